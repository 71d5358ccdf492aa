/**
 * The case queue (issue 36, point 5) over real HTTP and PostgreSQL: the "assigned to me" and
 * "unassigned" filters (web list, mobile list and schema, saved filters; alerts by their case),
 * take, next case (two officers at once never get the same case), and the bulk actions on cases
 * and alerts (assign, change status with one rationale, close with a clear decision), each record
 * through the write chain: a history row and an audit row each, maker-checker one request per
 * record, errors in the envelope, never a 500.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { h, type FunctionComponent } from 'preact';
import { renderToString } from 'preact-render-to-string';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { processRequest } from '../../src/modules/approvals/service.ts';
import type { DetailSectionProps } from '../../src/modules/backoffice/site.ts';
import { caseQueueBlocks, caseQueueSection } from '../../src/modules/cases/queue.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, type TestClock } from '../helpers/mobile.ts';

const DATA = '/api/mobile/data/';
const CASES = `${DATA}engine/watchlist/`;
const PASSWORD = 'amber-quarry-lantern-58';
const OFFICER = [
  'engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'engine.change_alert', 'customer.view_customer',
  'transaction.view_financialevent', 'transaction.change_financialevent', 'engine.add_compliancedecision', 'engine.view_compliancedecision',
  'approval.view_approvalrequest', 'approval.view_pendingapprovalrequest', 'auth.view_user',
];
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };

interface Member {
  id: string;
  username: string;
  token: string;
  principal: Principal;
}

let app: TestApp;
let clock: TestClock;
let merchant: string;
let alice: Member;
let bob: Member;
let reader: Member;
let checker: Member;

async function member(username: string, permissions: string[]): Promise<Member> {
  const user = await createUser(app.database.knex, { username, password: PASSWORD, permissions }, operator);
  await app.database.knex('staff_users').where({ id: user.id }).update({ is_staff: true });
  const { accessToken } = await pairDevice(app, clock, user.id);
  return { id: user.id, username, token: accessToken, principal: (await loadPrincipal(app.database.knex, user.id))! };
}

async function web(who: Member) {
  const client = adminClient(app.url);
  const login = await client.login(who.username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  const csrf = csrfTokenIn((await client.get('/admin/')).text);
  return { ...client, csrf };
}

let customerCount = 0;
/** A case of a fresh customer, written directly: priority, when it opened, status and assignee as told. */
async function makeCase(options: { priority?: number; hoursOld?: number; status?: string; assignee?: string | null } = {}): Promise<string> {
  customerCount += 1;
  const db = app.database.knex;
  const customerId = randomUUID();
  await db('customers').insert({ id: customerId, customer_ref: `queue-${customerCount}`, raw: '{}', score: 0, decision: 'ACCEPT', created_by: 't', updated_by: 't' });
  const [row] = await db('cases')
    .insert({
      customer_id: customerId,
      priority: options.priority ?? 10,
      opened_at: new Date(Date.now() - (options.hoursOld ?? 1) * 3_600_000),
      status: options.status ?? 'open',
      assignee_id: options.assignee ?? null,
      closed_at: options.status === 'closed' ? new Date() : null,
    })
    .returning('id');
  return String(row.id);
}

/** Every case not closed is closed directly, so a test's queue holds only its own cases. */
async function emptyQueue(): Promise<void> {
  await app.database.knex('cases').whereNot({ status: 'closed' }).update({ status: 'closed', closed_at: new Date() });
}

async function count(table: string, where: Record<string, unknown>): Promise<number> {
  return Number(((await app.database.knex(table).where(where).count('* as n').first()) as { n: string }).n);
}

async function assigneeOf(caseId: string): Promise<string | null> {
  return (await app.database.knex('cases').where({ id: caseId }).first()).assignee_id;
}

/** A response is never a server error, and is in the envelope. */
function enveloped(t: import('ava').ExecutionContext, response: { status: number; body: { status?: unknown; message?: unknown } }): void {
  t.true(response.status < 500, `status ${response.status}`);
  t.is(typeof response.body.message, 'string');
  t.is(typeof response.body.status, 'boolean');
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  alice = await member('alice', OFFICER);
  bob = await member('bob', OFFICER);
  reader = await member('reader', ['engine.view_watchlist', 'engine.view_alert']);
  checker = await member('checker', OFFICER);
});
test.after.always(async () => {
  await app?.close();
});

test.serial('filters: assigned to me, unassigned and assigned to anyone on the web list, the mobile list and schema, saved filters; alerts by their case', async (t) => {
  await emptyQueue();
  const mine = await makeCase({ assignee: alice.id });
  const bobs = await makeCase({ assignee: bob.id });
  const free = await makeCase();
  const db = app.database.knex;
  const customerOf = async (caseId: string) => (await db('cases').where({ id: caseId }).first()).customer_id;
  const alertOn = async (caseId: string | null) =>
    String((await db('alerts').insert({ case_id: caseId, customer_id: caseId ? await customerOf(caseId) : await customerOf(free), target: 'customer', record_id: randomUUID(), score: 50, decision: 'REVIEW' }).returning('id'))[0].id);
  const [alertMine, alertBobs, alertFree, alertNoCase] = [await alertOn(mine), await alertOn(bobs), await alertOn(free), await alertOn(null)];
  const open = (pks: string[]) => pks.filter((pk) => [mine, bobs, free].includes(pk)).sort();

  const list = async (who: Member, query: string) => {
    const response = await app.request('GET', `${CASES}?status__exact=open&${query}`, { token: who.token });
    t.is(response.status, 200, response.text);
    return open(response.body.data.results.map((row: { pk: string }) => row.pk));
  };
  t.deepEqual(await list(alice, 'assignee_id__assigned=me'), [mine]);
  t.deepEqual(await list(bob, 'assignee_id__assigned=me'), [bobs], '"me" is whoever asks');
  t.deepEqual(await list(alice, 'assignee_id__assigned=none'), [free]);
  t.deepEqual(await list(alice, 'assignee_id__assigned=any'), [mine, bobs].sort());
  const bad = await app.request('GET', `${CASES}?assignee_id__assigned=bob`, { token: alice.token });
  t.is(bad.status, 400);
  t.is(bad.body.data.parameter, 'assignee_id__assigned');
  enveloped(t, bad);

  const alerts = async (value: string) => {
    const response = await app.request('GET', `${DATA}engine/alert/?case_id__assigned=${value}`, { token: alice.token });
    t.is(response.status, 200, response.text);
    return response.body.data.results.map((row: { pk: string }) => row.pk).sort();
  };
  t.deepEqual(await alerts('me'), [alertMine]);
  t.deepEqual(await alerts('any'), [alertMine, alertBobs].sort());
  t.deepEqual(await alerts('none'), [alertFree, alertNoCase].sort(), 'an alert of an unassigned case, or of none');

  const schema = await app.request('GET', '/api/mobile/schema/engine/watchlist/', { token: alice.token });
  const filter = schema.body.data.list.filters.find((candidate: { class: string }) => candidate.class === 'AssigneeFilter');
  t.deepEqual(filter.parameters, ['assignee_id__assigned']);
  t.deepEqual(filter.choices.map((choice: { display: string; params: Record<string, string> }) => [choice.display, choice.params]), [
    ['All', {}],
    ['Assigned to me', { assignee_id__assigned: 'me' }],
    ['Unassigned', { assignee_id__assigned: 'none' }],
    ['Assigned to anyone', { assignee_id__assigned: 'any' }],
  ]);
  const alertSchema = await app.request('GET', '/api/mobile/schema/engine/alert/', { token: alice.token });
  t.truthy(alertSchema.body.data.list.filters.find((candidate: { parameters: string[] }) => candidate.parameters[0] === 'case_id__assigned'));

  const browser = await web(alice);
  const page = await browser.get('/admin/engine/watchlist/?assignee_id__assigned=me');
  t.is(page.status, 200);
  t.true(page.text.includes(`/admin/engine/watchlist/${mine}/change/`));
  t.false(page.text.includes(`/admin/engine/watchlist/${bobs}/change/`));
  t.false(page.text.includes(`/admin/engine/watchlist/${free}/change/`));
  t.regex(page.text, /<a href="[^"]*assignee_id__assigned=none"[^>]*>Unassigned<\/a>/);
  t.regex(page.text, /aria-current="true">Assigned to me<\/a>/);
  t.is((await browser.get('/admin/engine/watchlist/?assignee_id__assigned=everyone')).status, 400);

  // Saved as "mine", the filter means whoever opens it: Bob's shortcut of the same query lists Bob's.
  const saved = await browser.post('/admin/engine/watchlist/saved-filters/', { csrfmiddlewaretoken: browser.csrf, name: 'Mine', query: 'assignee_id__assigned=me' });
  t.is(saved.status, 302);
  t.is(await count('staff_saved_filters', { user_id: alice.id, name: 'Mine', query: 'assignee_id__assigned=me' }), 1);
  const index = await app.request('GET', '/api/mobile/schema/', { token: alice.token });
  const shortcut = index.body.data.menu.flatMap((group: { items: { model?: string; shortcuts?: { label: string; url: string }[] }[] }) => group.items).find((item: { model?: string }) => item.model === 'watchlist').shortcuts[0];
  t.is(shortcut.label, 'Mine');
  t.deepEqual(open((await app.request('GET', shortcut.url, { token: bob.token })).body.data.results.map((row: { pk: string }) => row.pk)), [bobs]);
});

test.serial('take: web and mobile, someone else\'s case is refused as taken, two officers at once get it once; 403 without change permission, 404 for no case', async (t) => {
  await emptyQueue();
  const caseId = await makeCase();
  const db = app.database.knex;
  const taken = await app.request('POST', `${CASES}${caseId}/take/`, { token: alice.token });
  t.is(taken.status, 200, taken.text);
  t.is(taken.body.data.object.pk, caseId);
  t.false(taken.body.data.pending_approval);
  t.is(await assigneeOf(caseId), alice.id);
  const history = await db('case_history').where({ case_id: caseId });
  t.is(history.length, 1);
  t.deepEqual(history[0].changes.assignee_id, [null, alice.id]);
  t.is(await count('admin_log_entries', { content_type: 'engine.watchlist', object_id: caseId, user_id: alice.id, action_flag: 2 }), 1);

  const refused = await app.request('POST', `${CASES}${caseId}/take/`, { token: bob.token });
  t.is(refused.status, 400);
  t.is(refused.body.data.errors.assignee_id[0].code, 'taken');
  enveloped(t, refused);
  t.is(await assigneeOf(caseId), alice.id);
  t.is((await app.request('POST', `${CASES}${caseId}/take/`, { token: reader.token })).status, 403);
  t.is((await app.request('POST', `${CASES}${randomUUID()}/take/`, { token: alice.token })).status, 404);
  const garbage = await app.request('POST', `${CASES}not-a-case/take/`, { token: alice.token });
  t.is(garbage.status, 404);
  enveloped(t, garbage);

  // Two officers take one case at the same moment: one has it, the other is told it is taken.
  const contested = await makeCase();
  const race = await Promise.all([alice, bob, alice, bob].map((who) => app.request('POST', `${CASES}${contested}/take/`, { token: who.token })));
  const winner = await assigneeOf(contested);
  t.truthy(winner);
  for (const [index, response] of race.entries()) {
    const who = [alice, bob, alice, bob][index]!;
    if (who.id === winner) t.is(response.status, 200, 'taking one\'s own case again changes nothing');
    else t.is(response.body.data.errors?.assignee_id?.[0]?.code, 'taken');
  }
  t.is(await count('case_history', { case_id: contested }), 1, 'assigned once');

  const closed = await makeCase({ status: 'closed' });
  t.is((await app.request('POST', `${CASES}${closed}/take/`, { token: alice.token })).body.data.errors.assignee_id[0].code, 'closed');

  // The web's take: a post from the case page, back to it with a message.
  const free = await makeCase();
  const browser = await web(bob);
  const posted = await browser.post(`/admin/engine/watchlist/${free}/take/`, { csrfmiddlewaretoken: browser.csrf });
  t.is(posted.status, 302);
  t.is(posted.location, `/admin/engine/watchlist/${free}/change/`);
  t.is(await assigneeOf(free), bob.id);
  const page = await browser.get(posted.location!);
  t.regex(page.text, /is now assigned to you\./);
  const again = await browser.post(`/admin/engine/watchlist/${caseId}/take/`, { csrfmiddlewaretoken: browser.csrf });
  t.is(again.status, 302);
  t.regex((await browser.get(again.location!)).text, /already assigned to someone else/);
  const readerWeb = await web(reader);
  t.is((await readerWeb.post(`/admin/engine/watchlist/${free}/take/`, { csrfmiddlewaretoken: readerWeb.csrf })).status, 403);
  t.is((await browser.post(`/admin/engine/watchlist/${randomUUID()}/take/`, { csrfmiddlewaretoken: browser.csrf })).status, 404);
  t.is((await browser.post(`/admin/engine/watchlist/${free}/take/`, {})).status, 403, 'CSRF');

  // The case page's block and button (a detail block and section for the composition root).
  const site = app.context.backoffice.site;
  const model = site.get('engine', 'watchlist')!;
  const open = await makeCase();
  const section = (blocks: Record<string, unknown>) => renderToString(h(caseQueueSection.component as FunctionComponent<DetailSectionProps>, { model, pk: open, blocks, csrfToken: 'token', preferences: alice.principal.user }));
  const row = await db('cases').where({ id: open }).first();
  const forAlice = await caseQueueBlocks.blocks({ db, site, model, row, principal: alice.principal });
  t.like(forAlice.queue, { assignee_id: null, assigned_to_me: false, can_take: true, take_endpoint: `${CASES}${open}/take/` });
  t.regex(section(forAlice), new RegExp(`<form method="post" action="/admin/engine/watchlist/${open}/take/" class="case-queue"><input type="hidden" name="csrfmiddlewaretoken" value="token"/><button type="submit">Take this case</button></form>`));
  t.like((await caseQueueBlocks.blocks({ db, site, model, row, principal: reader.principal })).queue, { can_take: false });
  t.is(section((await caseQueueBlocks.blocks({ db, site, model, row, principal: reader.principal }))), '');
  const held = await db('cases').where({ id: caseId }).first();
  t.like((await caseQueueBlocks.blocks({ db, site, model, row: held, principal: bob.principal })).queue, { can_take: false, assigned_to_me: false });
  t.regex(section(await caseQueueBlocks.blocks({ db, site, model, row: held, principal: alice.principal })), /This case is assigned to you\./);

  // The same as a one-record bulk action through the generic actions endpoint.
  const viaAction = await makeCase();
  const action = await app.request('POST', `${CASES}actions/take/`, { token: bob.token, json: { pks: [viaAction] } });
  t.is(action.status, 200, action.text);
  t.is(await assigneeOf(viaAction), bob.id);
});

test.serial('next case: the oldest highest-priority unassigned open case; ten calls at once by two officers get ten different cases; then none', async (t) => {
  await emptyQueue();
  const low = await makeCase({ priority: 20, hoursOld: 9 });
  const newer = await makeCase({ priority: 90, hoursOld: 1 });
  const older = await makeCase({ priority: 90, hoursOld: 5 });
  await makeCase({ priority: 99, status: 'closed' });
  await makeCase({ priority: 99, assignee: bob.id });
  const order: string[] = [];
  for (let index = 0; index < 3; index++) {
    const response = await app.request('POST', `${CASES}next/`, { token: alice.token });
    t.is(response.status, 200, response.text);
    order.push(response.body.data.object.pk);
  }
  t.deepEqual(order, [older, newer, low]);
  for (const caseId of order) t.is(await assigneeOf(caseId), alice.id);
  const none = await app.request('POST', `${CASES}next/`, { token: alice.token });
  t.is(none.status, 200);
  t.is(none.body.data.object, null);
  t.is(none.body.data.pk, null);
  t.regex(none.body.message, /No unassigned open case/);

  const ten = await Promise.all(Array.from({ length: 10 }, (_, index) => makeCase({ priority: 50 + (index % 3), hoursOld: index + 1 })));
  const callers = Array.from({ length: 10 }, (_, index) => (index % 2 ? bob : alice));
  const answers = await Promise.all(callers.map((who) => app.request('POST', `${CASES}next/`, { token: who.token })));
  t.deepEqual(answers.map((response) => response.status), Array(10).fill(200));
  const got = answers.map((response) => response.body.data.object?.pk);
  t.is(new Set(got).size, 10, 'ten different cases');
  t.deepEqual([...got].sort(), [...ten].sort());
  for (const [index, caseId] of got.entries()) t.is(await assigneeOf(caseId), callers[index]!.id, 'each to the officer who asked');
  for (const caseId of ten) t.is(await count('case_history', { case_id: caseId }), 1, 'assigned once');
  t.is(await count('admin_log_entries', { content_type: 'engine.watchlist', action_flag: 2 }) >= 13, true);

  // The web: the list's button and the direct post both open the case they assigned.
  const [first, second] = [await makeCase({ priority: 70 }), await makeCase({ priority: 60 })];
  const browser = await web(bob);
  const list = await browser.get('/admin/engine/watchlist/');
  t.regex(list.text, /<input type="hidden" name="action" value="next"\/>/);
  const viaList = await browser.post('/admin/engine/watchlist/', { csrfmiddlewaretoken: browser.csrf, action: 'next', _changelist_filters: '' });
  t.is(viaList.status, 302);
  t.is(viaList.location, `/admin/engine/watchlist/${first}/change/`);
  const direct = await browser.post('/admin/engine/watchlist/next/', { csrfmiddlewaretoken: browser.csrf });
  t.is(direct.location, `/admin/engine/watchlist/${second}/change/`);
  const empty = await browser.post('/admin/engine/watchlist/next/', { csrfmiddlewaretoken: browser.csrf });
  t.is(empty.location, '/admin/engine/watchlist/');
  t.regex((await browser.get('/admin/engine/watchlist/')).text, /No unassigned open case is waiting for you\./);

  const forbidden = await app.request('POST', `${CASES}next/`, { token: reader.token });
  t.is(forbidden.status, 403);
  enveloped(t, forbidden);
  const readerWeb = await web(reader);
  t.is((await readerWeb.post('/admin/engine/watchlist/next/', { csrfmiddlewaretoken: readerWeb.csrf })).status, 403);
  t.is((await readerWeb.post('/admin/engine/watchlist/', { csrfmiddlewaretoken: readerWeb.csrf, action: 'next' })).status, 403);
});

/** Ingests one large deposit per customer: each gets a case with an alerted transaction. */
async function alertedCases(customers: string[]): Promise<string[]> {
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: customers.map((customer_ref) => ({ customer_ref })) });
  const response = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: customers.map((customer, index) => ({ customer_ref: customer, event_slug: 'deposit', amount: '9000', currency: 'EUR', transaction_ref: `${customer}-${index}`, io_type: 0, event_date: hoursAgo(1) })),
  });
  if (response.status !== 200) throw new Error(response.text);
  const db = app.database.knex;
  return Promise.all(customers.map(async (customer) => String((await db('cases as c').join('customers as u', 'u.id', 'c.customer_id').where('u.customer_ref', customer).whereNot('c.status', 'closed').first('c.id')).id)));
}

test.serial('bulk actions on cases: assign, change status with one rationale, close with a clear decision; each case written with a history and an audit row; refusals per record', async (t) => {
  await emptyQueue();
  const db = app.database.knex;
  const cases = [await makeCase(), await makeCase(), await makeCase()];
  const audits = async (caseId: string) => count('admin_log_entries', { content_type: 'engine.watchlist', object_id: caseId, action_flag: 2 });

  const assigned = await app.request('POST', `${CASES}actions/assign/`, { token: alice.token, json: { pks: cases, fields: { assignee_id: bob.id, rationale: 'Bob knows these customers' } } });
  t.is(assigned.status, 200, assigned.text);
  t.deepEqual(assigned.body.data.counts, { updated: 3, pending: 0, refused: 0 });
  t.deepEqual(assigned.body.data.results.map((result: { status: string }) => result.status), ['updated', 'updated', 'updated']);
  for (const caseId of cases) {
    t.is(await assigneeOf(caseId), bob.id);
    const [history] = await db('case_history').where({ case_id: caseId });
    t.is(history.rationale, 'Bob knows these customers');
    t.is(history.actor, 'alice');
    t.is(await audits(caseId), 1);
  }

  // A status change needs its rationale: refused before any case is written.
  const bare = await app.request('POST', `${CASES}actions/change_status/`, { token: alice.token, json: { pks: cases, fields: { status: 'in_review' } } });
  t.is(bare.status, 400);
  t.is(bare.body.data.errors.rationale[0].code, 'required');
  enveloped(t, bare);
  const badStatus = await app.request('POST', `${CASES}actions/change_status/`, { token: alice.token, json: { pks: cases, fields: { status: 'done', rationale: 'x' } } });
  t.is(badStatus.status, 400);
  t.truthy(badStatus.body.data.errors.status);
  for (const caseId of cases) t.is((await db('cases').where({ id: caseId }).first()).status, 'open');

  // The web: the action's form asks for the status and the rationale, then writes every case.
  const browser = await web(alice);
  const base = { csrfmiddlewaretoken: browser.csrf, action: 'change_status', _changelist_filters: 'status__exact=open' };
  const selected = new URLSearchParams(base);
  for (const caseId of cases) selected.append('_selected_action', caseId);
  const post = (extra: Record<string, string>) => {
    const form = new URLSearchParams(selected);
    for (const [name, value] of Object.entries(extra)) form.set(name, value);
    return fetch(`${app.url}/admin/engine/watchlist/`, { method: 'POST', redirect: 'manual', headers: { cookie: browser.jar.header(), 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString() });
  };
  const form = await post({});
  const formText = await form.text();
  t.is(form.status, 200);
  t.regex(formText, /<select id="id_status" name="status" required/);
  t.regex(formText, /<label for="id_rationale">Rationale \(required\)<\/label>/);
  const missing = await post({ post: 'yes', status: 'in_review', rationale: '  ' });
  t.is(missing.status, 400);
  t.regex(await missing.text(), /id="id_rationale_errors"><div role="alert"><ul class="errorlist"><li>This field is required\./);
  const done = await post({ post: 'yes', status: 'in_review', rationale: 'Reviewing the batch together' });
  t.is(done.status, 302);
  t.is(done.headers.get('location'), '/admin/engine/watchlist/?status__exact=open');
  t.regex((await browser.get('/admin/engine/watchlist/')).text, /Change status…: 3 cases changed\./);
  for (const caseId of cases) {
    t.is((await db('cases').where({ id: caseId }).first()).status, 'in_review');
    const rows = await db('case_history').where({ case_id: caseId }).orderBy('id');
    t.is(rows.length, 2);
    t.deepEqual(rows[1].changes.status, ['open', 'in_review']);
    t.is(rows[1].rationale, 'Reviewing the batch together');
    t.is(await audits(caseId), 2);
  }

  // Closing with a clear decision: every alerted transaction gets it, the alerts close.
  const alerted = await alertedCases(['close-1', 'close-2']);
  const alreadyClosed = await makeCase({ status: 'closed' });
  const closed = await app.request('POST', `${CASES}actions/close/`, { token: alice.token, json: { pks: [...alerted, alreadyClosed], fields: { rationale: 'Salary, documented', clear_decision: 'ACCEPT', clear_score: '5' } } });
  t.is(closed.status, 200, closed.text);
  t.deepEqual(closed.body.data.counts, { updated: 2, pending: 0, refused: 1 });
  t.is(closed.body.data.level, 'warning');
  const refusal = closed.body.data.results.find((result: { pk: string }) => result.pk === alreadyClosed);
  t.like(refusal, { status: 'refused', reason: 'validation_failed' });
  t.regex(refusal.message, /already closed/);
  t.regex(closed.body.message, /2 cases changed, 1 case refused/);
  for (const caseId of alerted) {
    const row = await db('cases').where({ id: caseId }).first();
    t.is(row.status, 'closed');
    t.truthy(row.closed_at);
    t.is(await count('alerts', { case_id: caseId, status: 'open' }), 0);
    const decisions = await db('compliance_decisions').where({ case_id: caseId });
    t.is(decisions.length, 1);
    t.is(decisions[0].decision, 'ACCEPT');
    t.is(Number(decisions[0].score), 5);
    t.is((await db('case_history').where({ case_id: caseId }).first()).rationale, 'Salary, documented');
    t.is(await audits(caseId), 1);
  }
  const closeBare = await app.request('POST', `${CASES}actions/close/`, { token: alice.token, json: { pks: cases, fields: { rationale: 'x' } } });
  t.is(closeBare.status, 400);
  t.is(closeBare.body.data.errors.clear_decision[0].code, 'required');

  // Every record refused: an error of their kind, each record's reason in data.results.
  const allRefused = await app.request('POST', `${CASES}actions/close/`, { token: alice.token, json: { pks: alerted, fields: { rationale: 'again', clear_decision: 'REJECT' } } });
  t.is(allRefused.status, 400);
  t.is(allRefused.body.data.results.length, 2);
  t.deepEqual(allRefused.body.data.counts, { updated: 0, pending: 0, refused: 2 });
  enveloped(t, allRefused);

  // Permissions and malformed requests: in the envelope, never a 500.
  const denied = await app.request('POST', `${CASES}actions/assign/`, { token: reader.token, json: { pks: cases, fields: { assignee_id: reader.id } } });
  t.is(denied.status, 403);
  enveloped(t, denied);
  const readerWeb = await web(reader);
  t.is((await readerWeb.post('/admin/engine/watchlist/', { csrfmiddlewaretoken: readerWeb.csrf, action: 'assign', _selected_action: cases[0]!, post: 'yes', assignee_id: reader.id })).status, 403);
  for (const [path, body, status] of [
    [`${CASES}actions/explode/`, { pks: cases }, 404],
    [`${CASES}actions/assign/`, { pks: 'all' }, 400],
    [`${CASES}actions/assign/`, { pks: [{}] }, 400],
    [`${CASES}actions/assign/`, { pks: cases, fields: [] }, 400],
    [`${CASES}actions/assign/`, { pks: cases, extra: 1 }, 400],
    [`${CASES}actions/assign/`, { pks: ['nope'] }, 400],
    [`${CASES}actions/assign/`, { pks: [], fields: { assignee_id: bob.id } }, 400],
    [`${CASES}actions/assign/`, { pks: cases, fields: { assignee_id: 'not-a-user' } }, 400],
    [`${CASES}actions/assign/`, { pks: [randomUUID()], fields: { assignee_id: bob.id } }, 404],
    [`${DATA}engine/nothing/actions/assign/`, { pks: cases }, 404],
  ] as const) {
    const response = await app.request('POST', path, { token: alice.token, json: body });
    t.is(response.status, status, `${path} ${JSON.stringify(body)}: ${response.text}`);
    enveloped(t, response);
  }
  const notJson = await app.request('POST', `${CASES}actions/assign/`, { token: alice.token, body: '{', headers: { 'content-type': 'application/json' } });
  t.is(notJson.status, 400);

  // The schema describes each action with its fields.
  const schema = await app.request('GET', '/api/mobile/schema/engine/watchlist/', { token: alice.token });
  const actions = Object.fromEntries(schema.body.data.actions.map((action: { name: string }) => [action.name, action]));
  t.like(actions.change_status, { kind: 'change', selection: true, allowed: true, endpoint: `${CASES}actions/change_status/` });
  t.deepEqual(actions.change_status.fields.map((field: { name: string; required: boolean; type: string }) => [field.name, field.type, field.required]), [['status', 'choice', true], ['rationale', 'text', true]]);
  t.deepEqual(actions.close.fixed, { status: 'closed' });
  t.like(actions.next, { kind: 'pick', selection: false });
  t.like(actions.take, { kind: 'change', fields: [] });
  const openapi = (await app.request('GET', '/api/openapi.json')).body;
  for (const path of ['/api/mobile/data/engine/watchlist/next/', '/api/mobile/data/engine/watchlist/{pk}/take/', '/api/mobile/data/{app}/{model}/actions/{action}/']) t.truthy(openapi.paths[path]?.post, path);
  const readerSchema = await app.request('GET', '/api/mobile/schema/engine/watchlist/', { token: reader.token });
  t.false(readerSchema.body.data.actions.find((action: { name: string }) => action.name === 'assign').allowed);
});

test.serial('bulk actions on alerts: close and reopen, each through the chain with an audit row', async (t) => {
  const db = app.database.knex;
  const caseId = await makeCase();
  const customerId = (await db('cases').where({ id: caseId }).first()).customer_id;
  const alerts = (await db('alerts')
    .insert([1, 2].map(() => ({ case_id: caseId, customer_id: customerId, target: 'customer', record_id: randomUUID(), score: 50, decision: 'REVIEW' })))
    .returning('id')).map((row: { id: string }) => String(row.id));
  const closed = await app.request('POST', `${DATA}engine/alert/actions/close_alerts/`, { token: alice.token, json: { pks: alerts } });
  t.is(closed.status, 200, closed.text);
  t.deepEqual(closed.body.data.counts, { updated: 2, pending: 0, refused: 0 });
  for (const alertId of alerts) {
    t.is((await db('alerts').where({ id: alertId }).first()).status, 'closed');
    t.is(await count('admin_log_entries', { content_type: 'engine.alert', object_id: alertId }), 1);
  }
  const browser = await web(bob);
  const reopened = await browser.post('/admin/engine/alert/', { csrfmiddlewaretoken: browser.csrf, action: 'reopen_alerts', _selected_action: alerts[0]!, post: 'yes' });
  t.is(reopened.status, 302);
  t.is((await db('alerts').where({ id: alerts[0] }).first()).status, 'open');
  t.is((await app.request('POST', `${DATA}engine/alert/actions/close_alerts/`, { token: reader.token, json: { pks: alerts } })).status, 403);
});

test.serial('maker-checker: with a change policy on cases each record of a bulk change, a take and a next case is a pending request of its own, applied on approval', async (t) => {
  await emptyQueue();
  const db = app.database.knex;
  const [policy] = await setApprovalPolicies(db, { model: 'engine.watchlist', operations: ['change'] });
  try {
    const cases = [await makeCase({ priority: 80 }), await makeCase({ priority: 70 })];
    const bulk = await app.request('POST', `${CASES}actions/change_status/`, { token: alice.token, json: { pks: cases, fields: { status: 'escalated', rationale: 'Needs the MLRO' } } });
    t.is(bulk.status, 200, bulk.text);
    t.deepEqual(bulk.body.data.counts, { updated: 0, pending: 2, refused: 0 });
    t.true(bulk.body.data.pending_approval);
    const requestIds = bulk.body.data.results.map((result: { approval_request_id: string }) => result.approval_request_id);
    t.is(new Set(requestIds).size, 2, 'one request per case');
    for (const caseId of cases) {
      t.is((await db('cases').where({ id: caseId }).first()).status, 'open', 'old values stay until approved');
      t.is(await count('approval_requests', { content_type: 'engine.watchlist', object_id: caseId, status: 'pending' }), 1);
    }
    // A second change of a case waiting for approval is refused, record by record.
    const again = await app.request('POST', `${CASES}actions/assign/`, { token: alice.token, json: { pks: cases, fields: { assignee_id: alice.id } } });
    t.is(again.status, 409);
    t.is(again.body.data.results[0].reason, 'pending_approval');

    for (const requestId of requestIds) {
      const outcome = await processRequest(app.context, checker.principal, requestId, { action: 'approve', reason: 'ok', attachments: [] });
      t.true(outcome.applied);
    }
    for (const [index, caseId] of cases.entries()) {
      t.is((await db('cases').where({ id: caseId }).first()).status, 'escalated');
      const [history] = await db('case_history').where({ case_id: caseId });
      t.is(history.rationale, 'Needs the MLRO');
      const audit = await db('admin_log_entries').where({ content_type: 'engine.watchlist', object_id: caseId }).first();
      t.is(audit.approval_request_id, requestIds[index]);
    }

    // Take and next case go through the same approval: the case stays unassigned until approved.
    const free = await makeCase({ priority: 95 });
    const take = await app.request('POST', `${CASES}${free}/take/`, { token: bob.token });
    t.is(take.status, 202);
    t.true(take.body.data.pending_approval);
    t.is(await assigneeOf(free), null);
    const next = await app.request('POST', `${CASES}next/`, { token: alice.token });
    t.is(next.status, 202, next.text);
    t.not(next.body.data.pk, free, 'a case waiting for approval is passed over');
    t.truthy(next.body.data.approval_request_id);
    t.is(await assigneeOf(next.body.data.pk), null);
    await processRequest(app.context, checker.principal, next.body.data.approval_request_id, { action: 'approve', reason: '', attachments: [] });
    t.is(await assigneeOf(next.body.data.pk), alice.id);
  } finally {
    await db('approval_policies').where({ id: policy!.id }).update({ active: false });
  }
});
