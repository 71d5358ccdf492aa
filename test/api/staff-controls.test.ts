/**
 * Staff-side controls that hold on every door: the defects an outside probe found (issue 35), each
 * tried through every path that causes the same effect.
 */
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { ServiceMcp } from '../../src/gateway/mcp.ts';
import { delegate } from '../../src/modules/ai/delegation.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { saveObject } from '../../src/modules/backoffice/write.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { permissionCodenames } from '../../src/app/registrations.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';
const DATA = '/api/mobile/data/';
const PASSWORD = 'correct horse battery staple 42';
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };

let app: TestApp;
let clock: TestClock;
let merchant: string;

interface Member {
  id: string;
  username: string;
  token: string;
  principal: Principal;
}

async function member(permissions: string[], input: { groups?: string[]; is_superuser?: boolean } = {}): Promise<Member> {
  const user = await staffUser(app, { permissions, ...input });
  const { accessToken } = await pairDevice(app, clock, user.id);
  return { id: user.id, username: user.username, token: accessToken, principal: (await loadPrincipal(app.context.db, user.id))! };
}

let sequence = 0;
function transaction(customer: string, amount: number) {
  sequence += 1;
  return { customer_ref: customer, event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `sc-${process.pid}-${sequence}`, io_type: 0, event_date: hoursAgo(1) };
}

const known = new Set<string>();
async function ingest(records: Array<{ customer_ref: string }>) {
  const customers = [...new Set(records.map((record) => record.customer_ref))].filter((customer) => !known.has(customer));
  for (const customer of customers) known.add(customer);
  if (customers.length) await app.request('POST', '/api/customer/upsert/', { token: merchant, json: customers.map((customer_ref) => ({ customer_ref })) });
  const response = await app.request('POST', FINANCIAL, { token: merchant, json: records });
  if (response.status !== 200) throw new Error(`ingest failed: ${response.text}`);
  return response.body.data.results as Array<{ id: string; decision: string; log_id: string }>;
}

/** A customer with two alerted transactions in one open case. */
async function alertedCase(customer: string) {
  const results = await ingest([transaction(customer, 6000), transaction(customer, 7000)]);
  const alert = await app.context.db('alerts').where({ record_id: results[0]!.id }).first();
  return { caseId: String(alert.case_id), records: results.map((result) => result.id) };
}

const count = async (table: string, where: Record<string, unknown> = {}) => Number((await app.context.db(table).where(where).count('* as n').first())!.n);

async function mcpFor(user: Member) {
  const { token } = await delegate(app.context.db, user.id, 60, clock.now);
  return ServiceMcp.connect({ url: `${app.url}/api/mcp/`, token }, 5000);
}

async function webLogin(user: Member) {
  const client = adminClient(app.url);
  const login = await client.login(user.username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  return client;
}

const CASE_CLOSER = ['engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert'];
const DECIDER = ['transaction.view_financialevent', 'transaction.change_financialevent', 'engine.view_executionlog', 'engine.change_executionlog', 'engine.add_compliancedecision'];

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
});

test.after.always(async () => {
  await app?.close();
});

// Defect 1: closing a case with clear_decision writes decisions, so it needs what a decision needs.
test.serial('closing a case with a clear decision needs the decision permission, through every door: mobile PATCH, web form, MCP tools', async (t) => {
  const closer = await member(CASE_CLOSER);
  const { caseId, records } = await alertedCase('closer-1');
  const close = { status: 'closed', rationale: 'nothing to see', clear_decision: 'ACCEPT' };

  const mobile = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: closer.token, json: close });
  t.is(mobile.status, 403, mobile.text);
  t.is(mobile.body.data.reason, 'permission_denied');

  const web = await webLogin(closer);
  const page = await web.get(`/admin/engine/watchlist/${caseId}/change/`);
  t.is(page.status, 200);
  const posted = await web.post(`/admin/engine/watchlist/${caseId}/change/`, { csrfmiddlewaretoken: csrfTokenIn(page.text), ...close, flagged: '', account_action: 'none' });
  t.is(posted.status, 403, 'the web form refuses it as well');

  const mcp = await mcpFor(closer);
  try {
    for (const [tool, args] of [
      ['change_case', { pk: caseId, changes: { status: 'closed', clear_decision: 'ACCEPT' }, rationale: 'nothing' }],
      ['update_record', { model: 'engine.watchlist', pk: caseId, changes: close }],
    ] as const) {
      const refused = await mcp.call(tool, args, 5000);
      t.true(refused.isError, `${tool}: ${refused.text}`);
    }
  } finally {
    await mcp.close();
  }
  t.is(await count('compliance_decisions', { case_id: caseId }), 0, 'no decision written');
  t.not((await app.context.db('cases').where({ id: caseId }).first()).status, 'closed');
  for (const id of records) t.is((await app.context.db('financial_transactions').where({ id }).first()).decision, 'REVIEW');
});

test.serial('closing with a clear decision obeys the decision policy (refused with the reason) and the pending lock of every alerted record', async (t) => {
  const closer = await member([...CASE_CLOSER, ...DECIDER]);
  const other = await member(DECIDER);
  const { caseId, records } = await alertedCase('closer-2');
  // Another officer's decision request waits on one of the alerted transactions.
  await setApprovalPolicies(app.context.db, { model: 'transaction.financialevent', operations: ['decision'] });
  const pending = await app.request('POST', `${DATA}transaction/financialevent/${records[1]}/decision/`, { token: other.token, json: { decision: 'REJECT', description: 'fraud ring' } });
  t.is(pending.status, 202, pending.text);

  const refused = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: closer.token, json: { status: 'closed', rationale: 'clear', clear_decision: 'ACCEPT' } });
  t.is(refused.status, 409, refused.text);
  t.is(refused.body.data.reason, 'pending_approval');

  // With no request pending, the policy still covers decisions on financial events: refused, with the reason.
  await app.context.db('approval_requests').where({ id: pending.body.data.approval_request }).update({ status: 'withdrawn' });
  const covered = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: closer.token, json: { status: 'closed', rationale: 'clear', clear_decision: 'ACCEPT' } });
  t.is(covered.status, 400, covered.text);
  t.is(covered.body.data.errors.clear_decision[0].code, 'approval_required');
  t.is(await count('compliance_decisions', { case_id: caseId }), 0);
  t.is(await count('alerts', { case_id: caseId, status: 'closed' }), 0, 'the whole closure rolled back');

  // Closing without a clear decision is a case change, not a decision: allowed.
  const plain = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: closer.token, json: { status: 'closed', rationale: 'handled one by one' } });
  t.is(plain.status, 200, plain.text);
  await app.context.db('approval_policies').where({ content_type: 'transaction.financialevent' }).delete();
});

// Defect 5: the policy and lock belong to the ruled record, whatever door the decision comes in by.
test.serial("a decision posted on an execution log obeys the transaction's decision policy and its pending lock", async (t) => {
  const officer = await member(DECIDER);
  const [result] = await ingest([transaction('log-door', 8000)]);
  await setApprovalPolicies(app.context.db, { model: 'transaction.financialevent', operations: ['decision'] });
  try {
    const viaLog = await app.request('POST', `${DATA}engine/executionlog/${result!.log_id}/decision/`, { token: officer.token, json: { decision: 'ACCEPT', description: 'looks fine' } });
    t.is(viaLog.status, 202, viaLog.text);
    t.is((await app.context.db('financial_transactions').where({ id: result!.id }).first()).decision, 'REVIEW', 'not written while the policy asks for approval');
    // The request opened through the log locks the transaction's own door too, and the log's.
    const direct = await app.request('POST', `${DATA}transaction/financialevent/${result!.id}/decision/`, { token: officer.token, json: { decision: 'REJECT', description: 'other view' } });
    t.is(direct.status, 409, direct.text);
    const [second] = await app.context.db('execution_logs').where({ record_id: result!.id }).select('id');
    t.truthy(second);
  } finally {
    await app.context.db('approval_policies').where({ content_type: 'transaction.financialevent' }).delete();
  }
  // And the other way round: a request on the transaction locks its execution log's door.
  const [next] = await ingest([transaction('log-door', 9000)]);
  await setApprovalPolicies(app.context.db, { model: 'transaction.financialevent', operations: ['decision'] });
  try {
    t.is((await app.request('POST', `${DATA}transaction/financialevent/${next!.id}/decision/`, { token: officer.token, json: { decision: 'REJECT', description: 'x' } })).status, 202);
    const viaLog = await app.request('POST', `${DATA}engine/executionlog/${next!.log_id}/decision/`, { token: officer.token, json: { decision: 'ACCEPT', description: 'y' } });
    t.is(viaLog.status, 409, viaLog.text);
  } finally {
    await app.context.db('approval_policies').where({ content_type: 'transaction.financialevent' }).delete();
  }
  // A log decision needs the decision permission on the transaction it rules on.
  const logOnly = await member(['engine.view_executionlog', 'engine.change_executionlog', 'engine.add_compliancedecision']);
  const [third] = await ingest([transaction('log-door', 9500)]);
  const refused = await app.request('POST', `${DATA}engine/executionlog/${third!.log_id}/decision/`, { token: logOnly.token, json: { decision: 'ACCEPT', description: 'z' } });
  t.is(refused.status, 403, refused.text);
});

// Defect 2: groups carry permissions; superusers are changed by superusers only.
test.serial('a user who may change users cannot join a group beyond their permissions, nor demote or deactivate a superuser', async (t) => {
  const admins = await createGroup(app.context.db, { name: `admins-${process.pid}`, permissions: permissionCodenames() }, operator);
  const helpdesk = await createGroup(app.context.db, { name: `helpdesk-${process.pid}`, permissions: ['auth.view_user'] }, operator);
  const root = await member([], { is_superuser: true });
  const manager = await member(['auth.view_user', 'auth.change_user', 'auth.add_user', 'auth.view_group']);
  const users = app.context.backoffice.site.get('auth', 'user')!;

  const join = await app.request('PATCH', `${DATA}auth/user/${manager.id}/`, { token: manager.token, json: { groups: [String(admins.id)] } });
  t.is(join.status, 400, join.text);
  t.truthy(join.body.data.errors.groups);
  t.is(await count('staff_user_groups', { user_id: manager.id }), 0);
  // A group whose permissions they hold is fine.
  t.is((await app.request('PATCH', `${DATA}auth/user/${manager.id}/`, { token: manager.token, json: { groups: [String(helpdesk.id)] } })).status, 200);

  for (const change of [{ is_superuser: false }, { is_active: false }]) {
    const refused = await app.request('PATCH', `${DATA}auth/user/${root.id}/`, { token: manager.token, json: change });
    t.is(refused.status, 403, `${JSON.stringify(change)}: ${refused.text}`);
  }
  t.is((await app.request('DELETE', `${DATA}auth/user/${root.id}/`, { token: manager.token })).status, 403);
  const stored = await app.context.db('staff_users').where({ id: root.id }).first();
  t.true(stored.is_superuser && stored.is_active);

  // auth.add_user alone does not create a user inside a group beyond it.
  const created = await app.request('POST', `${DATA}auth/user/`, { token: manager.token, json: { username: `newbie${process.pid}`, password: 'quartz-lighthouse-meridian-9', groups: [String(admins.id)], timezone: 'UTC', language: 'en' } });
  t.is(created.status, 400, created.text);
  t.is(await count('staff_users', { username: `newbie${process.pid}` }), 0);

  // Through the MCP tool as well.
  const mcp = await mcpFor(manager);
  try {
    const refused = await mcp.call('update_record', { model: 'auth.user', pk: manager.id, changes: { groups: [String(admins.id)] } }, 5000);
    t.true(refused.isError, refused.text);
  } finally {
    await mcp.close();
  }
  t.deepEqual(await app.context.db('staff_user_groups').where({ user_id: manager.id }).pluck('group_id'), [helpdesk.id]);

  // The last active superuser stays one, even for a superuser.
  const last = await app.context.db('staff_users').where({ is_superuser: true, is_active: true }).pluck('id');
  for (const id of last.filter((id: string) => id !== root.id)) await app.context.db('staff_users').where({ id }).update({ is_superuser: false });
  const demoteSelf = await t.throwsAsync(saveObject(app.context.backoffice, users, root.principal, root.id, { is_superuser: false }, { partial: true }));
  t.regex(JSON.stringify((demoteSelf as { errors?: unknown }).errors), /last active superuser/);
});

// Defect 3: hidden columns never leave through the MCP tools.
test.serial('the MCP tools return no hidden column: password hashes, secrets, tokens, payloads', async (t) => {
  const root = await member([], { is_superuser: true });
  await app.context.db('verification_flows').insert({ code: `flow-${process.pid}`, name: 'Flow', required_artifact_types: ['selfie'], notify_secret: 'NOTIFY-SECRET-MARKER' });
  await app.credential();
  const mcp = await mcpFor(root);
  const hiddenMarkers = /argon2|NOTIFY-SECRET-MARKER|secret_hash|password_hash|notify_secret|videocall_token|"payload"/;
  try {
    for (const model of ['auth.user', 'document.flow', 'merchant.credential']) {
      const listed = await mcp.call('search_records', { model }, 5000);
      t.false(listed.isError, listed.text);
      t.notRegex(listed.text, hiddenMarkers, `search_records ${model}`);
      t.true(JSON.parse(listed.text).rows.length > 0, model);
      for (const row of JSON.parse(listed.text).rows.slice(0, 3)) {
        const record = await mcp.call('get_record', { model, pk: row.pk }, 5000);
        t.false(record.isError, record.text);
        t.notRegex(record.text, hiddenMarkers, `get_record ${model}`);
      }
    }
    const user = await mcp.call('get_record', { model: 'auth.user', pk: root.id }, 5000);
    t.false(JSON.parse(user.text).record.password_hash !== undefined);
  } finally {
    await mcp.close();
  }
});

// Defect 12: names only to those who may view customers.
test.serial("a case's customer is named only to users who may view customers (detail relation, list column, dashboard block)", async (t) => {
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'named-1', first_name: 'Zebulon', last_name: 'Quartermaine' }] });
  known.add('named-1');
  const { caseId } = await alertedCase('named-1');
  await ingest([transaction('named-1', 100)]);
  const caseViewer = await member(['engine.view_watchlist', 'transaction.view_financialevent']);
  const detail = await app.request('GET', `${DATA}engine/watchlist/${caseId}/`, { token: caseViewer.token });
  t.is(detail.status, 200, detail.text);
  t.notRegex(detail.text, /Zebulon|Quartermaine|named-1/);
  const list = await app.request('GET', `${DATA}engine/watchlist/`, { token: caseViewer.token });
  t.is(list.status, 200);
  t.notRegex(list.text, /Zebulon|Quartermaine|named-1/);
  const volume = await app.request('GET', '/api/mobile/dashboard/high-volume-customers/', { token: caseViewer.token });
  t.is(volume.status, 200, volume.text);
  t.notRegex(volume.text, /Zebulon|Quartermaine|named-1/);

  const customerViewer = await member(['engine.view_watchlist', 'transaction.view_financialevent', 'customer.view_customer']);
  t.regex((await app.request('GET', `${DATA}engine/watchlist/${caseId}/`, { token: customerViewer.token })).text, /Zebulon/);
  t.regex((await app.request('GET', '/api/mobile/dashboard/high-volume-customers/', { token: customerViewer.token })).text, /Zebulon/);
});

// Defect 16: an approval applies its diff only to the record it was made against.
test.serial('an approved change is refused, not applied, when the record changed since it was requested', async (t) => {
  const maker = await member(['customer.view_customer', 'customer.change_customer']);
  const checker = await member(['customer.view_customer', 'customer.change_customer', 'approval.view_approvalrequest']);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'stale-1', first_name: 'Ann', email: 'ann@example.com' }] });
  const customer = await app.context.db('customers').where({ customer_ref: 'stale-1' }).first();
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'] });
  try {
    const requested = await app.request('PATCH', `${DATA}customer/customer/${customer.id}/`, { token: maker.token, json: { first_name: 'Anne' } });
    t.is(requested.status, 202, requested.text);
    // The merchant renames the customer in between.
    const upsert = await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'stale-1', first_name: 'Annabel', email: 'ann@example.com' }] });
    t.is(upsert.status, 200, upsert.text);
    const requestId = requested.body.data.approval_request_id;
    const processed = await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checker.token, json: { action: 'approve', reason: 'ok' } });
    t.is(processed.status, 200, processed.text);
    t.regex(processed.body.message + JSON.stringify(processed.body.data), /changed since/);
    t.is((await app.context.db('customers').where({ id: customer.id }).first()).first_name, 'Annabel', 'the newer data stays');
    const request = await app.context.db('approval_requests').where({ id: requestId }).first();
    t.is(request.status, 'rejected');
    t.regex(request.reason, /changed since/);

    // Unchanged in between, the approval applies as before.
    const again = await app.request('PATCH', `${DATA}customer/customer/${customer.id}/`, { token: maker.token, json: { first_name: 'Anne' } });
    t.is(again.status, 202, again.text);
    const approved = await app.request('POST', `${DATA}approval/approvalrequest/${again.body.data.approval_request_id}/process/`, { token: checker.token, json: { action: 'approve', reason: 'ok' } });
    t.is(approved.status, 200, approved.text);
    t.is((await app.context.db('customers').where({ id: customer.id }).first()).first_name, 'Anne');
  } finally {
    await app.context.db('approval_policies').where({ content_type: 'customer.customer' }).delete();
  }
});

test.serial('an approved change writes only what its checkers signed: a field the form carried unchanged is not written back over a newer value', async (t) => {
  const maker = await member(['customer.view_customer', 'customer.change_customer']);
  const checker = await member(['customer.view_customer', 'customer.change_customer', 'approval.view_approvalrequest']);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'form-1', first_name: 'Bo', email: 'bo@example.com' }] });
  known.add('form-1');
  const customer = await app.context.db('customers').where({ customer_ref: 'form-1' }).first();
  const customers = app.context.backoffice.site.get('customer', 'customer')!;
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'] });
  try {
    // The form sends the e-mail as it stood; only the first name changes.
    const outcome = await saveObject(app.context.backoffice, customers, maker.principal, customer.id, { first_name: 'Bob', email: 'bo@example.com' }, { partial: true, origin: { channel: 'mobile' } });
    t.is(outcome.status, 'pending');
    await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'form-1', first_name: 'Bo', email: 'bo.new@example.com' }] });
    const approved = await app.request('POST', `${DATA}approval/approvalrequest/${outcome.approvalRequestId}/process/`, { token: checker.token, json: { action: 'approve', reason: 'ok' } });
    t.is(approved.status, 200, approved.text);
    const stored = await app.context.db('customers').where({ id: customer.id }).first();
    t.is(stored.first_name, 'Bob');
    t.is(stored.email, 'bo.new@example.com', 'the merchant\'s newer e-mail stays');
  } finally {
    await app.context.db('approval_policies').where({ content_type: 'customer.customer' }).delete();
  }
});

test.serial('an approved decision is applied only while its maker may still decide; the last superuser cannot be deleted', async (t) => {
  const maker = await member(DECIDER);
  const checker = await member([...DECIDER, 'approval.view_approvalrequest']);
  const [result] = await ingest([transaction('maker-lost', 8000)]);
  await setApprovalPolicies(app.context.db, { model: 'transaction.financialevent', operations: ['decision'] });
  try {
    const pending = await app.request('POST', `${DATA}transaction/financialevent/${result!.id}/decision/`, { token: maker.token, json: { decision: 'REJECT', description: 'mule' } });
    t.is(pending.status, 202, pending.text);
    await app.context.db('staff_user_permissions').where({ user_id: maker.id, codename: 'engine.add_compliancedecision' }).delete();
    const approved = await app.request('POST', `${DATA}approval/approvalrequest/${pending.body.data.approval_request}/process/`, { token: checker.token, json: { action: 'approve', reason: 'ok' } });
    t.is(approved.status, 403, approved.text);
    t.is(await count('compliance_decisions', { target_id: result!.id }), 0);
    t.is((await app.context.db('financial_transactions').where({ id: result!.id }).first()).decision, 'REVIEW');
  } finally {
    await app.context.db('approval_policies').where({ content_type: 'transaction.financialevent' }).delete();
  }

  const root = await member([], { is_superuser: true });
  await app.context.db('staff_users').whereNot({ id: root.id }).where({ is_superuser: true }).update({ is_superuser: false });
  const deleted = await app.request('DELETE', `${DATA}auth/user/${root.id}/`, { token: root.token });
  t.is(deleted.status, 400, deleted.text);
  t.regex(deleted.text, /last active superuser/);
  t.truthy(await app.context.db('staff_users').where({ id: root.id }).first('id'));
});
