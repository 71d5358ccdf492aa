/**
 * Reports read only what their reader may see, and one user's runs are limited: each kind names
 * the back-office models it reads, and running it needs view on each of them (403 naming the
 * model); the reports a user is offered are those they may run; a result is read by the user who
 * requested it (while they may still run its kind) and by superusers, in the mobile API, the
 * generic data API and the MCP tools alike; the rows are computed at run time with the
 * requester's permissions; at most REPORT_MAX_ACTIVE_RUNS runs per user are queued or running at
 * once (429 too_many_running with Retry-After, race-safe).
 */
import test from 'ava';
import type { Knex } from 'knex';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { listRows } from '../../src/modules/backoffice/query.ts';
import { runAction } from '../../src/modules/backoffice/write.ts';
import { REPORT_KINDS } from '../../src/modules/reports/kinds.ts';
import { mayViewModel } from '../../src/modules/reports/access.ts';
import { REPORT_MAX_ACTIVE_RUNS, runReport } from '../../src/modules/reports/service.ts';

let app: TestApp;
let clock: TestClock;

const REPORTS = ['report.view_report', 'report.add_report', 'report.change_report', 'report.view_reportresult'];
const EVERY_MODEL = ['transaction.view_financialevent', 'customer.view_customer', 'engine.view_compliancedecision', 'engine.view_alert', 'document.view_documentverificationsession'];
/** The model each kind reads, as the 403 names it. */
const READS: Record<string, string> = {
  transactions_above: 'transaction.financialevent',
  customers_by_risk: 'customer.customer',
  decisions_by_officer: 'engine.compliancedecision',
  alerts_by_rule: 'engine.alert',
  sanctions_hits: 'customer.customer',
  verification_outcomes: 'document.documentverificationsession',
};

interface User {
  id: string;
  token: string;
}
let reportsOnly: User;
let customerAnalyst: User;
let full: User;
let peer: User;
let superuser: User;
/** One report of each kind, by kind. */
const reportOf: Record<string, number> = {};

async function user(permissions: string[], extra: { is_superuser?: boolean } = {}): Promise<User> {
  const created = await staffUser(app, { permissions, ...extra });
  return { id: created.id, token: (await pairDevice(app, clock, created.id)).accessToken };
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  const customers = await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'acc-ann' }, { customer_ref: 'acc-ben' }] });
  if (customers.status !== 200) throw new Error(customers.text);
  const payments = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'acc-ann', event_slug: 'deposit', amount: '15000.00', currency: 'EUR', transaction_ref: 'acc-0', io_type: 0, event_date: hoursAgo(2) }],
  });
  if (payments.status !== 200) throw new Error(payments.text);
  reportsOnly = await user(REPORTS);
  customerAnalyst = await user([...REPORTS, 'customer.view_customer']);
  full = await user([...REPORTS, ...EVERY_MODEL]);
  peer = await user([...REPORTS, ...EVERY_MODEL]);
  superuser = await user([], { is_superuser: true });
  for (const kind of Object.keys(READS)) {
    const [row] = await app.database.knex('reports').insert({ name: `All ${kind}`, kind, parameters: kind === 'customers_by_risk' ? { min_score: 0 } : {} }).returning('id');
    reportOf[kind] = row.id;
  }
});
test.after.always(async () => {
  await app?.close();
});

async function finished(resultId: number, token: string) {
  for (let tries = 0; tries < 200; tries++) {
    const response = await app.request('GET', `/api/mobile/reports/results/${resultId}/`, { token });
    if (['done', 'failed'].includes(response.body.data?.status)) return response;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('report did not finish');
}

async function run(kind: string, who: User) {
  return app.request('POST', `/api/mobile/reports/${reportOf[kind]}/run/`, { token: who.token });
}

async function listed(path: string, who: User): Promise<string[]> {
  const response = await app.request('GET', `/api/mobile/data/${path}/?page_size=200`, { token: who.token });
  if (response.status !== 200) throw new Error(response.text);
  return response.body.data.results.map((row: { pk: string }) => row.pk);
}

test.serial('every kind declares the registered models it reads; the access rule is the admin site\'s view rule', async (t) => {
  const site = app.context.backoffice.site;
  t.deepEqual([...REPORT_KINDS.keys()].sort(), Object.keys(READS).sort());
  for (const [name, kind] of REPORT_KINDS) {
    t.true(kind.models.includes(READS[name]!), name);
    for (const key of kind.models) t.truthy(site.models.get(key), `${name} reads ${key}, a registered model`);
  }
  // The scope and save hooks have no site at hand: their rule must answer as site.can does.
  for (const who of [reportsOnly, customerAnalyst, full, superuser]) {
    const principal = (await loadPrincipal(app.database.knex, who.id))!;
    for (const key of new Set(Object.values(READS))) t.is(mayViewModel(principal, key), site.can(principal, site.models.get(key)!, 'view'), key);
  }
  const changer = (await loadPrincipal(app.database.knex, (await staffUser(app, { permissions: ['customer.change_customer', 'engine.change_compliancedecision'] })).id))!;
  t.true(mayViewModel(changer, 'customer.customer'), 'change implies view');
  t.false(mayViewModel(changer, 'engine.compliancedecision'), 'not where change is disabled');
  t.is(mayViewModel(changer, 'engine.compliancedecision'), site.can(changer, site.models.get('engine.compliancedecision')!, 'view'));
});

test.serial('running a kind needs view on every model it reads: 403 in the envelope naming the model, nothing queued', async (t) => {
  for (const [kind, model] of Object.entries(READS)) {
    const response = await run(kind, reportsOnly);
    t.is(response.status, 403, `${kind}: ${response.text}`);
    t.false(response.body.status);
    t.is(response.body.data.reason, 'permission_denied');
    t.is(response.body.data.model, model, kind);
    t.true(response.body.message.includes(model), response.body.message);
  }
  t.is((await run('transactions_above', customerAnalyst)).status, 403);
  t.is(await app.database.knex('report_results').whereIn('requested_by_id', [reportsOnly.id, customerAnalyst.id]).count({ n: '*' }).first().then((row) => Number(row!.n)), 0);
  const allowed = await run('customers_by_risk', customerAnalyst);
  t.is(allowed.status, 202, allowed.text);
  t.is((await finished(allowed.body.data.result_id, customerAnalyst.token)).body.data.status, 'done');
});

test.serial('the reports a user is offered are those they may run; defining one of another kind is refused naming the model', async (t) => {
  t.deepEqual(await listed('report/report', reportsOnly), []);
  t.deepEqual((await listed('report/report', customerAnalyst)).sort(), [String(reportOf.customers_by_risk), String(reportOf.sanctions_hits)].sort());
  t.is((await listed('report/report', full)).length, Object.keys(READS).length);
  t.is((await app.request('GET', `/api/mobile/data/report/report/${reportOf.transactions_above}/`, { token: customerAnalyst.token })).status, 404);

  const refused = await app.request('POST', '/api/mobile/data/report/report/', { token: customerAnalyst.token, json: { name: 'Payments', kind: 'transactions_above', parameters: {} } });
  t.is(refused.status, 400, refused.text);
  t.regex(refused.body.data.errors.kind[0].message, /transaction\.financialevent/);
  const accepted = await app.request('POST', '/api/mobile/data/report/report/', { token: customerAnalyst.token, json: { name: 'Risky', kind: 'sanctions_hits', parameters: {} } });
  t.is(accepted.status, 201, accepted.text);
  const moved = await app.request('PATCH', `/api/mobile/data/report/report/${accepted.body.data.object.pk}/`, { token: customerAnalyst.token, json: { kind: 'alerts_by_rule' } });
  t.is(moved.status, 400, moved.text);
  t.regex(moved.body.data.errors.kind[0].message, /engine\.alert/);

  // The web admin's bulk action queues only what the user may run.
  const principal = (await loadPrincipal(app.database.knex, customerAnalyst.id))!;
  const model = app.context.backoffice.site.get('report', 'report')!;
  await runAction(app.context.backoffice, model, principal, 'run', [String(reportOf.transactions_above)]).catch(() => undefined);
  t.is(await app.database.knex('report_results').where({ requested_by_id: customerAnalyst.id, report_id: reportOf.transactions_above }).first(), undefined);
});

test.serial('a result is read by its requester and by superusers only: header, rows, CSV, the data API list and the MCP list', async (t) => {
  const started = await run('transactions_above', full);
  t.is(started.status, 202, started.text);
  const resultId = started.body.data.result_id;
  const done = (await finished(resultId, full.token)).body.data;
  t.is(done.status, 'done');
  t.is(done.row_count, 1);

  for (const path of [`reports/results/${resultId}/`, `reports/results/${resultId}/csv/`, `reports/results/${resultId}/?page=1&page_size=1`]) {
    const other = await app.request('GET', `/api/mobile/${path}`, { token: peer.token });
    t.is(other.status, 404, `${path}: ${other.text}`);
    t.false(other.text.includes('acc-0'));
  }
  t.false((await listed('report/reportresult', peer)).includes(String(resultId)));
  t.true((await listed('report/reportresult', full)).includes(String(resultId)));
  const detail = await app.request('GET', `/api/mobile/data/report/report/${reportOf.transactions_above}/?include_inlines=1`, { token: peer.token });
  t.is(detail.status, 200, detail.text);
  t.false(JSON.stringify(detail.body.data.inlines).includes(`"pk":"${resultId}"`));

  // The generic list the MCP tools and the web admin use narrows the same way.
  const site = app.context.backoffice.site;
  const resultModel = site.get('report', 'reportresult')!;
  const peerPrincipal = (await loadPrincipal(app.database.knex, peer.id))!;
  const seen = await listRows(site, app.database.knex, resultModel, peerPrincipal, { page: 1, pageSize: 100, search: '', order: [], filters: {} });
  t.false(seen.rows.some((row) => Number(row.id) === resultId));

  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/`, { token: full.token })).status, 200);
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/csv/`, { token: full.token })).status, 200);
  const admin = await app.request('GET', `/api/mobile/reports/results/${resultId}/`, { token: superuser.token });
  t.is(admin.status, 200, admin.text);
  t.deepEqual(admin.body.data.rows.rows.map((row: unknown[]) => row[0]), ['acc-0']);
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/csv/`, { token: superuser.token })).status, 200);
  t.true((await listed('report/reportresult', superuser)).includes(String(resultId)));

  // Losing view on the model the report reads ends the requester's access to what it stored.
  await app.database.knex('staff_user_permissions').where({ user_id: full.id, codename: 'transaction.view_financialevent' }).delete();
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/`, { token: full.token })).status, 404);
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/csv/`, { token: full.token })).status, 404);
  await app.database.knex('staff_user_permissions').insert({ user_id: full.id, codename: 'transaction.view_financialevent' });
});

test.serial('rows are computed at run time with the requester\'s permissions: a run whose requester lost them fails and stores no rows', async (t) => {
  const loser = await user([...REPORTS, 'customer.view_customer']);
  const [result] = await app.database.knex('report_results').insert({ report_id: reportOf.customers_by_risk, status: 'queued', requested_by_id: loser.id }).returning('id');
  await app.database.knex('staff_user_permissions').where({ user_id: loser.id, codename: 'customer.view_customer' }).delete();
  await runReport(app.context, result.id);
  const stored = await app.database.knex('report_results').where({ id: result.id }).first();
  t.is(stored.status, 'failed');
  t.is(stored.rows, null);
  t.is(stored.file_path, null);
  t.regex(stored.error_message, /customer\.customer/);
});

/** Holds the report worker on a result row it must claim first, so runs stay queued while a test counts them. */
async function holdWorker(): Promise<{ release(): Promise<void> }> {
  const [blocker] = await app.database.knex('report_results').insert({ report_id: reportOf.verification_outcomes, status: 'queued', requested_by_id: superuser.id }).returning('id');
  const held = await app.database.knex.transaction();
  await held('report_results').where({ id: blocker.id }).forUpdate().select('id');
  await app.database.knex.transaction((trx) => app.context.jobs.runReport(trx, blocker.id));
  // Let the worker take the blocker's job and wait on its row.
  for (let tries = 0; tries < 100; tries++) {
    const waiting = await app.database.knex.raw("select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query ilike '%report_results%'");
    if (waiting.rows[0].n > 0) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return { release: async () => void (await held.rollback()) };
}

test.serial(`at most ${REPORT_MAX_ACTIVE_RUNS} runs per user queued or running: 429 too_many_running with Retry-After, even when the requests race`, async (t) => {
  const busy = await user([...REPORTS, ...EVERY_MODEL]);
  const hold = await holdWorker();
  try {
    const answers = await Promise.all(Array.from({ length: 10 }, () => run('verification_outcomes', busy)));
    const statuses = answers.map((answer) => answer.status).sort();
    t.deepEqual(statuses, [...Array(REPORT_MAX_ACTIVE_RUNS).fill(202), ...Array(10 - REPORT_MAX_ACTIVE_RUNS).fill(429)], answers.map((answer) => answer.text).join('\n'));
    const refused = answers.find((answer) => answer.status === 429)!;
    t.false(refused.body.status);
    t.is(refused.body.data.reason, 'too_many_running');
    t.true(Number(refused.headers.get('retry-after')) > 0);
    t.is(await activeRuns(app.database.knex, busy.id), REPORT_MAX_ACTIVE_RUNS);

    // The web admin's bulk action meets the same limit, and queues nothing of a refused batch.
    const principal = (await loadPrincipal(app.database.knex, busy.id))!;
    const model = app.context.backoffice.site.get('report', 'report')!;
    await t.throwsAsync(runAction(app.context.backoffice, model, principal, 'run', [String(reportOf.alerts_by_rule)]));
    t.is(await activeRuns(app.database.knex, busy.id), REPORT_MAX_ACTIVE_RUNS);
    // Another user is not held back by this one's runs.
    t.is((await run('verification_outcomes', peer)).status, 202);
  } finally {
    await hold.release();
  }
  // Once they finish, the user may run again.
  for (const row of await app.database.knex('report_results').where({ requested_by_id: busy.id }).select('id')) await finished(row.id, busy.token);
  t.is((await run('verification_outcomes', busy)).status, 202);
});

function activeRuns(db: Knex, userId: string): Promise<number> {
  return db('report_results').where({ requested_by_id: userId }).whereIn('status', ['queued', 'running']).count({ n: '*' }).first().then((row) => Number(row!.n));
}
