/**
 * Push: the FCM HTTP v1 and APNs clients against local servers that speak those protocols, the
 * devices/push-token endpoint, the push field, and the send-push job end to end (retries with
 * backoff, unregistered tokens cleared, only active devices with push on).
 */
import fs from 'node:fs';
import test from 'ava';
import { loadConfig } from '../../src/config.ts';
import { ApnsClient } from '../../src/modules/push/apns.ts';
import { FcmClient } from '../../src/modules/push/fcm.ts';
import { PushService } from '../../src/modules/push/service.ts';
import { PushRetryable } from '../../src/modules/push/types.ts';
import { notify } from '../../src/modules/notifications/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, LOGOUT, ME, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { startApnsServer, startFcmServer, temporaryDirectory, type ApnsServer, type FcmServer } from '../helpers/push-servers.ts';

const PUSH_TOKEN = '/api/mobile/devices/push-token';
const message = { title: 'Alert on case', body: 'Customer c-1', data: { notification_id: '1', kind: 'alert', target_model: 'engine.alert', target_pk: 'a-1' } };

let directory: string;
let fcm: FcmServer;
let apns: ApnsServer;
let app: TestApp;
let clock: TestClock;
let env: Record<string, string>;

test.before(async () => {
  directory = temporaryDirectory();
  fcm = await startFcmServer(directory);
  apns = await startApnsServer(directory);
  env = {
    WARDEN_FCM_SERVICE_ACCOUNT: fcm.serviceAccountFile,
    WARDEN_FCM_URL: fcm.url,
    WARDEN_APNS_URL: apns.url,
    WARDEN_APNS_KEY_FILE: apns.keyFile,
    WARDEN_APNS_KEY_ID: apns.keyId,
    WARDEN_APNS_TEAM_ID: apns.teamId,
    WARDEN_APNS_TOPIC: apns.topic,
  };
  app = await startTestApp(env);
  clock = installClock(app);
  // The service's own clients, except that APNs trusts the test's certificate.
  const config = app.context.config;
  app.context.push = new PushService(new FcmClient(config.push.fcm!), new ApnsClient(config.push.apns!, { ca: apns.ca }));
});
test.after.always(async () => {
  await app?.close();
  await fcm?.close();
  await apns?.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

function fcmSettings() {
  return loadConfig({ ...env, WARDEN_DATA_DIR: directory }).push.fcm!;
}

test.serial('FCM: the JWT grant is made once and its access token reused until it nears expiry', async (t) => {
  let now = Date.now();
  const client = new FcmClient(fcmSettings(), () => now);
  const before = fcm.tokenRequests;
  t.deepEqual(await client.send('ok-cache-1', message), { kind: 'sent' });
  t.deepEqual(await client.send('ok-cache-2', message), { kind: 'sent' });
  t.is(fcm.tokenRequests - before, 1);
  const received = fcm.received.find((push) => push.token === 'ok-cache-1')!;
  t.like(received, { title: 'Alert on case', body: 'Customer c-1' });
  // FCM data values are strings
  t.deepEqual(received.data, { notification_id: '1', kind: 'alert', target_model: 'engine.alert', target_pk: 'a-1' });
  now += 3599_000 - 30_000;
  t.deepEqual(await client.send('ok-cache-3', message), { kind: 'sent' });
  t.is(fcm.tokenRequests - before, 2);
});

test.serial('FCM: a token FCM no longer accepts (401) is replaced and the message sent once more', async (t) => {
  const client = new FcmClient(fcmSettings());
  t.deepEqual(await client.send('ok-expiry-1', message), { kind: 'sent' });
  const before = fcm.tokenRequests;
  fcm.expireAccessTokens();
  t.deepEqual(await client.send('ok-expiry-2', message), { kind: 'sent' });
  t.is(fcm.tokenRequests - before, 1);
});

test.serial('FCM: UNREGISTERED is a dead token; 429 and 503 are retryable with Retry-After', async (t) => {
  const client = new FcmClient(fcmSettings());
  t.like(await client.send('unregistered-1', message), { kind: 'unregistered', reason: 'UNREGISTERED' });
  const busy = await t.throwsAsync(client.send('busy-1-a', message), { instanceOf: PushRetryable });
  t.is((busy as PushRetryable).retryAfterSeconds, 1);
  t.deepEqual(await client.send('busy-1-a', message), { kind: 'sent' });
  await t.throwsAsync(client.send('down-1-a', message), { instanceOf: PushRetryable, message: /503/ });
  t.deepEqual(await client.send('down-1-a', message), { kind: 'sent' });
});

test.serial('APNs: HTTP/2 over TLS with an ES256 provider token, topic and push type; the token is reused and renewed when expired', async (t) => {
  const client = new ApnsClient(loadConfig({ ...env, WARDEN_DATA_DIR: directory }).push.apns!, { ca: apns.ca });
  try {
    t.deepEqual(await client.send('ok-apns-1', message), { kind: 'sent' });
    t.deepEqual(await client.send('ok-apns-2', message), { kind: 'sent' });
    t.is(apns.providerTokens.size, 1);
    const received = apns.received.find((push) => push.token === 'ok-apns-1')!;
    t.deepEqual(received.headers, { topic: apns.topic, priority: '10', pushType: 'alert' });
    t.like(received, { title: 'Alert on case', body: 'Customer c-1' });
    t.is(received.data.target_pk, 'a-1');
    apns.expireProviderTokens();
    t.deepEqual(await client.send('ok-apns-3', message), { kind: 'sent' });
    t.is(apns.providerTokens.size, 2);
    t.like(await client.send('gone-1', message), { kind: 'unregistered', reason: 'Unregistered' });
    t.like(await client.send('bad-1', message), { kind: 'unregistered', reason: 'BadDeviceToken' });
    await t.throwsAsync(client.send('busy-1-apns', message), { instanceOf: PushRetryable, message: /429/ });
    await t.throwsAsync(client.send('down-1-apns', message), { instanceOf: PushRetryable, message: /503/ });
    t.deepEqual(await client.send('down-1-apns', message), { kind: 'sent' });
  } finally {
    client.close();
  }
});

test.serial('APNs: a server whose certificate is not trusted is a retryable failure, not a crash', async (t) => {
  const client = new ApnsClient(loadConfig({ ...env, WARDEN_DATA_DIR: directory }).push.apns!);
  try {
    await t.throwsAsync(client.send('ok-untrusted', message), { instanceOf: PushRetryable });
  } finally {
    client.close();
  }
});

test.serial('push field and devices/push-token: fcm, the legacy gcm and apns are accepted; other providers and bad bodies are 400; DELETE clears', async (t) => {
  const user = await staffUser(app);
  const paired = await pairDevice(app, clock, user.id);
  t.deepEqual(paired.body.data.push, { provider: 'fcm', app_id: fcm.projectId });
  t.deepEqual((await app.request('GET', ME, { token: paired.accessToken })).body.data.push, { provider: 'fcm', app_id: fcm.projectId });
  const device = () => app.database.knex('mobile_devices').where({ id: paired.deviceId }).first();

  const registered = await app.request('POST', PUSH_TOKEN, { token: paired.accessToken, json: { token: 'fcm-token-1', provider: 'fcm' } });
  t.is(registered.status, 200, registered.text);
  t.like(await device(), { push_provider: 'fcm', push_token: 'fcm-token-1', push_enabled: true });
  t.is((await app.request('POST', PUSH_TOKEN, { token: paired.accessToken, json: { token: 'fcm-token-2', provider: 'gcm' } })).status, 200);
  t.like(await device(), { push_provider: 'fcm', push_token: 'fcm-token-2' });
  t.is((await app.request('POST', `${PUSH_TOKEN}/`, { token: paired.accessToken, json: { token: 'apns-token', provider: 'apns' } })).status, 200);
  t.like(await device(), { push_provider: 'apns', push_token: 'apns-token' });

  for (const body of [{ token: 'x', provider: 'webpush' }, { provider: 'fcm' }, { token: '', provider: 'fcm' }, { token: 5, provider: 'fcm' }, { token: 'x'.repeat(5000), provider: 'fcm' }]) {
    const refused = await app.request('POST', PUSH_TOKEN, { token: paired.accessToken, json: body });
    t.is(refused.status, 400, JSON.stringify(body).slice(0, 60));
    t.truthy(refused.body.data.errors);
  }
  t.is((await app.request('POST', PUSH_TOKEN, { token: paired.accessToken, body: '{', headers: { 'content-type': 'application/json' } })).status, 400);
  t.is((await app.request('POST', PUSH_TOKEN, { json: { token: 'x', provider: 'fcm' } })).status, 401);

  // the same phone paired again takes the token over
  const again = await pairDevice(app, clock, user.id, 'same phone');
  await app.request('POST', PUSH_TOKEN, { token: again.accessToken, json: { token: 'apns-token', provider: 'apns' } });
  t.like(await device(), { push_token: null, push_enabled: false });

  t.is((await app.request('DELETE', PUSH_TOKEN, { token: again.accessToken })).status, 200);
  t.like(await app.database.knex('mobile_devices').where({ id: again.deviceId }).first(), { push_token: null, push_enabled: false });
});

test.serial('without a provider configured the push field is null and no token is accepted', async (t) => {
  const bare = await startTestApp();
  try {
    const bareClock = installClock(bare);
    const user = await staffUser(bare);
    const paired = await pairDevice(bare, bareClock, user.id);
    t.is(paired.body.data.push, null);
    const refused = await bare.request('POST', PUSH_TOKEN, { token: paired.accessToken, json: { token: 't', provider: 'fcm' } });
    t.is(refused.status, 400);
    t.truthy(refused.body.data.errors.provider);
  } finally {
    await bare.close();
  }
});

async function until(condition: () => Promise<boolean> | boolean, timeoutMs = 20_000): Promise<boolean> {
  for (const started = Date.now(); Date.now() - started < timeoutMs; ) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

test.serial('send-push job: each active device with push on gets the notification; 429/503 retried with backoff; dead tokens cleared', async (t) => {
  const user = await staffUser(app);
  const register = async (name: string, token: string, provider: string) => {
    const paired = await pairDevice(app, clock, user.id, name);
    await app.request('POST', PUSH_TOKEN, { token: paired.accessToken, json: { token, provider } });
    return paired;
  };
  const android = await register('android', 'ok-job-android', 'fcm');
  const busy = await register('busy', 'busy-2-job', 'fcm');
  const iphone = await register('iphone', 'down-1-job-iphone', 'apns');
  const dead = await register('dead', 'gone-job', 'apns');
  const off = await register('off', 'ok-job-off', 'fcm');
  await app.request('DELETE', PUSH_TOKEN, { token: off.accessToken });
  const revoked = await register('revoked', 'ok-job-revoked', 'fcm');
  await app.request('POST', LOGOUT, { token: revoked.accessToken });
  const paused = await register('paused', 'ok-job-paused', 'fcm');
  await app.database.knex('mobile_devices').where({ id: paused.deviceId }).update({ push_enabled: false });

  const [id] = await app.database.knex.transaction((trx) =>
    notify(trx, { userIds: [user.id], kind: 'approval_request', title: 'Signature needed', body: 'Rule change R-7', target: { model: 'approval.approvalrequest', pk: 'r-7' } }),
  );
  const delivered = await until(() =>
    fcm.received.some((push) => push.token === 'ok-job-android') &&
    fcm.received.some((push) => push.token === 'busy-2-job') &&
    apns.received.some((push) => push.token === 'down-1-job-iphone'),
  );
  t.true(delivered, `fcm: ${JSON.stringify(fcm.received.map((push) => push.token))} apns: ${JSON.stringify(apns.received.map((push) => push.token))}`);
  t.is(fcm.attempts.get('busy-2-job'), 3);
  t.is(apns.attempts.get('down-1-job-iphone'), 2);
  const push = fcm.received.find((entry) => entry.token === 'ok-job-android')!;
  t.like(push, { title: 'Signature needed', body: 'Rule change R-7' });
  t.deepEqual(push.data, { notification_id: id, kind: 'approval_request', target_model: 'approval.approvalrequest', target_pk: 'r-7' });
  t.true(await until(async () => (await app.database.knex('mobile_devices').where({ id: dead.deviceId }).first()).push_token === null));
  t.like(await app.database.knex('mobile_devices').where({ id: dead.deviceId }).first(), { push_token: null, push_enabled: false });
  t.like(await app.database.knex('mobile_devices').where({ id: android.deviceId }).first(), { push_token: 'ok-job-android', push_enabled: true });
  t.like(await app.database.knex('mobile_devices').where({ id: busy.deviceId }).first(), { push_token: 'busy-2-job' });
  t.like(await app.database.knex('mobile_devices').where({ id: iphone.deviceId }).first(), { push_token: 'down-1-job-iphone' });
  t.truthy((await app.database.knex('notifications').where({ id }).first()).pushed_at);
  for (const token of ['ok-job-off', 'ok-job-revoked', 'ok-job-paused']) t.false(fcm.attempts.has(token), token);
});
