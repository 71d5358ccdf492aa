/**
 * The generated admin pages in a real browser (Debian's chromium through playwright-core): log in
 * and a wrong password, search, sort, filter, pages, creating and editing a group, validation
 * errors, 403 for a limited user, a CSRF refusal, escaped markup, and no script dialogs or
 * console errors (a CSP violation is one) on the way. Skipped visibly without chromium.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createGroup, createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser, logIn as signIn } from '../helpers/browser.ts';

const PASSWORD = 'violet-harbour-lantern-42';
const XSS = '<script>alert(1)</script>';
let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
const problems: string[] = [];

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };
  await createUser(db, { username: 'root', password: PASSWORD, is_superuser: true }, operator);
  await createGroup(db, { name: 'Readers', permissions: ['customer.view_customer'] }, operator);
  await createUser(db, { username: 'reader', password: PASSWORD, groups: ['Readers'] }, operator);
  await db.batchInsert(
    'customers',
    Array.from({ length: 130 }, (_, index) => ({
      id: randomUUID(),
      customer_ref: `cus-${String(index).padStart(3, '0')}`,
      first_name: index === 5 ? XSS : `First${index}`,
      last_name: `Last${index}`,
      raw: '{}',
      score: index % 100,
      decision: index % 4 === 0 ? 'REJECT' : 'ACCEPT',
      created_by: 't',
      updated_by: 't',
    })),
    200,
  );
  browser = await launchBrowser();
  browser.page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  // A page answered 400 or 403 on purpose is logged as a failed load: only subresources count here.
  browser.page.on('console', (message) => {
    if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
  });
  browser.page.on('response', (response) => {
    if (response.request().resourceType() !== 'document' && response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
  });
});
test.after.always(async () => {
  await browser?.close();
  await app?.close();
});

async function logIn(page: Page, username: string, password = PASSWORD) {
  await signIn(page, app.url, username, password);
}

/** Clicks and waits for the navigation it starts. */
async function follow(page: Page, selector: string) {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

browserTest('a wrong password keeps the user on the login page; the right one opens the index', async (t) => {
  const { page } = browser;
  await logIn(page, 'root', 'not the password');
  t.regex(await page.locator('.errornote').innerText(), /Please enter the correct username and password/);
  await logIn(page, 'root');
  t.is(new URL(page.url()).pathname, '/admin/');
  t.is(await page.locator('h1').innerText(), 'Site administration');
  t.true(await page.locator('a[href="/admin/customer/customer/"]').isVisible());
});

browserTest('changelist: search, sort by a header, filter, paginate, and markup shown as text', async (t) => {
  const { page } = browser;
  await logIn(page, 'root');
  await page.goto(`${app.url}/admin/customer/customer/`);
  t.regex(await page.locator('.result-count').first().innerText(), /130 customers · page 1 of 2/);
  // The customers share one created_at (one batch), so the default ordering puts them in primary
  // key order: ordered by reference, cus-005 (the markup name) is certain to be on page 1.
  await page.goto(`${app.url}/admin/customer/customer/?o=1`);
  t.true(await page.locator('table.results').getByText(XSS, { exact: true }).isVisible(), 'the name reads as text');

  await page.fill('#searchbar', 'cus-12');
  await follow(page, '.search-bar button');
  t.regex(await page.locator('.result-count').first().innerText(), /^10 customers/);

  await page.goto(`${app.url}/admin/customer/customer/`);
  await follow(page, 'th.sortable >> text=Reference');
  t.is(await page.locator('table.results tbody tr th').first().innerText(), 'cus-000');
  await follow(page, 'th.sortable >> text=Reference');
  t.is(await page.locator('table.results tbody tr th').first().innerText(), 'cus-129');
  t.is(new URL(page.url()).searchParams.get('o'), '-1');

  await follow(page, '.filter >> text=Reject');
  t.regex(await page.locator('.result-count').first().innerText(), /^33 customers/);
  t.is(new URL(page.url()).searchParams.get('decision__exact'), 'REJECT');
  t.is(new URL(page.url()).searchParams.get('o'), '-1', 'the filter keeps the ordering');

  await page.goto(`${app.url}/admin/customer/customer/?o=1`);
  await follow(page, '.pages >> text=Next ›');
  t.is(new URL(page.url()).searchParams.get('p'), '2');
  t.is(await page.locator('table.results tbody tr th').first().innerText(), 'cus-100');
  t.is(await page.locator('.this-page').first().innerText(), '2');

  await page.goto(`${app.url}/admin/customer/customer/?bogus=1`);
  t.regex(await page.locator('.errornote').innerText(), /Unknown filter parameter: bogus\./);
  t.deepEqual(problems, []);
});

browserTest('a group is created with validation errors first, then edited', async (t) => {
  const { page } = browser;
  await logIn(page, 'root');
  await page.goto(`${app.url}/admin/auth/group/`);
  await follow(page, 'text=Add group');
  await follow(page, 'button[name=_save]');
  t.regex(await page.locator('.field-name .errorlist').innerText(), /This field is required\./);

  await page.fill('#id_name', 'Compliance officers');
  await page.selectOption('#id_permissions', ['customer.view_customer', 'customer.change_customer']);
  await follow(page, 'button[name=_continue]');
  t.regex(await page.locator('.message-success').innerText(), /The group "Compliance officers" was added successfully\./);
  t.deepEqual(await page.locator('#id_permissions option:checked').evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).value)), [
    'customer.view_customer',
    'customer.change_customer',
  ]);

  await page.fill('#id_name', 'Senior officers');
  await follow(page, 'button[name=_save]');
  t.is(new URL(page.url()).pathname, '/admin/auth/group/');
  t.true(await page.locator('table.results').getByText('Senior officers').isVisible());
  const group = await app.database.knex('staff_groups').where({ name: 'Senior officers' }).first();
  t.truthy(group);
  await follow(page, 'table.results >> text=Senior officers');
  await follow(page, 'text=History');
  t.regex(await page.locator('table.history').innerText(), /Name: Compliance officers → Senior officers/);
  t.deepEqual(problems, []);
});

browserTest('a relation too large to list is searched as the user types, and the chosen record saved', async (t) => {
  const { page } = browser;
  const db = app.database.knex;
  await db('staff_users').insert(Array.from({ length: 101 }, (_, index) => ({ id: randomUUID(), username: `agent-${String(index).padStart(3, '0')}`, password_hash: null })));
  const [customer] = await db('customers').where({ customer_ref: 'cus-001' }).select('id');
  const [theCase] = await db('cases').insert({ customer_id: customer.id }).returning('id');
  const chosen = await db('staff_users').where({ username: 'agent-042' }).first();
  await logIn(page, 'root');
  await page.goto(`${app.url}/admin/engine/watchlist/${theCase.id}/change/`);
  await page.locator('#id_assignee_id').pressSequentially('agent-04');
  await page.waitForFunction(() => document.querySelectorAll('#id_assignee_id_options option').length === 10);
  t.deepEqual(
    await page.locator('#id_assignee_id_options option').evaluateAll((options) => options.map((option) => (option as HTMLOptionElement).label)),
    Array.from({ length: 10 }, (_, index) => `agent-04${index}`),
  );
  // What picking a suggestion does: the input takes the record's id, its name shows beside it.
  await page.locator('#id_assignee_id').fill(chosen.id);
  await page.waitForFunction(() => document.querySelector('.field-assignee_id .fk-repr')?.textContent === 'agent-042');
  await follow(page, 'button[name=_save]');
  t.is((await db('cases').where({ id: theCase.id }).first()).assignee_id, chosen.id);
  t.deepEqual(problems, []);
});

browserTest('a limited user gets the 403 page; a tampered CSRF token is refused and writes nothing', async (t) => {
  const { page } = browser;
  await logIn(page, 'reader');
  const response = await page.goto(`${app.url}/admin/auth/group/`);
  t.is(response!.status(), 403);
  t.is(await page.locator('h1').innerText(), 'Permission denied');

  await logIn(page, 'root');
  await page.goto(`${app.url}/admin/auth/group/add/`);
  await page.locator('form.change-form input[name=csrfmiddlewaretoken]').evaluate((input) => {
    (input as HTMLInputElement).value = 'tampered-token-tampered-token-tampered-toke';
  });
  await page.fill('#id_name', 'Forged group');
  const [refused] = await Promise.all([page.waitForResponse((candidate) => candidate.request().method() === 'POST'), page.click('button[name=_save]')]);
  t.is(refused.status(), 403);
  t.regex(await page.locator('main').innerText(), /CSRF verification failed/);
  t.falsy(await app.database.knex('staff_groups').where({ name: 'Forged group' }).first());
});
