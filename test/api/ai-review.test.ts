import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { startScriptedLlm, type ScriptedLlm } from '../helpers/scripted-llm.ts';
import { connectLive } from '../helpers/live.ts';
import { startGateway, type RunningGateway } from '../../src/gateway/server.ts';
import type { GatewaySettings } from '../../src/gateway/model.ts';

const GATEWAY_TOKEN = 'gateway-token-for-the-tests-0123';
let app: TestApp;
let llm: ScriptedLlm;
let gateway: RunningGateway;
let clock: TestClock;
let merchant: string;
let officer: { id: string; token: string };
let sequence = 0;

const OFFICER = ['engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'customer.view_customer', 'transaction.view_financialevent', 'engine.view_compliancedecision'];

function review(overrides: Record<string, unknown> = {}) {
  return JSON.stringify({
    topic: { subject: 'Large deposits', typologies: ['structuring'] },
    decision: 'ESCALATE',
    confidence: 72,
    str_required: true,
    reasoning: 'Two deposits above the threshold within an hour.',
    recommended_actions: ['Ask for the source of funds'],
    rule_proposal: null,
    knowledge_gaps: [],
    references: [],
    knowledge_cited: [],
    ...overrides,
  });
}

async function caseOf(customer: string): Promise<string> {
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: customer }] });
  sequence += 1;
  const response = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: customer, event_slug: 'deposit', amount: '9000', currency: 'EUR', transaction_ref: `ai-${process.pid}-${sequence}`, io_type: 0, event_date: hoursAgo(1) }],
  });
  if (response.status !== 200) throw new Error(response.text);
  const row = await app.context.db('cases as k').join('customers as c', 'c.id', 'k.customer_id').where('c.customer_ref', customer).first('k.id');
  return row.id as string;
}

const ai = (pk: string, tail = '') => `/api/mobile/data/engine/watchlist/${pk}/ai/${tail}`;

async function settled(pk: string) {
  for (let i = 0; i < 100; i++) {
    const response = await app.request('GET', ai(pk), { token: officer.token });
    if (!response.body.data.in_flight) return response;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the review never settled');
}

test.before(async () => {
  llm = await startScriptedLlm();
  // The gateway starts first (the app needs its address), then learns the app's origin: the only one it sends a delegated token to.
  const settings: GatewaySettings = { llmUrl: llm.url, llmModel: 'scripted', llmApiKey: '', token: GATEWAY_TOKEN, timeoutMs: 1500, mcpOrigin: 'http://127.0.0.1:1' };
  gateway = await startGateway(settings, 0);
  app = await startTestApp({ WARDEN_GATEWAY_URL: gateway.url, WARDEN_GATEWAY_TOKEN: GATEWAY_TOKEN });
  settings.mcpOrigin = app.url;
  clock = installClock(app);
  const credential = await app.credential();
  merchant = (await app.request('POST', '/api/merchant/auth/token/', { json: { api_key: credential.apiKey, api_secret: credential.apiSecret } })).body.data.access_token;
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  const user = await staffUser(app, { permissions: OFFICER });
  officer = { id: user.id, token: (await pairDevice(app, clock, user.id)).accessToken };
});

test.after.always(async () => {
  await app?.close();
  await gateway?.close();
  await llm?.close();
});

test.serial('a review reads the case through MCP, answers every AI block field, cites the records it relied on first and notifies the owner', async (t) => {
  const pk = await caseOf('ai-alice');
  const empty = await app.request('GET', ai(pk), { token: officer.token });
  t.is(empty.status, 200);
  t.like(empty.body.data, { status: 'empty', in_flight: false, can_run: true, can_feedback: false, result: null, legacy: null });
  const alert = await app.context.db('alerts').where('case_id', pk).first('id');
  const live = await connectLive(app.url);
  t.teardown(() => live.close());
  await live.login(officer.token);
  llm.script({ content: review({ references: [{ model: 'engine.alert', pk: alert.id, why: 'the large deposit', relied_on: false }, { model: 'engine.watchlist', pk, why: 'the case', relied_on: true }] }) });
  const run = await app.request('POST', ai(pk, 'run/'), { token: officer.token });
  t.is(run.status, 202, run.text);
  const done = (await settled(pk)).body.data;
  t.is(done.status, 'done', JSON.stringify(done));
  t.deepEqual(done.topic, { subject: 'Large deposits', typologies: ['structuring'] });
  t.deepEqual(done.result, {
    decision: 'ESCALATE', decision_label: 'Escalate', decision_tone: 'warning', confidence: 72, confidence_tone: 'warning', str_required: true,
    reasoning: 'Two deposits above the threshold within an hour.', recommended_actions: ['Ask for the source of funds'], rule_proposal: null, knowledge_gaps: [],
  });
  t.deepEqual(done.references.map((reference: { model: string; relied_on: boolean }) => [reference.model, reference.relied_on]), [['engine.watchlist', true], ['engine.alert', false]]);
  t.true(done.can_feedback);
  // The model was given the case as the MCP tool read it, with its alert.
  const sent = JSON.parse(llm.requests.at(-1).messages[1].content);
  t.is(sent.case.case.id, pk);
  t.true(sent.case.case_blocks.some((block: { model: string; rows: { id: string }[] }) => block.model === 'engine.alert' && block.rows.some((row) => row.id === alert.id)));
  t.is(llm.requests.at(-1).response_format.type, 'json_schema');
  const notification = await app.context.db('notifications').where({ user_id: officer.id, kind: 'ai_review_done', target_pk: pk }).first();
  t.truthy(notification);
  const frame = await live.next((candidate) => candidate.data?.type === 'notification' && candidate.data.data?.kind === 'ai_review_done');
  t.like(frame.data.data, { target: { model: 'engine.watchlist', pk } });
});

test.serial('feedback: 400 for to_knowledge without a note, 409 for a second note; a knowledge note is retrieved and cited by a later review', async (t) => {
  const pk = await caseOf('ai-bob');
  llm.script({ content: review() });
  t.is((await app.request('POST', ai(pk, 'run/'), { token: officer.token })).status, 202);
  await settled(pk);
  const empty = await app.request('POST', ai(pk, 'feedback/'), { token: officer.token, json: { verdict: 'agree', note: ' ', to_knowledge: true } });
  t.is(empty.status, 400);
  t.truthy(empty.body.data.errors.note);
  t.is((await app.request('POST', ai(pk, 'feedback/'), { token: officer.token, json: { verdict: 'maybe' } })).status, 400);
  const unstorable = await app.request('POST', ai(pk, 'feedback/'), { token: officer.token, json: { verdict: 'agree', note: 'nul\u0000here' } });
  t.is(unstorable.status, 400, 'a note PostgreSQL cannot store is refused by the form check, not by the database');
  t.is(unstorable.body.data.errors.note[0].code, 'invalid');
  const note = 'Deposits flagged by LARGE from salaried customers are usually bonuses: ask for the payslip.';
  const given = await app.request('POST', ai(pk, 'feedback/'), { token: officer.token, json: { verdict: 'partial', note, to_knowledge: true } });
  t.is(given.status, 200, given.text);
  t.like(given.body.data.feedback, { verdict: 'partial', note, to_knowledge: true, delivered: true });
  t.false(given.body.data.can_feedback);
  t.is((await app.request('POST', ai(pk, 'feedback/'), { token: officer.token, json: { verdict: 'agree', note: 'again' } })).status, 409);
  t.is((await app.request('POST', ai(pk, 'feedback/'), { token: officer.token, json: { resend: true } })).status, 200);

  const reviewId = (await app.context.db('ai_reviews').where('object_pk', pk).first('id')).id as string;
  const later = await caseOf('ai-carol');
  llm.script({ content: review({ knowledge_cited: [reviewId] }) });
  t.is((await app.request('POST', ai(later, 'run/'), { token: officer.token })).status, 202);
  const done = (await settled(later)).body.data;
  const sent = JSON.parse(llm.requests.at(-1).messages[1].content);
  t.deepEqual(sent.knowledge, [{ id: reviewId, note }]);
  t.like(done.references[0], { type: 'knowledge', pk: reviewId, note, relied_on: true });
});

test.serial('feedback is delivered where it goes: a verdict with its review; a knowledge note only when later reviews can find it, else delivered false with the reason', async (t) => {
  const plain = await caseOf('ai-gina');
  const words = await caseOf('ai-hank');
  llm.script({ content: review() }, { content: review() });
  for (const pk of [plain, words]) {
    t.is((await app.request('POST', ai(pk, 'run/'), { token: officer.token })).status, 202);
    await settled(pk);
  }
  const verdict = await app.request('POST', ai(plain, 'feedback/'), { token: officer.token, json: { verdict: 'disagree', note: 'Known payroll.' } });
  t.like(verdict.body.data.feedback, { verdict: 'disagree', to_knowledge: false, delivered: true, error: null });
  // Stop words only: stored, but the knowledge search indexes nothing of it.
  const unsearchable = await app.request('POST', ai(words, 'feedback/'), { token: officer.token, json: { verdict: 'agree', note: 'It is what it was.', to_knowledge: true } });
  t.is(unsearchable.status, 200);
  t.like(unsearchable.body.data.feedback, { to_knowledge: true, delivered: false });
  t.regex(unsearchable.body.data.feedback.error, /cannot find it/);
  const resent = await app.request('POST', ai(words, 'feedback/'), { token: officer.token, json: { resend: true } });
  t.like(resent.body.data.feedback, { delivered: false });
  t.is(llm.remaining(), 0);
});

test.serial('a malformed answer is retried once; garbage twice fails the review with its reason', async (t) => {
  const pk = await caseOf('ai-dave');
  llm.script({ content: 'not json at all' }, { content: review({ confidence: 90 }) });
  await app.request('POST', ai(pk, 'run/'), { token: officer.token });
  const retried = (await settled(pk)).body.data;
  t.is(retried.status, 'done');
  t.is(retried.result.confidence_tone, 'success');
  t.regex(llm.requests.at(-1).messages.at(-1).content, /invalid/);

  llm.script({ content: review({ confidence: 'high' }) }, { raw: '{"choices": "garbage"}' });
  t.is((await app.request('POST', ai(pk, 'run/'), { token: officer.token })).status, 202);
  const failed = (await settled(pk)).body.data;
  t.is(failed.status, 'failed');
  t.is(failed.result, null);
  t.true(failed.warnings.length > 0);
  t.is(llm.remaining(), 0);
});

test.serial('a hanging model: one review in flight per case (409), then the review fails with the timeout as its reason', async (t) => {
  const pk = await caseOf('ai-erin');
  llm.script('hang');
  t.is((await app.request('POST', ai(pk, 'run/'), { token: officer.token })).status, 202);
  const second = await app.request('POST', ai(pk, 'run/'), { token: officer.token });
  t.is(second.status, 409);
  const failed = (await settled(pk)).body.data;
  t.is(failed.status, 'failed');
  t.regex(failed.warnings.join(' '), /timed out|timeout/i);
});

test.serial('a closed case answers 403 to run; other models 404; no token 401', async (t) => {
  const pk = await caseOf('ai-frank');
  await app.context.db('cases').where('id', pk).update({ status: 'closed' });
  const closed = await app.request('POST', ai(pk, 'run/'), { token: officer.token });
  t.is(closed.status, 403);
  t.false((await app.request('GET', ai(pk), { token: officer.token })).body.data.can_run);
  t.is((await app.request('GET', `/api/mobile/data/engine/alert/${pk}/ai/`, { token: officer.token })).status, 404);
  t.is((await app.request('GET', ai('00000000-0000-0000-0000-000000000000'), { token: officer.token })).status, 404);
  t.is((await app.request('GET', ai(pk))).status, 401);
});
