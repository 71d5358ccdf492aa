/**
 * Screening hits in a real browser (Debian's chromium through playwright-core), issue 36: an
 * officer finds a customer's sanctions match on the customer's page, opens the hit, is refused a
 * status change without a rationale, marks it a false positive with one, and sees the customer
 * rescored and the hit marked on the customer's, the case's and the alert's pages; screening the
 * customer again raises no alert. axe-core checks every page visited: no serious or critical
 * violation. No script dialogs or console errors. Skipped visibly without chromium.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations } from '../helpers/browser.ts';

const PASSWORD = 'juniper-beacon-ledger-73';
const OFFICER = [
  'screening.view_screeninghit', 'screening.change_screeninghit', 'screening.view_sanctionentry', 'customer.view_customer', 'engine.view_watchlist', 'engine.view_alert',
];
const root = path.resolve(import.meta.dirname, '../..');
// test/fixtures/sanctions/sdn.csv lists "KARAVELLO, Dmitri Anatolyevich" (OFAC 90001), DOB 14 Mar 1971, nationality Russia.
const KARAVELLO = { customer_ref: 'cus-k', first_name: 'Dmitri', last_name: 'Karavello', birth_date: '1971-03-14', nationality: 'RUS' };

let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
let merchant: string;
let customerId: string;
const problems: string[] = [];

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  await createUser(db, { username: 'officer', password: PASSWORD, permissions: OFFICER }, { actor: { type: 'operator', id: 'test' }, known: new Set(permissionCodenames()) });
  await db('staff_users').update({ is_staff: true });
  const fixtures = path.join(root, 'test/fixtures/sanctions');
  await promisify(execFile)(process.execPath, ['bin/warden.js', 'sanctions', 'import', '--format', 'ofac', path.join(fixtures, 'sdn.csv'), path.join(fixtures, 'alt.csv')], {
    cwd: root,
    env: { ...process.env, DATABASE_URL: app.database.url },
  });
  merchant = await app.merchantToken();
  const response = await app.request('POST', '/api/customer/upsert/', { token: merchant, json: KARAVELLO });
  customerId = response.body.data.results[0].id;
  browser = await launchBrowser();
  browser.page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  browser.page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
});
test.after.always(async () => {
  await browser?.close();
  await app?.close();
});

const audited: string[] = [];

/** axe-core on the page as it is now: no serious or critical violation. */
async function audit(t: ExecutionContext, page: Page, what: string) {
  t.deepEqual(await seriousViolations(page), [], `axe-core on ${what} (${page.url()})`);
  audited.push(what);
}

async function follow(page: Page, selector: string) {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

browserTest('an officer marks a sanctions match a false positive with a rationale; the customer is rescored and not alerted again', async (t) => {
  const { page } = browser;
  await page.goto(`${app.url}/admin/`);
  await page.fill('#id_username', 'officer');
  await page.fill('#id_password', PASSWORD);
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')]);

  await page.goto(`${app.url}/admin/customer/customer/${customerId}/change/`);
  const section = page.locator('section.screening-hits');
  t.regex(await section.innerText(), /KARAVELLO, Dmitri Anatolyevich[\s\S]*OFAC[\s\S]*90001[\s\S]*Open/);
  await audit(t, page, 'customer page with its hit');

  await follow(page, 'section.screening-hits tbody th a');
  t.regex(page.url(), /\/admin\/screening\/screeninghit\/[0-9a-f-]+\/change\/$/);
  await audit(t, page, 'hit page');
  await page.selectOption('#id_status', 'false_positive');
  await Promise.all([page.waitForLoadState('load'), page.click('button[name=_continue]')]);
  t.regex(await page.locator('.field-rationale').innerText(), /A rationale is required to change the status\./);
  t.is(await page.locator('#id_status').inputValue(), 'false_positive', 'the refused form comes back as chosen');
  await audit(t, page, 'hit page refused without a rationale');
  t.like(await app.database.knex('screening_hits').where({ customer_id: customerId }).first(), { status: 'open' });

  await page.fill('#id_rationale', 'Passport on file: born in Tallinn, another patronymic.');
  await follow(page, 'button[name=_continue]');
  t.regex(await page.locator('ul.messages').innerText(), /was changed successfully/);
  t.is(await page.locator('#id_status').inputValue(), 'false_positive');
  await audit(t, page, 'hit page after the review');
  const hit = await app.database.knex('screening_hits').where({ customer_id: customerId }).first();
  t.like(hit, { status: 'false_positive', reviewed_by: 'officer', review_rationale: 'Passport on file: born in Tallinn, another patronymic.' });
  t.is(Number((await app.database.knex('customers').where({ id: customerId }).first()).sanction_score), 0);

  const alert = await app.database.knex('alerts').where({ customer_id: customerId, kind: 'sanctions' }).first();
  for (const [what, url] of [
    ['customer page after the review', `/admin/customer/customer/${customerId}/change/`],
    ['case page', `/admin/engine/watchlist/${alert.case_id}/change/`],
    ['alert page', `/admin/engine/alert/${alert.id}/change/`],
  ] as const) {
    await page.goto(`${app.url}${url}`);
    t.regex(await page.locator('section.screening-hits').innerText(), /False positive[\s\S]*officer[\s\S]*another patronymic/, what);
    await audit(t, page, what);
  }

  const alerts = Number((await app.database.knex('alerts').where({ customer_id: customerId }).count('* as n').first())!.n);
  const again = await app.request('POST', '/api/customer/upsert/', { token: merchant, json: KARAVELLO });
  t.is(again.body.data.results[0].sanction_score, 0);
  t.is(Number((await app.database.knex('alerts').where({ customer_id: customerId }).count('* as n').first())!.n), alerts);
  t.true(audited.length >= 7, `axe-core ran on ${audited.length} pages`);
  t.deepEqual(problems, []);
});
