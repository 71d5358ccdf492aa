/** The staff live socket: login frames, permission filter, broadcasts, re-login, revocation, heartbeats. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { WebSocket } from 'ws';
import { StaffLive, CLOSE_DEVICE_REVOKED } from '../../src/realtime/staff.ts';
import { createIdentity } from '../../src/modules/mobile/guard.ts';
import { notify } from '../../src/modules/notifications/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { connectLive, LIVE_PATH } from '../helpers/live.ts';
import { installClock, LOGOUT, pairDevice, REFRESH, staffUser, type TestClock } from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

test.serial('login: the reply carries a socket token and the models the user may view; a bad token gets login_failed with no reason', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer', 'engine.change_alert'] });
  const paired = await pairDevice(app, clock, user.id);
  const live = await connectLive(app.url);
  const reply = await live.login(paired.accessToken);
  t.is(reply.type, 'login');
  t.regex(reply.token!, /^[0-9a-f-]{36}$/);
  // change implies view (the web admin's rule); models without any permission are not listed
  t.deepEqual(reply.permissions, [...reply.permissions!].sort());
  t.true(reply.permissions!.includes('customer.customer'));
  t.true(reply.permissions!.includes('engine.alert'));
  t.false(reply.permissions!.includes('transaction.financialevent'));

  const other = await connectLive(app.url);
  t.deepEqual(await other.login('not-a-token'), { type: 'login_failed' });
  t.deepEqual(await other.login(''), { type: 'login_failed' });
  live.close();
  other.close();
});

test.serial('nothing before login counts: other frames and garbage get no answer and no broadcasts', async (t) => {
  const user = await staffUser(app, { is_superuser: true });
  const live = await connectLive(app.url);
  live.ws.send('not json');
  live.ws.send(JSON.stringify({ type: 'subscribe', payload: {} }));
  live.ws.send(JSON.stringify(['login']));
  await app.context.live.publish(app.database.knex, { to: 'mainstream', type: 'ping', data: {} });
  await app.context.live.publish(app.database.knex, { to: user.id, type: 'ping', data: {} });
  t.true(await live.silent(() => true, 400));
  live.close();
});

test.serial('broadcasts: mainstream and one user, filtered by model permission, in the spec envelope', async (t) => {
  const viewer = await staffUser(app, { permissions: ['customer.view_customer'] });
  const outsider = await staffUser(app, { permissions: ['engine.view_alert'] });
  const viewerLive = await connectLive(app.url);
  const outsiderLive = await connectLive(app.url);
  await viewerLive.login((await pairDevice(app, clock, viewer.id)).accessToken);
  await outsiderLive.login((await pairDevice(app, clock, outsider.id)).accessToken);
  const db = app.database.knex;

  const before = Date.now();
  await app.context.live.publish(db, { to: 'mainstream', type: 'customerRisk', model: 'customer.customer', data: { pk: 'c-1' } });
  const frame = await viewerLive.next((f) => f.data?.type === 'customerRisk');
  t.is(frame.event, 'broadcast');
  t.is(typeof frame.client_id, 'string');
  t.true(frame.timestamp >= before && frame.timestamp <= Date.now());
  t.regex(frame.correlation_id, /^[0-9a-f-]{36}$/);
  t.deepEqual(frame.data, { to: 'mainstream', type: 'customerRisk', model: 'customer.customer', data: { pk: 'c-1' } });
  t.true(await outsiderLive.silent((f) => f.data?.type === 'customerRisk'));

  await app.context.live.publish(db, { to: 'mainstream', type: 'hello', data: {} });
  t.truthy(await viewerLive.next((f) => f.data?.type === 'hello'));
  t.truthy(await outsiderLive.next((f) => f.data?.type === 'hello'));

  await app.context.live.publish(db, { to: outsider.id, type: 'personal', data: {} });
  t.is((await outsiderLive.next((f) => f.data?.type === 'personal')).data.to, outsider.id);
  t.true(await viewerLive.silent((f) => f.data?.type === 'personal'));

  // inside a transaction the message goes out at commit, and never on rollback
  await db
    .transaction(async (trx) => {
      await app.context.live.publish(trx, { to: 'mainstream', type: 'rolledBack', data: {} });
      throw new Error('roll back');
    })
    .catch(() => {});
  t.true(await viewerLive.silent((f) => f.data?.type === 'rolledBack'));
  viewerLive.close();
  outsiderLive.close();
});

test.serial('record changes through the write chain and new notifications reach the socket', async (t) => {
  // A report of a kind needs view on what the kind reads (transactions_above: financial events).
  const user = await staffUser(app, { permissions: ['report.add_report', 'report.view_report', 'transaction.view_financialevent'] });
  const paired = await pairDevice(app, clock, user.id);
  const live = await connectLive(app.url);
  await live.login(paired.accessToken);
  const created = await app.request('POST', '/api/mobile/data/report/report/', {
    token: paired.accessToken,
    json: { name: 'Big payments', kind: 'transactions_above', parameters: { threshold: 5000 } },
  });
  t.is(created.status, 201, created.text);
  const change = await live.next((f) => f.data?.type === 'recordChange');
  t.deepEqual(change.data, { to: 'mainstream', type: 'recordChange', model: 'report.report', data: { model: 'report.report', pk: String(created.body.data.object.pk), operation: 'add' } });

  await app.database.knex.transaction((trx) =>
    notify(trx, { userIds: [user.id], kind: 'report_done', title: 'Report ready', body: '3 rows', target: { model: 'report.reportresult', pk: '7' } }),
  );
  const notification = await live.next((f) => f.data?.type === 'notification');
  t.is(notification.data.to, user.id);
  t.like(notification.data.data, { kind: 'report_done', title: 'Report ready', body: '3 rows', target: { model: 'report.reportresult', pk: '7' } });
  live.close();
});

test.serial('a new login on the same socket after a refresh is accepted; revoking the device closes its sockets', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer'] });
  const paired = await pairDevice(app, clock, user.id);
  const live = await connectLive(app.url);
  const first = await live.login(paired.accessToken);
  clock.advance(3700);
  // the access token expired: a re-login with it fails, and the socket stays open
  t.deepEqual(await live.login(paired.accessToken), { type: 'login_failed' });
  await app.context.live.publish(app.database.knex, { to: 'mainstream', type: 'afterFailedLogin', data: {} });
  t.true(await live.silent((f) => f.data?.type === 'afterFailedLogin'));
  const refreshed = await app.request('POST', REFRESH, { json: { device_id: paired.deviceId, refresh_token: paired.refreshToken } });
  t.is(refreshed.status, 200);
  const second = await live.login(refreshed.body.data.access_token);
  t.is(second.type, 'login');
  t.not(second.token, first.token);

  const sibling = await connectLive(app.url);
  t.is((await sibling.login(refreshed.body.data.access_token)).type, 'login');
  await app.request('POST', LOGOUT, { token: refreshed.body.data.access_token });
  t.is((await live.closed).code, CLOSE_DEVICE_REVOKED);
  t.is((await sibling.closed).code, CLOSE_DEVICE_REVOKED);
  // and the revoked device cannot log in again
  const again = await connectLive(app.url);
  t.deepEqual(await again.login(refreshed.body.data.access_token), { type: 'login_failed' });
  again.close();
});

test.serial('an inactive account cannot log in', async (t) => {
  const user = await staffUser(app, { permissions: ['customer.view_customer'] });
  const paired = await pairDevice(app, clock, user.id);
  await app.database.knex('staff_users').where({ id: user.id }).update({ is_active: false });
  const live = await connectLive(app.url);
  t.deepEqual(await live.login(paired.accessToken), { type: 'login_failed' });
  live.close();
});

test.serial('heartbeats: a socket that stops answering pings is closed; one that never logs in is closed after the login timeout', async (t) => {
  const context = app.context;
  const live = new StaffLive(context.db, context.backoffice.site, { subscribe() {} } as never, context.logger, undefined, { heartbeatMs: 100, loginTimeoutMs: 250 });
  live.useIdentity(createIdentity(context));
  const server = http.createServer();
  await live.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `ws://127.0.0.1:${(server.address() as AddressInfo).port}${LIVE_PATH}`;
  try {
    const user = await staffUser(app, { permissions: ['customer.view_customer'] });
    const paired = await pairDevice(app, clock, user.id);
    const open = (socket: WebSocket) => new Promise((resolve) => socket.once('open', resolve));
    const healthy = new WebSocket(url);
    const dead = new WebSocket(url);
    const silent = new WebSocket(url);
    await Promise.all([open(healthy), open(dead), open(silent)]);
    for (const socket of [healthy, dead]) socket.send(JSON.stringify({ type: 'login', payload: { token: paired.accessToken } }));
    await new Promise((resolve) => setTimeout(resolve, 150));
    t.is(live.loggedInCount, 2);
    // a paused client reads nothing, so it never answers a ping
    dead.pause();
    const closed = (socket: WebSocket) => new Promise<void>((resolve) => socket.once('close', () => resolve()));
    const deadClosed = closed(dead);
    await closed(silent);
    // the server dropped the paused one; the client sees it once it reads again
    for (let waited = 0; live.loggedInCount > 1 && waited < 3000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
    t.is(live.loggedInCount, 1);
    dead.resume();
    await deadClosed;
    t.is(healthy.readyState, WebSocket.OPEN);
    healthy.close();
  } finally {
    await live.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

test.serial('other upgrade paths are not taken: the socket lives at the websocket_url path only', async (t) => {
  const socket = new WebSocket(`${app.url.replace(/^http/, 'ws')}/api/mobile/elsewhere/`);
  const outcome = await new Promise<string>((resolve) => {
    socket.once('open', () => resolve('open'));
    socket.once('error', () => resolve('refused'));
  });
  t.is(outcome, 'refused');
});
