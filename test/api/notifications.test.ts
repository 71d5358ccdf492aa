/** notifications/: the list with its filters and unread_count, the bell counter, marking read; notify() itself. */
import test from 'ava';
import { notify } from '../../src/modules/notifications/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, ME, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

const LIST = '/api/mobile/notifications/';
const COUNT = '/api/mobile/notifications/unread-count/';
const READ_ALL = '/api/mobile/notifications/read-all/';

async function raise(userIds: string[], kind: Parameters<typeof notify>[1]['kind'], title: string) {
  return app.database.knex.transaction((trx) => notify(trx, { userIds, kind, title, body: `${title} body`, target: { model: 'engine.alert', pk: title } }));
}

test.serial('notify writes one row per user in the caller transaction; a rollback leaves none', async (t) => {
  const one = await staffUser(app);
  const two = await staffUser(app);
  const ids = await raise([one.id, two.id, one.id], 'alert', 'dup');
  t.is(ids.length, 2);
  await app.database.knex
    .transaction(async (trx) => {
      await notify(trx, { userIds: [one.id], kind: 'alert', title: 'never' });
      throw new Error('roll back');
    })
    .catch(() => {});
  t.is(await app.database.knex('notifications').where({ title: 'never' }).first(), undefined);
  t.deepEqual(await app.database.knex.transaction((trx) => notify(trx, { userIds: [], kind: 'alert', title: 'nobody' })), []);
});

test.serial('list: own rows newest first with target, paging, unread=1, kind and unread_count; equal to me/ and unread-count/', async (t) => {
  const user = await staffUser(app);
  const stranger = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  await raise([user.id], 'alert', 'a1');
  await raise([user.id], 'approval_request', 'r1');
  await raise([user.id], 'alert', 'a2');
  await raise([stranger.id], 'alert', 'theirs');
  await app.database.knex('notifications').where({ user_id: user.id, title: 'a1' }).update({ read: true });

  const all = await app.request('GET', LIST, { token: accessToken });
  t.is(all.status, 200);
  t.deepEqual(all.body.data.results.map((row: { title: string }) => row.title), ['a2', 'r1', 'a1']);
  t.deepEqual(all.body.data.pagination, { page: 1, page_size: 20, total: 3, pages: 1 });
  t.is(all.body.data.unread_count, 2);
  const first = all.body.data.results[0];
  t.deepEqual(Object.keys(first).sort(), ['body', 'created_at', 'id', 'kind', 'read', 'target', 'title']);
  t.deepEqual(first.target, { model: 'engine.alert', pk: 'a2' });
  t.regex(first.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/);

  const page2 = await app.request('GET', `${LIST}?page=2&page_size=2`, { token: accessToken });
  t.deepEqual(page2.body.data.results.map((row: { title: string }) => row.title), ['a1']);
  t.deepEqual(page2.body.data.pagination, { page: 2, page_size: 2, total: 3, pages: 2 });
  const unread = await app.request('GET', `${LIST}?unread=1`, { token: accessToken });
  t.deepEqual(unread.body.data.results.map((row: { title: string }) => row.title), ['a2', 'r1']);
  const alerts = await app.request('GET', `${LIST}?kind=alert`, { token: accessToken });
  t.deepEqual(alerts.body.data.results.map((row: { title: string }) => row.title), ['a2', 'a1']);

  const count = await app.request('GET', COUNT, { token: accessToken });
  t.is(count.body.data.unread_count, 2);
  const me = await app.request('GET', ME, { token: accessToken });
  t.is(me.body.data.unread_notifications, 2);
});

test.serial('read: one row (another user\'s gives 404), then all; the counters follow', async (t) => {
  const user = await staffUser(app);
  const stranger = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  const [mine] = await raise([user.id], 'alert', 'mine');
  await raise([user.id], 'alert', 'mine too');
  const [theirs] = await raise([stranger.id], 'alert', 'theirs');

  const read = await app.request('POST', `/api/mobile/notifications/${mine}/read/`, { token: accessToken });
  t.is(read.status, 200);
  t.is(read.body.data.notification.read, true);
  t.is(read.body.data.unread_count, 1);
  const foreign = await app.request('POST', `/api/mobile/notifications/${theirs}/read/`, { token: accessToken });
  t.is(foreign.status, 404);
  t.false(foreign.body.status);
  t.false((await app.database.knex('notifications').where({ id: theirs }).first()).read);
  for (const bad of ['abc', '99999999999', '-1', '1.5']) {
    t.is((await app.request('POST', `/api/mobile/notifications/${bad}/read/`, { token: accessToken })).status, 404, bad);
  }

  const all = await app.request('POST', READ_ALL, { token: accessToken });
  t.is(all.status, 200);
  t.is(all.body.data.marked, 1);
  t.is((await app.request('GET', COUNT, { token: accessToken })).body.data.unread_count, 0);
  t.false((await app.database.knex('notifications').where({ id: theirs }).first()).read);
});

test.serial('errors: bad paging, filters and methods are 400/405 in the envelope; no token is 401', async (t) => {
  const user = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  for (const query of ['page=0', 'page=x', 'page_size=101', 'page_size=0', 'unread=yes', 'kind=nope', 'bogus=1', 'page=1&page=2']) {
    const response = await app.request('GET', `${LIST}?${query}`, { token: accessToken });
    t.is(response.status, 400, query);
    t.false(response.body.status);
  }
  t.is((await app.request('GET', `${LIST}?page_size=100`, { token: accessToken })).status, 200);
  t.is((await app.request('GET', LIST)).status, 401);
  t.is((await app.request('GET', COUNT)).status, 401);
  t.is((await app.request('POST', READ_ALL)).status, 401);
  t.is((await app.request('DELETE', LIST, { token: accessToken })).status, 405);
  t.is((await app.request('GET', READ_ALL, { token: accessToken })).status, 405);
});

test.serial('kind is looked up among the kinds themselves: __proto__, constructor, toString and hasOwnProperty are 400 naming kind', async (t) => {
  const user = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  for (const kind of ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf']) {
    const response = await app.request('GET', `${LIST}?kind=${encodeURIComponent(kind)}`, { token: accessToken });
    t.is(response.status, 400, `${kind}: ${response.text}`);
    t.false(response.body.status);
    t.is(response.body.data.parameter, 'kind', response.text);
  }
  t.is((await app.request('GET', `${LIST}?kind=report_done`, { token: accessToken })).status, 200);
});
