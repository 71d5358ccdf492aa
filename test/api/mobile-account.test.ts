/** The mobile account menu: me/, preferences, video-call availability and password change. */
import { createHash } from 'node:crypto';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { AVAILABILITY, installClock, ME, operator, pairDevice, PASSWORD, PREFERENCES, staffUser, type TestClock } from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

const PASSWORD_NOW = 'correct horse battery staple 42';

test.serial('me/: every session info field, with groups, permissions, unread notifications and the devices', async (t) => {
  const knex = app.database.knex;
  await createGroup(knex, { name: 'Analysts', permissions: ['customer.view_customer', 'engine.view_alert'] }, { actor: operator, known: new Set(permissionCodenames()) });
  const user = await staffUser(app, { groups: ['Analysts'], permissions: ['engine.change_alert'], full_name: 'Bea Analyst' });
  const phone = await pairDevice(app, clock, user.id, 'phone');
  clock.advance(120);
  const tablet = await pairDevice(app, clock, user.id, 'tablet');
  const revoked = await pairDevice(app, clock, user.id, 'old phone');
  await app.request('POST', '/api/mobile/auth/logout/', { token: revoked.accessToken });
  await knex('notifications').insert([
    { user_id: user.id, kind: 'alert', title: 'one', read: false },
    { user_id: user.id, kind: 'alert', title: 'two', read: true },
    { user_id: user.id, kind: 'alert', title: 'three', read: false },
  ]);

  const response = await app.request('GET', ME, { token: phone.accessToken });
  t.is(response.status, 200);
  const data = response.body.data;
  t.deepEqual(Object.keys(data).sort(), [
    'datetime_timezone', 'device', 'devices', 'groups', 'permissions', 'push', 'unread_notifications', 'user', 'websocket_url',
  ]);
  t.deepEqual(data.user, {
    id: user.id,
    username: user.username,
    full_name: 'Bea Analyst',
    email: '',
    is_superuser: false,
    timezone: 'UTC',
    language: 'en',
    mobile: '',
    profile_target: { model: 'auth.user', pk: user.id },
    agent_dashboard: false,
    date_format: 'YYYY-MM-DD',
    time_format: 'HH:mm',
    show_today: true,
    has_usable_password: true,
    video_call: null,
  });
  t.is(data.datetime_timezone, 'UTC');
  t.is(data.websocket_url, null);
  t.is(data.push, null);
  t.deepEqual(data.groups, ['Analysts']);
  t.deepEqual(data.permissions, ['customer.view_customer', 'engine.change_alert', 'engine.view_alert']);
  t.is(data.unread_notifications, 2);
  t.deepEqual(data.device, { id: phone.deviceId, name: 'phone', platform: 'android' });
  const devices = [...data.devices].sort((a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name));
  // The revoked device is not listed. The phone's seen-at stamp was two minutes old, so this
  // request moved it to now; the tablet paired now.
  const now = clock.now.toISOString().slice(0, 19);
  t.deepEqual(devices, [
    { id: phone.deviceId, name: 'phone', platform: 'android', last_seen_at: now, current: true },
    { id: tablet.deviceId, name: 'tablet', platform: 'android', last_seen_at: now, current: false },
  ]);
});

test.serial('me/: a superuser holds every codename of the registry; an agent carries video_call and the agent dashboard', async (t) => {
  const admin = await staffUser(app, { is_superuser: true });
  const paired = await pairDevice(app, clock, admin.id);
  const me = await app.request('GET', ME, { token: paired.accessToken });
  t.deepEqual(me.body.data.permissions, [...permissionCodenames()].sort());
  t.true(me.body.data.user.is_superuser);

  const agent = await staffUser(app, { video_call_agent: true });
  const agentMe = await app.request('GET', ME, { token: (await pairDevice(app, clock, agent.id)).accessToken });
  t.true(agentMe.body.data.user.agent_dashboard);
  t.is(agentMe.body.data.user.video_call.status, 'AWAY');
  t.false(agentMe.body.data.user.video_call.in_call);
  t.deepEqual(agentMe.body.data.permissions, []);
});

test.serial('me/ with WARDEN_PUBLIC_URL gives the live socket address', async (t) => {
  const other = await startTestApp({ WARDEN_PUBLIC_URL: 'https://warden.example.org/' });
  try {
    const otherClock = installClock(other);
    const user = await staffUser(other);
    const paired = await pairDevice(other, otherClock, user.id);
    t.is(paired.body.data.websocket_url, 'wss://warden.example.org/api/mobile/ws/');
    const me = await other.request('GET', ME, { token: paired.accessToken });
    t.is(me.body.data.websocket_url, 'wss://warden.example.org/api/mobile/ws/');
  } finally {
    await other.close();
  }
});

test.serial('preferences: GET lists the valid choices; PATCH changes what was sent and answers with the user payload', async (t) => {
  const user = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  const current = await app.request('GET', PREFERENCES, { token: accessToken });
  t.is(current.status, 200);
  t.is(current.body.data.language, 'en');
  t.is(current.body.data.timezone, 'UTC');
  t.true(current.body.data.timezones.includes('UTC'));
  t.true(current.body.data.timezones.includes('Europe/Paris'));
  t.deepEqual(current.body.data.languages[0], { value: 'en', label: 'English' });

  const changed = await app.request('PATCH', PREFERENCES, { token: accessToken, json: { timezone: 'Europe/Paris', nickname: 'ignored' } });
  t.is(changed.status, 200);
  t.is(changed.body.message, 'Preferences updated.');
  t.is(changed.body.data.timezone, 'Europe/Paris');
  t.is(changed.body.data.language, 'en');
  t.is(changed.body.data.has_usable_password, true);
  const both = await app.request('PATCH', PREFERENCES, { token: accessToken, json: { language: 'fr', timezone: 'UTC' } });
  t.like(both.body.data, { language: 'fr', timezone: 'UTC' });
  const stored = await app.database.knex('staff_users').where({ id: user.id }).first('language', 'timezone');
  t.deepEqual(stored, { language: 'fr', timezone: 'UTC' });
});

test.serial('preferences: invalid choices, wrong types and over-long values are 400 with data.errors; nothing changes', async (t) => {
  const user = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  const cases: [unknown, Record<string, string>][] = [
    [{ timezone: 'Mars/Olympus' }, { timezone: 'invalid_choice' }],
    [{ language: 'xx', timezone: 'Europe/Paris' }, { language: 'invalid_choice' }],
    [{ language: 5, timezone: true }, { language: 'invalid', timezone: 'invalid' }],
    [{ timezone: 'Europe/'.repeat(20) }, { timezone: 'max_length' }],
  ];
  for (const [json, codes] of cases) {
    const response = await app.request('PATCH', PREFERENCES, { token: accessToken, json });
    t.is(response.status, 400, JSON.stringify(json));
    t.is(response.body.message, 'Validation failed.');
    t.deepEqual(
      Object.fromEntries(Object.entries(response.body.data.errors as Record<string, { code: string }[]>).map(([field, errors]) => [field, errors[0]!.code])),
      codes,
    );
  }
  const malformed = await app.request('PATCH', PREFERENCES, { token: accessToken, body: '{"language":', headers: { 'content-type': 'application/json' } });
  t.is(malformed.status, 400);
  t.is(malformed.body.data.reason, 'invalid_json');
  const stored = await app.database.knex('staff_users').where({ id: user.id }).first('language', 'timezone');
  t.deepEqual(stored, { language: 'en', timezone: 'UTC' });
});

test.serial('video-call availability: an agent switches AVAILABLE and AWAY; 403 for others; 409 during a call', async (t) => {
  const agent = await staffUser(app, { video_call_agent: true });
  const { accessToken } = await pairDevice(app, clock, agent.id);
  const available = await app.request('POST', AVAILABILITY, { token: accessToken, json: { available: true } });
  t.is(available.status, 200);
  t.is(available.body.message, 'Availability set to AVAILABLE.');
  t.is(available.body.data.video_call.status, 'AVAILABLE');
  t.is(available.body.data.id, agent.id);
  const away = await app.request('POST', AVAILABILITY, { token: accessToken, json: { available: false } });
  t.is(away.body.data.video_call.status, 'AWAY');

  for (const json of [{}, { available: 'yes' }, { available: 1 }]) {
    const response = await app.request('POST', AVAILABILITY, { token: accessToken, json });
    t.is(response.status, 400, JSON.stringify(json));
    t.truthy(response.body.data.errors.available);
  }

  await app.database.knex('staff_video_agents').where({ user_id: agent.id }).update({ in_call: true });
  const busy = await app.request('POST', AVAILABILITY, { token: accessToken, json: { available: true } });
  t.is(busy.status, 409);
  t.is(busy.body.data.reason, 'call_in_progress');
  t.is((await app.database.knex('staff_video_agents').where({ user_id: agent.id }).first()).status, 'AWAY');

  const plain = await staffUser(app);
  const notAgent = await app.request('POST', AVAILABILITY, { token: (await pairDevice(app, clock, plain.id)).accessToken, json: { available: true } });
  t.is(notAgent.status, 403);
  t.deepEqual(notAgent.body, { status: false, message: 'You are not a video-call agent.', data: { reason: 'not_an_agent' } });
});

test.serial('password: the web form\u2019s errors in data.errors; on success web sessions end and this device stays signed in', async (t) => {
  const knex = app.database.knex;
  const user = await staffUser(app, { username: 'carla.password' });
  const { accessToken } = await pairDevice(app, clock, user.id);
  const change = (json: unknown) => app.request('POST', PASSWORD, { token: accessToken, json });
  const codes = (response: { body: { data: { errors: Record<string, { code: string }[]> } } }) =>
    Object.fromEntries(Object.entries(response.body.data.errors).map(([field, errors]) => [field, errors.map((error) => error.code)]));

  const wrongOld = await change({ old_password: 'nope', new_password1: 'a fresh long passphrase 7', new_password2: 'a fresh long passphrase 7' });
  t.is(wrongOld.status, 400);
  t.is(wrongOld.body.message, 'Validation failed.');
  t.deepEqual(codes(wrongOld), { old_password: ['password_incorrect'] });
  t.deepEqual(codes(await change({ old_password: PASSWORD_NOW, new_password1: 'a fresh long passphrase 7', new_password2: 'different one entirely 8' })), {
    new_password2: ['password_mismatch'],
  });
  t.deepEqual(codes(await change({ old_password: PASSWORD_NOW, new_password1: 'x7$kQz', new_password2: 'x7$kQz' })), { new_password2: ['password_too_short'] });
  t.deepEqual(codes(await change({})), { old_password: ['required'], new_password1: ['required'], new_password2: ['required'] });
  t.deepEqual(codes(await change({ old_password: 42, new_password1: ['x'], new_password2: 'y'.repeat(5000) })), {
    old_password: ['invalid'],
    new_password1: ['invalid'],
    new_password2: ['max_length'],
  });

  await knex('staff_web_sessions').insert({ id_hash: createHash('sha256').update('web-session').digest('hex'), user_id: user.id, csrf_token: 'x' });
  const ok = await change({ old_password: PASSWORD_NOW, new_password1: 'a fresh long passphrase 7', new_password2: 'a fresh long passphrase 7' });
  t.is(ok.status, 200);
  t.is(ok.body.message, 'Password changed.');
  t.is(ok.body.data.id, user.id);
  t.true(ok.body.data.has_usable_password);
  t.is((await knex('staff_web_sessions').where({ user_id: user.id })).length, 0);
  t.is((await app.request('GET', ME, { token: accessToken })).status, 200);
  const again = await change({ old_password: PASSWORD_NOW, new_password1: 'another long passphrase 9', new_password2: 'another long passphrase 9' });
  t.deepEqual(codes(again), { old_password: ['password_incorrect'] });
});
