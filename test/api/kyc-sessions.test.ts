import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { decodeJwt } from 'jose';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineFlow } from '../../src/modules/kyc/flows.ts';
import { countRows } from '../helpers/fixtures.ts';
import { defineTestFlow, openSession, waitFor } from '../helpers/kyc.ts';

const CREATE = '/api/document/create-session/';
const END = '/api/document/end-kyc-session/';

let app: TestApp;
let token: string;
test.before(async () => {
  // The notify_url receiver below listens on 127.0.0.1, which outgoing URLs may not reach otherwise.
  app = await startTestApp({ WARDEN_OUTBOUND_ALLOW: '127.0.0.1' });
  token = await app.merchantToken();
  await defineTestFlow(app.context, 'basic', ['doc_mrz', 'selfie'], { default: true });
  await defineTestFlow(app.context, 'video', ['passport_mrz_page', 'nfc_raw'], { videoCall: true });
  await defineTestFlow(app.context, 'retired', ['doc_front'], { active: false });
});
test.after.always(async () => {
  await app?.close();
});

test('create-session returns the full session object; repeating returns it with attempt_no + 1', async (t) => {
  const response = await app.request('POST', CREATE, {
    token,
    json: { customer_ref: 'kyc-1', flow: 'basic', device_id: 'dev-9', ip_address: '203.0.113.5', user_agent: 'Mobile Safari', geo: { country: 'SE' } },
  });
  t.is(response.status, 200);
  const session = response.body.data.session;
  t.deepEqual(Object.keys(session).sort(), [
    'attempt_no', 'endpoint_token', 'flow', 'mrz_data', 'pending_artifact_types', 'required_artifact_types',
    'requires_video_call', 'session_id', 'succeeded_artifact_types', 'videocall_token',
  ]);
  t.is(session.flow, 'basic');
  t.deepEqual(session.required_artifact_types, ['doc_mrz', 'selfie']);
  t.deepEqual(session.pending_artifact_types, ['doc_mrz', 'selfie']);
  t.deepEqual(session.succeeded_artifact_types, []);
  t.is(session.requires_video_call, false);
  t.is(session.videocall_token, '');
  t.is(session.attempt_no, 1);
  t.is(session.mrz_data, null);
  const claims = decodeJwt(session.endpoint_token);
  t.is(claims.aud, 'session');
  t.is(claims.sub, session.session_id);
  t.is(claims.exp! - claims.iat!, 24 * 3600);
  const stored = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.is(stored.device_id, 'dev-9');
  t.is(stored.ip_address, '203.0.113.5');
  t.deepEqual(stored.geo, { country: 'SE' });

  const again = await openSession(app, token, { customer_ref: 'kyc-1', flow: 'basic' });
  t.is(again.session_id, session.session_id);
  t.is(again.attempt_no, 2);
  const other = await openSession(app, token, { customer_ref: 'kyc-1', flow: 'video' });
  t.not(other.session_id, session.session_id);
  t.is(other.attempt_no, 1);
});

test('the default flow is used when none is named; a video flow carries a videocall token', async (t) => {
  const defaulted = await openSession(app, token, { customer_ref: 'kyc-default' });
  const row = await app.database.knex('verification_sessions').where({ id: defaulted.session_id }).first();
  t.is(row.flow_code, 'basic');
  const video = (await app.request('POST', CREATE, { token, json: { customer_ref: 'kyc-video', flow: 'video' } })).body.data.session;
  t.is(video.requires_video_call, true);
  t.regex(video.videocall_token, /^videocall_/);
});

test('create-session errors: unknown or inactive flow opens nothing, missing customer_ref, no Bearer', async (t) => {
  for (const flow of ['nope', 'retired']) {
    const response = await app.request('POST', CREATE, { token, json: { customer_ref: 'kyc-x', flow } });
    t.is(response.status, 400);
    t.is(response.body.message, `Unknown or inactive verification flow: ${flow}`);
  }
  t.is(await countRows(app.database.knex, 'verification_sessions', { customer_ref: 'kyc-x' }), 0);
  const missing = await app.request('POST', CREATE, { token, json: { flow: 'basic' } });
  t.is(missing.status, 400);
  t.regex(missing.body.message, /customer_ref/);
  const anonymous = await app.request('POST', CREATE, { json: { customer_ref: 'kyc-x' } });
  t.is(anonymous.status, 401);
});

test('concurrent create-session calls open one session', async (t) => {
  const sessions = await Promise.all(Array.from({ length: 8 }, () => openSession(app, token, { customer_ref: 'kyc-race', flow: 'basic' })));
  t.is(new Set(sessions.map((session) => session.session_id)).size, 1);
  t.deepEqual(sessions.map((session) => session.attempt_no).sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 8]);
});

test('end-kyc-session: statuses map, the checklist is audited, closing again is not an error', async (t) => {
  const cases = [
    ['completed', 'completed'],
    ['reported', 'reported'],
    ['ended', 'failed'],
  ] as const;
  for (const [status, expected] of cases) {
    const session = await openSession(app, token, { customer_ref: `kyc-end-${status}`, flow: 'basic' });
    const { token: agentToken } = await app.context.tokens.issue('agent', session.session_id, 600, { agent: 'agent-7' });
    const response = await app.request('POST', END, { json: { token: agentToken, status, checklist: { '1': true, '2': false } } });
    t.is(response.status, 200);
    t.deepEqual([response.body.status, response.body.session_id, response.body.session_status], [true, session.session_id, expected]);
    const audit = await app.database.knex('audit_log').where({ entity_id: session.session_id, action: 'session.close' }).first();
    t.deepEqual(audit.details.checklist, { '1': true, '2': false });
    t.is(audit.actor_id, 'agent-7');
    const again = await app.request('POST', END, { json: { token: agentToken, status: 'completed' } });
    t.is(again.status, 200);
    t.is(again.body.session_status, expected, 'a closed session stays as it was');
  }
});

test('end-kyc-session errors: status_invalid, session token 403, missing and bad tokens 401', async (t) => {
  const session = await openSession(app, token, { customer_ref: 'kyc-end-errors', flow: 'basic' });
  const { token: agentToken } = await app.context.tokens.issue('agent', session.session_id, 600);
  const invalid = await app.request('POST', END, { json: { token: agentToken, status: 'approved' } });
  t.is(invalid.status, 400);
  t.is(invalid.body.data.reason, 'status_invalid');
  const row = await app.database.knex('verification_sessions').where({ id: session.session_id }).first();
  t.is(row.status, 'open', 'an undefined status is never treated as failed');
  const customerToken = await app.request('POST', END, { json: { token: session.endpoint_token, status: 'completed' } });
  t.is(customerToken.status, 403);
  t.is(customerToken.body.data.reason, 'token_wrong_audience');
  t.is((await app.request('POST', END, { json: { status: 'completed' } })).body.data.reason, 'token_missing');
  t.is((await app.request('POST', END, { json: { token: 'x.y.z', status: 'completed' } })).body.data.reason, 'token_invalid');
  const expired = await app.context.tokens.issue('agent', session.session_id, -5);
  const expiredResponse = await app.request('POST', END, { json: { token: expired.token, status: 'completed' } });
  t.is(expiredResponse.status, 401);
  t.is(expiredResponse.body.data.reason, 'token_expired');
  const badChecklist = await app.request('POST', END, { json: { token: agentToken, status: 'completed', checklist: { '1': 'yes' } } });
  t.is(badChecklist.status, 400);
  const ghost = await app.context.tokens.issue('agent', '00000000-0000-0000-0000-000000000000', 600);
  t.is((await app.request('POST', END, { json: { token: ghost.token, status: 'completed' } })).status, 404);
});

test('a flow with a notify URL gets a signed result notification, retried until delivered and logged', async (t) => {
  const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  let failuresLeft = 1;
  const receiver = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      received.push({ headers: request.headers, body });
      response.statusCode = failuresLeft-- > 0 ? 500 : 204;
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => receiver.close());
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const flow = await defineFlow(app.context.db, { code: 'notified', artifacts: ['doc_mrz'], videoCall: false, isDefault: false, active: true, notifyUrl: url }, { type: 'operator', id: 'test' }, app.context.config.outboundAllow);
  const session = await openSession(app, token, { customer_ref: 'kyc-notify', flow: 'notified' });
  const { token: agentToken } = await app.context.tokens.issue('agent', session.session_id, 600);
  await app.request('POST', END, { json: { token: agentToken, status: 'completed', checklist: { q1: true } } });

  await waitFor(() => (received.length >= 2 ? true : undefined), 30_000);
  const delivered = received[1]!;
  const payload = JSON.parse(delivered.body);
  t.is(payload.session_id, session.session_id);
  t.is(payload.status, 'completed');
  t.deepEqual(payload.checklist, { q1: true });
  const [stamp, signature] = String(delivered.headers['x-warden-signature']).split(',');
  const timestamp = stamp!.slice(2);
  t.is(signature, `v1=${createHmac('sha256', flow.notify_secret!).update(`${timestamp}.${delivered.body}`).digest('hex')}`);
  // The delivery is logged after the receiver has answered: wait for the second row.
  const deliveries = await waitFor(async () => {
    const rows = await app.database.knex('webhook_deliveries').where({ session_id: session.session_id }).orderBy('id');
    return rows.length >= 2 ? rows : undefined;
  }, 30_000);
  t.deepEqual(deliveries.map((row: { status_code: number }) => row.status_code), [500, 204]);
});
