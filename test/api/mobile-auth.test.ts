/** Mobile identity: pairing, tickets, access and refresh tokens, logout and revocation, through real HTTP. */
import { SignJWT, UnsecuredJWT } from 'jose';
import test from 'ava';
import { loadSigningKey } from '../../src/auth/tokens.ts';
import { NotificationHub } from '../../src/db/notifications.ts';
import { createLogger } from '../../src/logger.ts';
import { DEVICE_REVOKED_CHANNEL, revokeDevice } from '../../src/modules/mobile/devices.ts';
import { hashSecret } from '../../src/modules/mobile/secrets.ts';
import { issueLoginTicket, TicketRefusedError } from '../../src/modules/mobile/tickets.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import {
  AVAILABILITY,
  installClock,
  LOGOUT,
  ME,
  PAIR,
  pairDevice,
  PASSWORD,
  PREFERENCES,
  REFRESH,
  staffUser,
  type TestClock,
} from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

const TICKET_REFUSED = 'QR ticket is invalid, expired or already used.';
const device = { device_name: 'iPhone 16', platform: 'ios', app_version: '2.0.1' };

/** Every Bearer endpoint with a request that would succeed for an agent. */
const BEARER_ENDPOINTS: [string, string, unknown][] = [
  ['GET', ME, undefined],
  ['GET', PREFERENCES, undefined],
  ['PATCH', PREFERENCES, { timezone: 'Europe/Paris' }],
  ['POST', AVAILABILITY, { available: true }],
  ['POST', PASSWORD, { old_password: 'x', new_password1: 'y', new_password2: 'y' }],
  ['POST', LOGOUT, undefined],
];

test.serial('pairing with a login ticket: one device, a token pair and the user; secrets stored only as hashes', async (t) => {
  const user = await staffUser(app, { full_name: 'Ada Reviewer', email: 'ada@example.org' });
  const { qr, expires_at } = await issueLoginTicket(app.database.knex, user.id, clock.now);
  t.deepEqual(Object.keys(qr), ['v', 'typ', 'ticket', 'endpoint']);
  t.is(qr.v, 1);
  t.is(qr.typ, 'warden-mobile-login');
  t.is(qr.endpoint, '/api/mobile/auth/qr/');
  t.is(expires_at, new Date(clock.now.getTime() + 300_000).toISOString().slice(0, 19));

  const response = await app.request('POST', PAIR, { json: { ticket: qr.ticket, ...device } });
  t.is(response.status, 200);
  t.is(response.body.status, true);
  const data = response.body.data;
  t.deepEqual(Object.keys(data).sort(), ['access_token', 'device_id', 'expires_in', 'push', 'refresh_token', 'token_type', 'user', 'websocket_url']);
  t.is(data.token_type, 'Bearer');
  t.is(data.expires_in, 3600);
  t.is(data.websocket_url, null);
  t.is(data.push, null);
  t.is(Buffer.from(data.refresh_token, 'base64url').length, 48);
  t.deepEqual(data.user, {
    id: user.id,
    username: user.username,
    full_name: 'Ada Reviewer',
    email: 'ada@example.org',
    is_superuser: false,
    timezone: 'UTC',
    language: 'en',
    mobile: '',
    profile_target: { model: 'auth.user', pk: user.id },
    agent_dashboard: false,
  });

  const knex = app.database.knex;
  const row = await knex('mobile_devices').where({ id: data.device_id }).first();
  t.like(row, { user_id: user.id, name: 'iPhone 16', platform: 'ios', app_version: '2.0.1', revoked_at: null });
  const ticket = await knex('mobile_login_tickets').where({ user_id: user.id }).first();
  t.is(ticket.ticket_hash, hashSecret(qr.ticket));
  t.not(ticket.ticket_hash, qr.ticket);
  t.is(ticket.used_by_device, data.device_id);
  const tokens = await knex('mobile_refresh_tokens').where({ device_id: data.device_id });
  t.deepEqual(tokens.map((token) => token.token_hash), [hashSecret(data.refresh_token)]);

  const me = await app.request('GET', ME, { token: data.access_token });
  t.is(me.status, 200);
});

test.serial('a login ticket works once: a replay is 401 and opens no device', async (t) => {
  const user = await staffUser(app);
  const { qr } = await issueLoginTicket(app.database.knex, user.id, clock.now);
  const first = await app.request('POST', PAIR, { json: { ticket: qr.ticket, ...device } });
  t.is(first.status, 200);
  const replay = await app.request('POST', PAIR, { json: { ticket: qr.ticket, ...device } });
  t.is(replay.status, 401);
  t.deepEqual(replay.body, { status: false, message: TICKET_REFUSED, data: { reason: 'ticket_invalid' } });
  const unknown = await app.request('POST', PAIR, { json: { ticket: 'not-a-ticket', ...device } });
  t.is(unknown.status, 401);
  t.is(unknown.body.message, TICKET_REFUSED);
  t.is(Number((await app.database.knex('mobile_devices').where({ user_id: user.id }).count({ n: '*' }))[0]!.n), 1);
});

test.serial('a login ticket expires after five minutes', async (t) => {
  const user = await staffUser(app);
  const early = await issueLoginTicket(app.database.knex, user.id, clock.now);
  const late = await issueLoginTicket(app.database.knex, user.id, clock.now);
  clock.advance(299);
  t.is((await app.request('POST', PAIR, { json: { ticket: early.qr.ticket, ...device } })).status, 200);
  clock.advance(1);
  const expired = await app.request('POST', PAIR, { json: { ticket: late.qr.ticket, ...device } });
  t.is(expired.status, 401);
  t.is(expired.body.message, TICKET_REFUSED);
});

test.serial('two concurrent redemptions of one ticket open exactly one device', async (t) => {
  const user = await staffUser(app);
  const { qr } = await issueLoginTicket(app.database.knex, user.id, clock.now);
  const responses = await Promise.all(
    Array.from({ length: 8 }, (_, index) => app.request('POST', PAIR, { json: { ticket: qr.ticket, ...device, device_name: `phone ${index}` } })),
  );
  t.deepEqual(responses.map((response) => response.status).sort(), [200, 401, 401, 401, 401, 401, 401, 401]);
  const devices = await app.database.knex('mobile_devices').where({ user_id: user.id });
  t.is(devices.length, 1);
  const winner = responses.find((response) => response.status === 200)!;
  t.is(devices[0].id, winner.body.data.device_id);
});

test.serial('an inactive or non-staff account is not eligible: 403, and no device', async (t) => {
  const knex = app.database.knex;
  for (const change of [{ is_active: false }, { is_staff: false }]) {
    const user = await staffUser(app);
    const { qr } = await issueLoginTicket(knex, user.id, clock.now);
    await knex('staff_users').where({ id: user.id }).update(change);
    const response = await app.request('POST', PAIR, { json: { ticket: qr.ticket, ...device } });
    t.is(response.status, 403, JSON.stringify(change));
    t.deepEqual(response.body, { status: false, message: 'User account is not eligible for mobile access', data: { reason: 'account_not_eligible' } });
    t.is((await knex('mobile_devices').where({ user_id: user.id })).length, 0);
  }
  const inactive = await staffUser(app);
  await knex('staff_users').where({ id: inactive.id }).update({ is_active: false });
  await t.throwsAsync(issueLoginTicket(knex, inactive.id, clock.now), { message: /not eligible/ });
});

test.serial('a ticket asked for while its user is being deleted is refused, not a database error (found by the staff fuzz run: a deadlock)', async (t) => {
  const knex = app.database.knex;
  const user = await staffUser(app);
  // A spent ticket: the issuer clears it while the delete cascades to it.
  await pairDevice(app, clock, user.id);
  const deleting = await knex.transaction();
  await deleting('staff_users').where({ id: user.id }).delete();
  const issuing = issueLoginTicket(knex, user.id, clock.now).then(
    () => 'issued',
    (error: Error) => error,
  );
  // The issuer waits for the deleting transaction's locks before the delete commits.
  for (let waited = 0; waited < 200; waited++) {
    const waiting = await knex('pg_stat_activity').where({ datname: knex.client.database(), wait_event_type: 'Lock' }).count({ count: '*' }).first();
    if (Number(waiting?.count) > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  await deleting.commit();
  const outcome = await issuing;
  t.true(outcome instanceof TicketRefusedError, String(outcome));
});

test.serial('pairing input: malformed JSON, wrong types, unknown choices and over-long fields are 400 in the envelope', async (t) => {
  const malformed = await app.request('POST', PAIR, { body: '{"ticket": ', headers: { 'content-type': 'application/json' } });
  t.is(malformed.status, 400);
  t.deepEqual(malformed.body, { status: false, message: 'Request body is not valid JSON.', data: { reason: 'invalid_json' } });
  const array = await app.request('POST', PAIR, { json: [{ ticket: 'x' }] });
  t.is(array.status, 400);
  t.is(array.body.data.reason, 'object_required');
  const form = await app.request('POST', PAIR, { body: 'ticket=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.is(form.status, 415);

  const missing = await app.request('POST', PAIR, { json: {} });
  t.is(missing.status, 400);
  t.is(missing.body.message, 'Validation failed.');
  t.deepEqual(Object.keys(missing.body.data.errors).sort(), ['device_name', 'platform', 'ticket']);
  t.deepEqual(missing.body.data.errors.ticket, [{ message: 'This field is required.', code: 'required' }]);

  const wrong = await app.request('POST', PAIR, {
    json: { ticket: 12345, device_name: 'x'.repeat(101), platform: 'windows', app_version: ['1'] },
  });
  t.is(wrong.status, 400);
  t.deepEqual(wrong.body.data.errors, {
    ticket: [{ message: 'Expected text.', code: 'invalid' }],
    device_name: [{ message: 'Ensure this value has at most 100 characters (it has 101).', code: 'max_length' }],
    platform: [{ message: 'Select a valid choice. windows is not one of the available choices.', code: 'invalid_choice' }],
    app_version: [{ message: 'Expected text.', code: 'invalid' }],
  });
  const unstorable = await app.request('POST', PAIR, {
    body: '{"ticket": "abc", "device_name": "nul \\u0000 here", "platform": "ios", "app_version": "\\ud800"}',
    headers: { 'content-type': 'application/json' },
  });
  t.is(unstorable.status, 400);
  t.deepEqual(unstorable.body.data.errors, {
    device_name: [{ message: 'The text contains a NUL character (\\u0000).', code: 'invalid' }],
    app_version: [{ message: 'The text contains a lone UTF-16 surrogate (broken Unicode).', code: 'invalid' }],
  });
  const huge = await app.request('POST', PAIR, { json: { ticket: 'x'.repeat(100_000), ...device } });
  t.is(huge.status, 413);
});

test.serial('access tokens: tampered, expired, alg none, foreign-key, other-audience and other-device tokens are 401', async (t) => {
  const user = await staffUser(app);
  const other = await staffUser(app);
  const paired = await pairDevice(app, clock, user.id);
  const otherPaired = await pairDevice(app, clock, other.id);
  const meWith = (token: string) => app.request('GET', ME, { token });

  const [header, payload, signature] = paired.accessToken.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
  const forgedPayload = Buffer.from(JSON.stringify({ ...claims, sub: other.id, dev: otherPaired.deviceId })).toString('base64url');
  const flipped = signature.slice(0, -2) + (signature.at(-2) === 'A' ? 'B' : 'A') + signature.at(-1);
  const alg = (name: string) => Buffer.from(JSON.stringify({ alg: name, typ: 'JWT' })).toString('base64url');
  const key = await loadSigningKey(app.database.knex, undefined);
  const signed = (body: Record<string, unknown>, audience = 'mobile', signingKey: Uint8Array = key) =>
    new SignJWT(body).setProtectedHeader({ alg: 'HS256' }).setIssuer('warden').setAudience(audience).setIssuedAt().setExpirationTime('1h').sign(signingKey);

  const cases: [string, string, string][] = [
    ['tampered payload', `${header}.${forgedPayload}.${signature}`, 'token_invalid'],
    ['tampered signature', `${header}.${payload}.${flipped}`, 'token_invalid'],
    ['alg none', new UnsecuredJWT({ dev: paired.deviceId }).setSubject(user.id).setIssuer('warden').setAudience('mobile').setExpirationTime('1h').encode(), 'token_invalid'],
    ['alg none header on a real payload', `${alg('none')}.${payload}.`, 'token_invalid'],
    ['HS512 header', `${alg('HS512')}.${payload}.${signature}`, 'token_invalid'],
    ['signed with another key', await signed({ sub: user.id, dev: paired.deviceId }, 'mobile', new TextEncoder().encode('x'.repeat(40))), 'token_invalid'],
    ['merchant audience', await signed({ sub: user.id, dev: paired.deviceId }, 'merchant'), 'token_invalid'],
    ['merchant access token', await app.merchantToken(), 'token_invalid'],
    ['no device claim', await signed({ sub: user.id }), 'token_invalid'],
    ['another user\u2019s device', await signed({ sub: user.id, dev: otherPaired.deviceId }), 'token_invalid'],
    ['unknown device', await signed({ sub: user.id, dev: '00000000-0000-4000-8000-000000000000' }), 'token_invalid'],
    ['device claim not a uuid', await signed({ sub: user.id, dev: "x' or 1=1" }), 'token_invalid'],
    ['not a JWT', 'abc.def', 'token_invalid'],
  ];
  for (const [name, token, reason] of cases) {
    const response = await meWith(token);
    t.is(response.status, 401, name);
    t.is(response.body.data.reason, reason, name);
  }
  const missing = await app.request('GET', ME);
  t.is(missing.status, 401);
  t.is(missing.body.data.reason, 'token_missing');
  const basic = await app.request('GET', ME, { headers: { authorization: 'Basic dXNlcjpwYXNz' } });
  t.is(basic.status, 401);
  t.is(basic.body.data.reason, 'token_invalid');

  t.is((await meWith(paired.accessToken)).status, 200);
  clock.advance(3599);
  t.is((await meWith(paired.accessToken)).status, 200);
  clock.advance(1);
  const expired = await meWith(paired.accessToken);
  t.is(expired.status, 401);
  t.deepEqual(expired.body, { status: false, message: 'The access token has expired.', data: { reason: 'token_expired' } });
});

test.serial('refresh rotates the pair; the old refresh token presented again revokes the device', async (t) => {
  const user = await staffUser(app);
  const paired = await pairDevice(app, clock, user.id);
  clock.advance(60);
  const refreshed = await app.request('POST', REFRESH, { json: { device_id: paired.deviceId, refresh_token: paired.refreshToken } });
  t.is(refreshed.status, 200);
  const data = refreshed.body.data;
  t.deepEqual(Object.keys(data).sort(), ['access_token', 'device_id', 'expires_in', 'push', 'refresh_token', 'token_type', 'websocket_url']);
  t.is(data.device_id, paired.deviceId);
  t.is(data.expires_in, 3600);
  t.not(data.refresh_token, paired.refreshToken);
  t.not(data.access_token, paired.accessToken);
  t.is((await app.request('GET', ME, { token: data.access_token })).status, 200);

  const wrongDevice = await app.request('POST', REFRESH, { json: { device_id: '00000000-0000-4000-8000-000000000000', refresh_token: data.refresh_token } });
  t.is(wrongDevice.status, 401);
  t.is(wrongDevice.body.data.reason, 'refresh_token_invalid');

  const reused = await app.request('POST', REFRESH, { json: { device_id: paired.deviceId, refresh_token: paired.refreshToken } });
  t.is(reused.status, 401);
  t.is(reused.body.data.reason, 'refresh_token_reused');
  const row = await app.database.knex('mobile_devices').where({ id: paired.deviceId }).first();
  t.is(row.revoked_reason, 'refresh_token_reuse');
  t.truthy(row.revoked_at);
  // Both holders are out: the newest refresh token and the live access token stop working too.
  const newest = await app.request('POST', REFRESH, { json: { device_id: paired.deviceId, refresh_token: data.refresh_token } });
  t.is(newest.status, 401);
  const me = await app.request('GET', ME, { token: data.access_token });
  t.is(me.status, 401);
  t.is(me.body.data.reason, 'device_revoked');
});

test.serial('two concurrent refreshes with one token: one rotates, the other is reuse and revokes the device', async (t) => {
  const user = await staffUser(app);
  const paired = await pairDevice(app, clock, user.id);
  const body = { device_id: paired.deviceId, refresh_token: paired.refreshToken };
  const responses = await Promise.all([app.request('POST', REFRESH, { json: body }), app.request('POST', REFRESH, { json: body })]);
  t.deepEqual(responses.map((response) => response.status).sort(), [200, 401]);
  t.is(responses.find((response) => response.status === 401)!.body.data.reason, 'refresh_token_reused');
  t.is((await app.database.knex('mobile_devices').where({ id: paired.deviceId }).first()).revoked_reason, 'refresh_token_reuse');
});

test.serial('refresh tokens last 30 days; bad refresh input is 400', async (t) => {
  const user = await staffUser(app);
  const first = await pairDevice(app, clock, user.id);
  const second = await pairDevice(app, clock, user.id);
  clock.advance(30 * 24 * 3600 - 1);
  t.is((await app.request('POST', REFRESH, { json: { device_id: first.deviceId, refresh_token: first.refreshToken } })).status, 200);
  clock.advance(1);
  const expired = await app.request('POST', REFRESH, { json: { device_id: second.deviceId, refresh_token: second.refreshToken } });
  t.is(expired.status, 401);
  t.is(expired.body.data.reason, 'refresh_token_invalid');

  const missing = await app.request('POST', REFRESH, { json: { refresh_token: 7 } });
  t.is(missing.status, 400);
  t.deepEqual(missing.body.data.errors, {
    device_id: [{ message: 'This field is required.', code: 'required' }],
    refresh_token: [{ message: 'Expected text.', code: 'invalid' }],
  });
  const notUuid = await app.request('POST', REFRESH, { json: { device_id: 'abc', refresh_token: 'def' } });
  t.is(notUuid.status, 401);
  const malformed = await app.request('POST', REFRESH, { body: '{', headers: { 'content-type': 'application/json' } });
  t.is(malformed.status, 400);
  t.is(malformed.body.data.reason, 'invalid_json');
});

test.serial('logout revokes the device: every endpoint answers 401 for it, refresh too; other devices keep working', async (t) => {
  const user = await staffUser(app, { video_call_agent: true });
  const paired = await pairDevice(app, clock, user.id);
  const kept = await pairDevice(app, clock, user.id, 'tablet');
  const logout = await app.request('POST', LOGOUT, { token: paired.accessToken });
  t.is(logout.status, 200);
  t.deepEqual(logout.body, { status: true, message: 'The device is logged out.', data: {} });
  const row = await app.database.knex('mobile_devices').where({ id: paired.deviceId }).first();
  t.is(row.revoked_reason, 'logout');
  t.is((await app.database.knex('mobile_refresh_tokens').where({ device_id: paired.deviceId })).length, 0);

  for (const [method, path, json] of BEARER_ENDPOINTS) {
    const response = await app.request(method, path, { token: paired.accessToken, ...(json === undefined ? {} : { json }) });
    t.is(response.status, 401, `${method} ${path}`);
    t.deepEqual(response.body, { status: false, message: 'This device has been logged out; pair it again.', data: { reason: 'device_revoked' } });
  }
  const refresh = await app.request('POST', REFRESH, { json: { device_id: paired.deviceId, refresh_token: paired.refreshToken } });
  t.is(refresh.status, 401);
  t.is((await app.request('GET', ME, { token: kept.accessToken })).status, 200);
});

test.serial('revocation from elsewhere (the web admin) takes effect at the next request and is announced to every process', async (t) => {
  const user = await staffUser(app);
  const paired = await pairDevice(app, clock, user.id);
  const hub = new NotificationHub(app.database.knex, createLogger('silent'));
  const heard = new Promise<string>((resolve) => hub.subscribe(DEVICE_REVOKED_CHANNEL, resolve));
  await hub.start();
  try {
    t.true(await revokeDevice(app.database.knex, paired.deviceId, 'admin', { actor: { type: 'staff', id: user.id } }));
    t.is(await heard, paired.deviceId);
    t.false(await revokeDevice(app.database.knex, paired.deviceId, 'admin'));
  } finally {
    await hub.stop();
  }
  const me = await app.request('GET', ME, { token: paired.accessToken });
  t.is(me.status, 401);
  t.is(me.body.data.reason, 'device_revoked');
  const audit = await app.database.knex('audit_log').where({ entity_id: paired.deviceId, action: 'mobile_device.revoke' });
  t.is(audit.length, 1);
});

test.serial('a deactivated account is refused at the next request (401) and cannot refresh', async (t) => {
  const user = await staffUser(app);
  const paired = await pairDevice(app, clock, user.id);
  await app.database.knex('staff_users').where({ id: user.id }).update({ is_active: false });
  const me = await app.request('GET', ME, { token: paired.accessToken });
  t.is(me.status, 401);
  t.is(me.body.data.reason, 'account_inactive');
  const refresh = await app.request('POST', REFRESH, { json: { device_id: paired.deviceId, refresh_token: paired.refreshToken } });
  t.is(refresh.status, 401);
});

test.serial('405 with Allow for methods an endpoint does not support; unknown mobile paths are 404; never a 500', async (t) => {
  const cases: [string, string, string][] = [
    ['GET', PAIR, 'POST'],
    ['PUT', REFRESH, 'POST'],
    ['GET', LOGOUT, 'POST'],
    ['DELETE', ME, 'GET'],
    ['POST', ME, 'GET'],
    ['PUT', PREFERENCES, 'GET'],
    ['GET', AVAILABILITY, 'POST'],
    ['GET', PASSWORD, 'POST'],
  ];
  for (const [method, path, allowed] of cases) {
    const response = await app.request(method, path);
    t.is(response.status, 405, `${method} ${path}`);
    t.is(response.body.status, false);
    t.is(response.body.data.reason, 'method_not_allowed');
    t.true(response.headers.get('allow')!.split(', ').includes(allowed), `${method} ${path}: ${response.headers.get('allow')}`);
  }
  t.true((await app.request('PUT', PREFERENCES)).headers.get('allow')!.includes('PATCH'));
  const unknown = await app.request('GET', '/api/mobile/nothing-here/');
  t.is(unknown.status, 404);
  t.is(unknown.body.status, false);
  const openapi = await app.request('GET', '/api/openapi.json');
  t.truthy(openapi.body.paths['/api/mobile/auth/qr/'].post.requestBody);
  t.deepEqual(Object.keys(openapi.body.paths['/api/mobile/me/preferences/']).sort(), ['get', 'patch']);
  const noSlash = await app.request('GET', '/api/mobile/me', { token: (await pairDevice(app, clock, (await staffUser(app)).id)).accessToken });
  t.is(noSlash.status, 200);
});

test.serial('odd bodies on every identity endpoint are answered in the envelope, never with a 500', async (t) => {
  const agent = await staffUser(app, { video_call_agent: true });
  const { accessToken } = await pairDevice(app, clock, agent.id);
  const deep = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;
  const bodies = ['[]', '"text"', '1', 'null', '{}', deep, '{"ticket": {}, "device_id": [], "refresh_token": 1e999}',
    '{"available": null, "language": [], "timezone": {}, "old_password": {"a": 1}}', '{"__proto__": {"admin": true}}', '\u00ff\u00fe'];
  const endpoints: [string, string][] = [['POST', PAIR], ['POST', REFRESH], ['PATCH', PREFERENCES], ['POST', AVAILABILITY], ['POST', PASSWORD]];
  for (const [method, path] of endpoints) {
    for (const body of bodies) {
      const response = await app.request(method, path, { body, token: accessToken, headers: { 'content-type': 'application/json' } });
      t.true(response.status < 500 && response.body?.status !== undefined, `${method} ${path} ${body.slice(0, 40)}: ${response.status}`);
    }
  }
  t.is((await app.request('GET', ME, { token: accessToken })).status, 200);
});
