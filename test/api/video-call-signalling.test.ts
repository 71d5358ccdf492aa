/**
 * The video call's signalling rules (issue 38), at the protocol level: the end user's page on the
 * plain documents socket, agents on the staff live socket and the lobby endpoints. Join with
 * consent (refused without it, on a flow without a call, on a closed session, from a second page),
 * the queue position, take (agent token, ICE servers, agent_joined), the relay in both directions
 * and only between the two parties (a signal for another session, from a second page, from an
 * agent who did not take the call, or before agent_joined goes to no one and is refused), the
 * snapshot request, the recording (only with consent, only video), the end, an end user who
 * leaves, an offer that lapses, an agent who disconnects, and the TURN credentials coturn checks.
 */
import { createHmac } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import { loadConfig } from '../../src/config.ts';
import { iceServersFor, TURN_CREDENTIAL_SECONDS } from '../../src/modules/videocall/ice.ts';
import { expireOffers, offerCalls } from '../../src/modules/videocall/queue.ts';
import { AGENT_GRACE_MS } from '../../src/modules/videocall/signalling.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineTestFlow, openSession, registeredDocumentsClient, waitFor, type DocumentsFrame as Frame, type PlainDocumentsClient } from '../helpers/kyc.ts';
import { connectLive, type LiveClient } from '../helpers/live.ts';
import { AVAILABILITY, installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

const D = '/api/mobile/dashboard/';
const SESSION_VIEW = ['document.view_documentverificationsession'];
const CONSENT = { call: true, recording: true, text: 'I agree to this video call and to its recording.', at: '2026-11-29T10:00:00Z' };
/** The first bytes of a WebM file (EBML header, DocType webm): enough for the content check. */
const WEBM = Buffer.concat([
  Buffer.from('1a45dfa39f4286810142f7810142f2810442f381084282847765626d4287810442858102185380670' + '1ffffffffffffff1549a96680', 'hex'),
  Buffer.alloc(256),
]);

let app: TestApp;
let clock: TestClock;
let merchant: string;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineTestFlow(app.context, 'video', ['doc_front'], { videoCall: true });
  await defineTestFlow(app.context, 'plain', ['doc_front']);
});
test.after.always(async () => {
  await app?.close();
});

interface Page extends PlainDocumentsClient {
  /** Nothing matching arrives for a moment (after the frames already taken). */
  quiet(predicate: (frame: Frame) => boolean): Promise<boolean>;
}

/** An end user's page: the plain documents socket, registered with the session's endpoint token. */
async function page(t: ExecutionContext, token: string): Promise<Page> {
  const client = await registeredDocumentsClient(app.url, token, t);
  let taken = client.frames.length;
  return {
    ...client,
    async next(predicate) {
      const frame = await client.next(predicate);
      taken = client.frames.indexOf(frame) + 1;
      return frame;
    },
    async quiet(predicate) {
      await new Promise((resolve) => setTimeout(resolve, 400));
      return !client.frames.slice(taken).some(predicate);
    },
  };
}

async function videoSession(customer: string) {
  return openSession(app, merchant, { customer_ref: customer, flow: 'video' });
}

async function agent(t: ExecutionContext): Promise<{ id: string; token: string; live: LiveClient }> {
  const user = await staffUser(app, { video_call_agent: true, permissions: SESSION_VIEW });
  const paired = await pairDevice(app, clock, user.id);
  const live = await connectLive(app.url);
  t.teardown(() => live.close());
  await live.login(paired.accessToken);
  return { id: user.id, token: paired.accessToken, live };
}

const joinFrame = (consent: object = CONSENT) => ({ event: 'call', type: 'join', data: { consent } });
const isError = (reason: string) => (frame: Frame) => frame.event === 'error' && frame.data.reason === reason;
const isCall = (type: string) => (frame: Frame) => frame.event === 'call' && frame.type === type;

/** POST dashboard/lobby/<session>/recording/ with the file as multipart `file`. */
async function postRecording(token: string, sessionId: string, body: Buffer) {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(body)], { type: 'video/webm' }), 'call.webm');
  const response = await fetch(`${app.url}${D}lobby/${sessionId}/recording/`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const text = await response.text();
  return { status: response.status, text, body: JSON.parse(text) };
}

async function queueRow(sessionId: string) {
  return app.database.knex('video_call_queue').where({ session_id: sessionId }).first();
}

test.serial('join: consent required; a flow without a call and a closed session refuse; the consent is kept; the position is told', async (t) => {
  const plain = await openSession(app, merchant, { customer_ref: 'no-call', flow: 'plain' });
  const plainPage = await page(t, plain.endpoint_token);
  plainPage.send(joinFrame());
  await plainPage.next(isError('call_not_required'));

  const session = await videoSession('caller-join');
  t.is((await queueRow(session.session_id)).status, 'pending', 'not in the lobby before the page joins');
  const user = await page(t, session.endpoint_token);
  user.send(joinFrame({ call: true, text: 'no recording flag', at: CONSENT.at }));
  await user.next(isError('consent_invalid'));
  user.send(joinFrame({ call: false, recording: false, text: 'x', at: CONSENT.at }));
  await user.next(isError('consent_missing'));
  user.send({ event: 'call', type: 'join' });
  await user.next(isError('consent_missing'));
  t.is((await queueRow(session.session_id)).status, 'pending');

  user.send(joinFrame());
  const queued = await user.next(isCall('queued'));
  t.true(queued.data.position >= 1);
  t.like(await queueRow(session.session_id), { status: 'waiting' });
  const stored = await app.database.knex('verification_sessions').where({ id: session.session_id }).first('call_consent');
  t.like(stored.call_consent, { call: true, recording: true, text: CONSENT.text, at: CONSENT.at });
  t.truthy(stored.call_consent.received_at);

  // a second page of the same session may not take the call over
  const second = await page(t, session.endpoint_token);
  second.send(joinFrame());
  await second.next(isError('call_already_joined'));
  // a signal before any agent joined goes nowhere
  user.send({ event: 'signal', data: { kind: 'answer', sdp: 'v=0' } });
  await user.next(isError('call_not_connected'));

  // the session closes: the page can no longer join
  await app.database.knex('verification_sessions').where({ id: session.session_id }).update({ status: 'failed' });
  t.is((await queueRow(session.session_id)).status, 'ended');
  const late = await page(t, session.endpoint_token);
  late.send(joinFrame());
  await late.next(isError('session_closed'));
});

test.serial('a call: take (agent token, ICE servers, agent_joined), relay both ways between the two parties only, snapshot, recording, end', async (t) => {
  const session = await videoSession('caller-call');
  const other = await videoSession('caller-other');
  const user = await page(t, session.endpoint_token);
  const secondPage = await page(t, session.endpoint_token);
  const otherUser = await page(t, other.endpoint_token);
  user.send(joinFrame());
  await user.next(isCall('queued'));
  otherUser.send(joinFrame({ ...CONSENT, recording: false }));
  await otherUser.next(isCall('queued'));

  const a = await agent(t);
  const b = await agent(t);
  const taken = await app.request('POST', `${D}lobby/${session.session_id}/take/`, { token: a.token });
  t.is(taken.status, 200, taken.text);
  const { agent_token: agentToken, ice_servers: iceServers } = taken.body.data;
  t.deepEqual(iceServers, [], 'no ICE servers configured: host candidates only');
  t.is((await app.context.tokens.verify('agent', agentToken)).subject, session.session_id);
  t.deepEqual((await user.next(isCall('agent_joined'))).data, { ice_servers: [] });
  t.true(await secondPage.quiet(isCall('agent_joined')), 'only the page that joined');

  // the agent's console reloaded: taking the call again resumes it (a new token, agent_joined again);
  // nobody else can take it
  const resumed = await app.request('POST', `${D}lobby/${session.session_id}/take/`, { token: a.token });
  t.is(resumed.status, 200, resumed.text);
  t.deepEqual(resumed.body.data.you.call, { session_id: session.session_id, customer_ref: 'caller-call' });
  t.not(resumed.body.data.agent_token, agentToken);
  t.is((await app.context.tokens.verify('agent', resumed.body.data.agent_token)).subject, session.session_id);
  await user.next(isCall('agent_joined'));
  t.is((await app.request('POST', `${D}lobby/${session.session_id}/take/`, { token: b.token })).status, 409, 'another agent cannot take it');
  t.is((await app.request('POST', `${D}lobby/${other.session_id}/take/`, { token: a.token })).status, 409, 'nor can the agent take a second call');

  // agent -> end user: the offer reaches the one page, and no other
  a.live.ws.send(JSON.stringify({ type: 'signal', payload: { session: session.session_id, kind: 'offer', sdp: 'v=0 offer' } }));
  t.deepEqual((await user.next((frame) => frame.event === 'signal')).data, { kind: 'offer', sdp: 'v=0 offer' });
  t.true(await secondPage.quiet((frame) => frame.event === 'signal'));
  t.true(await otherUser.quiet((frame) => frame.event === 'signal'));
  // end user -> agent: only to the agent who took the call
  user.send({ event: 'signal', data: { kind: 'answer', sdp: 'v=0 answer' } });
  const answer = await a.live.next((frame) => frame.data?.type === 'videoCallSignal');
  t.deepEqual(answer.data.data, { session: session.session_id, kind: 'answer', sdp: 'v=0 answer' });
  t.is(answer.data.to, a.id);
  user.send({ event: 'signal', data: { kind: 'ice', candidate: { candidate: 'candidate:1 1 udp 1 127.0.0.1 5000 typ host', sdpMid: '0' } } });
  t.like((await a.live.next((frame) => frame.data?.type === 'videoCallSignal')).data.data, { kind: 'ice', candidate: { sdpMid: '0' } });
  t.true(await b.live.silent((frame) => frame.data?.type === 'videoCallSignal', 300), 'the other agent hears nothing');

  // refused, relayed to no one: the other agent on this call, an agent on a session it has no call on,
  // the second page, a kind the side may not send, a bad candidate
  b.live.ws.send(JSON.stringify({ type: 'signal', payload: { session: session.session_id, kind: 'offer', sdp: 'v=0 hijack' } }));
  t.like(await b.live.next((frame) => frame.type === 'signal_refused'), { payload: { session: session.session_id, reason: 'call_not_connected' } });
  a.live.ws.send(JSON.stringify({ type: 'signal', payload: { session: other.session_id, kind: 'offer', sdp: 'v=0 wrong session' } }));
  t.like(await a.live.next((frame) => frame.type === 'signal_refused'), { payload: { session: other.session_id, reason: 'call_not_connected' } });
  secondPage.send({ event: 'signal', data: { kind: 'answer', sdp: 'v=0 second page' } });
  await secondPage.next(isError('call_not_connected'));
  user.send({ event: 'signal', data: { kind: 'offer', sdp: 'v=0 the end user does not offer' } });
  await user.next(isError('signal_invalid'));
  a.live.ws.send(JSON.stringify({ type: 'signal', payload: { session: session.session_id, kind: 'ice', candidate: 'not an object' } }));
  t.like(await a.live.next((frame) => frame.type === 'signal_refused'), { payload: { reason: 'signal_invalid' } });
  t.true(await user.quiet((frame) => frame.event === 'signal'));
  t.true(await otherUser.quiet((frame) => frame.event === 'signal'));
  t.true(await a.live.silent((frame) => frame.data?.type === 'videoCallSignal' && frame.data.data.sdp === 'v=0 second page', 300));
  // unsigned-in sockets' signals mean nothing
  const stranger = await connectLive(app.url);
  t.teardown(() => stranger.close());
  stranger.ws.send(JSON.stringify({ type: 'signal', payload: { session: session.session_id, kind: 'offer', sdp: 'v=0 stranger' } }));
  t.true(await stranger.silent(() => true, 300));

  // snapshot request: only to the page, only by the agent of the call
  t.is((await app.request('POST', `${D}lobby/${session.session_id}/snapshot/`, { token: b.token })).status, 409);
  const requested = await app.request('POST', `${D}lobby/${session.session_id}/snapshot/`, { token: a.token });
  t.is(requested.status, 200, requested.text);
  t.deepEqual((await user.next(isCall('snapshot_request'))).data, { request_id: requested.body.data.request_id });

  // recording: multipart video, only by the agent of the call
  const recording = (token: string, body: Buffer) => postRecording(token, session.session_id, body);
  t.is((await recording(b.token, WEBM)).status, 409, 'not the agent of this call');
  const notVideo = await recording(a.token, Buffer.from('%PDF-1.4 not a video'));
  t.is(notVideo.status, 415, notVideo.text);
  const stored = await recording(a.token, WEBM);
  t.is(stored.status, 200, stored.text);
  t.like(await app.database.knex('verification_artifacts').where({ id: stored.body.data.artifact_id }).first(), { artifact_type: 'recording', content_type: 'video/webm', session_id: session.session_id });

  // the end: the page is told, the session is closed with the agent token
  t.is((await app.request('POST', `${D}lobby/${session.session_id}/end/`, { token: a.token })).status, 200);
  t.deepEqual((await user.next(isCall('ended'))).data, { reason: 'agent_ended' });
  t.like(await queueRow(session.session_id), { status: 'ended', end_reason: 'agent_ended' });
  const closed = await app.request('POST', '/api/document/end-kyc-session/', { json: { token: agentToken, status: 'completed', checklist: { face_matches: true } } });
  t.is(closed.status, 200, closed.text);
  t.is(closed.body.session_status, 'completed');
});

test.serial('recording needs the end user’s consent', async (t) => {
  const session = await videoSession('caller-no-recording');
  const user = await page(t, session.endpoint_token);
  user.send(joinFrame({ ...CONSENT, recording: false }));
  await user.next(isCall('queued'));
  const a = await agent(t);
  t.is((await app.request('POST', `${D}lobby/${session.session_id}/take/`, { token: a.token })).status, 200);
  const refused = await postRecording(a.token, session.session_id, WEBM);
  t.is(refused.status, 409);
  t.is(refused.body.data.reason, 'recording_not_consented');
  t.is(await app.database.knex('verification_artifacts').where({ session_id: session.session_id, artifact_type: 'recording' }).count({ n: '*' }).first().then((row) => Number(row!.n)), 0);
  await app.request('POST', `${D}lobby/${session.session_id}/end/`, { token: a.token });
});

test.serial('an end user who leaves: out of the lobby while waiting; the call ends (agent told) when in a call', async (t) => {
  const waiting = await videoSession('caller-leaves-early');
  const early = await page(t, waiting.endpoint_token);
  early.send(joinFrame());
  await early.next(isCall('queued'));
  early.ws.close();
  t.like(await waitFor(async () => ((await queueRow(waiting.session_id)).status === 'pending' ? queueRow(waiting.session_id) : undefined)), { end_user_client: null });

  const session = await videoSession('caller-leaves-late');
  const user = await page(t, session.endpoint_token);
  user.send(joinFrame());
  await user.next(isCall('queued'));
  const a = await agent(t);
  t.is((await app.request('POST', `${D}lobby/${session.session_id}/take/`, { token: a.token })).status, 200);
  user.ws.close();
  const ended = await a.live.next((frame) => frame.data?.type === 'videoCallEnded');
  t.deepEqual(ended.data.data, { session: session.session_id, reason: 'end_user_left' });
  t.like(await queueRow(session.session_id), { status: 'ended', end_reason: 'end_user_left' });
  t.false((await app.database.knex('staff_video_agents').where({ user_id: a.id }).first('in_call')).in_call, 'the agent is free again');
});

test.serial('an offer nobody takes goes to the next agent', async (t) => {
  const db = app.database.knex;
  // nobody else is available for this test
  await db('staff_video_agents').update({ status: 'AWAY' });
  const first = await agent(t);
  const second = await agent(t);
  t.is((await app.request('POST', AVAILABILITY, { token: first.token, json: { available: true } })).status, 200);
  const session = await videoSession('caller-unanswered');
  const user = await page(t, session.endpoint_token);
  user.send(joinFrame());
  await user.next(isCall('queued'));
  t.is((await waitFor(async () => ((await queueRow(session.session_id)).status === 'offered' ? queueRow(session.session_id) : undefined))).offered_to, first.id);
  t.is((await app.request('POST', AVAILABILITY, { token: second.token, json: { available: true } })).status, 200);
  // WARDEN_CALL_OFFER_SECONDS lapses (each process's timer looks when it is up; here at once)
  await db('video_call_queue').where({ session_id: session.session_id }).update({ offered_at: db.raw("now() - interval '1 hour'") });
  t.is(await expireOffers(db, app.context.config.videoCall.offerSeconds), 1);
  await offerCalls(db);
  t.like(await queueRow(session.session_id), { status: 'offered', offered_to: second.id, passed_over: first.id });
  await db('staff_video_agents').update({ status: 'AWAY' });
  await db('video_call_queue').where({ session_id: session.session_id }).update({ status: 'ended' });
});

test.serial('an offer lapses by itself after WARDEN_CALL_OFFER_SECONDS: no polling, a timer per offer heard', async (t) => {
  const quick = await startTestApp({ WARDEN_CALL_OFFER_SECONDS: '1' });
  t.teardown(() => quick.close());
  const quickClock = installClock(quick);
  await defineTestFlow(quick.context, 'video', ['doc_front'], { videoCall: true });
  const agents: { id: string; token: string }[] = [];
  for (let index = 0; index < 2; index++) {
    const user = await staffUser(quick, { video_call_agent: true, permissions: SESSION_VIEW });
    const paired = await pairDevice(quick, quickClock, user.id);
    agents.push({ id: user.id, token: paired.accessToken });
  }
  t.is((await quick.request('POST', AVAILABILITY, { token: agents[0]!.token, json: { available: true } })).status, 200);
  const session = await openSession(quick, await quick.merchantToken(), { customer_ref: 'caller-lapse', flow: 'video' });
  const user = await registeredDocumentsClient(quick.url, session.endpoint_token, t);
  user.send(joinFrame());
  await user.next(isCall('queued'));
  const row = () => quick.database.knex('video_call_queue').where({ session_id: session.session_id }).first();
  t.is((await waitFor(async () => ((await row()).status === 'offered' ? row() : undefined))).offered_to, agents[0]!.id);
  t.is((await quick.request('POST', AVAILABILITY, { token: agents[1]!.token, json: { available: true } })).status, 200);
  const moved = await waitFor(async () => ((await row()).offered_to === agents[1]!.id ? row() : undefined), 10_000);
  t.like(moved, { status: 'offered', passed_over: agents[0]!.id });
});

test.serial('an agent who disconnects mid-call: after the grace period the call ends for both, with the reason', async (t) => {
  const session = await videoSession('caller-abandoned');
  const user = await page(t, session.endpoint_token);
  user.send(joinFrame());
  await user.next(isCall('queued'));
  const a = await agent(t);
  t.is((await app.request('POST', `${D}lobby/${session.session_id}/take/`, { token: a.token })).status, 200);
  await user.next(isCall('agent_joined'));
  a.live.close();
  const started = Date.now();
  t.deepEqual((await user.next(isCall('ended'))).data, { reason: 'agent_disconnected' });
  t.true(Date.now() - started >= AGENT_GRACE_MS - 500, 'not before the grace period');
  t.like(await queueRow(session.session_id), { status: 'ended', end_reason: 'agent_disconnected' });
});

test('TURN credentials as coturn use-auth-secret checks them; fixed servers as given; none set: empty', (t) => {
  const secret = 'a-turn-secret-of-some-length';
  const config = loadConfig({ WARDEN_TURN_URLS: 'turn:127.0.0.1:3478?transport=udp,turn:127.0.0.1:3478?transport=tcp', WARDEN_TURN_SECRET: secret, WARDEN_ICE_SERVERS: '[{"urls":"stun:stun.example.org:3478"}]' });
  const now = Date.UTC(2026, 10, 29, 12);
  const [stun, turn] = iceServersFor(config, 'session-1:agent', now);
  t.deepEqual(stun, { urls: 'stun:stun.example.org:3478' });
  t.deepEqual(turn!.urls, ['turn:127.0.0.1:3478?transport=udp', 'turn:127.0.0.1:3478?transport=tcp']);
  t.is(turn!.username, `${now / 1000 + TURN_CREDENTIAL_SECONDS}:session-1:agent`);
  t.is(turn!.credential, createHmac('sha1', secret).update(turn!.username!).digest('base64'));
  t.deepEqual(iceServersFor(loadConfig({}), 'x'), []);
  t.throws(() => loadConfig({ WARDEN_TURN_URLS: 'turn:127.0.0.1:3478' }), { message: /WARDEN_TURN_URLS and WARDEN_TURN_SECRET go together/ });
  t.throws(() => loadConfig({ WARDEN_ICE_SERVERS: '{"urls": 1}' }), { message: /WARDEN_ICE_SERVERS/ });
  t.throws(() => loadConfig({ WARDEN_TURN_URLS: 'http://x', WARDEN_TURN_SECRET: secret }), { message: /not a turn: or turns: URL/ });
});

test('the end user’s uploads answer any origin, errors included (the call embedded in a merchant’s page)', async (t) => {
  for (const path of ['/api/document/take_snapshot/', '/api/document/upload_document/']) {
    const form = new FormData();
    form.append('token', 'not-a-token');
    const response = await fetch(`${app.url}${path}`, { method: 'POST', headers: { origin: 'https://shop.example' }, body: form });
    t.is(response.status, 401, path);
    t.is(response.headers.get('access-control-allow-origin'), '*', path);
    await response.arrayBuffer();
  }
  const session = await app.request('POST', '/api/document/create-session/', { token: merchant, json: { customer_ref: 'cors', flow: 'video' } });
  t.is(session.headers.get('access-control-allow-origin'), null, 'merchant endpoints stay server-to-server');
});
