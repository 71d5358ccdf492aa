/**
 * The case queue in a real browser (Debian's chromium through playwright-core), issue 36 point 5:
 * an officer filters the case list to "Assigned to me", takes a case from the list, two officers
 * in two browsers press "Next case" at the same moment and land on different cases, and a bulk
 * status change with one rationale is made from the list (the action's form is its second step).
 * axe-core checks every page visited: no serious or critical violation. No script dialogs or
 * console errors. Skipped visibly without chromium.
 */
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import type { Page } from 'playwright-core';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations, logIn as signIn } from '../helpers/browser.ts';

const PASSWORD = 'indigo-lantern-harbour-27';
const OFFICER = ['engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'customer.view_customer', 'auth.view_user', 'approval.view_approvalrequest'];

let app: TestApp;
let browsers: Awaited<ReturnType<typeof launchBrowser>>[] = [];
const problems: string[] = [];
const users: Record<string, string> = {};
let cases: Record<string, string> = {};

async function makeCase(name: string, priority: number, hoursOld: number, assignee: string | null = null): Promise<string> {
  const db = app.database.knex;
  const customerId = randomUUID();
  await db('customers').insert({ id: customerId, customer_ref: `q-${name}`, raw: '{}', score: 0, decision: 'ACCEPT', created_by: 't', updated_by: 't' });
  const [row] = await db('cases').insert({ customer_id: customerId, priority, opened_at: new Date(Date.now() - hoursOld * 3_600_000), assignee_id: assignee }).returning('id');
  return String(row.id);
}

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  for (const username of ['ada', 'ben']) {
    users[username] = (await createUser(db, { username, password: PASSWORD, permissions: OFFICER }, { actor: { type: 'operator', id: 'test' }, known: new Set(permissionCodenames()) })).id;
  }
  await db('staff_users').update({ is_staff: true });
  cases = {
    adas: await makeCase('adas', 40, 30, users.ada!),
    bens: await makeCase('bens', 40, 30, users.ben!),
    top: await makeCase('top', 95, 2),
    second: await makeCase('second', 90, 5),
    low1: await makeCase('low1', 10, 8),
    low2: await makeCase('low2', 10, 9),
  };
  browsers = [await launchBrowser(), await launchBrowser()];
  for (const browser of browsers) {
    browser.page.on('dialog', (dialog) => {
      problems.push(`dialog: ${dialog.message()}`);
      void dialog.dismiss();
    });
    browser.page.on('console', (message) => {
      if (message.type() === 'error' && !message.text().startsWith('Failed to load resource')) problems.push(`console: ${message.text()}`);
    });
  }
});
test.after.always(async () => {
  for (const browser of browsers) await browser.close();
  await app?.close();
});

const audited: string[] = [];

/** axe-core on the page as it is now: no serious or critical violation. */
async function audit(t: ExecutionContext, page: Page, what: string) {
  t.deepEqual(await seriousViolations(page), [], `axe-core on ${what} (${page.url()})`);
  audited.push(what);
}

async function logIn(page: Page, username: string) {
  await signIn(page, app.url, username, PASSWORD);
}

async function follow(page: Page, selector: string) {
  await Promise.all([page.waitForNavigation(), page.click(selector)]);
}

async function assigneeOf(caseId: string): Promise<string | null> {
  return (await app.database.knex('cases').where({ id: caseId }).first()).assignee_id;
}

/** The case ids the list shows, from its row links. */
async function listed(page: Page): Promise<string[]> {
  const hrefs = await page.locator('table.results tbody th a').evaluateAll((links) => links.map((link) => link.getAttribute('href') ?? ''));
  return hrefs.map((href) => /\/admin\/engine\/watchlist\/([^/]+)\/change\//.exec(href)?.[1] ?? href);
}

browserTest('an officer filters the case list to "Assigned to me", then takes an unassigned case from the list', async (t) => {
  const page = browsers[0]!.page;
  await logIn(page, 'ada');
  await page.goto(`${app.url}/admin/engine/watchlist/`);
  await audit(t, page, 'the case list');
  await follow(page, '.filters a:text-is("Assigned to me")');
  t.regex(page.url(), /assignee_id__assigned=me/);
  t.deepEqual(await listed(page), [cases.adas]);
  t.is(await page.locator('.filters a[aria-current="true"]:text-is("Assigned to me")').count(), 1);
  await audit(t, page, 'the list filtered to the officer\'s cases');

  await follow(page, '.filters a:text-is("Unassigned")');
  const unassigned = await listed(page);
  t.deepEqual([...unassigned].sort(), [cases.top, cases.second, cases.low1, cases.low2].sort());
  await page.check(`input[name=_selected_action][value="${cases.low2}"]`);
  await page.selectOption('#id_action', 'take');
  await follow(page, '.actions button[type=submit]');
  t.regex(await page.locator('h1').innerText(), /Are you sure\?/);
  await audit(t, page, 'the take confirmation');
  await follow(page, '.submit-row button[type=submit]');
  t.regex(await page.locator('ul.messages').innerText(), /Take \(assign to me\): 1 case changed\./);
  t.is(await assigneeOf(cases.low2!), users.ada!);
  t.false((await listed(page)).includes(cases.low2!), 'back on the unassigned list, the case has left it');
  await audit(t, page, 'the list after taking a case');
});

browserTest('two officers in two browsers press "Next case" at the same moment and get different cases', async (t) => {
  const [ada, ben] = [browsers[0]!.page, browsers[1]!.page];
  await logIn(ben, 'ben');
  await Promise.all([ada.goto(`${app.url}/admin/engine/watchlist/`), ben.goto(`${app.url}/admin/engine/watchlist/`)]);
  await Promise.all([follow(ada, '.list-action button:text-is("Next case")'), follow(ben, '.list-action button:text-is("Next case")')]);
  const opened = [ada, ben].map((page) => /\/admin\/engine\/watchlist\/([^/]+)\/change\//.exec(page.url())?.[1]);
  t.deepEqual([...opened].sort(), [cases.top, cases.second].sort(), 'the two highest-priority unassigned cases, one each');
  t.is(await assigneeOf(opened[0]!), users.ada!);
  t.is(await assigneeOf(opened[1]!), users.ben!);
  t.regex(await ada.locator('ul.messages').innerText(), /is now assigned to you\./);
  await audit(t, ada, 'the case opened by next case');

  // The next press gets the one left; then there is none.
  await ada.goto(`${app.url}/admin/engine/watchlist/`);
  await follow(ada, '.list-action button:text-is("Next case")');
  t.true(ada.url().endsWith(`/admin/engine/watchlist/${cases.low1}/change/`));
  await ada.goto(`${app.url}/admin/engine/watchlist/`);
  await follow(ada, '.list-action button:text-is("Next case")');
  t.true(ada.url().endsWith('/admin/engine/watchlist/'));
  t.regex(await ada.locator('ul.messages').innerText(), /No unassigned open case is waiting for you\./);
});

browserTest('a bulk status change with one rationale from the list: the action asks for the status and the rationale, every case is written with it', async (t) => {
  const page = browsers[0]!.page;
  await page.goto(`${app.url}/admin/engine/watchlist/?assignee_id__assigned=me`);
  const mine = await listed(page);
  t.true(mine.length >= 3);
  for (const caseId of mine) await page.check(`input[name=_selected_action][value="${caseId}"]`);
  await page.selectOption('#id_action', 'change_status');
  await follow(page, '.actions button[type=submit]');
  t.regex(await page.locator('h1').innerText(), /Change status…/);
  await audit(t, page, 'the bulk change form');

  // Without a rationale: the form again, with the error next to the field, nothing written.
  await page.selectOption('#id_status', 'escalated');
  await page.evaluate(() => document.querySelector('#id_rationale')!.removeAttribute('required'));
  await follow(page, '.submit-row button[type=submit]');
  t.regex(await page.locator('#id_rationale_errors').innerText(), /This field is required\./);
  t.is(await page.locator('#id_rationale').getAttribute('aria-invalid'), 'true');
  await audit(t, page, 'the bulk change form with an error');
  for (const caseId of mine) t.is((await app.database.knex('cases').where({ id: caseId }).first()).status, 'open');

  await page.fill('#id_rationale', 'Escalated together: same counterparty');
  await follow(page, '.submit-row button[type=submit]');
  t.regex(await page.locator('ul.messages').innerText(), new RegExp(`Change status…: ${mine.length} cases changed\\.`));
  for (const caseId of mine) {
    t.is((await app.database.knex('cases').where({ id: caseId }).first()).status, 'escalated');
    const history = await app.database.knex('case_history').where({ case_id: caseId }).orderBy('id', 'desc').first();
    t.is(history.rationale, 'Escalated together: same counterparty');
    t.deepEqual(history.changes.status, ['open', 'escalated']);
  }
  await audit(t, page, 'the list after the bulk change');
  t.true(audited.length >= 8, `axe-core ran on ${audited.length} pages`);
  t.deepEqual(problems, []);
});

browserTest('under a change policy on cases, a bulk close with a clear decision becomes one approval request per case; a checker approves one from its page', async (t) => {
  const page = browsers[0]!.page;
  const db = app.database.knex;
  await setApprovalPolicies(db, { model: 'engine.watchlist', operations: ['change'], signerPermission: 'engine.change_watchlist' });
  try {
    const chosen = [await makeCase('mc1', 30, 5, users.ada!), await makeCase('mc2', 30, 4, users.ada!)];
    await page.goto(`${app.url}/admin/engine/watchlist/?assignee_id__assigned=me`);
    for (const caseId of chosen) await page.check(`input[name=_selected_action][value="${caseId}"]`);
    await page.selectOption('#id_action', 'close');
    await follow(page, '.actions button[type=submit]');
    await audit(t, page, 'the bulk close form');
    await page.fill('#id_rationale', 'Salary payments; employer confirmed.');
    await page.selectOption('#id_clear_decision', 'ACCEPT');
    await follow(page, '.submit-row button[type=submit]');
    t.regex(await page.locator('ul.messages').innerText(), /2 cases submitted for approval/);
    await audit(t, page, 'the list after a bulk change became requests');
    for (const caseId of chosen) t.is((await db('cases').where({ id: caseId }).first()).status, 'open', 'nothing changes before the checker signs');
    const requests = await db('approval_requests').whereIn('object_id', chosen).where({ content_type: 'engine.watchlist', status: 'pending' });
    t.is(requests.length, 2);

    const checker = browsers[1]!.page;
    await logIn(checker, 'ben');
    await checker.goto(`${app.url}/admin/approval/approvalrequest/${requests[0]!.id}/change/`);
    await checker.fill('.casework-approval textarea[name=reason]', 'Agreed.');
    await follow(checker, '.casework-approval button[value=approve]');
    await audit(t, checker, 'the approved request');
    const approved = await db('cases').where({ id: requests[0]!.object_id }).first();
    t.is(approved.status, 'closed');
    const history = await db('case_history').where({ case_id: approved.id }).orderBy('id', 'desc').first();
    t.is(history.rationale, 'Salary payments; employer confirmed.');
    t.true(Boolean(await db('admin_log_entries').where({ content_type: 'engine.watchlist', object_id: approved.id, approval_request_id: requests[0]!.id }).first()), 'the audit row names the request');
    t.deepEqual(problems, []);
  } finally {
    await db('approval_policies').delete();
  }
});
