/**
 * The dashboard on the web admin's index (issue 37, in part): the viewer's own counts (open cases
 * assigned to them, unassigned open cases, requests waiting for their signature) and the mobile
 * dashboard's cards they may view, each linking to the list it counts; nothing of a model the
 * viewer may not view. axe-core on the page. Skipped visibly without chromium.
 */
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient } from '../helpers/admin.ts';
import { browserAvailable, browserTest, launchBrowser, seriousViolations } from '../helpers/browser.ts';

const PASSWORD = 'violet-harbour-compass-19';
let app: TestApp;
let browser: Awaited<ReturnType<typeof launchBrowser>>;

async function makeCase(assignee: string | null, status = 'open') {
  const db = app.database.knex;
  const customerId = randomUUID();
  await db('customers').insert({ id: customerId, customer_ref: `dash-${customerId.slice(0, 8)}`, raw: '{}', score: 0, decision: 'ACCEPT', created_by: 't', updated_by: 't' });
  await db('cases').insert({ customer_id: customerId, priority: 10, assignee_id: assignee, status });
}

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  const db = app.database.knex;
  const grants = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };
  const olga = await createUser(db, { username: 'olga', password: PASSWORD, permissions: ['engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert'] }, grants);
  await createUser(db, { username: 'clerk', password: PASSWORD, permissions: ['customer.view_customer'] }, grants);
  await db('staff_users').update({ is_staff: true });
  await makeCase(olga.id);
  await makeCase(olga.id);
  await makeCase(olga.id, 'closed');
  await makeCase(null);
  browser = await launchBrowser();
});
test.after.always(async () => {
  await browser?.close();
  await app?.close();
});

browserTest('the index dashboard: my cases, unassigned open ones and the cards I may view, each a link to its list', async (t) => {
  const { page } = browser;
  await page.goto(`${app.url}/admin/`);
  await page.fill('#id_username', 'olga');
  await page.fill('#id_password', PASSWORD);
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')]);
  const panel = page.locator('.index-dashboard');
  t.regex(await panel.innerText(), /3\s+Cases assigned to me/);
  t.regex(await panel.innerText(), /1\s+Unassigned open cases/);
  t.regex(await panel.innerText(), /3\s+Open cases/);
  t.regex(await panel.innerText(), /0\s+Open alerts/);
  t.notRegex(await panel.innerText(), /High-risk customers|Pending approvals/, 'no card of a model she may not view');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the index');
  await Promise.all([page.waitForNavigation(), panel.locator('a:has-text("Cases assigned to me")').click()]);
  t.regex(page.url(), /\/admin\/engine\/watchlist\/\?assignee_id__assigned=me$/);
  t.is(await page.locator('table.results tbody tr').count(), 3, 'the list holds what the count says');
});

test.serial('a user who may view none of the counted models gets no dashboard', async (t) => {
  if (!browserAvailable) return t.pass();
  const client = adminClient(app.url);
  t.is((await client.login('clerk', PASSWORD)).status, 302);
  const index = await client.get('/admin/');
  t.is(index.status, 200);
  t.regex(index.text, /High-risk customers/, 'the customers card, the one model the clerk may view');
  t.notRegex(index.text, /Cases assigned to me|Open alerts/);
});
