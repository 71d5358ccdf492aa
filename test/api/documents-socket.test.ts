/**
 * The documents socket as the spec writes it: a plain WebSocket at /ws/documents/ (JSON text
 * frames) beside the socket.io namespace /documents, one delivery path for both, across processes
 * (PostgreSQL LISTEN/NOTIFY, or Redis with REDIS_URL), frames over NOTIFY's 8000 bytes included;
 * the hooks the video call uses; and a selfie that always gets its answer (session closed, wait over).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test, { type ExecutionContext } from 'ava';
import WebSocket from 'ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineTestFlow, documentsClient, image, openSession, registeredClient, registeredDocumentsClient, upload, waitFor, type DocumentsFrame as Frame, type PlainDocumentsClient } from '../helpers/kyc.ts';
import { NotificationHub } from '../../src/db/notifications.ts';
import { SELFIE_WAIT_SECONDS } from '../../src/modules/kyc/constants.ts';
import { verifyArtifact } from '../../src/modules/kyc/pipeline.ts';
import { DocumentsChannel, DOCUMENTS_PATH, type DocumentsClient } from '../../src/realtime/documents.ts';


const redisUrl = process.env.REDIS_URL;
if (!redisUrl) console.log('documents-socket: REDIS_URL is not set; the Redis two-process test is skipped.');

let app: TestApp;
let merchant: string;
test.before(async () => {
  // 127.0.0.1 as a trusted proxy: its X-Forwarded-Proto decides ws or wss in websocket_url.
  app = await startTestApp({ WARDEN_TRUSTED_PROXIES: '127.0.0.1' });
  merchant = await app.merchantToken();
  await defineTestFlow(app.context, 'doc-selfie', ['doc_front', 'selfie'], { default: true });
});
test.after.always(async () => {
  await app?.close();
});

/** Nothing more arrives for a moment (deliveries are asynchronous: absence needs a wait). */
async function settle(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 300));
}

test('register: the endpoint token joins its session; create-session gives the plain socket as data.websocket_url', async (t) => {
  const created = await app.request('POST', '/api/document/create-session/', { token: merchant, json: { customer_ref: 'ds-register' } });
  t.is(created.status, 200, created.text);
  const session = created.body.data.session;
  const host = new URL(app.url).host;
  t.is(created.body.data.websocket_url, `ws://${host}/ws/documents/`);
  const behindTls = await app.request('POST', '/api/document/create-session/', { token: merchant, json: { customer_ref: 'ds-register' }, headers: { 'x-forwarded-proto': 'https' } });
  t.is(behindTls.body.data.websocket_url, `wss://${host}/ws/documents/`);

  const client = await documentsClient(created.body.data.websocket_url.replace(DOCUMENTS_PATH, '').replace(/^ws/, 'http'), t);
  client.ws.send(JSON.stringify({ event: 'register', token: session.endpoint_token }));
  t.deepEqual(await client.next(), { event: 'registered', data: { session_id: session.session_id } });
  t.is(app.context.documents.clientCount(session.session_id), 1);
  client.ws.close();
  await client.closed;
  await waitFor(() => (app.context.documents.clientCount(session.session_id) === 0 ? true : undefined));
  t.pass();
});

test('register errors: missing, invalid, expired and wrong-audience tokens; the connection may try again', async (t) => {
  const session = await openSession(app, merchant, { customer_ref: 'ds-errors' });
  const expired = await app.context.tokens.issue('session', session.session_id, -1);
  const agent = await app.context.tokens.issue('agent', session.session_id, 600);
  const client = await documentsClient(app.url, t);
  for (const [frame, reason] of [
    [{ event: 'register' }, 'token_missing'],
    [{ event: 'register', token: '' }, 'token_missing'],
    [{ event: 'register', token: 'garbage' }, 'token_invalid'],
    [{ event: 'register', token: expired.token }, 'token_expired'],
    [{ event: 'register', token: agent.token }, 'token_wrong_audience'],
  ] as const) {
    client.ws.send(JSON.stringify(frame));
    const reply = await client.next();
    t.is(reply.event, 'error');
    t.is(reply.data.reason, reason);
    t.is(typeof reply.data.message, 'string');
  }
  t.is(app.context.documents.clientCount(session.session_id), 0);
  client.ws.send(JSON.stringify({ event: 'register', token: session.endpoint_token }));
  t.is((await client.next()).event, 'registered');
  client.ws.send(JSON.stringify({ event: 'register', token: session.endpoint_token }));
  t.is((await client.next()).data.reason, 'already_registered');
});

test('bad frames get an error frame and change nothing: not JSON, not an object, binary, too large, before register', async (t) => {
  const session = await openSession(app, merchant, { customer_ref: 'ds-frames' });
  const client = await documentsClient(app.url, t);
  for (const [send, reason] of [
    [() => client.ws.send('not json {'), 'frame_invalid'],
    [() => client.ws.send('[1,2]'), 'frame_invalid'],
    [() => client.ws.send('null'), 'frame_invalid'],
    [() => client.ws.send(Buffer.from('{"event":"register"}'), { binary: true }), 'frame_invalid'],
    [() => client.ws.send(JSON.stringify({ event: 'call', pad: 'x'.repeat(70_000) })), 'frame_too_large'],
    [() => client.ws.send(JSON.stringify({ event: 'call' })), 'not_registered'],
  ] as const) {
    send();
    t.is((await client.next()).data.reason, reason);
  }
  client.ws.send(JSON.stringify({ event: 'register', token: session.endpoint_token }));
  t.is((await client.next()).event, 'registered');
  // Past the protocol limit the socket is closed (1009) without the frame being read; the service stays up.
  const huge = await documentsClient(app.url, t);
  huge.ws.send('x'.repeat(2 * 1024 * 1024));
  t.is(await huge.closed, 1009);
  await app.context.documents.sendToSession(session.session_id, { event: 'still-here' });
  t.is((await client.next()).event, 'still-here');
});

test('isolation: a frame for session A reaches A\'s clients only; plain and socket.io clients of A both get it', async (t) => {
  const a = await openSession(app, merchant, { customer_ref: 'ds-iso-a' });
  const b = await openSession(app, merchant, { customer_ref: 'ds-iso-b' });
  const plainA = await registeredDocumentsClient(app.url, a.endpoint_token, t);
  const plainB = await registeredDocumentsClient(app.url, b.endpoint_token, t);
  const ioA = await registeredClient(app.url, a.endpoint_token);
  t.teardown(() => ioA.socket.close());
  t.deepEqual(ioA.reply, { event: 'registered', data: { session_id: a.session_id } });
  t.is(app.context.documents.clientCount(a.session_id), 2);

  const result = { event: 'broadcast', data: { to: a.session_id, type: 'docfront_verification_result' } };
  await app.context.documents.sendToSession(a.session_id, result);
  t.deepEqual(await plainA.next(), result);
  t.deepEqual(await waitFor(() => ioA.messages[0]), result);
  await settle();
  t.is(plainB.frames.length, 1, 'B has its registration reply only');
  t.is(ioA.messages.length, 1);
});

test('the video call\'s hooks: client messages from both transports, one connection addressed, closes reported', async (t) => {
  const session = await openSession(app, merchant, { customer_ref: 'ds-hooks' });
  const heard: Array<{ client: DocumentsClient; message: Record<string, unknown> }> = [];
  const closed: DocumentsClient[] = [];
  app.context.documents.onClientMessage((client, message) => {
    if (client.sessionId === session.session_id) heard.push({ client, message });
  });
  app.context.documents.onClientClose((client) => {
    if (client.sessionId === session.session_id) closed.push(client);
  });
  const plain = await registeredDocumentsClient(app.url, session.endpoint_token, t);
  const other = await registeredDocumentsClient(app.url, session.endpoint_token, t);
  const io = await registeredClient(app.url, session.endpoint_token);
  t.teardown(() => io.socket.close());

  // `call` frames without a type: the video call (src/modules/videocall) listens here too and leaves them alone.
  plain.ws.send(JSON.stringify({ event: 'call', note: 'offer' }));
  const fromPlain = await waitFor(() => heard[0]);
  t.deepEqual(fromPlain.message, { event: 'call', note: 'offer' });
  t.is(fromPlain.client.sessionId, session.session_id);
  io.socket.emit('call', { action: 'join' });
  io.socket.send({ event: 'call', note: 'c1' });
  await waitFor(() => (heard.length >= 3 ? true : undefined));
  t.deepEqual(heard.slice(1).map((entry) => entry.message), [{ action: 'join', event: 'call' }, { event: 'call', note: 'c1' }]);
  const ioClient = heard[1]!.client;
  t.not(ioClient.id, fromPlain.client.id);

  // Answered through the hook's own client, and addressed by id through the fan-out.
  fromPlain.client.send({ event: 'call', note: 'answer' });
  t.deepEqual(await plain.next(), { event: 'call', note: 'answer' });
  await app.context.documents.sendToClient(session.session_id, ioClient.id, { event: 'call', to: 'io only' });
  t.deepEqual(await waitFor(() => io.messages[0]), { event: 'call', to: 'io only' });
  await settle();
  t.is(plain.frames.length, 2);
  t.is(other.frames.length, 1, 'the other connection of the session heard nothing');

  plain.ws.close();
  const gone = await waitFor(() => closed[0]);
  t.is(gone.id, fromPlain.client.id);
  t.is(app.context.documents.clientCount(session.session_id), 2);
});

test('register timeout and heartbeat: an unregistered socket and one that stops answering pings are closed', async (t) => {
  const logger = app.context.logger;
  const channel = new DocumentsChannel(app.context.db, new NotificationHub(app.context.db, logger), app.context.tokens, logger, { registerTimeoutMs: 300, heartbeatMs: 200 });
  const server = http.createServer();
  await channel.attach(server, undefined);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(async () => {
    await channel.close();
    await new Promise((resolve) => server.close(resolve));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const session = await openSession(app, merchant, { customer_ref: 'ds-timeouts' });

  const idle = await documentsClient(url, t);
  const started = Date.now();
  await idle.closed;
  t.true(Date.now() - started >= 250, 'closed at the register timeout');
  // Registered in time and answering pings (ws answers by itself): still open after several beats.
  const alive = await registeredDocumentsClient(url, session.endpoint_token, t);
  await new Promise((resolve) => setTimeout(resolve, 800));
  t.is(alive.ws.readyState, WebSocket.OPEN);
  // A client that no longer answers pings (its socket paused) is closed within two beats.
  (alive.ws as unknown as { _socket: { pause(): void } })._socket.pause();
  await waitFor(() => (channel.clientCount(session.session_id) === 0 ? true : undefined), 3000);
  t.pass();
});

/** Two processes on one database: frames published by A reach a plain client held by B only through the fan-out. */
async function twoProcesses(t: ExecutionContext, env: Record<string, string>): Promise<void> {
  const nodeA = await startTestApp(env);
  t.teardown(() => nodeA.close());
  const nodeB = await startTestApp({ ...env, DATABASE_URL_OVERRIDE: nodeA.database.url });
  t.teardown(() => nodeB.close());
  const token = await nodeA.merchantToken();
  await defineTestFlow(nodeA.context, 'passport', ['passport_mrz_page'], { default: true });
  const session = await openSession(nodeA, token, { customer_ref: 'ds-two' });
  const onB = await registeredDocumentsClient(nodeB.url, session.endpoint_token, t);
  const ioOnB = await registeredClient(nodeB.url, session.endpoint_token);
  t.teardown(() => ioOnB.socket.close());
  t.is(nodeA.context.documents.clientCount(session.session_id), 0);

  await nodeA.context.documents.sendToSession(session.session_id, { event: 'small', n: 1 });
  t.deepEqual(await onB.next(), { event: 'small', n: 1 });
  // Over NOTIFY's limit: it goes through the spill table (without Redis) and arrives whole, in order.
  const big = { event: 'big', pad: 'é'.repeat(20_000) };
  await nodeA.context.documents.sendToSession(session.session_id, big);
  await nodeA.context.documents.sendToSession(session.session_id, { event: 'after-big' });
  t.deepEqual(await onB.next(), big);
  t.deepEqual(await onB.next(), { event: 'after-big' });
  t.deepEqual(await waitFor(() => ioOnB.messages[1]), big);
  if (!env.REDIS_URL) t.is(Number((await nodeA.database.knex('realtime_spill').count({ n: '*' }).first())!.n), 1);
  // In a transaction: sent at commit, never on rollback.
  await nodeA.database.knex
    .transaction(async (trx) => {
      await nodeA.context.documents.sendToSession(session.session_id, { event: 'rolled-back' }, trx);
      throw new Error('rollback');
    })
    .catch(() => {});
  await nodeA.database.knex.transaction((trx) => nodeA.context.documents.sendToSession(session.session_id, { event: 'committed' }, trx));
  t.deepEqual(await onB.next(), { event: 'committed' });
  t.false(onB.frames.some((frame) => frame.event === 'rolled-back'));
  // One connection addressed from the other process.
  const clients: DocumentsClient[] = [];
  nodeB.context.documents.onClientMessage((client) => clients.push(client));
  onB.ws.send(JSON.stringify({ event: 'call', hello: true }));
  const client = await waitFor(() => clients[0]);
  await nodeA.context.documents.sendToClient(session.session_id, client.id, { event: 'just-you' });
  t.deepEqual(await onB.next(), { event: 'just-you' });
  await settle();
  t.false(ioOnB.messages.some((message) => (message as Frame).event === 'just-you'));
}

test.serial('two processes without Redis: PostgreSQL carries frames, big ones through the spill table', async (t) => {
  await twoProcesses(t, {});
});

(redisUrl ? test.serial : test.serial.skip)('two processes with REDIS_URL: Redis pub/sub carries the same frames', async (t) => {
  await twoProcesses(t, { REDIS_URL: redisUrl! });
});

/** A selfie uploaded with no document in the session; resolves once its first verification ran and stored nothing. */
async function waitingSelfie(session: { endpoint_token: string }): Promise<string> {
  const uploaded = await upload(app, '/api/document/upload_document/', { token: session.endpoint_token, artifact_type: 'selfie', file: { bytes: await image('jpeg', 64), name: 'selfie.jpg', type: 'image/jpeg' } });
  if (uploaded.status !== 200) throw new Error(uploaded.text);
  const artifactId = uploaded.body.artifact_id as string;
  await waitFor(async () => {
    const done = await app.database.knex('pgboss.job').where({ name: 'verify-artifact', state: 'completed' }).whereRaw("data->>'artifactId' = ?", [artifactId]).first();
    return done ?? undefined;
  });
  return artifactId;
}

test('a selfie waiting for a document when the session closes gets face_verification_result fail (session_closed)', async (t) => {
  const session = await openSession(app, merchant, { customer_ref: 'ds-selfie-closed' });
  const selfieId = await waitingSelfie(session);
  t.falsy(await app.database.knex('verification_results').where({ artifact_id: selfieId }).first(), 'it waits while the session is open');
  const client = await registeredDocumentsClient(app.url, session.endpoint_token, t);
  const agent = await app.context.tokens.issue('agent', session.session_id, 600, { agent: 'agent-1' });
  const closed = await app.request('POST', '/api/document/end-kyc-session/', { json: { token: agent.token, status: 'ended', checklist: {} } });
  t.is(closed.status, 200, closed.text);
  const message = await client.next((frame) => frame.event === 'broadcast');
  t.is(message.data.type, 'face_verification_result');
  t.is(message.data.to, session.session_id);
  t.is(message.data.result.code, 'fail');
  t.is(message.data.result.data, null);
  t.regex(message.data.result.message, /session was closed \(failed\) before a document/);
  const stored = await app.database.knex('verification_results').where({ artifact_id: selfieId }).first();
  t.is(stored.details.reason, 'session_closed');
});

test('a selfie whose document never comes: a verification queued for SELFIE_WAIT_SECONDS later fails it (reference_timeout)', async (t) => {
  const session = await openSession(app, merchant, { customer_ref: 'ds-selfie-timeout' });
  const selfieId = await waitingSelfie(session);
  const delayed = await app.database.knex('pgboss.job').where({ name: 'verify-artifact', state: 'created' }).whereRaw("data->>'artifactId' = ?", [selfieId]).first();
  t.truthy(delayed, 'the end of the wait is queued with the upload');
  t.true(Math.abs(new Date(delayed.start_after).getTime() - (Date.now() + SELFIE_WAIT_SECONDS * 1000)) < 120_000);
  const client = await registeredDocumentsClient(app.url, session.endpoint_token, t);

  // That job, as it runs a minute early and then once the wait is over.
  await verifyArtifact(app.context, selfieId, false, new Date(Date.now() + (SELFIE_WAIT_SECONDS - 60) * 1000));
  t.falsy(await app.database.knex('verification_results').where({ artifact_id: selfieId }).first(), 'still waiting');
  await verifyArtifact(app.context, selfieId, false, new Date(Date.now() + SELFIE_WAIT_SECONDS * 1000));
  const message = await client.next((frame) => frame.event === 'broadcast');
  t.is(message.data.type, 'face_verification_result');
  t.is(message.data.result.code, 'fail');
  t.regex(message.data.result.message, /No document with a portrait arrived within 24 hours/);
  const stored = await app.database.knex('verification_results').where({ artifact_id: selfieId }).first();
  t.is(stored.details.reason, 'reference_timeout');
});
