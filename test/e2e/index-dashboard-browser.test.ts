/**
 * The dashboard on the web admin's index (issue 37): the viewer's own counts (open cases assigned
 * to them, unassigned open cases, alerts today, requests waiting for their signature, KYC sessions
 * waiting for a call) and the mobile dashboard's cards and blocks (decisions by day, high-volume
 * customers, the lobby, the agent's summary) they may view, each count linking to the list it
 * counts; nothing of a model the viewer may not view. axe-core on the page. Skipped visibly
 * without chromium.
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
  // two alerts today on one of olga's cases, one from last week
  const caseRow = await db('cases').where({ assignee_id: olga.id, status: 'open' }).first('id', 'customer_id');
  for (const [ref, daysAgo] of [['a-1', 0], ['a-2', 0], ['a-3', 8]] as const) {
    await db('alerts').insert({ case_id: caseRow.id, customer_id: caseRow.customer_id, target: 'financial', record_id: randomUUID(), record_ref: ref, kind: 'rules', score: 50, decision: 'REVIEW', rule_codes: [], status: 'open', created_at: db.raw(`now() - interval '${daysAgo} days'`) });
  }
  // fiona sees financial events and customers: the decisions chart and the high-volume customers
  await createUser(db, { username: 'fiona', password: PASSWORD, permissions: ['transaction.view_financialevent', 'customer.view_customer'], video_call_agent: true }, grants);
  const big = await db('customers').insert({ id: randomUUID(), customer_ref: 'whale-1', first_name: 'Wanda', last_name: 'Whale', raw: '{}', score: 0, decision: 'ACCEPT', created_by: 't', updated_by: 't' }).returning('id');
  await db('events').insert({ slug: 'payment', name: 'Payment', type: 1 }).onConflict('slug').ignore();
  for (const [index, decision] of ['ACCEPT', 'REVIEW', 'REJECT', 'ACCEPT'].entries()) {
    await db('financial_transactions').insert({ id: randomUUID(), transaction_ref: `dash-tx-${index}`, customer_id: big[0].id, customer_ref: 'whale-1', event_slug: 'payment', amount: 25_000, currency: 'EUR', io_type: 0, event_date: db.raw(`now() - interval '${index} days'`), raw: '{}', score: 0, decision, rule_check: true, created_by: 't', updated_by: 't' });
  }
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
  t.regex(await panel.innerText(), /3\s+Open alerts/);
  t.regex(await panel.innerText(), /2\s+Alerts raised today \(UTC\)/);
  t.notRegex(await panel.innerText(), /High-risk customers|Pending approvals/, 'no card of a model she may not view');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the index');
  await Promise.all([page.waitForNavigation(), panel.locator('a:has-text("Cases assigned to me")').click()]);
  t.regex(page.url(), /\/admin\/engine\/watchlist\/\?assignee_id__assigned=me$/);
  t.is(await page.locator('table.results tbody tr').count(), 3, 'the list holds what the count says');
  await page.goBack();
  await Promise.all([page.waitForNavigation(), page.locator('.index-dashboard a:has-text("Alerts raised today")').click()]);
  t.is(await page.locator('table.results tbody tr').count(), 2, 'the alerts list holds today’s two');
  t.notRegex(await page.locator('main').innerText(), /Decisions by day|High-volume customers/, 'no financial-event blocks without that permission');
});

browserTest('the mobile blocks on the web: decisions by day, high-volume customers linking to the customer, the agent summary', async (t) => {
  const { page } = browser;
  await page.context().clearCookies();
  await page.goto(`${app.url}/admin/`);
  await page.fill('#id_username', 'fiona');
  await page.fill('#id_password', PASSWORD);
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')]);
  const chart = page.locator('section:has(#decisions-title)');
  t.regex(await chart.locator('svg title').innerHTML(), /ACCEPT 2, REVIEW 1, REJECT 1/);
  t.is(await chart.locator('rect').count(), 4, 'one bar segment per day with an event');
  const volume = page.locator('section:has(#volume-title)');
  t.regex(await volume.innerText(), /Wanda Whale\s+100000\.00 EUR\s+4/);
  t.regex(await page.locator('section:has(#agent-title)').innerText(), /Away|Available/);
  t.notRegex(await page.locator('main').innerText(), /Video-call lobby/, 'no lobby without the sessions permission');
  t.deepEqual(await seriousViolations(page), [], 'axe-core on the index with the blocks');
  await Promise.all([page.waitForNavigation(), volume.locator('a:has-text("Wanda Whale")').click()]);
  t.regex(page.url(), /\/admin\/customer\/customer\/[0-9a-f-]{36}\/change\/$/);
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
