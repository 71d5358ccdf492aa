/** dashboard/: the blocks and their permissions; the video-call lobby (queue, offers, taking and ending a call) and the agent summary. */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { AVAILABILITY, installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { connectLive } from '../helpers/live.ts';
import { defineFlow } from '../../src/modules/kyc/flows.ts';
import { joinQueue } from '../../src/modules/videocall/queue.ts';

let app: TestApp;
let clock: TestClock;
let boss: string;

const D = '/api/mobile/dashboard/';
const SESSION_VIEW = ['document.view_documentverificationsession'];

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'BIG', name: 'Big', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'd-amy' }, { customer_ref: 'd-bob' }] });
  const payments = [
    ['d-amy', '100.00', 1],
    ['d-amy', '7000.00', 2],
    ['d-bob', '300.00', 26],
    ['d-bob', '50.00', 24 * 45],
  ].map(([customer, amount, hours], index) => ({ customer_ref: customer, event_slug: 'deposit', amount, currency: 'EUR', transaction_ref: `dash-${index}`, io_type: 0, event_date: hoursAgo(Number(hours)) }));
  const stored = await app.request('POST', '/api/transaction/financial/upsert/', { token: merchant, json: payments });
  if (stored.status !== 200) throw new Error(stored.text);
  const superuser = await staffUser(app, { is_superuser: true });
  boss = (await pairDevice(app, clock, superuser.id)).accessToken;
  await defineFlow(app.database.knex, { code: 'video', artifacts: ['doc_front'], videoCall: true, isDefault: false, active: true, notifyUrl: null }, { type: 'operator', id: 'test' });
  await defineFlow(app.database.knex, { code: 'plain', artifacts: ['doc_front'], videoCall: false, isDefault: false, active: true, notifyUrl: null }, { type: 'operator', id: 'test' });
});
test.after.always(async () => {
  await app?.close();
});

test.serial('widgets: the cards the user may see, each with value, change and a 7-day trend; none visible is 403', async (t) => {
  const all = await app.request('GET', `${D}widgets/`, { token: boss });
  t.is(all.status, 200);
  const cards = all.body.data.cards;
  t.deepEqual(cards.map((card: { key: string }) => card.key), ['open_alerts', 'open_cases', 'decisions_today', 'pending_approvals', 'high_risk_customers', 'sessions_waiting']);
  const alerts = cards[0];
  t.is(alerts.value, Number((await app.database.knex('alerts').where({ status: 'open' }).count({ n: '*' }).first())!.n));
  t.is(alerts.value, 1);
  t.is(alerts.trend.length, 7);
  t.is(alerts.trend[6], 1);
  t.is(alerts.change, alerts.trend[6] - alerts.trend[5]);
  t.deepEqual(alerts.target, { model: 'engine.alert', filters: { status__exact: 'open' } });

  const alertViewer = await staffUser(app, { permissions: ['engine.view_alert'] });
  const limited = await app.request('GET', `${D}widgets/`, { token: (await pairDevice(app, clock, alertViewer.id)).accessToken });
  t.deepEqual(limited.body.data.cards.map((card: { key: string }) => card.key), ['open_alerts']);
  const nobody = await staffUser(app);
  const refused = await app.request('GET', `${D}widgets/`, { token: (await pairDevice(app, clock, nobody.id)).accessToken });
  t.is(refused.status, 403);
  t.false(refused.body.status);
});

test.serial('decisions-by-day: 30 days by decision; high-volume-customers: 30-day amounts, largest first; 403 without financial events', async (t) => {
  const chart = (await app.request('GET', `${D}decisions-by-day/`, { token: boss })).body.data;
  t.is(chart.days.length, 30);
  t.is(chart.days[29], new Date().toISOString().slice(0, 10));
  t.deepEqual(chart.series.slice(0, 3).map((entry: { decision: string }) => entry.decision), ['ACCEPT', 'REVIEW', 'REJECT']);
  const stored = (await app.database.knex('financial_transactions').where('event_date', '>=', new Date(`${chart.days[0]}T00:00:00Z`)).select(app.database.knex.raw("coalesce(decision, 'NONE') as decision"), app.database.knex.raw('count(*)::int as n')).groupBy(1)) as { decision: string; n: number }[];
  t.deepEqual(chart.totals, Object.fromEntries([...chart.series.map((entry: { decision: string }) => [entry.decision, 0]), ...stored.map((row) => [row.decision, row.n])]));
  t.is(Object.values(chart.totals as Record<string, number>).reduce((sum, n) => sum + n, 0), 3, 'the 45-day-old payment is outside the chart');
  t.is(chart.totals.REVIEW, 1);

  const table = (await app.request('GET', `${D}high-volume-customers/`, { token: boss })).body.data;
  t.deepEqual(table.results.map((row: { customer_ref: string; amount: string; transactions: number }) => [row.customer_ref, row.amount, row.transactions]), [
    ['d-amy', '7100.00', 2],
    ['d-bob', '300.00', 1],
  ]);
  t.is(table.results[0].currency, 'EUR');
  t.is(table.results[0].target.model, 'customer.customer');

  const viewer = await staffUser(app, { permissions: ['customer.view_customer'] });
  const token = (await pairDevice(app, clock, viewer.id)).accessToken;
  for (const block of ['decisions-by-day/', 'high-volume-customers/', 'lobby/']) t.is((await app.request('GET', `${D}${block}`, { token })).status, 403, block);
  t.is((await app.request('GET', `${D}widgets/?x=1`, { token: boss })).status, 400);
  t.is((await app.request('GET', `${D}widgets/`)).status, 401);
});

async function openSession(flow: string, customer: string): Promise<string> {
  const id = randomUUID();
  await app.database.knex('verification_sessions').insert({
    id, customer_ref: customer, flow_code: flow, required_artifact_types: ['doc_front'], pending_artifact_types: ['doc_front'],
    requires_video_call: flow === 'video', videocall_token: 'vc', created_by: 'test',
  });
  return id;
}

/** The end user's page joins the call (the documents socket's join, called directly: this file tests the agent's side). */
async function join(sessionId: string): Promise<void> {
  await joinQueue(app.database.knex, sessionId, `page-${sessionId}`, { call: true, recording: true, text: 'I agree to the call and its recording.', at: new Date().toISOString() });
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 5000): Promise<T> {
  for (const started = Date.now(); ; ) {
    const value = await read();
    if (done(value) || Date.now() - started > timeoutMs) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('lobby: a session path PostgreSQL cannot hold (NUL) is no session in the queue, not a 500', async (t) => {
  const agent = await staffUser(app, { video_call_agent: true, permissions: SESSION_VIEW });
  const { accessToken } = await pairDevice(app, clock, agent.id);
  for (const action of ['take', 'end']) {
    const response = await app.request('POST', `${D}lobby/a%00b/${action}/`, { token: accessToken });
    t.is(response.status, 404, `${action}: ${response.text}`);
    t.is(response.body.data.reason, 'not_found');
  }
});

test.serial('lobby: video-call sessions queue; an available agent is offered one (notification and videoCallQueue broadcast), takes it, is in call, ends it', async (t) => {
  const agentA = await staffUser(app, { video_call_agent: true, permissions: SESSION_VIEW });
  const agentB = await staffUser(app, { video_call_agent: true, permissions: SESSION_VIEW });
  const viewer = await staffUser(app, { permissions: SESSION_VIEW });
  const a = await pairDevice(app, clock, agentA.id);
  const b = await pairDevice(app, clock, agentB.id);
  const v = await pairDevice(app, clock, viewer.id);
  const live = await connectLive(app.url);
  await live.login(a.accessToken);

  await openSession('plain', 'no-call');
  const first = await openSession('video', 'caller-1');
  t.like((await live.next((f) => f.data?.type === 'videoCallQueue')).data, { data: { session_id: first, status: 'pending' } });
  let lobby = (await app.request('GET', `${D}lobby/`, { token: v.accessToken })).body.data;
  t.is(lobby.waiting, 0, 'nobody in the lobby before the end user joins');
  await join(first);
  const queued = await live.next((f) => f.data?.type === 'videoCallQueue' && f.data.data.status === 'waiting');
  t.like(queued.data, { model: 'document.documentverificationsession', data: { session_id: first, status: 'waiting' } });
  lobby = (await app.request('GET', `${D}lobby/`, { token: v.accessToken })).body.data;
  t.is(lobby.waiting, 1, 'only the flow that asks for a video call queues');
  t.like(lobby.queue[0], { session_id: first, customer_ref: 'caller-1', status: 'waiting', offered_to_you: false });
  t.is(lobby.you, null);

  t.is((await app.request('POST', AVAILABILITY, { token: a.accessToken, json: { available: true } })).status, 200);
  const offered = await until(() => app.database.knex('video_call_queue').where({ session_id: first }).first(), (row) => row.status === 'offered');
  t.is(offered.offered_to, agentA.id);
  const incoming = await live.next((f) => f.data?.type === 'notification' && f.data.data.kind === 'incoming_call');
  t.like(incoming.data.data, { title: 'Incoming video call', target: { model: 'document.documentverificationsession', pk: first } });
  lobby = (await app.request('GET', `${D}lobby/`, { token: a.accessToken })).body.data;
  t.like(lobby.queue[0], { status: 'offered', offered_to_you: true });
  t.deepEqual(lobby.you, { status: 'AVAILABLE', in_call: false, call: null });

  t.is((await app.request('POST', `${D}lobby/${first}/take/`, { token: b.accessToken })).status, 409, 'offered to another agent');
  t.is((await app.request('POST', `${D}lobby/${first}/take/`, { token: v.accessToken })).status, 403, 'not an agent');
  t.is((await app.request('POST', `${D}lobby/nope/take/`, { token: a.accessToken })).status, 404);
  const taken = await app.request('POST', `${D}lobby/${first}/take/`, { token: a.accessToken });
  t.is(taken.status, 200, taken.text);
  t.deepEqual(taken.body.data.you, { status: 'AVAILABLE', in_call: true, call: { session_id: first, customer_ref: 'caller-1' } });
  t.is(taken.body.data.session_id, first);
  t.true(Array.isArray(taken.body.data.ice_servers));
  const agentToken = await app.context.tokens.verify('agent', taken.body.data.agent_token);
  t.is(agentToken.subject, first, 'the agent token end-kyc-session takes, for this session');
  t.is(agentToken.claims.agent, agentA.id);
  t.is((await app.request('POST', AVAILABILITY, { token: a.accessToken, json: { available: false } })).status, 409, 'in call');
  const summary = (await app.request('GET', `${D}agent-summary/`, { token: a.accessToken })).body.data;
  t.like(summary, { agent: true, in_call: true, availability: 'AVAILABLE', availability_label: 'Available' });
  t.is(summary.today.calls, 1);

  // B is available: the next caller goes to B, since A is in a call
  await app.request('POST', AVAILABILITY, { token: b.accessToken, json: { available: true } });
  const second = await openSession('video', 'caller-2');
  await join(second);
  t.is((await until(() => app.database.knex('video_call_queue').where({ session_id: second }).first(), (row) => row.status === 'offered')).offered_to, agentB.id);
  // B goes away: the offer returns to the queue
  await app.request('POST', AVAILABILITY, { token: b.accessToken, json: { available: false } });
  t.like(await app.database.knex('video_call_queue').where({ session_id: second }).first(), { status: 'waiting', offered_to: null });

  t.is((await app.request('POST', `${D}lobby/${second}/end/`, { token: a.accessToken })).status, 409, 'not in that call');
  const ended = await app.request('POST', `${D}lobby/${first}/end/`, { token: a.accessToken });
  t.is(ended.status, 200);
  // A is free and still available: the waiting caller is offered to A
  t.is((await until(() => app.database.knex('video_call_queue').where({ session_id: second }).first(), (row) => row.status === 'offered')).offered_to, agentA.id);
  // closing a session takes it out of the queue
  await app.database.knex('verification_sessions').where({ id: second }).update({ status: 'completed' });
  t.is((await app.database.knex('video_call_queue').where({ session_id: second }).first()).status, 'ended');
  live.close();
});

test.serial('agent-summary: {agent: false} for a non-agent; the keys of the spec for an agent; no last-seen stamp written', async (t) => {
  const plain = await staffUser(app);
  const plainToken = (await pairDevice(app, clock, plain.id)).accessToken;
  t.deepEqual((await app.request('GET', `${D}agent-summary/`, { token: plainToken })).body.data, { agent: false });

  const agent = await staffUser(app, { video_call_agent: true, permissions: SESSION_VIEW });
  const paired = await pairDevice(app, clock, agent.id);
  await app.request('POST', AVAILABILITY, { token: paired.accessToken, json: { available: true } });
  await app.request('POST', AVAILABILITY, { token: paired.accessToken, json: { available: false } });
  const stamp = new Date('2026-01-01T00:00:00Z');
  await app.database.knex('mobile_devices').where({ id: paired.deviceId }).update({ last_seen_at: stamp });
  // Past the last-seen resolution (60 s), so a stamp would be due if reads wrote one. Not further:
  // today's shifts are counted from the clock's midnight, and the switches above were stamped by
  // the database's clock; advancing 50 minutes made the test fail when run after 23:10 UTC.
  clock.advance(61);
  const response = await app.request('GET', `${D}agent-summary/`, { token: paired.accessToken });
  t.is(response.status, 200);
  const data = response.body.data;
  t.deepEqual(Object.keys(data).sort(), ['agent', 'availability', 'availability_label', 'in_call', 'kpis', 'recent', 'series', 'shifts', 'today'].sort());
  t.like(data, { agent: true, availability: 'AWAY', availability_label: 'Away', in_call: false });
  t.is(data.series.length, 14);
  t.deepEqual(Object.keys(data.series[0]), ['day', 'calls', 'on_screen_hours']);
  t.is(data.shifts.length, 1);
  t.truthy(data.shifts[0].end);
  t.deepEqual((await app.database.knex('mobile_devices').where({ id: paired.deviceId }).first()).last_seen_at, stamp);
  t.is((await app.request('GET', `${D}agent-summary/`)).status, 401);
});
