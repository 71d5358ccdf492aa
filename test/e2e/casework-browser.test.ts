/**
 * Case work in a real browser (Debian's chromium through playwright-core): an officer records a
 * compliance decision from a transaction's page, then closes the customer's case from its page
 * with a rationale and a clear decision, and a checker rejects a pending change from the request's
 * page. No script dialogs or console errors on the way. Skipped visibly without chromium.
 */
import test from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { saveObject } from '../../src/modules/backoffice/write.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser, logIn as signIn } from '../helpers/browser.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';

const PASSWORD = 'saffron-ledger-compass-31';
const OFFICER = [
  'transaction.view_financialevent', 'transaction.change_financialevent', 'engine.add_compliancedecision', 'engine.view_compliancedecision',
  'engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'customer.view_customer', 'customer.change_customer', 'approval.view_approvalrequest',
];
let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
const problems: string[] = [];
let transactions: { id: string; decision: string }[];

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };
  for (const username of ['officer', 'checker']) await createUser(db, { username, password: PASSWORD, permissions: OFFICER }, operator);
  await db('staff_users').update({ is_staff: true });
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  const merchant = await app.merchantToken();
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'cus-b', first_name: 'Berit' }] });
  const ingested = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [6000, 7000].map((amount, index) => ({ customer_ref: 'cus-b', event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `b-${index}`, io_type: 0, event_date: hoursAgo(1) })),
  });
  transactions = ingested.body.data.results;
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

async function logIn(page: Page, username: string) {
  await signIn(page, app.url, username, PASSWORD);
}

async function follow(page: Page, selector: string) {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

browserTest('an officer records a decision on a transaction, then closes the case with a rationale and a clear decision', async (t) => {
  const { page } = browser;
  await logIn(page, 'officer');
  t.deepEqual(transactions.map((row) => row.decision), ['REVIEW', 'REVIEW']);

  await page.goto(`${app.url}/admin/transaction/financialevent/${transactions[0]!.id}/change/`);
  const decision = page.locator('.casework-decision form');
  await decision.locator('select[name=decision]').selectOption('REJECT');
  await decision.locator('input[name=score]').fill('90');
  await decision.locator('textarea[name=description]').fill('Source of funds not shown.');
  await follow(page, '.casework-decision button[type=submit]');
  t.regex(await page.locator('ul.messages').innerText(), /Decision REJECT recorded\./);
  t.like(await app.database.knex('financial_transactions').where({ id: transactions[0]!.id }).first(), { decision: 'REJECT', score: '90.00' });

  const caseRow = await app.database.knex('cases').first('id');
  await page.goto(`${app.url}/admin/engine/watchlist/${caseRow.id}/change/`);
  await page.selectOption('#id_status', 'closed');
  await page.selectOption('#id_clear_decision', 'ACCEPT');
  await page.fill('#id_clear_score', '5');
  await Promise.all([page.waitForLoadState('load'), page.click('button[name=_continue]')]);
  t.regex(await page.locator('.field-rationale').innerText(), /A rationale is required to change status\./);
  t.is(await page.locator('#id_clear_decision').inputValue(), 'ACCEPT', 'the refused form comes back as typed');

  await page.fill('#id_rationale', 'Both deposits from the sale of a car; contract on file.');
  await follow(page, 'button[name=_continue]');
  t.regex(await page.locator('ul.messages').innerText(), /was changed successfully/);
  t.is(await page.locator('#id_status').inputValue(), 'closed');
  const decisions = await app.database.knex('compliance_decisions').where({ case_id: caseRow.id });
  t.is(decisions.length, 2);
  t.is(new Set(decisions.map((row) => row.batch_id)).size, 1);
  for (const row of await app.database.knex('financial_transactions').whereIn('id', transactions.map((transaction) => transaction.id))) t.like(row, { decision: 'ACCEPT', score: '5.00' });
  t.deepEqual(problems, []);
});

browserTest("a checker rejects a pending change from the request's page, with a reason", async (t) => {
  const { page } = browser;
  await setApprovalPolicies(app.database.knex, { model: 'customer.customer', operations: ['change'], signerPermission: 'customer.view_customer' });
  const officer = await app.database.knex('staff_users').where({ username: 'officer' }).first('id');
  const customers = app.context.backoffice.site.get('customer', 'customer')!;
  const customer = await app.database.knex('customers').where({ customer_ref: 'cus-b' }).first('id');
  const pending = await saveObject(app.context.backoffice, customers, (await loadPrincipal(app.database.knex, officer.id))!, customer.id, { first_name: 'Birgitta' }, { partial: true });

  await logIn(page, 'checker');
  await page.goto(`${app.url}/admin/customer/customer/${customer.id}/change/`);
  await follow(page, '.casework-pending a');
  t.regex(await page.locator('.casework-diff').innerText(), /Berit\s+Birgitta/);
  await page.fill('.casework-approval textarea[name=reason]', 'No document shows the new name.');
  await follow(page, '.casework-approval button[value=reject]');
  t.regex(await page.locator('ul.messages').innerText(), /reject/i);
  t.like(await app.database.knex('approval_requests').where({ id: pending.approvalRequestId }).first(), { status: 'rejected', reason: 'No document shows the new name.' });
  t.is((await app.database.knex('customers').where({ id: customer.id }).first('first_name')).first_name, 'Berit');
  t.is(await page.locator('.casework-approval button').count(), 0, 'a processed request offers no buttons');
  t.deepEqual(problems, []);
});
