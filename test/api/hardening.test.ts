/**
 * Issue 16's defects, each as an attacker or a careless client would meet it from outside: input
 * PostgreSQL cannot store, prototype keys, temporary files, aborted and oversized bodies, the
 * token endpoint's limits, and credentials that were deactivated or rotated.
 */
import fs from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { SignJWT } from 'jose';
import { credentialCommand } from '../../src/cli/credential.ts';
import type { Database } from '../../src/db/database.ts';
import { SESSION_COOKIE, startSession } from '../../src/modules/backoffice/web/session.ts';
import { sweepTemporaryUploads } from '../../src/http/multipart.ts';
import { issueLoginTicket } from '../../src/modules/mobile/tickets.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { countRows, defineEvents } from '../helpers/fixtures.ts';
import { defineTestFlow, image, openSession, upload, waitFor } from '../helpers/kyc.ts';
import { PAIR, pairDevice, PASSWORD, staffUser } from '../helpers/mobile.ts';

const CUSTOMERS = '/api/customer/upsert/';
const FINANCIAL = '/api/transaction/financial/upsert/';
const TOKEN = '/api/merchant/auth/token/';
const CHECK = '/api/merchant/auth/check/';
const CREATE = '/api/document/create-session/';
const UPLOAD = '/api/document/upload_document/';
const END = '/api/document/end-kyc-session/';

let app: TestApp;
let token: string;
/** The command line's view of the test database. */
let cli: Database;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  cli = { knex: app.database.knex, description: 'test database', close: async () => {} };
  await defineEvents(app.context, [['deposit', 1]]);
  await defineTestFlow(app.context, 'hard', ['doc_front', 'liveness_video'], { default: true });
  await app.request('POST', CUSTOMERS, { token, json: { customer_ref: 'hard-1', migration: true } });
});
test.after.always(async () => {
  await app?.close();
});

async function temporaryFiles(): Promise<string[]> {
  return fs.readdir(app.context.files.temporaryDirectory()).catch(() => []);
}

async function serverErrors(): Promise<number> {
  const metric = await app.context.metrics.requests.get();
  return metric.values.filter((value) => Number(value.labels.status) >= 500).reduce((sum, value) => sum + value.value, 0);
}

test('end-kyc-session: prototype names are no status; the session stays open and takes uploads', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'hard-proto' });
  const { token: agent } = await app.context.tokens.issue('agent', session.session_id, 600);
  for (const status of ['__proto__', 'toString', 'constructor', 'valueOf', 'hasOwnProperty']) {
    const response = await app.request('POST', END, { json: { token: agent, status } });
    t.is(response.status, 400, `${status}: ${response.text}`);
    t.is(response.body.data.reason, 'status_invalid');
  }
  const row = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.is(row.status, 'open');
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'doc_front', file: { bytes: await image(), name: 'a.jpg', type: 'image/jpeg' } });
  t.is(uploaded.status, 200, uploaded.text);
});

test('records PostgreSQL cannot store are skipped with a reason; the rest of the batch is stored', async (t) => {
  const records = [
    { customer_ref: 'nul-value', first_name: 'An\u0000na' },
    { customer_ref: 'nul-key', ['bad\u0000key']: 1 },
    { customer_ref: 'surrogate', last_name: 'X\ud800Y' },
    { customer_ref: 'deep', extra: 'DEEP' },
    { customer_ref: 'late-date', registration_date: '9999-12-31T23:59:59-23:59' },
    { customer_ref: 'early-date', registration_date: '0001-01-01T00:00:00+01:00' },
    { customer_ref: 'fine-1' },
  ];
  // 10,000 levels: more than JSON.stringify can write, so the body is put together as text.
  const body = JSON.stringify(records).replace('"DEEP"', `${'['.repeat(10_000)}"bottom"${']'.repeat(10_000)}`);
  const response = await app.request('POST', CUSTOMERS, { token, body, headers: { 'content-type': 'application/json' } });
  t.is(response.status, 200, response.text);
  const results = response.body.data.results as Array<{ action: string; error?: string }>;
  t.deepEqual(results.map((result) => result.action), ['skipped', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped', 'created']);
  t.regex(results[0]!.error!, /first_name: contains a NUL character/);
  t.regex(results[1]!.error!, /key that contains a NUL character/);
  t.regex(results[2]!.error!, /last_name: contains a lone UTF-16 surrogate/);
  t.regex(results[3]!.error!, /nests deeper than 64 levels/);
  t.regex(results[4]!.error!, /registration_date: .* outside the years 0001-9999/);
  t.regex(results[5]!.error!, /registration_date: .* outside the years 0001-9999/);
  t.is(await countRows(app.database.knex, 'customers', { customer_ref: 'fine-1' }), 1);
});

test('an object with its own toString as a ref is a skipped record, not a 500', async (t) => {
  const customers = await app.request('POST', CUSTOMERS, { token, json: [{ customer_ref: { toString: 1 } }, { customer_ref: 'fine-2' }] });
  t.is(customers.status, 200, customers.text);
  t.is(customers.body.data.results[0].action, 'skipped');
  t.is(customers.body.data.results[1].action, 'created');
  const financial = await app.request('POST', FINANCIAL, {
    token,
    json: { customer_ref: 'hard-1', event_slug: 'deposit', amount: 5, currency: 'EUR', transaction_ref: { toString: 1 }, io_type: 0, event_date: new Date().toISOString() },
  });
  t.is(financial.status, 200, financial.text);
  t.is(financial.body.data.results[0].action, 'skipped');
});

test('transactions whose refs PostgreSQL cannot store are skipped records, not a 500 from the customer prefetch', async (t) => {
  const base = { event_slug: 'deposit', amount: 5, currency: 'EUR', io_type: 0, event_date: new Date().toISOString() };
  const financial = await app.request('POST', FINANCIAL, {
    token,
    json: [
      { ...base, customer_ref: 'hard\u0000-1', transaction_ref: 'nul-customer' },
      { ...base, customer_ref: 'hard-1', transaction_ref: 'nul\u0000-ref' },
      { ...base, customer_ref: 'hard\ud800', transaction_ref: 'surrogate-customer' },
      { ...base, customer_ref: 'hard-1', transaction_ref: 'fine-nul-neighbour' },
    ],
  });
  t.is(financial.status, 200, financial.text);
  t.deepEqual(financial.body.data.results.map((result: { action: string }) => result.action), ['skipped', 'skipped', 'skipped', 'created']);
  t.regex(financial.body.data.results[0].error, /customer_ref: contains a NUL character/);
  const nonFinancial = await app.request('POST', '/api/transaction/non-financial/upsert/', { token, json: { customer_ref: '\u0000' } });
  t.is(nonFinancial.status, 200, nonFinancial.text);
  t.is(nonFinancial.body.data.results[0].action, 'skipped');
});

test('an amount that rounds to 0.00 is refused, not stored as 0.00', async (t) => {
  const base = { customer_ref: 'hard-1', event_slug: 'deposit', currency: 'EUR', io_type: 0, event_date: new Date().toISOString() };
  const response = await app.request('POST', FINANCIAL, { token, json: [{ ...base, amount: 0.001, transaction_ref: 'tiny' }, { ...base, amount: '0.005', transaction_ref: 'rounds-up' }] });
  t.is(response.status, 200, response.text);
  t.is(response.body.data.results[0].action, 'skipped');
  t.regex(response.body.data.results[0].error, /amount: must be at least 0\.01/);
  t.is(await countRows(app.database.knex, 'financial_transactions', { transaction_ref: 'tiny' }), 0);
  t.is(response.body.data.results[1].action, 'created', 'half a cent rounds up to 0.01');
});

test('a record with 400,000 extra keys is skipped, and the service goes on', async (t) => {
  const record: Record<string, unknown> = { customer_ref: 'many-keys' };
  for (let key = 0; key < 400_000; key++) record[`k${key}`] = 1;
  const response = await app.request('POST', CUSTOMERS, { token, json: [record, { customer_ref: 'fine-3' }] });
  t.is(response.status, 200, response.text);
  t.is(response.body.data.results[0].action, 'skipped');
  t.regex(response.body.data.results[0].error, /400000 extra fields; at most 1000/);
  t.is(response.body.data.results[1].action, 'created');
  t.is((await app.request('GET', '/healthz')).status, 200);
});

test.serial('NUL and broken Unicode in request bodies are a 400 on every JSON endpoint', async (t) => {
  const key = await app.request('POST', TOKEN, { json: { api_key: 'wk_\u0000', api_secret: 'x' } });
  t.is(key.status, 400, key.text);
  t.is(key.body.data.reason, 'value_not_storable');
  const session = await app.request('POST', CREATE, { token, json: { customer_ref: 'hard-1', device_id: 'd\u0000' } });
  t.is(session.status, 400, session.text);
  const geo = await app.request('POST', CREATE, { token, json: { customer_ref: 'hard-1', geo: { ['c\ud800']: 1 } } });
  t.is(geo.status, 400, geo.text);
  const opened = await openSession(app, token, { customer_ref: 'hard-checklist' });
  const { token: agent } = await app.context.tokens.issue('agent', opened.session_id, 600);
  const checklist = await app.request('POST', END, { json: { token: agent, status: 'completed', checklist: { ['q\u0000']: true } } });
  t.is(checklist.status, 400, checklist.text);
  const extra = await upload(app, UPLOAD, { token: opened.endpoint_token, artifact_type: 'doc_front', file: { bytes: await image(), name: 'a.jpg', type: 'image/jpeg' }, extra_data: '{"note": "a\\u0000b"}' });
  t.is(extra.status, 400, extra.text);
  t.is(extra.body.data.reason, 'extra_data_invalid');
  t.deepEqual(await temporaryFiles(), []);
});

test('a validly signed token whose subject is not a UUID is token_invalid, not a 500', async (t) => {
  const signed = await app.context.tokens.issue('merchant', 'not-a-uuid', 600);
  const response = await app.request('GET', CHECK, { token: signed.token });
  t.is(response.status, 401, response.text);
  t.is(response.body.data.reason, 'token_invalid');
  // The same with a token made outside the service's own issue(), as a holder of the key could.
  const key = new TextEncoder().encode('x'.repeat(32));
  const forged = await new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject('1').setJti('j').setExpirationTime('1h').sign(key);
  t.is((await app.request('GET', CHECK, { token: forged })).status, 401);
});

test.serial('uploads: two snapshot parts and unauthenticated requests leave no temporary file; a JPEG is no liveness video', async (t) => {
  const form = new FormData();
  form.set('token', 'nonsense');
  form.set('artifact_type', 'doc_front');
  const bytes = await image();
  form.append('snapshot', new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' }), 'a.jpg');
  form.append('snapshot', new Blob([new Uint8Array(bytes)], { type: 'image/jpeg' }), 'b.jpg');
  const twice = await fetch(app.url + UPLOAD, { method: 'POST', body: form });
  t.is(twice.status, 401);
  t.deepEqual(await temporaryFiles(), []);

  const session = await openSession(app, token, { customer_ref: 'hard-liveness' });
  const liveness = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'liveness_video', file: { bytes, name: 'v.mp4', type: 'video/mp4' } });
  t.is(liveness.status, 415, liveness.text);
  t.is(liveness.body.data.reason, 'file_type_not_allowed');
  t.is(await countRows(app.database.knex, 'verification_artifacts', { session_id: session.session_id }), 0);
});

/** Sends the head of a request and part of its body, then drops the connection. */
async function abortMidBody(requestPath: string, headers: Record<string, string>, partialBody: Buffer | string): Promise<void> {
  const { port } = new URL(app.url);
  const socket = net.connect(Number(port), '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  const head = [`POST ${requestPath} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`), '', ''].join('\r\n');
  socket.write(head);
  socket.write(partialBody);
  await new Promise((resolve) => setTimeout(resolve, 200));
  socket.destroy();
}

test.serial('an aborted upload settles, leaves no .part file and is not a 500; an aborted JSON body neither', async (t) => {
  const before = await serverErrors();
  const boundary = 'xyzBOUNDARY';
  const partial = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="token"\r\n\r\nabc\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="snapshot"; filename="a.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    Buffer.alloc(64 * 1024, 0xff),
  ]);
  await abortMidBody(UPLOAD, { 'Content-Type': `multipart/form-data; boundary=${boundary}`, 'Content-Length': String(10 * 1024 * 1024) }, partial);
  await waitFor(async () => ((await temporaryFiles()).length === 0 ? true : undefined), 10_000);
  await abortMidBody(CUSTOMERS, { 'Content-Type': 'application/json', 'Content-Length': '100000', Authorization: `Bearer ${token}` }, '[{"customer_ref": "x"');
  // Both requests have ended in the access log and the metrics by the time a later one is answered.
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.is((await app.request('GET', '/healthz')).status, 200);
  t.is(await serverErrors(), before, 'no request was counted as a server error');
  t.deepEqual(await temporaryFiles(), []);
});

test('start-up sweeps .part files older than an hour and leaves younger ones', async (t) => {
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-sweep-'));
  t.teardown(() => fs.rm(directory, { recursive: true, force: true }));
  const old = path.join(directory, 'old.part');
  const young = path.join(directory, 'young.part');
  await fs.writeFile(old, 'x');
  await fs.writeFile(young, 'x');
  const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
  await fs.utimes(old, twoHoursAgo, twoHoursAgo);
  t.is(await sweepTemporaryUploads(directory), 1);
  t.deepEqual(await fs.readdir(directory), ['young.part']);
});

test('a chunked body over the limit is answered 413, not a connection reset', async (t) => {
  const small = await startTestApp({ WARDEN_BODY_LIMIT_BYTES: '2048' });
  t.teardown(() => small.close());
  const { port } = new URL(small.url);
  const response = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const request = http.request({ host: '127.0.0.1', port, path: TOKEN, method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      let body = '';
      res.on('data', (chunk) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    request.on('error', reject);
    request.write('{"api_key": "');
    for (let chunk = 0; chunk < 8; chunk++) request.write('k'.repeat(1024));
    request.end('"}');
  });
  t.is(response.status, 413);
  t.is(JSON.parse(response.body).data.reason, 'body_too_large');
});

test('the token endpoint limits failures per IP and per api_key, before spending argon2 on them', async (t) => {
  const limited = await startTestApp();
  t.teardown(() => limited.close());
  const { apiKey, apiSecret } = await limited.credential();
  const attempt = (secret: string) => limited.request('POST', TOKEN, { json: { api_key: apiKey, api_secret: secret } });
  for (let failure = 0; failure < 5; failure++) t.is((await attempt('wrong')).status, 401);
  const blocked = await attempt(apiSecret);
  t.is(blocked.status, 429, 'even the right secret waits once the key is over its failures from this IP');
  t.is(blocked.body.data.reason, 'rate_limited');
  t.true(Number(blocked.headers.get('retry-after')) >= 1);
  const other = await limited.credential();
  t.is((await limited.request('POST', TOKEN, { json: { api_key: other.apiKey, api_secret: other.apiSecret } })).status, 200, 'another key from the same IP still works');
  for (let failure = 0; failure < 5; failure++) await limited.request('POST', TOKEN, { json: { api_key: `wk_guess${failure}`, api_secret: 'x' } });
  t.is((await limited.request('POST', TOKEN, { json: { api_key: other.apiKey, api_secret: other.apiSecret } })).status, 429, 'ten failures from one IP block it');
});

/**
 * The CLI changes a credential from outside the service, which hears of it by PostgreSQL NOTIFY a
 * moment after the commit: the token check answers `status` once that has arrived (within 5 s).
 */
async function checkUntil(token: string, status: number) {
  const started = Date.now();
  for (;;) {
    const answer = await app.request('GET', CHECK, { token });
    if (answer.status === status || Date.now() - started > 5_000) return answer;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('reactivation does not revive old tokens; rotation ends the old secret and its tokens', async (t) => {
  const { apiKey, apiSecret } = await app.credential({ name: 'Rotating' });
  const issue = async (secret: string) => app.request('POST', TOKEN, { json: { api_key: apiKey, api_secret: secret } });
  const old = (await issue(apiSecret)).body.data.access_token as string;
  t.is((await app.request('GET', CHECK, { token: old })).status, 200);
  await credentialCommand(['deactivate', '--api-key', apiKey], cli);
  t.is((await checkUntil(old, 403)).status, 403);
  await credentialCommand(['activate', '--api-key', apiKey], cli);
  const revived = await checkUntil(old, 401);
  t.is(revived.status, 401, 'a token from before the deactivation stays dead');
  t.is(revived.body.data.reason, 'token_invalid');
  const fresh = (await issue(apiSecret)).body.data.access_token as string;
  t.is((await app.request('GET', CHECK, { token: fresh })).status, 200);

  const rotated = (await credentialCommand(['rotate', '--api-key', apiKey], cli)) as { api_secret: string; api_key: string };
  t.is(rotated.api_key, apiKey);
  t.not(rotated.api_secret, apiSecret);
  t.is((await checkUntil(fresh, 401)).status, 401, 'tokens of the old secret are refused');
  t.is((await issue(apiSecret)).status, 401, 'the old secret is refused');
  const renewed = await issue(rotated.api_secret);
  t.is(renewed.status, 200);
  t.is((await app.request('GET', CHECK, { token: renewed.body.data.access_token })).status, 200);
  const audit = await app.database.knex('audit_log').where({ action: 'credential.rotate' });
  t.is(audit.length, 1);
  t.false(JSON.stringify(audit[0]).includes('argon2'), 'the audit entry holds no hash');
});

test('a session for a customer_ref with no customer record fails its document comparison, it does not pass against nothing', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'nobody-here' });
  const bytes = await fs.readFile(path.resolve(import.meta.dirname, '../fixtures/mrz/td3-flat.jpg'));
  const uploaded = await upload(app, UPLOAD, { token: session.endpoint_token, artifact_type: 'passport_mrz_page', file: { bytes, name: 'page.jpg', type: 'image/jpeg' } });
  t.is(uploaded.status, 200, uploaded.text);
  const result = await waitFor(async () => (await app.database.knex('verification_results').where({ artifact_id: uploaded.body.artifact_id }).first()) ?? undefined, 60_000);
  t.is(result.code, 'fail');
  t.is(result.message, 'There is no customer record with customer_ref nobody-here to compare the document with.');
  t.deepEqual(result.data.mismatched_fields, ['customer_ref']);
});

/** Until a statement like `pattern` (ILIKE) waits on a lock. */
async function waitingOnLock(pattern: string): Promise<void> {
  await waitFor(async () => (await app.database.knex('pg_stat_activity').where({ wait_event_type: 'Lock' }).whereILike('query', pattern).first('pid')) ?? undefined, 10_000);
}

/**
 * Runs `request` while a transaction holds the staff user's row, and deletes the user once the
 * request waits on that row: the user vanishes between the request's authentication and its write.
 */
async function deletedMidRequest(userId: string, request: () => Promise<Response>): Promise<Response> {
  const knex = app.database.knex;
  const trx = await knex.transaction();
  try {
    await trx('staff_users').where({ id: userId }).forUpdate().first('id');
    const answer = request();
    await waitingOnLock('update "staff_users"%');
    await trx('staff_users').where({ id: userId }).delete();
    await trx.commit();
    return await answer;
  } catch (error) {
    await trx.rollback();
    throw error;
  }
}

const STAFF_PASSWORD = 'correct horse battery staple 42';
const NEW_PASSWORDS = { old_password: STAFF_PASSWORD, new_password1: 'a fresh long passphrase 7', new_password2: 'a fresh long passphrase 7' };

test.serial('a staff user deleted while its mobile request runs gets account_inactive, not a 500', async (t) => {
  const user = await staffUser(app);
  // The app's own clock: the other tests of this file run beside this one.
  const { accessToken } = await pairDevice(app, { now: new Date(), advance: () => {} }, user.id);
  const response = await deletedMidRequest(user.id, () =>
    fetch(app.url + PASSWORD, { method: 'POST', headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' }, body: JSON.stringify(NEW_PASSWORDS) }),
  );
  const body = await response.json();
  t.is(response.status, 401, JSON.stringify(body));
  t.is(body.data.reason, 'account_inactive');
});

test.serial('a staff user deleted while its web request runs is sent to the login page, not a 500', async (t) => {
  const user = await staffUser(app);
  const { cookieValue, session } = await startSession(app.database.knex, user.id);
  const response = await deletedMidRequest(user.id, () =>
    fetch(`${app.url}/admin/auth/user/${user.id}/password/`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: `${SESSION_COOKIE}=${cookieValue}`, 'content-type': 'application/x-www-form-urlencoded', origin: app.url, referer: `${app.url}/admin/` },
      body: new URLSearchParams({ csrfmiddlewaretoken: session.csrfToken, ...NEW_PASSWORDS }),
    }),
  );
  t.is(response.status, 302, await response.text());
  t.true(response.headers.get('location')!.startsWith('/admin/login/'));
});

test.serial('a staff user deleted between its password check and its new session gets the login page again, not a 500', async (t) => {
  const knex = app.database.knex;
  const user = await staffUser(app);
  t.true(user.is_staff, 'a user who could log in');
  const client = adminClient(app.url);
  const page = await client.get('/admin/login/');
  // The sessions table is held, so the login waits there after its password check; the user is
  // deleted meanwhile, and the new session's row then names a user that is gone.
  const trx = await knex.transaction();
  try {
    await trx.raw('lock table staff_web_sessions in exclusive mode');
    const login = client.post('/admin/login/', { csrfmiddlewaretoken: csrfTokenIn(page.text), username: user.username, password: STAFF_PASSWORD });
    await waitingOnLock('%staff_web_sessions%');
    await trx('staff_users').where({ id: user.id }).delete();
    await trx.commit();
    const answer = await login;
    t.is(answer.status, 200, answer.text.slice(0, 300));
    t.true(answer.text.includes('Please enter the correct username and password'), answer.text.slice(0, 300));
  } finally {
    if (!trx.isCompleted()) await trx.rollback();
  }
});

test.serial('pairing while the user is deleted is no deadlock: the pairing either happens before the deletion or is refused', async (t) => {
  const knex = app.database.knex;
  const user = await staffUser(app);
  const { qr } = await issueLoginTicket(knex, user.id);
  // The ticket's row is held, so the pairing waits on it; the deletion of the user comes next and
  // waits on it too (its cascade reaches the ticket) for longer than PostgreSQL's deadlock check.
  const trx = await knex.transaction();
  await trx('mobile_login_tickets').where({ user_id: user.id }).forUpdate().first('id');
  const pairing = fetch(app.url + PAIR, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ticket: qr.ticket, device_name: 'race', platform: 'android', app_version: '1.0.0' }) });
  await waitingOnLock('%update mobile_login_tickets%');
  const deletion = knex('staff_users').where({ id: user.id }).delete().then(
    (rows) => rows,
    (error: Error) => error,
  );
  await waitingOnLock('delete from "staff_users"%');
  await new Promise((resolve) => setTimeout(resolve, 1500));
  await trx.commit();
  const response = await pairing;
  const body = await response.json();
  // The pairing's statement ends first; the user may be gone by the time its answer is built.
  t.true(response.status === 200 || (response.status === 401 && body.data.reason === 'account_inactive'), JSON.stringify(body));
  t.is(await deletion, 1, 'the deletion follows the pairing');
  t.is(await countRows(knex, 'mobile_devices', { user_id: user.id }), 0, 'and takes the new device with it');
});

test('a JSON field of a NOT NULL column sent as the text null is refused, not written as NULL (a 500)', async (t) => {
  const admin = await staffUser(app, { is_superuser: true });
  const { accessToken } = await pairDevice(app, { now: new Date(), advance: () => {} }, admin.id);
  const reports = '/api/mobile/data/report/report/';
  const refused = { message: 'This field cannot be empty.', code: 'null' };
  const added = await app.request('POST', reports, { token: accessToken, json: { name: 'nulls', kind: 'transactions_above', parameters: 'null' } });
  t.is(added.status, 400, added.text);
  t.deepEqual(added.body.data.errors.parameters, [refused]);
  const made = await app.request('POST', reports, { token: accessToken, json: { name: 'nulls', kind: 'transactions_above', parameters: '{"days": 3}' } });
  t.is(made.status, 201, made.text);
  const changed = await app.request('PATCH', `${reports}${made.body.data.object.pk}/`, { token: accessToken, json: { parameters: 'null' } });
  t.is(changed.status, 400, changed.text);
  t.deepEqual(changed.body.data.errors.parameters, [refused]);
});

test('a choice sent as an object with its own toString is an invalid choice, not a 500', async (t) => {
  const admin = await staffUser(app, { is_superuser: true });
  const { accessToken } = await pairDevice(app, { now: new Date(), advance: () => {} }, admin.id);
  for (const kind of [{ toString: 1 }, { valueOf: 'x', toString: null }, ['transactions_above'], true]) {
    const response = await app.request('POST', '/api/mobile/data/report/report/', { token: accessToken, json: { name: 'odd kind', kind } });
    t.is(response.status, 400, response.text);
    t.deepEqual(response.body.data.errors.kind, [{ message: `Select a valid choice. ${JSON.stringify(kind)} is not one of the available choices.`, code: 'invalid_choice' }]);
  }
});
