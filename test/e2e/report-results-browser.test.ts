/**
 * Report results on the web (issue 37): the result's page shows its first rows and links the next
 * page and the CSV file; the rows page pages through them; the CSV is the mobile API's file. Only
 * the result's requester (and superusers) read it, as in the mobile API: a colleague with the same
 * permissions gets 404, a user without view permission 403. axe-core on every page visited.
 */
import test from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient } from '../helpers/admin.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations, logIn as signIn } from '../helpers/browser.ts';
import { defineEvents, hoursAgo } from '../helpers/fixtures.ts';
import { installClock, pairDevice } from '../helpers/mobile.ts';
import { WEB_ROWS_PAGE } from '../../src/modules/reports/web.tsx';

const PASSWORD = 'amber-quarry-lantern-83';
const PERMISSIONS = ['report.view_report', 'report.add_report', 'report.view_reportresult', 'transaction.view_financialevent', 'customer.view_customer'];
let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
let resultId: number;
const problems: string[] = [];

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const clock = installClock(app);
  const db = app.database.knex;
  const grants = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };
  const rita = await createUser(db, { username: 'rita', password: PASSWORD, permissions: PERMISSIONS }, grants);
  await createUser(db, { username: 'colleague', password: PASSWORD, permissions: PERMISSIONS }, grants);
  await createUser(db, { username: 'outsider', password: PASSWORD, permissions: ['customer.view_customer'] }, grants);
  await db('staff_users').update({ is_staff: true });
  const merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'rw-1' }] });
  const payments = Array.from({ length: WEB_ROWS_PAGE + 12 }, (_, index) => ({
    customer_ref: 'rw-1', event_slug: 'deposit', amount: String(20000 + index), currency: 'EUR', transaction_ref: `rw-${index}`, io_type: 0, event_date: hoursAgo(2),
  }));
  const stored = await app.request('POST', '/api/transaction/financial/upsert/', { token: merchant, json: payments });
  if (stored.status !== 200) throw new Error(stored.text);
  const token = (await pairDevice(app, clock, rita.id)).accessToken;
  const report = await app.request('POST', '/api/mobile/data/report/report/', { token, json: { name: 'Large payments', kind: 'transactions_above', parameters: { threshold: 10000, days: 30 } } });
  const started = await app.request('POST', `/api/mobile/reports/${report.body.data.object.pk}/run/`, { token });
  resultId = started.body.data.result_id;
  for (let tries = 0; tries < 200; tries++) {
    if ((await db('report_results').where({ id: resultId }).first('status')).status === 'done') break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  browser = await launchBrowser();
  browser.page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
});
test.after.always(async () => {
  await browser?.close();
  await app?.close();
});

async function logIn(page: Page, username: string) {
  await signIn(page, app.url, username, PASSWORD);
}

browserTest("a result's rows on its page, the next page, and the CSV file", async (t) => {
  const { page } = browser;
  await logIn(page, 'rita');
  await page.goto(`${app.url}/admin/report/reportresult/${resultId}/change/`);
  const section = page.locator('.report-result-rows');
  t.regex(await section.innerText(), new RegExp(`${WEB_ROWS_PAGE + 12} rows, the first ${WEB_ROWS_PAGE} shown`));
  t.is(await section.locator('tbody tr').count(), WEB_ROWS_PAGE);
  t.regex(await section.locator('thead').innerText(), /Transaction ref/i);
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the result page');

  await Promise.all([page.waitForNavigation(), section.locator('a:text-is("next page")').click()]);
  t.regex(await page.locator('h1').innerText(), /Large payments.*: rows/);
  t.is(await page.locator('table.report-rows tbody tr').count(), 12);
  t.regex(await page.locator('main, body').first().innerText(), /Page 2 of 2/);
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the rows page');

  const csv = await page.request.get(`${app.url}/admin/report/reportresult/${resultId}/csv/`);
  t.is(csv.status(), 200);
  t.regex(csv.headers()['content-type']!, /text\/csv/);
  const lines = (await csv.text()).trim().split('\r\n');
  t.is(lines[0], 'transaction_ref,customer_ref,amount,currency,event_date,decision,score');
  t.is(lines.length, WEB_ROWS_PAGE + 13);
  t.deepEqual(problems, []);
});

test.serial("another user's result is not found; without view permission it is forbidden; bad pages are 400", async (t) => {
  if (!browserAvailable) return t.pass();
  for (const [username, status] of [['colleague', 404], ['outsider', 403]] as const) {
    const client = adminClient(app.url);
    t.is((await client.login(username, PASSWORD)).status, 302);
    for (const suffix of ['change/', 'rows/', 'csv/']) t.is((await client.get(`/admin/report/reportresult/${resultId}/${suffix}`)).status, status, `${username} ${suffix}`);
  }
  const owner = adminClient(app.url);
  await owner.login('rita', PASSWORD);
  t.is((await owner.get(`/admin/report/reportresult/${resultId}/rows/?page=0`)).status, 400);
  t.is((await owner.get(`/admin/report/reportresult/${resultId}/rows/?page=abc`)).status, 400);
  t.is((await owner.get('/admin/report/reportresult/99999/rows/')).status, 404);
  t.is((await owner.get('/admin/report/reportresult/x/csv/')).status, 404);
});
