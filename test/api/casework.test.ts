import test from 'ava';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHmac } from 'node:crypto';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { detailBlocks } from '../../src/modules/backoffice/site.ts';
import { getRow } from '../../src/modules/backoffice/query.ts';
import { saveObject } from '../../src/modules/backoffice/write.ts';
import { PendingApprovalConflict, ValidationFailed } from '../../src/modules/backoffice/errors.ts';
import { setApprovalPolicies, setDecisionWebhook } from '../../src/app/policies.ts';
import { processRequest } from '../../src/modules/approvals/service.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';
const DATA = '/api/mobile/data/';

let app: TestApp;
let clock: TestClock;
let merchant: string;
let apiKey: string;
let officer: { id: string; token: string; principal: Principal };
let clerk: { id: string; token: string };
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };

const OFFICER_PERMISSIONS = [
  'transaction.view_financialevent', 'transaction.change_financialevent', 'engine.view_executionlog', 'engine.change_executionlog',
  'engine.add_compliancedecision', 'engine.view_compliancedecision', 'engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert',
  'customer.view_customer', 'customer.change_customer', 'approval.view_approvalrequest', 'approval.view_pendingapprovalrequest',
];

async function member(permissions: string[], groups: string[] = []) {
  const user = await staffUser(app, { permissions, groups });
  const { accessToken } = await pairDevice(app, clock, user.id);
  return { id: user.id, token: accessToken, principal: (await loadPrincipal(app.context.db, user.id))! };
}

let sequence = 0;
function transaction(customer: string, amount: number) {
  sequence += 1;
  return { customer_ref: customer, event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `cw-${process.pid}-${sequence}`, io_type: 0, event_date: hoursAgo(1) };
}

async function ingest(records: unknown[]) {
  const response = await app.request('POST', FINANCIAL, { token: merchant, json: records });
  if (response.status !== 200) throw new Error(`ingest failed: ${response.text}`);
  return response.body.data.results as Array<{ id: string; transaction_ref: string; decision: string; score: number; log_id: string }>;
}

async function multipart(path: string, token: string, fields: Record<string, string>, files: Array<{ name: string; bytes: Buffer }>) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const file of files) form.append('attachments[]', new Blob([new Uint8Array(file.bytes)]), file.name);
  const response = await fetch(`${app.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text) };
}

const PDF = Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n');
const EXECUTABLE = Buffer.concat([Buffer.from('MZ'), Buffer.alloc(58), Buffer.from([0x80, 0, 0, 0]), Buffer.alloc(64), Buffer.from('PE\0\0'), Buffer.alloc(200)]);

test.before(async () => {
  // The merchant webhook receiver below listens on 127.0.0.1, which outgoing URLs may not reach otherwise.
  app = await startTestApp({ WARDEN_OUTBOUND_ALLOW: '127.0.0.1' });
  clock = installClock(app);
  const credential = await app.credential();
  apiKey = credential.apiKey;
  merchant = (await app.request('POST', '/api/merchant/auth/token/', { json: { api_key: credential.apiKey, api_secret: credential.apiSecret } })).body.data.access_token;
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [
    { code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 },
    { code: 'HUGE', name: 'Huge amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 50000] }, score: 30, decision: 'REJECT' },
  ]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: ['alice', 'bob', 'carol', 'dave', 'erin'].map((customer_ref) => ({ customer_ref })) });
  officer = await member(OFFICER_PERMISSIONS);
  clerk = await member(['transaction.view_financialevent', 'transaction.change_financialevent']);
});

test.after.always(async () => {
  await app?.close();
});

test.serial('a batch raises alerts for REVIEW and REJECT in its transaction; one case per customer, extended, priority the highest score', async (t) => {
  const results = await ingest([transaction('alice', 100), transaction('alice', 6000), transaction('alice', 60000), transaction('bob', 7000)]);
  t.deepEqual(results.map((result) => result.decision), ['ACCEPT', 'REVIEW', 'REJECT', 'REVIEW']);
  const alerts = await app.context.db('alerts as a').join('customers as c', 'c.id', 'a.customer_id').select('a.*', 'c.customer_ref').orderBy('a.score');
  const alice = alerts.filter((alert) => alert.customer_ref === 'alice');
  t.is(alice.length, 2);
  t.deepEqual(alice.map((alert) => alert.record_id).sort(), [results[1]!.id, results[2]!.id].sort());
  t.is(alice[0]!.log_id, results[1]!.log_id);
  t.deepEqual(alice[1]!.rule_codes.sort(), ['HUGE', 'LARGE']);
  t.is(alice[0]!.case_id, alice[1]!.case_id);
  const aliceCase = await app.context.db('cases').where({ id: alice[0]!.case_id }).first();
  t.is(Number(aliceCase.priority), 90);
  t.is(aliceCase.alert_count, 2);

  await ingest([transaction('alice', 5500)]);
  const extended = await app.context.db('cases').where({ id: alice[0]!.case_id }).first();
  t.is(extended.alert_count, 3);
  t.is(Number(extended.priority), 90, 'a lower score leaves the priority at the highest seen');
  t.is(await app.context.db('cases').join('customers as c', 'c.id', 'cases.customer_id').where('c.customer_ref', 'alice').count('* as n').first().then((row) => Number(row!.n)), 1);
});

test.serial('a batch whose alerts cannot be written stores nothing (same transaction)', async (t) => {
  const before = Number((await app.context.db('financial_transactions').count('* as n').first())!.n);
  await app.context.db.raw(`create function refuse_alerts() returns trigger language plpgsql as $$ begin raise exception 'refused for the test'; end $$`);
  await app.context.db.raw('create trigger refuse_alerts before insert on alerts for each row execute function refuse_alerts()');
  try {
    const response = await app.request('POST', FINANCIAL, { token: merchant, json: [transaction('erin', 100), transaction('erin', 9000)] });
    t.is(response.status, 500);
  } finally {
    await app.context.db.raw('drop trigger refuse_alerts on alerts');
    await app.context.db.raw('drop function refuse_alerts()');
  }
  t.is(Number((await app.context.db('financial_transactions').count('* as n').first())!.n), before);
});

test.serial('alert and execution log details carry data_context with four flat sections as the rules saw them', async (t) => {
  const [result] = await ingest([transaction('carol', 8000)]);
  const site = app.context.backoffice.site;
  const alert = await app.context.db('alerts').where({ record_id: result!.id }).first();
  const alertBlocks = await detailBlocks(app.context.db, site, site.get('engine', 'alert')!, alert, officer.principal);
  const context = alertBlocks.data_context as Record<string, Record<string, unknown>>;
  t.deepEqual(Object.keys(context), ['transaction', 'customer', 'aggregates', 'event']);
  t.is(context.transaction!.amount, 8000);
  t.is(context.customer!.customer_ref, 'carol');
  t.is(context.event!.slug, 'deposit');
  t.regex(String(context.transaction!.event_date), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/, 'timestamps as the API writes them: UTC to the second, no offset');
  for (const section of Object.values(context)) t.true(Object.values(section).every((value) => value === null || typeof value !== 'object'));
  const log = await app.context.db('execution_logs').where({ id: result!.log_id }).first();
  const logBlocks = await detailBlocks(app.context.db, site, site.get('engine', 'executionlog')!, log, officer.principal);
  t.deepEqual(logBlocks.data_context, context);
  t.is((logBlocks.mark as { allowed: boolean }).allowed, true);
});

test.serial('decision endpoint: bad values, score 101, eleven attachments, an executable named .pdf, permissions, unknown model and record', async (t) => {
  const [result] = await ingest([transaction('dave', 100)]);
  const path = `${DATA}transaction/financialevent/${result!.id}/decision/`;
  const wrong = await app.request('POST', path, { token: officer.token, json: { decision: 'MAYBE', description: 'x' } });
  t.is(wrong.status, 400);
  t.is(wrong.body.data.errors.decision[0].code, 'invalid_choice');
  const missing = await app.request('POST', path, { token: officer.token, json: { decision: 'REJECT' } });
  t.is(missing.status, 400);
  t.is(missing.body.data.errors.description[0].code, 'required');
  const high = await app.request('POST', path, { token: officer.token, json: { decision: 'REJECT', description: 'x', score: 101 } });
  t.is(high.status, 400);
  t.truthy(high.body.data.errors.score);
  const eleven = await multipart(path, officer.token, { decision: 'REJECT', description: 'x' }, Array.from({ length: 11 }, (_, index) => ({ name: `page-${index}.pdf`, bytes: PDF })));
  t.is(eleven.status, 400);
  t.is(eleven.body.data.reason, 'too_many_attachments');
  const disguised = await multipart(path, officer.token, { decision: 'REJECT', description: 'x' }, [{ name: 'invoice.pdf', bytes: EXECUTABLE }]);
  t.is(disguised.status, 400);
  t.is(disguised.body.data.reason, 'file_type_not_allowed');
  const forbidden = await app.request('POST', path, { token: clerk.token, json: { decision: 'REJECT', description: 'x' } });
  t.is(forbidden.status, 403);
  t.is((await app.request('POST', `${DATA}customer/customer/${result!.id}/decision/`, { token: officer.token, json: { decision: 'REJECT', description: 'x' } })).status, 404);
  t.is((await app.request('POST', `${DATA}transaction/financialevent/00000000-0000-4000-8000-000000000000/decision/`, { token: officer.token, json: { decision: 'REJECT', description: 'x' } })).status, 404);
  t.is((await app.request('POST', path, { token: officer.token, body: '{not json', headers: { 'content-type': 'application/json' } })).status, 400);
  t.is(Number((await app.context.db('compliance_decisions').where({ target_id: result!.id }).count('* as n').first())!.n), 0, 'nothing written by any refusal');
  const stored = await app.context.db('financial_transactions').where({ id: result!.id }).first();
  t.is(stored.decision, 'ACCEPT');
});

test.serial('a decision is written (201) with its PDF, updates the record, joins its execution history and reaches the merchant webhook, signed', async (t) => {
  const deliveries: Array<{ body: string; signature: string }> = [];
  const receiver = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      deliveries.push({ body, signature: String(request.headers['x-warden-signature']) });
      response.writeHead(deliveries.length === 1 ? 503 : 200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => receiver.close(() => resolve())));
  const { secret } = await setDecisionWebhook(app.context.db, apiKey, `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, app.context.config.outboundAllow);

  const [result] = await ingest([transaction('dave', 200)]);
  const path = `${DATA}transaction/financialevent/${result!.id}/decision/`;
  const response = await multipart(path, officer.token, { decision: 'REJECT', description: 'Mule account confirmed', score: '95', document_description: 'Bank letter' }, [{ name: 'letter.pdf', bytes: PDF }]);
  t.is(response.status, 201, JSON.stringify(response.body));
  t.is(response.body.data.decision.decision, 'REJECT');
  t.is(response.body.data.decision.original_score, 0);
  t.is(response.body.data.decision.attachments[0].content_type, 'application/pdf');
  t.deepEqual(response.body.data.target, { model: 'transaction.financialevent', pk: result!.id, decision: 'REJECT', score: 95 });
  const record = await app.context.db('financial_transactions').where({ id: result!.id }).first();
  t.is(record.decision, 'REJECT');
  t.is(Number(record.score), 95);
  const history = await app.context.db('execution_logs').where({ record_id: result!.id }).orderBy('created_at');
  t.is(history.length, 2);
  t.is(history[1].decision, 'REJECT');
  t.is(history[1].compliance_decision_id, response.body.data.decision.id);
  t.is(record.log_id, history[1].id);
  // The ruling keeps the context and the rule versions of the scoring it follows.
  t.truthy(history[0].rule_version_set);
  t.is(history[1].rule_version_set, history[0].rule_version_set);
  t.deepEqual(history[1].data_context, history[0].data_context);

  // A score left out leaves the score alone.
  const again = await app.request('POST', path, { token: officer.token, json: { decision: 'REVIEW', description: 'Second look' } });
  t.is(again.status, 201);
  t.is(again.body.data.target.score, 95);

  for (let waited = 0; deliveries.length < 2 && waited < 20_000; waited += 200) await new Promise((resolve) => setTimeout(resolve, 200));
  t.true(deliveries.length >= 2, 'the first delivery failed (503) and was retried');
  const first = deliveries.find((delivery) => JSON.parse(delivery.body).decision === 'REJECT')!;
  const [stamp, mac] = first.signature.split(',');
  const timestamp = stamp!.slice(2);
  t.is(mac, `v1=${createHmac('sha256', secret).update(`${timestamp}.${first.body}`).digest('hex')}`);
  t.is(JSON.parse(first.body).transaction_ref, result!.transaction_ref);
});

test.serial('compliance decisions are append-only in the database, for everyone', async (t) => {
  const [result] = await ingest([transaction('dave', 300)]);
  await app.request('POST', `${DATA}transaction/financialevent/${result!.id}/decision/`, { token: officer.token, json: { decision: 'ACCEPT', description: 'fine' } });
  const row = await app.context.db('compliance_decisions').where({ target_id: result!.id }).first();
  await t.throwsAsync(app.context.db('compliance_decisions').where({ id: row.id }).update({ decision: 'REJECT' }), { message: /append-only/ });
  await t.throwsAsync(app.context.db('compliance_decisions').where({ id: row.id }).delete(), { message: /append-only/ });
  t.false(app.context.backoffice.site.can(officer.principal, app.context.backoffice.site.get('engine', 'compliancedecision')!, 'add'));
});

test.serial('case update: a rationale is required; closing with clear_decision writes one decision per alerted transaction with one batch_id; closing twice at once writes them once', async (t) => {
  const results = await ingest([transaction('bob', 9000), transaction('bob', 70000)]);
  const alert = await app.context.db('alerts').where({ record_id: results[0]!.id }).first();
  const site = app.context.backoffice.site;
  const cases = site.get('engine', 'watchlist')!;
  const chain = app.context.backoffice;
  t.true(cases.formFields.some((field) => field.name === 'clear_decision'));
  t.true(cases.formFields.some((field) => field.name === 'clear_score'));
  const noRationale = await t.throwsAsync(saveObject(chain, cases, officer.principal, alert.case_id, { status: 'in_review' }, { partial: true }));
  t.truthy((noRationale as ValidationFailed).errors.rationale);
  const notClosing = await t.throwsAsync(saveObject(chain, cases, officer.principal, alert.case_id, { clear_decision: 'ACCEPT' }, { partial: true }));
  t.truthy((notClosing as ValidationFailed).errors.clear_decision);
  const badScore = await t.throwsAsync(saveObject(chain, cases, officer.principal, alert.case_id, { status: 'closed', rationale: 'x', clear_decision: 'ACCEPT', clear_score: '101' }, { partial: true }));
  t.truthy((badScore as ValidationFailed).errors.clear_score);

  const close = () => saveObject(chain, cases, officer.principal, alert.case_id, { status: 'closed', rationale: 'False positive: payroll', clear_decision: 'ACCEPT', clear_score: '5' }, { partial: true });
  const outcomes = await Promise.allSettled([close(), close()]);
  t.true(outcomes.every((outcome) => outcome.status === 'fulfilled'));
  const alerted = await app.context.db('alerts').where({ case_id: alert.case_id }).whereIn('target', ['financial']).distinct('record_id');
  const decisions = await app.context.db('compliance_decisions').where({ case_id: alert.case_id });
  t.is(decisions.length, alerted.length, 'one decision per alerted transaction, not two');
  t.is(new Set(decisions.map((decision) => decision.batch_id)).size, 1);
  t.truthy(decisions[0].batch_id);
  for (const id of results.map((result) => result.id)) {
    const record = await app.context.db('financial_transactions').where({ id }).first();
    t.is(record.decision, 'ACCEPT');
    t.is(Number(record.score), 5);
  }
  t.is(Number((await app.context.db('alerts').where({ case_id: alert.case_id, status: 'open' }).count('* as n').first())!.n), 0);
  const history = await app.context.db('case_history').where({ case_id: alert.case_id });
  t.is(history.length, 1);
  t.is(history[0].rationale, 'False positive: payroll');
  const again = await t.throwsAsync(saveObject(chain, cases, officer.principal, alert.case_id, { status: 'closed', rationale: 'again', clear_decision: 'REJECT' }, { partial: true }));
  t.truthy((again as ValidationFailed).errors.clear_decision);
});

test.serial('maker-checker: a covered change opens a request (202-style pending), a second change is refused, the maker cannot sign, withdraw, then two stages applied with the audit naming maker and checkers', async (t) => {
  await createGroup(app.context.db, { name: 'Checkers', permissions: ['customer.view_customer', 'approval.view_pendingapprovalrequest', 'approval.view_approvalrequest'] }, operator);
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], stages: 2, signatures: 2, signerGroup: 'Checkers' });
  const checkers = await Promise.all([1, 2, 3, 4].map(() => member(['customer.view_customer', 'approval.view_approvalrequest'], ['Checkers'])));
  const outsider = await member(['customer.view_customer', 'approval.view_approvalrequest']);
  const model = app.context.backoffice.site.get('customer', 'customer')!;
  const customer = await app.context.db('customers').where({ customer_ref: 'erin' }).first();
  const chain = app.context.backoffice;

  const first = await saveObject(chain, model, officer.principal, customer.id, { first_name: 'Erin' }, { partial: true, origin: { channel: 'mobile' } });
  t.is(first.status, 'pending');
  t.is(first.messages[0]!.message, 'Change submitted for approval.');
  t.is((await app.context.db('customers').where({ id: customer.id }).first()).first_name, customer.first_name, 'old values stay');
  const withdrawn = await processRequest(app.context, officer.principal, first.approvalRequestId!, { action: 'withdraw', reason: 'typo', attachments: [] });
  t.is(withdrawn.status, 'withdrawn');

  const submitted = await saveObject(chain, model, officer.principal, customer.id, { first_name: 'Erin', last_name: 'Example' }, { partial: true });
  const requestId = submitted.approvalRequestId!;
  const request = await app.context.db('approval_requests').where({ id: requestId }).first();
  t.deepEqual(request.diff.fields.map((field: { name: string; type: string }) => [field.name, field.type]), [['first_name', 'scalar'], ['last_name', 'scalar']]);
  t.deepEqual(request.diff.inline_blocks, []);
  const second = await t.throwsAsync(saveObject(chain, model, officer.principal, customer.id, { first_name: 'Other' }, { partial: true }));
  t.true(second instanceof PendingApprovalConflict);
  const racing = await Promise.allSettled([1, 2].map(() => saveObject(chain, model, checkers[0]!.principal, customer.id, { middle_name: 'R' }, { partial: true })));
  t.true(racing.every((outcome) => outcome.status === 'rejected'));

  const own = await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: officer.token, json: { action: 'approve', reason: 'mine' } });
  t.is(own.status, 403);
  t.is((await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: outsider.token, json: { action: 'approve' } })).status, 403);
  t.is((await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checkers[0]!.token, json: { action: 'maybe' } })).status, 400);
  t.is((await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checkers[0]!.token, json: { action: 'reject' } })).status, 400, 'a rejection needs a reason');

  const stageOne = await Promise.all(checkers.slice(0, 2).map((checker) => app.request('POST', `${DATA}approval/pendingapprovalrequest/${requestId}/process/`, { token: checker.token, json: { action: 'approve', reason: 'ok' } })));
  t.deepEqual(stageOne.map((response) => response.status), [200, 200]);
  t.deepEqual(stageOne.map((response) => response.body.data.forwarded_to).sort(), [2, null].sort() as unknown[], 'exactly one stage move');
  t.is((await app.context.db('approval_requests').where({ id: requestId }).first()).stage, 2);
  const twice = await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checkers[0]!.token, json: { action: 'approve' } });
  t.is(twice.status, 409);
  t.is(twice.body.data.reason, 'approval_state');

  const third = await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checkers[2]!.token, json: { action: 'approve' } });
  t.is(third.body.data.request.action.code, 'signed');
  t.is((await app.context.db('customers').where({ id: customer.id }).first()).last_name, customer.last_name, 'not applied before the last signature');
  const last = await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checkers[3]!.token, json: { action: 'approve', reason: 'verified' } });
  t.is(last.status, 200);
  t.true(last.body.data.applied);
  t.is(last.body.data.request.action.code, 'processed');
  const changed = await app.context.db('customers').where({ id: customer.id }).first();
  t.is(changed.last_name, 'Example');
  const audit = await app.context.db('admin_log_entries').where({ approval_request_id: requestId }).first();
  t.is(audit.user_id, officer.id);
  for (const checker of checkers) {
    const user = await app.context.db('staff_users').where({ id: checker.id }).first();
    t.true(audit.actor.includes(user.username));
  }
  const blocks = await detailBlocks(app.context.db, app.context.backoffice.site, model, (await getRow(app.context.db, model, officer.principal, customer.id))!, officer.principal);
  t.is(blocks.pending_approval, false);
});

test.serial('a decision under a decision policy answers 202 and is applied, with its files, when approved', async (t) => {
  await setApprovalPolicies(app.context.db, { model: 'transaction.nonfinancialevent', operations: ['decision'] });
  await setApprovalPolicies(app.context.db, { model: 'engine.executionlog', operations: ['decision'], signerPermission: 'engine.change_executionlog' });
  const [result] = await ingest([transaction('carol', 120)]);
  const logPath = `${DATA}engine/executionlog/${result!.log_id}/decision/`;
  const pending = await multipart(logPath, officer.token, { decision: 'REJECT', description: 'Escalated', score: '88' }, [{ name: 'scan.pdf', bytes: PDF }]);
  t.is(pending.status, 202, JSON.stringify(pending.body));
  t.true(pending.body.data.pending_approval);
  t.is((await app.context.db('financial_transactions').where({ id: result!.id }).first()).decision, 'ACCEPT');
  const log = await app.context.db('execution_logs').where({ id: result!.log_id }).first();
  const mark = (await detailBlocks(app.context.db, app.context.backoffice.site, app.context.backoffice.site.get('engine', 'executionlog')!, log, officer.principal)).mark as Record<string, unknown>;
  t.like(mark, { needs_approval: true, max_attachments: 10, has_decisions: false, current: 'ACCEPT' });
  const checker = await member(['engine.change_executionlog', 'approval.view_approvalrequest']);
  const approved = await app.request('POST', `${DATA}approval/approvalrequest/${pending.body.data.approval_request}/process/`, { token: checker.token, json: { action: 'approve', reason: 'agreed' } });
  t.is(approved.status, 200, JSON.stringify(approved.body));
  const record = await app.context.db('financial_transactions').where({ id: result!.id }).first();
  t.is(record.decision, 'REJECT');
  t.is(Number(record.score), 88);
  const decision = await app.context.db('compliance_decisions').where({ target_id: result!.log_id }).first();
  t.is(decision.approval_request_id, pending.body.data.approval_request);
  t.is(decision.attachments[0].name, 'scan.pdf');
});

test.serial('a rule change under a policy carries replay evidence: outcome changes per pair, alerts added and removed, examples', async (t) => {
  await ingest([transaction('alice', 1000), transaction('alice', 3000), transaction('bob', 4000)]);
  await setApprovalPolicies(app.context.db, { model: 'engine.rule', operations: ['change'] });
  const rules = app.context.backoffice.site.get('engine', 'rule')!;
  const author = await member(['engine.view_rule', 'engine.change_rule']);
  const outcome = await saveObject(app.context.backoffice, rules, author.principal, 'LARGE', { expression: { '>=': [{ var: 'record.amount' }, 2000] } }, { partial: true });
  t.is(outcome.status, 'pending');
  const request = await app.context.db('approval_requests').where({ content_type: 'engine.rule', status: 'pending' }).first();
  t.truthy(request);
  let evidence: { evidence: Record<string, unknown>; evidence_status: string } = request;
  for (let waited = 0; evidence.evidence_status !== 'done' && waited < 20_000; waited += 200) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    evidence = await app.context.db('approval_requests').where({ id: request.id }).first();
  }
  t.is(evidence.evidence_status, 'done');
  const result = evidence.evidence as { events: number; changed: number; outcomes: Record<string, Record<string, number>>; alerts_added: number; alerts_removed: number; examples: unknown[] };
  const stored = Number((await app.context.db('financial_transactions').where('event_date', '>=', new Date(Date.now() - 30 * 86_400_000)).count('* as n').first())!.n);
  t.is(result.events, stored);
  const moved = await app.context.db('financial_transactions').where('event_date', '>=', new Date(Date.now() - 30 * 86_400_000)).whereBetween('amount', [2000, 4999.99]).count('* as n').first();
  t.is(result.outcomes.ACCEPT!.REVIEW, Number(moved!.n));
  t.is(result.alerts_added, Number(moved!.n));
  t.is(result.alerts_removed, 0);
  t.true(result.examples.length > 0 && result.examples.length <= 20);
  t.is((await app.context.db('rules').where({ code: 'LARGE' }).first()).expression['>='][1], 5000, 'the rule in force is unchanged until approved');
});

test.serial('web admin: the change page shows the decision form and context; a posted decision is recorded; an approval request is signed from its page', async (t) => {
  const password = 'violet-harbour-lantern-42';
  const web = await staffUser(app, { password, permissions: [...OFFICER_PERMISSIONS, 'customer.view_customer'] });
  await app.context.db('staff_users').where({ id: web.id }).update({ is_staff: true });
  const client = adminClient(app.url);
  t.is((await client.login(web.username, password)).status, 302);
  const [result] = await ingest([transaction('carol', 9500)]);
  const page = await client.get(`/admin/transaction/financialevent/${result!.id}/change/`);
  t.is(page.status, 200);
  t.true(page.text.includes(`action="/admin/transaction/financialevent/${result!.id}/decision/"`));
  const logPage = await client.get(`/admin/engine/executionlog/${result!.log_id}/change/`);
  t.true(logPage.text.includes('Decision context'));
  const csrf = csrfTokenIn(page.text);
  const refused = await client.post(`/admin/transaction/financialevent/${result!.id}/decision/`, { csrfmiddlewaretoken: csrf, decision: 'REJECT', description: 'web', score: '101' });
  t.is(refused.status, 302);
  t.is((await app.context.db('financial_transactions').where({ id: result!.id }).first()).decision, 'REVIEW');
  const posted = await client.post(`/admin/transaction/financialevent/${result!.id}/decision/`, { csrfmiddlewaretoken: csrf, decision: 'REJECT', description: 'Confirmed on the web', score: '' });
  t.is(posted.status, 302);
  const record = await app.context.db('financial_transactions').where({ id: result!.id }).first();
  t.is(record.decision, 'REJECT');
  t.is(Number(record.score), 60, 'an empty score leaves it alone');

  // A pending change to a customer, made by the officer, approved by this web user from the request page.
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], stages: 1, signatures: 1, signerPermission: 'customer.view_customer' });
  const model = app.context.backoffice.site.get('customer', 'customer')!;
  const customer = await app.context.db('customers').where({ customer_ref: 'carol' }).first();
  const pending = await saveObject(app.context.backoffice, model, officer.principal, customer.id, { first_name: 'Carol' }, { partial: true });
  const customerPage = await client.get(`/admin/customer/customer/${customer.id}/change/`);
  t.true(customerPage.text.includes('waiting for approval'));
  const requestPage = await client.get(`/admin/approval/approvalrequest/${pending.approvalRequestId}/change/`);
  t.is(requestPage.status, 200);
  t.true(requestPage.text.includes('value="approve"'));
  const approved = await client.post(`/admin/approval/approvalrequest/${pending.approvalRequestId}/process/`, { csrfmiddlewaretoken: csrf, action: 'approve', reason: 'checked' });
  t.is(approved.status, 302);
  t.is((await app.context.db('customers').where({ id: customer.id }).first()).first_name, 'Carol');
});

test.serial('two covered changes of one record at the same moment open exactly one request; the other is refused', async (t) => {
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'] });
  const model = app.context.backoffice.site.get('customer', 'customer')!;
  const customer = await app.context.db('customers').where({ customer_ref: 'dave' }).first();
  const outcomes = await Promise.allSettled(['One', 'Two'].map((name) => saveObject(app.context.backoffice, model, officer.principal, customer.id, { first_name: name }, { partial: true })));
  t.is(outcomes.filter((outcome) => outcome.status === 'fulfilled' && outcome.value.status === 'pending').length, 1);
  const refused = outcomes.find((outcome) => outcome.status === 'rejected') as PromiseRejectedResult;
  t.true(refused.reason instanceof PendingApprovalConflict);
  t.is(Number((await app.context.db('approval_requests').where({ object_id: customer.id, status: 'pending' }).count('* as n').first())!.n), 1);
  t.is((await app.context.db('customers').where({ id: customer.id }).first()).first_name, customer.first_name);
});

test.serial('approval policies are checked against the registry: unknown model, impossible operation, bad counts, unknown group or permission', async (t) => {
  const attempts: Array<[Parameters<typeof setApprovalPolicies>[1], RegExp]> = [
    [{ model: 'engine.nothing', operations: ['change'] }, /No model engine.nothing/],
    [{ model: 'engine.rule', operations: ['approve'] }, /Unknown operation approve/],
    [{ model: 'engine.rule', operations: [] }, /at least one operation/],
    [{ model: 'engine.compliancedecision', operations: ['add'] }, /allows no add/],
    [{ model: 'customer.customer', operations: ['decision'] }, /Decisions are made only on/],
    [{ model: 'engine.rule', operations: ['change'], stages: 0 }, /--stages/],
    [{ model: 'engine.rule', operations: ['change'], signatures: 11 }, /--signatures/],
    [{ model: 'engine.rule', operations: ['change'], signerGroup: 'Nobody' }, /No group named Nobody/],
    [{ model: 'engine.rule', operations: ['change'], signerPermission: 'engine.fly' }, /Unknown permission/],
  ];
  for (const [input, message] of attempts) await t.throwsAsync(setApprovalPolicies(app.context.db, input), { message });
  const [policy] = await setApprovalPolicies(app.context.db, { model: 'engine.rule', operations: ['delete'], stages: 3, signatures: 2 });
  t.like(policy, { content_type: 'engine.rule', operation: 'delete', stages: 3, signatures_per_stage: 2, active: true });
});

/** The ids of a customer's case and its alerted transactions, after a batch of deposits of these amounts. */
async function caseWithAlerts(customer: string, amounts: number[]) {
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: customer }] });
  const results = await ingest(amounts.map((amount) => transaction(customer, amount)));
  const alerted = results.filter((result) => result.decision !== 'ACCEPT').map((result) => result.id);
  const caseRow = await app.context.db('cases as k').join('customers as c', 'c.id', 'k.customer_id').where('c.customer_ref', customer).first('k.id');
  return { caseId: caseRow.id as string, alerted };
}

async function closedBy(caseId: string, alerted: string[], decision: string, score: number) {
  const decisions = await app.context.db('compliance_decisions').where({ case_id: caseId });
  const records = await app.context.db('financial_transactions').whereIn('id', alerted);
  return {
    status: (await app.context.db('cases').where({ id: caseId }).first('status')).status as string,
    decided: decisions.map((row) => row.target_id).sort(),
    batches: new Set(decisions.map((row) => row.batch_id)).size,
    records: records.every((record) => record.decision === decision && Number(record.score) === score),
    openAlerts: Number((await app.context.db('alerts').where({ case_id: caseId, status: 'open' }).count('* as n').first())!.n),
  };
}

test('web admin: the approval form of a pk that can name no request is a 404, not a 500', async (t) => {
  const password = 'amber-quarry-window-59';
  const web = await staffUser(app, { password, permissions: OFFICER_PERMISSIONS });
  await app.context.db('staff_users').where({ id: web.id }).update({ is_staff: true });
  const client = adminClient(app.url);
  t.is((await client.login(web.username, password)).status, 302);
  const csrf = csrfTokenIn((await client.get('/admin/')).text);
  for (const pk of ['not-a-uuid', '-1', '%ff']) {
    const response = await client.post(`/admin/approval/approvalrequest/${pk}/process/`, { csrfmiddlewaretoken: csrf, action: 'approve', reason: 'x' });
    t.is(response.status, 404, pk);
  }
});

test.serial('web admin: a case is closed from its page (rationale required, clear decision and score); a request is rejected and another withdrawn from their pages; replay evidence is on the request page', async (t) => {
  const password = 'amber-quarry-window-58';
  const web = await staffUser(app, { password, permissions: OFFICER_PERMISSIONS });
  await app.context.db('staff_users').where({ id: web.id }).update({ is_staff: true });
  const client = adminClient(app.url);
  t.is((await client.login(web.username, password)).status, 302);

  // Closing a case on its change page.
  const { caseId, alerted } = await caseWithAlerts('gwen', [9000, 60000, 100]);
  t.is(alerted.length, 2);
  const url = `/admin/engine/watchlist/${caseId}/change/`;
  const page = await client.get(url);
  t.is(page.status, 200);
  t.regex(page.text, /name="clear_decision"/);
  t.regex(page.text, /name="clear_score"/);
  t.regex(page.text, /<legend>Closing<\/legend><p class="help">Used only when the case is closed\.<\/p>/);
  const csrf = csrfTokenIn(page.text);
  const form = { csrfmiddlewaretoken: csrf, status: 'closed', account_action: 'none', postponed_until: '', assignee_id: '', clear_decision: 'ACCEPT', clear_score: '7' };
  const missing = await client.post(url, { ...form, rationale: '' });
  t.is(missing.status, 400);
  t.regex(missing.text, /A rationale is required to change status/);
  t.like(await closedBy(caseId, alerted, 'ACCEPT', 7), { status: 'open', decided: [], openAlerts: 2 });
  const closed = await client.post(url, { ...form, rationale: 'Payroll, documents on file' });
  t.is(closed.status, 302, closed.text.slice(0, 500));
  t.deepEqual(await closedBy(caseId, alerted, 'ACCEPT', 7), { status: 'closed', decided: [...alerted].sort(), batches: 1, records: true, openAlerts: 0 });
  t.is((await app.context.db('case_history').where({ case_id: caseId }).first()).rationale, 'Payroll, documents on file');
  const twice = await client.post(url, { ...form, rationale: 'again', clear_decision: 'REJECT', clear_score: '' });
  t.is(twice.status, 400);
  t.regex(twice.text, /This case is already closed\./);
  t.is(Number((await app.context.db('compliance_decisions').where({ case_id: caseId }).count('* as n').first())!.n), 2);

  // A request rejected from its page: a reason is required; the record keeps its values.
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], stages: 1, signatures: 1, signerPermission: 'customer.view_customer' });
  const customers = app.context.backoffice.site.get('customer', 'customer')!;
  const gwen = await app.context.db('customers').where({ customer_ref: 'gwen' }).first();
  const submitted = await saveObject(app.context.backoffice, customers, officer.principal, gwen.id, { first_name: 'Gwendolyn' }, { partial: true });
  const requestUrl = `/admin/approval/approvalrequest/${submitted.approvalRequestId}/`;
  const review = await client.get(`${requestUrl}change/`);
  t.true(review.text.includes('value="reject"'));
  t.true(review.text.includes('Gwendolyn'), 'the diff is on the page');
  t.is((await client.post(`${requestUrl}process/`, { csrfmiddlewaretoken: csrf, action: 'reject', reason: '' })).status, 302);
  t.true((await client.get(`${requestUrl}change/`)).text.includes('reason: A reason is required to reject.'), 'the refusal comes back as a message');
  t.is((await app.context.db('approval_requests').where({ id: submitted.approvalRequestId }).first()).status, 'pending');
  t.is((await client.post(`${requestUrl}process/`, { csrfmiddlewaretoken: csrf, action: 'reject', reason: 'No document for the name' })).status, 302);
  t.like(await app.context.db('approval_requests').where({ id: submitted.approvalRequestId }).first(), { status: 'rejected', reason: 'No document for the name' });
  t.is((await app.context.db('customers').where({ id: gwen.id }).first()).first_name, gwen.first_name);
  t.false((await client.get(`${requestUrl}change/`)).text.includes('value="reject"'), 'a processed request offers no buttons');

  // A change made on the web under the policy waits; its maker withdraws it from the request page.
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'hugo' }] });
  const hugo = await app.context.db('customers').where({ customer_ref: 'hugo' }).first();
  const customerUrl = `/admin/customer/customer/${hugo.id}/change/`;
  const fields = { csrfmiddlewaretoken: csrf, first_name: 'Hugo', last_name: '', company_name: '', birth_date: '', nationality: '', email: '', phone: '', country: '', occupation: '', status: '' };
  const held = await client.post(customerUrl, fields);
  t.is(held.status, 302);
  t.is(held.location, customerUrl);
  const pending = await client.get(customerUrl);
  t.true(pending.text.includes('Change submitted for approval.'));
  t.true(pending.text.includes('waiting for approval'));
  t.is((await app.context.db('customers').where({ id: hugo.id }).first()).first_name, hugo.first_name);
  const request = await app.context.db('approval_requests').where({ object_id: hugo.id, status: 'pending' }).first();
  t.deepEqual(request.diff.fields.map((field: { name: string }) => field.name), ['first_name'], 'only what changed is in the diff');
  const mine = await client.get(`/admin/approval/approvalrequest/${request.id}/change/`);
  t.true(mine.text.includes('value="withdraw"'));
  t.false(mine.text.includes('value="approve"'), 'the maker cannot sign');
  t.is((await client.post(`/admin/approval/approvalrequest/${request.id}/process/`, { csrfmiddlewaretoken: csrf, action: 'approve', reason: 'mine' })).status, 403, 'a forged approve form from the maker is refused');
  t.is((await app.context.db('approval_requests').where({ id: request.id }).first()).status, 'pending');
  t.is((await client.post(`/admin/approval/approvalrequest/${request.id}/process/`, { csrfmiddlewaretoken: csrf, action: 'withdraw' })).status, 302);
  t.is((await app.context.db('approval_requests').where({ id: request.id }).first()).status, 'withdrawn');
  t.false((await client.get(customerUrl)).text.includes('waiting for approval'));

  // The rule change of the replay test: its evidence is on the request's page.
  const ruleRequest = await app.context.db('approval_requests').where({ content_type: 'engine.rule', evidence_status: 'done' }).first();
  const evidencePage = await client.get(`/admin/approval/approvalrequest/${ruleRequest.id}/change/`);
  t.regex(evidencePage.text, new RegExp(`Replay of ${ruleRequest.evidence.events} financial events [^<]*: ${ruleRequest.evidence.changed} change outcome`));
  t.regex(evidencePage.text, new RegExp(`Alerts added: ${ruleRequest.evidence.alerts_added}; removed: ${ruleRequest.evidence.alerts_removed}`));
});

test.serial('mobile: the case form lists clear_decision and clear_score; a PATCH closes the case with a clear decision; the request detail carries the approval block with its evidence', async (t) => {
  const schema = await app.request('GET', '/api/mobile/schema/engine/watchlist/', { token: officer.token });
  const names = schema.body.data.form.fields.map((field: { name: string }) => field.name);
  t.true(names.includes('clear_decision') && names.includes('clear_score') && names.includes('rationale'));

  const { caseId, alerted } = await caseWithAlerts('ivan', [7000, 8000]);
  const path = `${DATA}engine/watchlist/${caseId}/`;
  const refused = await app.request('PATCH', path, { token: officer.token, json: { status: 'closed', clear_decision: 'REJECT' } });
  t.is(refused.status, 400);
  t.truthy(refused.body.data.errors.rationale);
  t.is((await app.request('PATCH', path, { token: officer.token, json: { status: 'closed', rationale: 'x', clear_decision: 'MAYBE' } })).status, 400);
  const closed = await app.request('PATCH', path, { token: officer.token, json: { status: 'closed', rationale: 'Mule pattern confirmed', clear_decision: 'REJECT', clear_score: 99 } });
  t.is(closed.status, 200, closed.text);
  t.deepEqual(await closedBy(caseId, alerted, 'REJECT', 99), { status: 'closed', decided: [...alerted].sort(), batches: 1, records: true, openAlerts: 0 });
  const again = await app.request('PATCH', path, { token: officer.token, json: { status: 'closed', rationale: 'twice', clear_decision: 'ACCEPT' } });
  t.is(again.status, 400);
  t.truthy(again.body.data.errors.clear_decision);

  const ruleRequest = await app.context.db('approval_requests').where({ content_type: 'engine.rule', evidence_status: 'done' }).first();
  const detail = await app.request('GET', `${DATA}approval/approvalrequest/${ruleRequest.id}/`, { token: officer.token });
  t.is(detail.status, 200, detail.text);
  t.like(detail.body.data.approval, { status: 'pending', operation: 'change', evidence_status: 'done', target: { model: 'engine.rule', pk: 'LARGE', exists: true }, mcp_origin: null });
  t.is(detail.body.data.approval.evidence.changed, ruleRequest.evidence.changed);
  t.true(['review', 'not_authorized'].includes(detail.body.data.approval.action.code));
});

const root = path.resolve(import.meta.dirname, '../..');

/** The operator command line on this test's database: exit code and the JSON it printed (stdout, or the error line). */
async function warden(...args: string[]): Promise<{ code: number; json: unknown }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], { cwd: root, env: { ...process.env, DATABASE_URL: app.database.url } });
    return { code: 0, json: JSON.parse(stdout) };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!) };
  }
}

test.serial('a customer whose sanctions score reaches the review threshold raises a sanctions alert on its case, even when the rules accept it', async (t) => {
  const fixtures = path.join(root, 'test/fixtures/sanctions');
  t.is((await warden('sanctions', 'import', '--format', 'ofac', path.join(fixtures, 'sdn.csv'), path.join(fixtures, 'alt.csv'))).code, 0);
  // test/fixtures/sanctions/sdn.csv lists "KARAVELLO, Dmitri Anatolyevich", DOB 14 Mar 1971, nationality Russia.
  const response = await app.request('POST', '/api/customer/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'listed-1', first_name: 'Dmitri', last_name: 'Karavello', birth_date: '1971-03-14', nationality: 'RUS' }, { customer_ref: 'clean-1', first_name: 'Maria', last_name: 'Lindqvist' }],
  });
  const [listed, clean] = response.body.data.results;
  t.is(listed.decision, 'ACCEPT', 'no customer rule is loaded here');
  t.true(listed.sanction_score >= app.context.config.thresholds.review, JSON.stringify(listed));
  const alerts = await app.context.db('alerts').whereIn('customer_id', [listed.id, clean.id]);
  t.is(alerts.length, 1);
  t.like(alerts[0], { customer_id: listed.id, target: 'customer', record_id: listed.id, kind: 'sanctions', decision: 'ACCEPT' });
  const caseRow = await app.context.db('cases').where({ id: alerts[0].case_id }).first();
  t.like(caseRow, { customer_id: listed.id, status: 'open', alert_count: 1 });
});

test.serial('warden approval-policy set and list, warden decision-webhook set: usage errors exit 2 with the reason', async (t) => {
  const refused = await warden('approval-policy', 'set', '--model', 'engine.rule', '--operations', 'change,approve');
  t.is(refused.code, 2);
  t.regex(JSON.stringify(refused.json), /Unknown operation approve/);
  t.is((await warden('approval-policy', 'set', '--model', 'engine.rule', '--operations', 'change', '--stages', 'two')).code, 2);
  t.is((await warden('approval-policy', 'set', '--operations', 'change')).code, 2);
  const set = await warden('approval-policy', 'set', '--model', 'transaction.financialevent', '--operations', 'decision', '--stages', '2', '--signatures', '3', '--signer-group', 'Checkers');
  t.is(set.code, 0, JSON.stringify(set.json));
  t.like((set.json as unknown[])[0], { content_type: 'transaction.financialevent', operation: 'decision', stages: 2, signatures_per_stage: 3, active: true });
  const listed = (await warden('approval-policy', 'list')).json as { model: string; operation: string }[];
  t.like(listed.find((policy) => policy.model === 'transaction.financialevent' && policy.operation === 'decision'), { stages: 2, signatures: 3, signer_group: 'Checkers', active: true });
  t.is((await warden('approval-policy', 'set', '--model', 'transaction.financialevent', '--operations', 'decision', '--inactive')).code, 0);
  t.false((await app.context.db('approval_policies').where({ content_type: 'transaction.financialevent', operation: 'decision' }).first()).active);

  t.is((await warden('decision-webhook', 'set', '--api-key', 'wk_nobody', '--url', 'https://merchant.example/hook')).code, 2);
  t.is((await warden('decision-webhook', 'set', '--api-key', apiKey, '--url', 'ftp://merchant.example/hook')).code, 2);
  const webhook = await warden('decision-webhook', 'set', '--api-key', apiKey, '--url', 'https://merchant.example/hook');
  t.is(webhook.code, 0);
  t.like(webhook.json, { url: 'https://merchant.example/hook' });
  t.regex((webhook.json as { secret: string }).secret, /^[0-9a-f]{64}$/);
});
