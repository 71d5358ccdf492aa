/**
 * The staff live socket follows the user's current state, not the state at login: deactivation,
 * deletion and device revocation close the sockets; a permission taken away (from a group, or by
 * leaving a group) stops that model's broadcasts at once; changes made by another process (the
 * command line) or straight in the database count as well, since the database announces them.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { CLOSE_ACCOUNT_INACTIVE, CLOSE_DEVICE_REVOKED } from '../../src/realtime/staff.ts';
import { createGroup, deactivateUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { connectLive, type LiveClient } from '../helpers/live.ts';
import { installClock, operator, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

const DATA = '/api/mobile/data/';
const root = path.resolve(import.meta.dirname, '../..');
const grants = () => ({ actor: operator, known: new Set(permissionCodenames()) });

let app: TestApp;
let clock: TestClock;
let adminToken: string;

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const admin = await staffUser(app, { is_superuser: true });
  adminToken = (await pairDevice(app, clock, admin.id)).accessToken;
});
/** Every client opened here: closed before the app, so a failed test leaves no socket holding the server open. */
const clients: LiveClient[] = [];
test.after.always(async () => {
  for (const client of clients) client.ws.terminate();
  await app?.close();
});

let sequence = 0;

/** Publishes one broadcast as every writer does (NOTIFY after its commit); returns its type, unique per call. */
async function broadcast(model: string | null, to = 'mainstream'): Promise<string> {
  const type = `probe${++sequence}`;
  await app.context.live.publish(app.database.knex, { to, type, model, data: { n: sequence } });
  return type;
}

/** The close code, or null when the socket is still open after `ms`. */
async function closedWithin(live: LiveClient, ms = 3000): Promise<number | null> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)));
  const outcome = await Promise.race([live.closed.then((closed) => closed.code), timeout]);
  clearTimeout(timer);
  return outcome;
}

async function loggedIn(userId: string): Promise<{ live: LiveClient; permissions: string[]; deviceId: string }> {
  const paired = await pairDevice(app, clock, userId);
  const live = await connectLive(app.url);
  clients.push(live);
  const reply = await live.login(paired.accessToken);
  if (reply.type !== 'login') throw new Error(`login refused: ${JSON.stringify(reply)}`);
  return { live, permissions: reply.permissions!, deviceId: paired.deviceId };
}

const broadcastFrames = (live: LiveClient) => live.frames.filter((frame) => frame.event === 'broadcast');

/** Runs the command line as its own process against the test database. */
function cli(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: app.database.url, LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('exit', (code) => resolve({ code, output }));
  });
}

test.serial('deactivating a user through the mobile data API closes their sockets and nothing more reaches them', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer'] });
  const bystander = await staffUser(app, { permissions: ['customer.view_customer'] });
  const first = await loggedIn(user.id);
  const second = await loggedIn(user.id);
  const other = await loggedIn(bystander.id);
  const before = await broadcast('customer.customer');
  t.truthy(await first.live.next((frame) => frame.data?.type === before));

  const patched = await app.request('PATCH', `${DATA}auth/user/${user.id}/`, { token: adminToken, json: { is_active: false } });
  t.is(patched.status, 200, patched.text);
  // published after the deactivation committed: it must not reach the deactivated user
  const after = await broadcast('customer.customer');
  const personal = await broadcast(null, user.id);

  for (const { live } of [first, second]) {
    t.is(await closedWithin(live), CLOSE_ACCOUNT_INACTIVE);
    // the spec's refusal frame, no reason given, then the close
    t.true(live.frames.some((frame) => frame.type === 'login_failed'));
    t.false(broadcastFrames(live).some((frame) => frame.data.type === after || frame.data.type === personal));
  }
  // other users' sockets are untouched
  t.truthy(await other.live.next((frame) => frame.data?.type === after));
  t.is(await closedWithin(other.live, 200), null);
  other.live.close();
});

test.serial('deactivating through the staff service (what `warden staff deactivate` runs) closes the sockets', async (t) => {
  const user = await staffUser(app, { permissions: ['engine.view_alert'] });
  const { live } = await loggedIn(user.id);
  await deactivateUser(app.database.knex, user.username, operator);
  const after = await broadcast('engine.alert');
  t.is(await closedWithin(live), CLOSE_ACCOUNT_INACTIVE);
  t.false(broadcastFrames(live).some((frame) => frame.data.type === after));
});

test.serial('removing a permission from a group stops that model\'s broadcasts; a model still permitted keeps flowing', async (t) => {
  const group = await createGroup(app.database.knex, { name: 'Live watchers', permissions: ['customer.view_customer'] }, grants());
  const user = await staffUser(app, { groups: ['Live watchers'], permissions: ['engine.view_alert'] });
  const { live, permissions } = await loggedIn(user.id);
  t.true(permissions.includes('customer.customer'));
  t.true(permissions.includes('engine.alert'));
  const customerBefore = await broadcast('customer.customer');
  t.truthy(await live.next((frame) => frame.data?.type === customerBefore));

  const patched = await app.request('PATCH', `${DATA}auth/group/${group.id}/`, { token: adminToken, json: { permissions: [] } });
  t.is(patched.status, 200, patched.text);
  const customerAfter = await broadcast('customer.customer');
  const alertAfter = await broadcast('engine.alert');
  const everyone = await broadcast(null);
  t.truthy(await live.next((frame) => frame.data?.type === alertAfter));
  t.truthy(await live.next((frame) => frame.data?.type === everyone));
  t.false(broadcastFrames(live).some((frame) => frame.data.type === customerAfter));
  t.true(await live.silent((frame) => frame.data?.type === customerAfter, 300));
  t.is(await closedWithin(live, 100), null);

  // given back: the model's broadcasts come again, without a new login
  const restored = await app.request('PATCH', `${DATA}auth/group/${group.id}/`, { token: adminToken, json: { permissions: ['customer.view_customer'] } });
  t.is(restored.status, 200, restored.text);
  const customerAgain = await broadcast('customer.customer');
  t.truthy(await live.next((frame) => frame.data?.type === customerAgain));
  live.close();
});

test.serial('leaving a group (deleted straight in the database) stops the group\'s models; the trigger announces it', async (t) => {
  await createGroup(app.database.knex, { name: 'Alert desk', permissions: ['engine.view_alert'] }, grants());
  const user = await staffUser(app, { groups: ['Alert desk'], permissions: ['customer.view_customer'] });
  const { live } = await loggedIn(user.id);
  const alertBefore = await broadcast('engine.alert');
  t.truthy(await live.next((frame) => frame.data?.type === alertBefore));

  // no service code runs: a plain DELETE, as psql or another tool would do it
  await app.database.knex('staff_user_groups').where({ user_id: user.id }).delete();
  const alertAfter = await broadcast('engine.alert');
  const customerAfter = await broadcast('customer.customer');
  t.truthy(await live.next((frame) => frame.data?.type === customerAfter));
  t.false(broadcastFrames(live).some((frame) => frame.data.type === alertAfter));
  t.true(await live.silent((frame) => frame.data?.type === alertAfter, 300));

  // a superuser flag taken away in the database narrows the list the same way
  const superuser = await staffUser(app, { is_superuser: true });
  const boss = await loggedIn(superuser.id);
  const caseBefore = await broadcast('engine.alert');
  t.truthy(await boss.live.next((frame) => frame.data?.type === caseBefore));
  await app.database.knex('staff_users').where({ id: superuser.id }).update({ is_superuser: false });
  const caseAfter = await broadcast('engine.alert');
  const everyone = await broadcast(null);
  t.truthy(await boss.live.next((frame) => frame.data?.type === everyone));
  t.false(broadcastFrames(boss.live).some((frame) => frame.data.type === caseAfter));
  live.close();
  boss.live.close();
});

test.serial('a deactivation made by another process (the command line, its own connection and no live socket) closes the socket', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer'] });
  const { live } = await loggedIn(user.id);
  const before = await broadcast('customer.customer');
  t.truthy(await live.next((frame) => frame.data?.type === before));

  const deactivated = await cli(['staff', 'deactivate', '--username', user.username]);
  t.is(deactivated.code, 0, deactivated.output);
  const after = await broadcast('customer.customer');
  t.is(await closedWithin(live), CLOSE_ACCOUNT_INACTIVE);
  t.false(broadcastFrames(live).some((frame) => frame.data.type === after));
});

test.serial('a device revoked or a user deleted straight in the database closes the sockets', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer'] });
  const kept = await loggedIn(user.id);
  const revoked = await loggedIn(user.id);
  await app.database.knex('mobile_devices').where({ id: revoked.deviceId }).update({ revoked_at: new Date(), revoked_reason: 'admin' });
  t.is(await closedWithin(revoked.live), CLOSE_DEVICE_REVOKED);
  // the user's other device is not affected
  const still = await broadcast('customer.customer');
  t.truthy(await kept.live.next((frame) => frame.data?.type === still));

  await app.database.knex('staff_users').where({ id: user.id }).delete();
  const after = await broadcast('customer.customer');
  const code = await closedWithin(kept.live);
  // the deletion takes the devices with it: either announcement may close the socket first
  t.true(code === CLOSE_ACCOUNT_INACTIVE || code === CLOSE_DEVICE_REVOKED, `closed with ${code}`);
  t.false(broadcastFrames(kept.live).some((frame) => frame.data.type === after));
});

test.serial('broadcasts cost no database read per message: grants are reloaded on change, not per delivery', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer'] });
  const sockets = await Promise.all([loggedIn(user.id), loggedIn(user.id), loggedIn(user.id)]);
  const statements: string[] = [];
  const listener = (query: { sql: string }) => statements.push(query.sql);
  app.context.db.on('query', listener);
  try {
    const types: string[] = [];
    for (let index = 0; index < 20; index++) types.push(await broadcast('customer.customer'));
    for (const { live } of sockets) for (const type of types) t.truthy(await live.next((frame) => frame.data?.type === type));
  } finally {
    app.context.db.removeListener('query', listener);
  }
  // only the 20 publishes themselves
  t.is(statements.filter((sql) => !/pg_notify/.test(sql)).length, 0, statements.join('\n'));
  for (const { live } of sockets) live.close();
});
