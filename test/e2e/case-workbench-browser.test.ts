/**
 * The case page as a workbench in a real browser (Debian's chromium through playwright-core): the
 * case is titled by its number, the evidence (customer, alerted records with counterparty and
 * matched rules by name) sits above the form, the timeline below it shows the change with its
 * rationale by name and label, a note added from the page appears at the top of the timeline, and
 * older entries are on their own page. axe-core on every page visited: no serious or critical
 * violation. No script dialogs or console errors. Skipped visibly without chromium.
 */
import test from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations, logIn as signIn } from '../helpers/browser.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';

const PASSWORD = 'copper-meadow-lantern-58';
const OFFICER = [
  'transaction.view_financialevent', 'transaction.change_financialevent', 'engine.add_compliancedecision', 'engine.view_compliancedecision',
  'engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'engine.view_casenote', 'engine.add_casenote', 'customer.view_customer',
  'approval.view_approvalrequest', 'auth.view_user',
];
let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
const problems: string[] = [];
let caseId: string;
let reference: string;

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  await createUser(db, { username: 'olga', full_name: 'Olga Officer', password: PASSWORD, permissions: OFFICER }, { actor: { type: 'operator', id: 'test' }, known: new Set(permissionCodenames()) });
  await db('staff_users').update({ is_staff: true });
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  const merchant = await app.merchantToken();
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'wb-cus', first_name: 'Nadia', last_name: 'Haddad' }] });
  await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [6000, 7000].map((amount, index) => ({ customer_ref: 'wb-cus', event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `wbb-${index}`, io_type: 0, event_date: hoursAgo(1), destination_ref: `DE8937040044053201300${index}` })),
  });
  const row = await db('cases').first('id', 'reference');
  caseId = row.id;
  reference = row.reference;
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

async function logIn(page: Page) {
  await signIn(page, app.url, 'olga', PASSWORD);
}

async function follow(page: Page, selector: string) {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

browserTest('the case page: number, evidence above the form, a change with its rationale in the timeline, a note from the page', async (t) => {
  const { page } = browser;
  await logIn(page);
  await page.goto(`${app.url}/admin/engine/watchlist/`);
  t.true((await page.locator('table.results').innerText()).includes(reference), 'the list names the case by its number');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the case list');

  await page.goto(`${app.url}/admin/engine/watchlist/${caseId}/change/`);
  t.regex(await page.title(), new RegExp(reference));
  const evidence = page.locator('.workbench-evidence');
  t.regex(await evidence.innerText(), /Nadia Haddad/);
  t.regex(await evidence.innerText(), /DE89370400440532013000/);
  t.regex(await evidence.locator('.workbench-rules').first().innerText(), /Large amount\s+LARGE \+60/);
  const [evidenceTop = 0, formTop = 0, timelineTop = 0] = await Promise.all(
    ['.workbench-evidence', 'form.change-form', '.workbench-timeline'].map((selector) => page.locator(selector).evaluate((element) => element.getBoundingClientRect().top)),
  );
  t.true(evidenceTop < formTop && formTop < timelineTop, 'evidence above the form, the timeline below it');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the case page');

  await page.selectOption('#id_status', 'in_review');
  await page.fill('#id_rationale', 'Two large deposits in an hour; asking for the source of funds.');
  await follow(page, 'button[name=_continue]');
  const first = page.locator('.timeline > li').first();
  t.regex(await first.innerText(), /Case changed by Olga Officer \(olga\)/);
  t.regex(await first.innerText(), /Status: Open → In review/);
  t.regex(await first.innerText(), /asking for the source of funds/);

  await page.fill('#case-note', 'Customer says: sale of a car. Contract requested.');
  await follow(page, '.workbench-note button[type=submit]');
  t.regex(await page.locator('ul.messages').innerText(), /Note added\./);
  t.regex(await page.locator('.timeline > li').first().innerText(), /Note by Olga Officer \(olga\)[\s\S]*sale of a car/);
  t.is(await page.locator('.timeline > li').count(), 5, 'opened, two alerts, the change, the note');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the case page with its timeline');
  t.deepEqual(problems, []);
});

browserTest('older timeline entries on their own page, linked from the case page', async (t) => {
  const { page } = browser;
  const db = app.database.knex;
  const author = await db('staff_users').where({ username: 'olga' }).first('id');
  const opened = (await db('cases').where({ id: caseId }).first('opened_at')).opened_at as Date;
  await db('case_notes').insert(Array.from({ length: 120 }, (_, index) => ({ case_id: caseId, author_id: author.id, author: 'olga', body: `Bulk note ${index}`, created_at: new Date(opened.getTime() + (index + 1) * 10) })));
  await page.goto(`${app.url}/admin/engine/watchlist/${caseId}/change/`);
  await follow(page, 'a[href$="/timeline/?page=2"]');
  t.regex(await page.locator('h1').innerText(), new RegExp(`Timeline of ${reference}`));
  t.regex(await page.locator('.timeline').innerText(), /Case opened/);
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the timeline page');
  t.deepEqual(problems, []);
});
