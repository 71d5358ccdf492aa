/**
 * The notifications inbox on the web (issue 37, point 3): every staff user reads their own
 * notifications at /admin/notifications/ without notification.view_notification, newest first,
 * unread marked; the header of every admin page shows the unread count; opening one marks it read
 * (and goes to its target when the user may view it); mark all read; a notification raised while
 * the inbox is open appears without reload, from the staff live socket (admin.js asks nothing
 * until a notification arrives on it). Another user's id answers
 * 404; CSRF and bad ids are checked over HTTP. axe-core on every page visited.
 */
import test from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { notify, type NotificationKind } from '../../src/modules/notifications/service.ts';
import { INBOX_PAGE_SIZE } from '../../src/modules/notifications/web.tsx';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations, logIn as signIn } from '../helpers/browser.ts';

const PASSWORD = 'amber-quarry-lantern-83';
let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>> | undefined;
let analystId: string;
let otherId: string;
const problems: string[] = [];

async function raise(userId: string, title: string, options: { kind?: NotificationKind; target?: { model: string; pk: string } } = {}): Promise<string> {
  const [id] = await app.database.knex.transaction((trx) => notify(trx, { userIds: [userId], kind: options.kind ?? 'report_done', title, body: `${title} body`, target: options.target ?? null }));
  return id!;
}

test.before(async () => {
  app = await startTestApp();
  const db = app.database.knex;
  const grants = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };
  analystId = (await createUser(db, { username: 'ana', password: PASSWORD, permissions: ['customer.view_customer'] }, grants)).id;
  otherId = (await createUser(db, { username: 'otto', password: PASSWORD, permissions: ['customer.view_customer'] }, grants)).id;
  await db('staff_users').update({ is_staff: true });
  if (browserAvailable) {
    browser = await launchBrowser();
    browser.page.on('console', (message) => {
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
    });
    browser.page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
  }
});
test.after.always(async () => {
  await browser?.close();
  await app?.close();
});

async function logIn(page: Page, username: string) {
  await signIn(page, app.url, username, PASSWORD);
}

async function headerCount(page: Page): Promise<string> {
  const badge = page.locator('#unread-count');
  return (await badge.isHidden()) ? '' : (await badge.innerText()).trim();
}

browserTest('an analyst reads only their own inbox; opening marks read, the header count drops, new ones appear live', async (t) => {
  const { page } = browser!;
  await raise(analystId, 'First report done');
  await raise(analystId, 'Second report done');
  const otherOnes = await raise(otherId, 'Otto only');
  await logIn(page, 'ana');

  // the header of an ordinary admin page shows the count
  await page.goto(`${app.url}/admin/`);
  t.is(await headerCount(page), '2');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the index with the badge');

  await page.click('#notifications-link');
  await page.waitForURL(`${app.url}/admin/notifications/`);
  const rows = page.locator('table.notifications-list tbody tr');
  t.is(await rows.count(), 2);
  t.deepEqual(await rows.locator('.notification-open').allInnerTexts(), ['Second report done', 'First report done'], 'newest first');
  t.is(await page.locator('tr.unread').count(), 2);
  t.notRegex(await page.locator('main').innerText(), /Otto only/);
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the inbox');

  // another user's notification is a 404 page, like a missing one
  const foreign = await page.request.get(`${app.url}/admin/notifications/`);
  t.is(foreign.status(), 200);
  const token = csrfTokenIn(await foreign.text());
  const stolen = await page.request.post(`${app.url}/admin/notifications/${otherOnes}/open/`, { form: { csrfmiddlewaretoken: token }, maxRedirects: 0 });
  t.is(stolen.status(), 404);
  t.false((await app.database.knex('notifications').where({ id: otherOnes }).first('read')).read);

  // opening one marks it read; it has no target, so back to the inbox with a message
  await Promise.all([page.waitForURL(`${app.url}/admin/notifications/`), rows.locator('.notification-open', { hasText: 'First report done' }).click()]);
  t.is(await headerCount(page), '1');
  t.regex(await page.locator('.messages').innerText(), /First report done.*marked as read/);
  t.is(await page.locator('tr.unread').count(), 1);
  t.regex(await page.locator('tr.read').innerText(), /First report done/);
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the inbox after opening');

  // raised while the page is open: it appears without reload, and the count goes up; the page
  // learns of it from the live socket (it asked nothing while it was quiet)
  await page.waitForFunction(() => document.documentElement.dataset.live === 'open');
  await page.evaluate(() => ((window as unknown as { marker: number }).marker = 1));
  const asked: string[] = [];
  page.on('request', (request) => {
    if (request.url().includes('/admin/notifications/unread.json')) asked.push(request.url());
  });
  await new Promise((resolve) => setTimeout(resolve, 6000));
  t.deepEqual(asked, [], 'no polling while nothing happens');
  await raise(analystId, 'Third report done');
  await page.locator('.notification-open', { hasText: 'Third report done' }).waitFor({ timeout: 15_000 });
  t.is(await page.evaluate(() => (window as unknown as { marker?: number }).marker), 1, 'the page was not reloaded');
  t.is(await headerCount(page), '2');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the refreshed inbox');

  // mark all read
  await Promise.all([page.waitForURL(`${app.url}/admin/notifications/`), page.click('button:text-is("Mark all as read")')]);
  t.is(await headerCount(page), '');
  t.is(await page.locator('tr.unread').count(), 0);
  t.regex(await page.locator('.messages').innerText(), /2 notifications marked as read/);
  t.deepEqual(await seriousViolations(page), [], 'axe-core after mark all read');
  t.false((await app.database.knex('notifications').where({ id: otherOnes }).first('read')).read, "the other user's stays unread");

  // the generic model admin still needs the permission
  const generic = await page.goto(`${app.url}/admin/notification/notification/`);
  t.is(generic!.status(), 403);
  t.deepEqual(problems, []);
});

test.serial('HTTP: CSRF, bad and foreign ids, the target redirect, unread.json, pages', async (t) => {
  const db = app.database.knex;
  await db('notifications').whereIn('user_id', [analystId, otherId]).delete();
  const mine = await raise(analystId, 'Customer flagged', { kind: 'alert', target: { model: 'customer.customer', pk: '42' } });
  const hidden = await raise(analystId, 'Report ready', { target: { model: 'report.reportresult', pk: '7' } });
  const foreign = await raise(otherId, 'Not yours');
  const client = adminClient(app.url);
  t.is((await client.login('ana', PASSWORD)).status, 302);
  const inbox = await client.get('/admin/notifications/');
  t.is(inbox.status, 200);
  t.regex(inbox.text, /id="unread-count"[^>]*>2</);
  const csrf = csrfTokenIn(inbox.text);

  const counted = await client.get('/admin/notifications/unread.json');
  t.is(counted.status, 200);
  t.deepEqual(JSON.parse(counted.text), { unread: 2, newest_id: hidden });

  // CSRF: missing and wrong tokens are refused and change nothing
  t.is((await client.post(`/admin/notifications/${mine}/open/`, {})).status, 403);
  t.is((await client.post(`/admin/notifications/${mine}/open/`, { csrfmiddlewaretoken: 'x'.repeat(43) })).status, 403);
  t.is((await client.post('/admin/notifications/read-all/', { csrfmiddlewaretoken: 'nope' })).status, 403);
  t.is((await client.post(`/admin/notifications/${mine}/open/`, { csrfmiddlewaretoken: csrf }, { origin: 'https://evil.example' })).status, 403);
  t.is(await db('notifications').where({ user_id: analystId, read: false }).count({ n: '*' }).first().then((row) => Number(row!.n)), 2);

  // bad and foreign ids: 404
  for (const id of ['abc', '-1', '1e3', '9'.repeat(19), '999999999', foreign]) {
    t.is((await client.post(`/admin/notifications/${encodeURIComponent(id)}/open/`, { csrfmiddlewaretoken: csrf })).status, 404, id);
  }
  t.false((await db('notifications').where({ id: foreign }).first('read')).read);
  t.is((await client.get(`/admin/notifications/${mine}/open/`)).status, 404, 'opening is a POST');

  // a target the user may view: redirected to its admin page; one they may not: back to the inbox
  const opened = await client.post(`/admin/notifications/${mine}/open/`, { csrfmiddlewaretoken: csrf });
  t.is(opened.status, 302);
  t.is(opened.location, '/admin/customer/customer/42/change/');
  const notViewable = await client.post(`/admin/notifications/${hidden}/open/`, { csrfmiddlewaretoken: csrf });
  t.is(notViewable.location, '/admin/notifications/');
  t.deepEqual(JSON.parse((await client.get('/admin/notifications/unread.json')).text), { unread: 0, newest_id: hidden });
  t.regex((await client.get('/admin/notifications/')).text, /you may not view what it is about/);

  // pages
  await db('notifications').insert(Array.from({ length: INBOX_PAGE_SIZE + 3 }, (_, index) => ({ user_id: analystId, kind: 'report_done', title: `Bulk ${index}`, body: '' })));
  const second = await client.get('/admin/notifications/?page=2');
  t.is(second.status, 200);
  t.regex(second.text, /Page 2 of 2/);
  t.is((second.text.match(/class="notification (?:un)?read"/g) ?? []).length, 5);
  for (const bad of ['0', 'x', '-2', '1234567']) t.is((await client.get(`/admin/notifications/?page=${bad}`)).status, 400, bad);
  t.regex((await client.get('/admin/notifications/?page=9')).text, /No notifications on this page/);

  // mark all read answers with the user's own only
  const all = await client.post('/admin/notifications/read-all/', { csrfmiddlewaretoken: csrf });
  t.is(all.status, 302);
  t.is(Number((await db('notifications').where({ user_id: analystId, read: false }).count({ n: '*' }).first())!.n), 0);
  t.false((await db('notifications').where({ id: foreign }).first('read')).read);

  // signed out: the login page, not the data
  const anonymous = adminClient(app.url);
  const refused = await anonymous.get('/admin/notifications/unread.json');
  t.is(refused.status, 302);
  t.regex(refused.location!, /^\/admin\/login\//);
});
