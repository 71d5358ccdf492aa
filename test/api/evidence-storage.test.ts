/**
 * Evidence files of case work (decision attachments, approval signatures) are stored only for
 * requests that are authorised and go through: a request refused before its body (403, 404, 409)
 * is answered without reading it, one refused later removes every file it wrote, and an upload
 * the client abandons mid-body leaves no temporary file behind.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { waitFor } from '../helpers/kyc.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { saveObject } from '../../src/modules/backoffice/write.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';
const DATA = '/api/mobile/data/';

let app: TestApp;
let clock: TestClock;
let merchant: string;
let officer: { id: string; token: string; principal: Principal };
let clerk: { id: string; token: string };

const OFFICER_PERMISSIONS = [
  'transaction.view_financialevent', 'transaction.change_financialevent', 'engine.view_executionlog', 'engine.change_executionlog',
  'engine.add_compliancedecision', 'engine.view_compliancedecision', 'customer.view_customer', 'customer.change_customer',
  'approval.view_approvalrequest', 'approval.view_pendingapprovalrequest',
];

async function member(permissions: string[]) {
  const user = await staffUser(app, { permissions });
  const { accessToken } = await pairDevice(app, clock, user.id);
  return { id: user.id, token: accessToken, principal: (await loadPrincipal(app.context.db, user.id))! };
}

let sequence = 0;
async function ingest(customer: string, amount: number) {
  sequence += 1;
  const record = { customer_ref: customer, event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `ev-${process.pid}-${sequence}`, io_type: 0, event_date: hoursAgo(1) };
  const response = await app.request('POST', FINANCIAL, { token: merchant, json: [record] });
  if (response.status !== 200) throw new Error(`ingest failed: ${response.text}`);
  return response.body.data.results[0] as { id: string; log_id: string; decision: string };
}

/** A small PDF whose bytes (and so whose content address) no other file shares. */
function uniquePdf(): Buffer {
  return Buffer.from(`%PDF-1.4\n% ${randomBytes(16).toString('hex')}\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n`);
}

function pdfs(count: number) {
  return Array.from({ length: count }, (_, index) => ({ name: `evidence-${index}.pdf`, bytes: uniquePdf() }));
}

async function multipart(requestPath: string, token: string, fields: Record<string, string>, files: Array<{ name: string; bytes: Buffer }>) {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const file of files) form.append('attachments[]', new Blob([new Uint8Array(file.bytes)]), file.name);
  const response = await fetch(`${app.url}${requestPath}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text), text };
}

/** Every file under the app's data folder: stored artifacts and temporary uploads alike. */
async function storedFiles(): Promise<string[]> {
  const root = app.context.config.dataDir;
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isFile()).map((entry) => path.relative(root, path.join(entry.parentPath ?? entry.path, entry.name))).sort();
}

async function temporaryFiles(): Promise<string[]> {
  return fs.readdir(app.context.files.temporaryDirectory()).catch(() => []);
}

async function serverErrors(): Promise<number> {
  const metric = await app.context.metrics.requests.get();
  return metric.values.filter((value) => Number(value.labels.status) >= 500).reduce((sum, value) => sum + value.value, 0);
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: ['ada', 'ben', 'cy', 'dot'].map((customer_ref) => ({ customer_ref })) });
  officer = await member(OFFICER_PERMISSIONS);
  // May change events but not decide (no engine.add_compliancedecision).
  clerk = await member(['transaction.view_financialevent', 'transaction.change_financialevent']);
});

test.after.always(async () => {
  await app?.close();
});

test.serial('decisions refused with 403, 404 or 409 store none of their attachments', async (t) => {
  const before = await storedFiles();
  const record = await ingest('ada', 100);
  const fields = { decision: 'REJECT', description: 'Mule account' };

  const forbidden = await multipart(`${DATA}transaction/financialevent/${record.id}/decision/`, clerk.token, fields, pdfs(3));
  t.is(forbidden.status, 403, forbidden.text);
  t.deepEqual(await storedFiles(), before, '403: nothing stored');

  const missing = await multipart(`${DATA}transaction/financialevent/00000000-0000-4000-8000-000000000000/decision/`, officer.token, fields, pdfs(3));
  t.is(missing.status, 404, missing.text);
  t.is(missing.body.data.reason, 'not_found');
  t.deepEqual(await storedFiles(), before, '404: nothing stored');

  // A decision policy on execution logs: the first decision waits for approval, a second one is refused.
  await setApprovalPolicies(app.context.db, { model: 'engine.executionlog', operations: ['decision'], signerPermission: 'engine.change_executionlog' });
  const logPath = `${DATA}engine/executionlog/${record.log_id}/decision/`;
  const pending = await app.request('POST', logPath, { token: officer.token, json: fields });
  t.is(pending.status, 202, pending.text);
  const conflict = await multipart(logPath, officer.token, fields, pdfs(3));
  t.is(conflict.status, 409, conflict.text);
  t.is(conflict.body.data.reason, 'pending_approval');
  t.deepEqual(await storedFiles(), before, '409: nothing stored');
  t.is(Number((await app.context.db('compliance_decisions').where({ target_id: record.id }).count('* as n').first())!.n), 0);
});

test.serial('approval processing refused with 403, 404 or 409 stores none of its attachments', async (t) => {
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], stages: 1, signatures: 2, signerPermission: 'customer.change_customer' });
  const customers = app.context.backoffice.site.get('customer', 'customer')!;
  const customer = await app.context.db('customers').where({ customer_ref: 'ben' }).first();
  const submitted = await saveObject(app.context.backoffice, customers, officer.principal, customer.id, { first_name: 'Benedict' }, { partial: true });
  const requestPath = `${DATA}approval/approvalrequest/${submitted.approvalRequestId}/process/`;
  const checkers = await Promise.all([1, 2].map(() => member(['customer.view_customer', 'customer.change_customer', 'approval.view_approvalrequest'])));
  const outsider = await member(['customer.view_customer', 'approval.view_approvalrequest']);
  const before = await storedFiles();

  const notSigner = await multipart(requestPath, outsider.token, { action: 'approve', reason: 'looks fine' }, pdfs(3));
  t.is(notSigner.status, 403, notSigner.text);
  t.deepEqual(await storedFiles(), before, '403 (not a signer): nothing stored');

  const ghost = await multipart(`${DATA}approval/approvalrequest/00000000-0000-4000-8000-000000000000/process/`, checkers[0]!.token, { action: 'approve' }, pdfs(3));
  t.is(ghost.status, 404, ghost.text);
  t.deepEqual(await storedFiles(), before, '404: nothing stored');

  const signed = await app.request('POST', requestPath, { token: checkers[0]!.token, json: { action: 'approve', reason: 'ok' } });
  t.is(signed.status, 200, signed.text);
  const twice = await multipart(requestPath, checkers[0]!.token, { action: 'approve', reason: 'again' }, pdfs(3));
  t.is(twice.status, 409, twice.text);
  t.deepEqual(await storedFiles(), before, '409 (already signed): nothing stored');

  const rejected = await app.request('POST', requestPath, { token: checkers[1]!.token, json: { action: 'reject', reason: 'no document' } });
  t.is(rejected.status, 200, rejected.text);
  const late = await multipart(requestPath, outsider.token, { action: 'approve' }, pdfs(3));
  t.is(late.status, 409, late.text);
  t.is(late.body.data.reason, 'approval_state');
  t.deepEqual(await storedFiles(), before, '409 (already processed): nothing stored');
  t.is(Number((await app.context.db('approval_signatures').where({ request_id: submitted.approvalRequestId }).count('* as n').first())!.n), 2);
});

test.serial('a request refused after its body was read removes every file it wrote; a file an earlier decision stored stays', async (t) => {
  const record = await ingest('cy', 100);
  const decisionPath = `${DATA}transaction/financialevent/${record.id}/decision/`;

  // Kept: the first decision and its file.
  const shared = { name: 'shared.pdf', bytes: uniquePdf() };
  const first = await multipart(decisionPath, officer.token, { decision: 'REVIEW', description: 'First look' }, [shared]);
  t.is(first.status, 201, first.text);
  const kept = (await app.context.db('compliance_decisions').where({ id: first.body.data.decision.id }).first()).attachments[0].path as string;
  const before = await storedFiles();
  t.true(before.includes(kept));

  // Validation after the body: nothing of the request stays, not even a temporary file.
  const invalid = await multipart(decisionPath, officer.token, { decision: 'MAYBE', description: 'x' }, pdfs(2));
  t.is(invalid.status, 400, invalid.text);
  t.deepEqual(await storedFiles(), before, 'a decision that does not validate leaves no file');

  // Refused inside the transaction (the decision row cannot be written): the files it stored go again,
  // but the one an earlier decision stored with the same bytes stays.
  await app.context.db.raw(`create function refuse_decisions() returns trigger language plpgsql as $$ begin raise exception 'refused for the test'; end $$`);
  await app.context.db.raw('create trigger refuse_decisions before insert on compliance_decisions for each row execute function refuse_decisions()');
  try {
    const refused = await multipart(decisionPath, officer.token, { decision: 'REJECT', description: 'Second look' }, [shared, ...pdfs(2)]);
    t.is(refused.status, 500, refused.text);
  } finally {
    await app.context.db.raw('drop trigger refuse_decisions on compliance_decisions');
    await app.context.db.raw('drop function refuse_decisions()');
  }
  t.deepEqual(await storedFiles(), before, 'a decision refused in its transaction leaves no file of its own');
  t.deepEqual(await app.context.files.read(kept), shared.bytes, 'the earlier decision keeps its file');

  // A signer's rejection without a reason is refused by the approval service after the body was read.
  const customers = app.context.backoffice.site.get('customer', 'customer')!;
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], stages: 1, signatures: 1, signerPermission: 'customer.change_customer' });
  const customer = await app.context.db('customers').where({ customer_ref: 'dot' }).first();
  const submitted = await saveObject(app.context.backoffice, customers, officer.principal, customer.id, { first_name: 'Dorothy' }, { partial: true });
  const checker = await member(['customer.view_customer', 'customer.change_customer', 'approval.view_approvalrequest']);
  const requestPath = `${DATA}approval/approvalrequest/${submitted.approvalRequestId}/process/`;
  const noReason = await multipart(requestPath, checker.token, { action: 'reject', reason: '' }, pdfs(2));
  t.is(noReason.status, 400, noReason.text);
  t.deepEqual(await storedFiles(), before, 'a refused signature leaves no file');
  // The maker may only withdraw: an approval from them is refused (403) and leaves nothing.
  const own = await multipart(requestPath, officer.token, { action: 'approve', reason: 'mine' }, pdfs(2));
  t.is(own.status, 403, own.text);
  t.deepEqual(await storedFiles(), before, 'the maker signing leaves no file');

  // And a request that goes through keeps its files.
  const approved = await multipart(requestPath, checker.token, { action: 'approve', reason: 'documents match' }, pdfs(2));
  t.is(approved.status, 200, approved.text);
  t.is((await storedFiles()).length, before.length + 2);
  t.deepEqual(await temporaryFiles(), []);
});

/** Sends the head of a request and part of its body, then drops the connection. */
async function abortMidBody(requestPath: string, headers: Record<string, string>, partialBody: Buffer): Promise<void> {
  const { port } = new URL(app.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const head = [`POST ${requestPath} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), '', ''].join('\r\n');
  socket.write(head);
  socket.write(partialBody);
  await new Promise((resolve) => setTimeout(resolve, 200));
  socket.destroy();
}

test.serial('an aborted case-attachment upload leaves no temporary file; the service keeps serving', async (t) => {
  const errorsBefore = await serverErrors();
  const record = await ingest('ada', 200);
  const decisionPath = `${DATA}transaction/financialevent/${record.id}/decision/`;
  const before = await storedFiles();
  const boundary = 'evidenceBOUNDARY';
  const partial = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="decision"\r\n\r\nREJECT\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="description"\r\n\r\nMule\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="attachments[]"; filename="scan.pdf"\r\nContent-Type: application/pdf\r\n\r\n`),
    uniquePdf(),
    Buffer.alloc(64 * 1024, 0x20),
  ]);
  const headers = { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(10 * 1024 * 1024), Authorization: `Bearer ${officer.token}` };
  await abortMidBody(decisionPath, headers, partial);
  await abortMidBody(`${DATA}approval/approvalrequest/00000000-0000-4000-8000-000000000000/process/`, headers, partial);
  await waitFor(async () => ((await temporaryFiles()).length === 0 ? true : undefined), 10_000);
  // Both requests have ended in the metrics by the time a later one is answered.
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.deepEqual(await storedFiles(), before, 'nothing of the aborted upload stays');
  t.is((await app.request('GET', '/healthz')).status, 200);
  t.is(await serverErrors(), errorsBefore, 'no request was counted as a server error');
  t.is(Number((await app.context.db('compliance_decisions').where({ target_id: record.id }).count('* as n').first())!.n), 0);
  const after = await multipart(decisionPath, officer.token, { decision: 'REVIEW', description: 'after the abort' }, pdfs(1));
  t.is(after.status, 201, after.text);
});
