/**
 * The web admin's door to the staff live socket (issue 37, the live inbox): /admin/live/ signs in
 * by the admin session cookie, only from a page of this site (Origin naming the Host), and closes
 * when the session ends: logout (at once, on every process), idle timeout or a password change
 * (at the next heartbeat), a deactivated account (at once). A web socket takes no token logins.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { WebSocket } from 'ws';
import { CLOSE_ACCOUNT_INACTIVE, CLOSE_SESSION_ENDED, StaffLive, WEB_LIVE_PATH } from '../../src/realtime/staff.ts';
import { notify } from '../../src/modules/notifications/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { connectLive } from '../helpers/live.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

const PASSWORD = 'correct horse battery staple 42';
let app: TestApp;
let clock: TestClock;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

/** A staff user signed in to the web admin: their cookie header and client. */
async function signedIn(permissions: string[] = ['customer.view_customer']) {
  const user = await staffUser(app, { permissions });
  await app.database.knex('staff_users').where({ id: user.id }).update({ is_staff: true });
  const client = adminClient(app.url);
  const login = await client.login(user.username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  return { user, client, cookie: client.jar.header() };
}

function webSocket(cookie: string | null, origin: string | null = app.url) {
  return connectLive(app.url, { path: WEB_LIVE_PATH, headers: { ...(cookie ? { cookie } : {}), ...(origin ? { origin } : {}) } });
}

/** The HTTP status an upgrade was refused with (or 'open'). */
function upgradeOutcome(headers: Record<string, string>, url = `${app.url.replace(/^http/, 'ws')}${WEB_LIVE_PATH}`): Promise<number | 'open'> {
  return new Promise((resolve) => {
    const socket = new WebSocket(url, { headers });
    socket.once('open', () => {
      socket.close();
      resolve('open');
    });
    socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
    socket.once('error', () => {});
  });
}

async function raise(userId: string, title: string) {
  await app.database.knex.transaction((trx) => notify(trx, { userIds: [userId], kind: 'report_done', title, body: '', target: null }));
}

test.serial('a signed-in page gets the login frame and its own notifications, not anyone else’s', async (t) => {
  const ana = await signedIn();
  const otto = await signedIn();
  const live = await webSocket(ana.cookie);
  const login = await live.next((frame) => frame.type === 'login');
  t.regex(login.token, /^[0-9a-f-]{36}$/);
  t.true(login.permissions.includes('customer.customer'));
  await raise(otto.user.id, 'for otto');
  await raise(ana.user.id, 'for ana');
  const frame = await live.next((candidate) => candidate.event === 'broadcast');
  t.is(frame.data.type, 'notification');
  t.is(frame.data.data.title, 'for ana');
  t.is(frame.client_id, login.token);
  t.true(await live.silent((candidate) => candidate.event === 'broadcast', 300), 'otto’s notification never reaches ana');
  live.close();
});

test.serial('refused before any frame: no cookie or an unknown one (401), another site or no Origin (403)', async (t) => {
  const ana = await signedIn();
  t.is(await upgradeOutcome({ origin: app.url }), 401);
  t.is(await upgradeOutcome({ origin: app.url, cookie: 'warden_session=forged' }), 401);
  t.is(await upgradeOutcome({ origin: 'https://evil.example', cookie: ana.cookie }), 403);
  t.is(await upgradeOutcome({ cookie: ana.cookie }), 403);
  t.is(await upgradeOutcome({ origin: 'not a url', cookie: ana.cookie }), 403);
  t.is(await upgradeOutcome({ origin: app.url, cookie: ana.cookie }), 'open');
});

test.serial('logout closes the page’s sockets at once; the cookie then opens none', async (t) => {
  const ana = await signedIn();
  const live = await webSocket(ana.cookie);
  await live.next((frame) => frame.type === 'login');
  const page = await ana.client.get('/admin/');
  const logout = await ana.client.post('/admin/logout/', { csrfmiddlewaretoken: csrfTokenIn(page.text) });
  t.is(logout.status, 200);
  t.is((await live.closed).code, CLOSE_SESSION_ENDED);
  t.is(await upgradeOutcome({ origin: app.url, cookie: ana.cookie }), 401);
});

test.serial('a deactivated account’s web sockets close at once', async (t) => {
  const ana = await signedIn();
  const live = await webSocket(ana.cookie);
  await live.next((frame) => frame.type === 'login');
  await app.database.knex('staff_users').where({ id: ana.user.id }).update({ is_active: false });
  t.is((await live.closed).code, CLOSE_ACCOUNT_INACTIVE);
});

test.serial('a web socket takes no token login: a device token of another user changes nothing', async (t) => {
  const ana = await signedIn();
  const other = await staffUser(app, { permissions: ['customer.view_customer'] });
  await app.database.knex('staff_users').where({ id: other.id }).update({ is_staff: true });
  const paired = await pairDevice(app, clock, other.id);
  const live = await webSocket(ana.cookie);
  await live.next((frame) => frame.type === 'login');
  live.ws.send(JSON.stringify({ type: 'login', payload: { token: paired.accessToken } }));
  t.true(await live.silent((frame) => frame.type === 'login' || frame.type === 'login_failed', 300));
  await raise(other.id, 'for the other user');
  await raise(ana.user.id, 'still ana');
  const frame = await live.next((candidate) => candidate.event === 'broadcast');
  t.is(frame.data.data.title, 'still ana');
  live.close();
});

test.serial('heartbeat: a session gone idle, or whose password changed, closes its sockets', async (t) => {
  const context = app.context;
  const live = new StaffLive(context.db, context.backoffice.site, { subscribe() {} } as never, context.logger, undefined, { heartbeatMs: 100, webSessionIdleSeconds: 600 });
  const server = http.createServer();
  await live.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    const idle = await signedIn();
    const changed = await signedIn();
    const fresh = await signedIn();
    const open = async (cookie: string) => {
      const socket = await connectLive(base, { path: WEB_LIVE_PATH, headers: { cookie, origin: base } });
      await socket.next((frame) => frame.type === 'login');
      return socket;
    };
    const [idleLive, changedLive, freshLive] = await Promise.all([open(idle.cookie), open(changed.cookie), open(fresh.cookie)]);
    const db = app.database.knex;
    await db('staff_web_sessions').where({ user_id: idle.user.id }).update({ last_seen_at: db.raw("now() - interval '11 minutes'") });
    await db('staff_users').where({ id: changed.user.id }).update({ password_changed_at: db.raw("now() + interval '1 second'") });
    t.is((await idleLive.closed).code, CLOSE_SESSION_ENDED);
    t.is((await changedLive.closed).code, CLOSE_SESSION_ENDED);
    t.is(freshLive.ws.readyState, WebSocket.OPEN);
    freshLive.close();
  } finally {
    await live.close();
    await new Promise((resolve) => server.close(resolve));
  }
});
