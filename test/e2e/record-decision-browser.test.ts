/**
 * From a new alert to a recorded decision in a real browser (Debian's chromium through
 * playwright-core), issue 36: a transaction raises an alert; an officer goes from the admin index
 * to the alert list, opens the alert (which links to its record and its case, shows the matched
 * rules by name with their contributions, the decision context as labelled rows, and its record's
 * decision form above the alert's own form) and records a decision with a PNG attached: at most
 * 3 clicks. On the record's page the same, and a disallowed file comes back as an error message;
 * a post without or with a wrong CSRF token is refused (403) with nothing stored. axe-core checks
 * every page visited: no serious or critical violation. Skipped visibly without chromium.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations } from '../helpers/browser.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';

const PASSWORD = 'copper-meadow-lantern-58';
const OFFICER = [
  'engine.view_alert', 'engine.view_watchlist', 'engine.view_executionlog', 'engine.view_compliancedecision', 'engine.add_compliancedecision',
  'transaction.view_financialevent', 'transaction.change_financialevent', 'customer.view_customer',
];
/** A 1×1 PNG, made here. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64');
/** A Windows executable's first bytes, named as a PDF: the content decides. */
const EXECUTABLE = Buffer.concat([Buffer.from('MZ'), Buffer.alloc(58), Buffer.from([0x80, 0, 0, 0]), Buffer.alloc(64), Buffer.from('PE\0\0'), Buffer.alloc(200)]);

let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
const problems: string[] = [];
let transaction: { id: string; decision: string; log_id: string };

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  await createUser(db, { username: 'officer', password: PASSWORD, permissions: OFFICER }, { actor: { type: 'operator', id: 'test' }, known: new Set(permissionCodenames()) });
  await db('staff_users').update({ is_staff: true });
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [
    { code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 },
    { code: 'ROUND', name: 'Round amount', target: 'financial', expression: { '==': [{ '%': [{ var: 'record.amount' }, 1000] }, 0] }, score: 12.5 },
  ]);
  const merchant = await app.merchantToken();
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'cus-r', first_name: 'Rune' }] });
  const ingested = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'cus-r', event_slug: 'deposit', amount: '6000', currency: 'EUR', transaction_ref: 'r-1', io_type: 0, event_date: hoursAgo(1), payment_method: 'card' }],
  });
  transaction = ingested.body.data.results[0];
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

/** Every file under the app's data folder: stored evidence and temporary uploads alike. */
async function storedFiles(): Promise<string[]> {
  const root = app.context.config.dataDir;
  const entries = await fsp.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isFile()).map((entry) => path.relative(root, path.join(entry.parentPath, entry.name))).sort();
}

const audited: string[] = [];

/** axe-core on the page as it is now: no serious or critical violation. */
async function audit(t: ExecutionContext, page: Page, what: string) {
  t.deepEqual(await seriousViolations(page), [], `axe-core on ${what} (${page.url()})`);
  audited.push(what);
}

let clicks = 0;

/** One click of the officer's path that loads a page. */
async function click(page: Page, selector: string) {
  clicks += 1;
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

/** The value of the labelled row of a table under `scope`: the <td> beside the <th> whose text is `label`. */
async function labelledValue(page: Page, scope: string, label: string): Promise<string> {
  return page.locator(`${scope} tr`, { has: page.locator('th', { hasText: new RegExp(`^${label}$`) }) }).first().locator('td').innerText();
}

/** Whether `before` comes before `after` in the document. */
async function comesBefore(page: Page, before: string, after: string): Promise<boolean> {
  return page.evaluate(
    ([first, second]) => {
      const a = document.querySelector(first!);
      const b = document.querySelector(second!);
      return Boolean(a && b && a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING);
    },
    [before, after],
  );
}

browserTest('from the admin index to a recorded decision with an attachment in at most 3 clicks, through the alert', async (t) => {
  const { page } = browser;
  t.is(transaction.decision, 'REVIEW');
  const alert = await app.database.knex('alerts').where({ record_id: transaction.id }).first();
  t.truthy(alert, 'the transaction raised an alert');

  await page.goto(`${app.url}/admin/`);
  await audit(t, page, 'the login page');
  await page.fill('#id_username', 'officer');
  await page.fill('#id_password', PASSWORD);
  await Promise.all([page.waitForNavigation(), page.click('button[type=submit]')]);
  t.is(new URL(page.url()).pathname, '/admin/');
  await audit(t, page, 'the admin index');

  // 1: the alert list.
  await click(page, 'main a[href="/admin/engine/alert/"]');
  await audit(t, page, 'the alert list');
  // 2: the alert.
  await click(page, 'table.results tbody tr th a');
  t.is(new URL(page.url()).pathname, `/admin/engine/alert/${alert.id}/change/`);
  await audit(t, page, "the alert's page");
  t.is(await page.locator('.field-record_id a').getAttribute('href'), `/admin/transaction/financialevent/${transaction.id}/change/`, 'one click to the record');
  t.is(await page.locator('.field-record_id a').innerText(), 'r-1');
  t.is(await page.locator('.field-case_id a').getAttribute('href'), `/admin/engine/watchlist/${alert.case_id}/change/`, 'one click to the case');
  t.is(await page.locator('.field-log_id a').getAttribute('href'), `/admin/engine/executionlog/${transaction.log_id}/change/`);

  // The matched rules by name with their contributions.
  const rules = page.locator('.casework-rules tbody tr');
  t.is(await rules.count(), 2);
  t.deepEqual(await rules.nth(0).locator('td').allInnerTexts(), ['LARGE', 'Large amount', '+60.00', '—']);
  t.deepEqual(await rules.nth(1).locator('td').allInnerTexts(), ['ROUND', 'Round amount', '+12.50', '—']);
  t.regex(await page.locator('.casework-rules tfoot').innerText(), /72\.50\s+REVIEW/);
  // The decision context as labelled rows, never JSON.
  t.is(await labelledValue(page, '.casework-context', 'Amount'), '6000');
  t.is(await labelledValue(page, '.casework-context', 'Currency'), 'EUR');
  t.is(await labelledValue(page, '.casework-context', 'Direction'), 'Incoming');
  t.is(await labelledValue(page, '.casework-context', 'Customer reference'), 'cus-r');
  t.regex(await labelledValue(page, '.casework-context', 'Event date'), /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$/);
  t.is(await labelledValue(page, '.casework-context', 'Transactions, last 24 hours'), '0');
  t.false((await page.locator('.casework-context td').allInnerTexts()).some((value) => value.trim().startsWith('{')), 'no value is JSON text');
  // The decision form above the alert's own form, and the rules above it.
  t.true(await comesBefore(page, '.casework-rules', '.casework-decision'));
  t.true(await comesBefore(page, '.casework-decision form', '.change-form'));

  const form = page.locator('.casework-decision form');
  t.is(await form.getAttribute('enctype'), 'multipart/form-data');
  await form.locator('select[name=decision]').selectOption('REJECT');
  await form.locator('input[name=score]').fill('90');
  await form.locator('textarea[name=description]').fill('Deposit from an account in another name.');
  await form.locator('input[type=file]').setInputFiles({ name: 'evidence.png', mimeType: 'image/png', buffer: PNG });
  // 3: the decision.
  await click(page, '.casework-decision button[type=submit]');
  t.true(clicks <= 3, `${clicks} clicks from the index to the decision`);
  t.is(new URL(page.url()).pathname, `/admin/engine/alert/${alert.id}/change/`, 'back on the alert');
  t.regex(await page.locator('ul.messages').innerText(), /Decision REJECT recorded\./);
  await audit(t, page, "the alert's page after the decision");
  t.like(await app.database.knex('financial_transactions').where({ id: transaction.id }).first(), { decision: 'REJECT', score: '90.00' });
  const decision = await app.database.knex('compliance_decisions').where({ target_model: 'financialevent', target_id: transaction.id }).first();
  t.like(decision, { decision: 'REJECT', description: 'Deposit from an account in another name.', actor: 'officer' });
  t.deepEqual(decision.attachments.map((file: { name: string; content_type: string; size: number }) => [file.name, file.content_type, file.size]), [['evidence.png', 'image/png', PNG.length]]);
  t.regex(await page.locator('.casework-decisions').innerText(), new RegExp(`evidence\\.png \\(image/png, ${PNG.length} B\\)`));
  t.deepEqual(problems, []);
});

browserTest("on the record's page: the rules and the decision form above its form; a disallowed file is an error message; a forged post is refused with nothing stored", async (t) => {
  const { page } = browser;
  const alert = await app.database.knex('alerts').where({ record_id: transaction.id }).first();
  await page.goto(`${app.url}/admin/engine/alert/${alert.id}/change/`);
  await Promise.all([page.waitForNavigation(), page.click('.field-record_id a')]);
  t.is(new URL(page.url()).pathname, `/admin/transaction/financialevent/${transaction.id}/change/`);
  await audit(t, page, "the record's page");
  t.true(await comesBefore(page, '.casework-rules', '.change-form'));
  t.true(await comesBefore(page, '.casework-decision form', '.change-form'));
  t.deepEqual(await page.locator('.casework-rules tbody td:nth-child(2)').allInnerTexts(), ['Large amount', 'Round amount'], 'the rules stay after the ruling');
  t.regex(await page.locator('.casework-decisions').innerText(), /evidence\.png/);

  const decisions = Number((await app.database.knex('compliance_decisions').count('* as n').first())!.n);
  const before = await storedFiles();
  const fill = async (file: { name: string; mimeType: string; buffer: Buffer }) => {
    const form = page.locator('.casework-decision form');
    await form.locator('select[name=decision]').selectOption('ACCEPT');
    await form.locator('textarea[name=description]').fill('Cleared after the call.');
    await form.locator('input[type=file]').setInputFiles(file);
  };

  await fill({ name: 'statement.pdf', mimeType: 'application/pdf', buffer: EXECUTABLE });
  await Promise.all([page.waitForNavigation(), page.click('.casework-decision button[type=submit]')]);
  t.is(new URL(page.url()).pathname, `/admin/transaction/financialevent/${transaction.id}/change/`);
  t.regex(await page.locator('ul.messages .message-error').innerText(), /statement\.pdf is not an accepted file: only images, videos and PDF documents are/);
  await audit(t, page, "the record's page with an error message");

  // A wrong token, then none: 403 before any file is stored.
  await fill({ name: 'forged.png', mimeType: 'image/png', buffer: PNG });
  await page.evaluate(() => {
    (document.querySelector('.casework-decision input[name=csrfmiddlewaretoken]') as HTMLInputElement).value = 'forged-token';
  });
  const wrong = await Promise.all([page.waitForNavigation(), page.click('.casework-decision button[type=submit]')]);
  t.is(wrong[0]?.status(), 403);
  t.regex(await page.locator('main').innerText(), /CSRF verification failed\. Request aborted\. CSRF token incorrect\./);
  await audit(t, page, 'the 403 page');
  await page.goto(`${app.url}/admin/transaction/financialevent/${transaction.id}/change/`);
  await fill({ name: 'forged.png', mimeType: 'image/png', buffer: PNG });
  await page.evaluate(() => document.querySelector('.casework-decision input[name=csrfmiddlewaretoken]')!.remove());
  const missing = await Promise.all([page.waitForNavigation(), page.click('.casework-decision button[type=submit]')]);
  t.is(missing[0]?.status(), 403);
  t.regex(await page.locator('main').innerText(), /CSRF token missing\./);

  t.deepEqual(await storedFiles(), before, 'nothing stored, no temporary file left');
  t.is(Number((await app.database.knex('compliance_decisions').count('* as n').first())!.n), decisions);
  t.is((await app.database.knex('financial_transactions').where({ id: transaction.id }).first()).decision, 'REJECT');
  t.true(audited.length >= 8, `axe-core ran on ${audited.length} pages`);
  t.deepEqual(problems, []);
});
