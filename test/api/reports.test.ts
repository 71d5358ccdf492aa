/** Reports: definitions with checked parameters, runs as jobs (mobile endpoint and the web admin's bulk action), results and their errors. */
import fs from 'node:fs';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { runAction } from '../../src/modules/backoffice/write.ts';
import { toCsv } from '../../src/modules/reports/service.ts';

let app: TestApp;
let clock: TestClock;
let analyst: { id: string; token: string };

// Running a kind needs view on the models it reads (reports-access.test.ts): the analyst may view all of them.
const REPORT_PERMISSIONS = [
  'report.view_report', 'report.add_report', 'report.view_reportresult',
  'transaction.view_financialevent', 'customer.view_customer', 'engine.view_compliancedecision', 'engine.view_alert', 'document.view_documentverificationsession',
];

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'r-ann' }, { customer_ref: 'r-ben' }] });
  const payments = [
    ['r-ann', '15000.00', 2],
    ['r-ben', '12000.50', 3],
    ['r-ann', '900.00', 4],
    ['r-ben', '20000.00', 24 * 40],
  ].map(([customer, amount, hours], index) => ({
    customer_ref: customer, event_slug: 'deposit', amount, currency: 'EUR', transaction_ref: `rep-${index}`, io_type: 0, event_date: hoursAgo(Number(hours)),
  }));
  const stored = await app.request('POST', '/api/transaction/financial/upsert/', { token: merchant, json: payments });
  if (stored.status !== 200) throw new Error(stored.text);
  const user = await staffUser(app, { permissions: REPORT_PERMISSIONS });
  analyst = { id: user.id, token: (await pairDevice(app, clock, user.id)).accessToken };
});
test.after.always(async () => {
  await app?.close();
});

async function createReport(body: Record<string, unknown>) {
  const response = await app.request('POST', '/api/mobile/data/report/report/', { token: analyst.token, json: body });
  if (response.status !== 201) throw new Error(response.text);
  return Number(response.body.data.object.pk);
}

async function finished(resultId: number, token = analyst.token) {
  for (let tries = 0; tries < 200; tries++) {
    const response = await app.request('GET', `/api/mobile/reports/results/${resultId}/`, { token });
    if (['done', 'failed'].includes(response.body.data?.status)) return response;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('report did not finish');
}

test.serial('parameters are checked against the kind: unknown names, wrong types and out-of-range values are field errors', async (t) => {
  for (const parameters of [{ threshold: 'lots' }, { days: 0 }, { days: 1.5 }, { colour: 'red' }, [1, 2]]) {
    const response = await app.request('POST', '/api/mobile/data/report/report/', { token: analyst.token, json: { name: 'Bad', kind: 'transactions_above', parameters } });
    t.is(response.status, 400, JSON.stringify(parameters));
    t.truthy(response.body.data.errors.parameters);
  }
  const badKind = await app.request('POST', '/api/mobile/data/report/report/', { token: analyst.token, json: { name: 'Bad', kind: 'everything', parameters: {} } });
  t.is(badKind.status, 400);
  t.truthy(badKind.body.data.errors.kind);
});

test.serial('a run from the mobile API: 202, a job, then every field of the Report result, rows page by page, the CSV file and a notification', async (t) => {
  const reportId = await createReport({ name: 'Large payments', description: 'Above 10k in 30 days', kind: 'transactions_above', parameters: { threshold: 10000, days: 30 } });
  const started = await app.request('POST', `/api/mobile/reports/${reportId}/run/`, { token: analyst.token });
  t.is(started.status, 202);
  t.is(started.body.data.status, 'queued');
  const resultId = started.body.data.result_id;
  const response = await finished(resultId);
  const data = response.body.data;
  t.deepEqual(Object.keys(data).sort(), [
    'completed_at', 'duration_seconds', 'error_message', 'has_file', 'id', 'report', 'row_count', 'rows', 'started_at', 'status', 'status_display', 'title', 'tone',
  ]);
  t.like(data, { id: resultId, status: 'done', status_display: 'Done', tone: 'success', row_count: 2, error_message: null, has_file: true });
  t.deepEqual(data.report, { id: reportId, name: 'Large payments', description: 'Above 10k in 30 days' });
  t.regex(data.started_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/);
  t.true(typeof data.duration_seconds === 'number' && data.duration_seconds >= 0);
  t.deepEqual(data.rows.columns, ['transaction_ref', 'customer_ref', 'amount', 'currency', 'event_date', 'decision', 'score']);
  t.deepEqual(data.rows.rows.map((row: unknown[]) => [row[0], row[2]]), [['rep-0', '15000.00'], ['rep-1', '12000.50']]);
  t.like(data.rows, { page: 1, page_size: 50, total: 2, has_more: false, error: null });

  const paged = (await app.request('GET', `/api/mobile/reports/results/${resultId}/?page=2&page_size=1`, { token: analyst.token })).body.data.rows;
  t.like(paged, { page: 2, page_size: 1, total: 2, has_more: false });
  t.deepEqual(paged.rows.map((row: unknown[]) => row[0]), ['rep-1']);
  t.true((await app.request('GET', `/api/mobile/reports/results/${resultId}/?page_size=1`, { token: analyst.token })).body.data.rows.has_more);

  const csv = await app.request('GET', `/api/mobile/reports/results/${resultId}/csv/`, { token: analyst.token });
  t.is(csv.status, 200);
  t.regex(csv.headers.get('content-type')!, /text\/csv/);
  t.is(csv.text.split('\r\n')[0], 'transaction_ref,customer_ref,amount,currency,event_date,decision,score');
  t.is(csv.text.trim().split('\r\n').length, 3);
  const stored = await app.database.knex('report_results').where({ id: resultId }).first();
  t.true(fs.existsSync(stored.file_path));

  const notification = await app.database.knex('notifications').where({ user_id: analyst.id, kind: 'report_done' }).first();
  t.like(notification, { title: 'Report ready: Large payments', body: '2 row(s).', target_model: 'report.reportresult', target_pk: String(resultId) });
});

test.serial('every kind runs; the web admin bulk action queues runs of the selected reports', async (t) => {
  const kinds = ['customers_by_risk', 'decisions_by_officer', 'alerts_by_rule', 'sanctions_hits', 'verification_outcomes'];
  const ids: number[] = [];
  for (const kind of kinds) ids.push(await createReport({ name: kind, kind, parameters: {} }));
  const principal = (await loadPrincipal(app.context.db, analyst.id))!;
  const model = app.context.backoffice.site.get('report', 'report')!;
  // At most REPORT_MAX_ACTIVE_RUNS (3) runs of one user at once (reports-access.test.ts): five go in two batches.
  for (const batch of [ids.slice(0, 3), ids.slice(3)]) {
    const message = await runAction(app.context.backoffice, model, principal, 'run', batch.map(String));
    t.regex(String(typeof message === 'string' ? message : JSON.stringify(message)), new RegExp(`Queued ${batch.length} report run`));
    const results = await app.database.knex('report_results').whereIn('report_id', batch).select('id', 'report_id');
    t.is(results.length, batch.length);
    for (const result of results) {
      const response = await finished(result.id);
      t.is(response.body.data.status, 'done', `${kinds[ids.indexOf(result.report_id)]}: ${response.body.data.error_message}`);
    }
  }
});

test.serial('a failing report stores its error and the worker goes on with the next one', async (t) => {
  const [broken] = await app.database.knex('reports').insert({ name: 'Broken', kind: 'transactions_above', parameters: { threshold: 'x' } }).returning('id');
  const brokenRun = await app.request('POST', `/api/mobile/reports/${broken.id}/run/`, { token: analyst.token });
  const healthy = await createReport({ name: 'After', kind: 'verification_outcomes', parameters: { days: 7 } });
  const healthyRun = await app.request('POST', `/api/mobile/reports/${healthy}/run/`, { token: analyst.token });
  const failed = (await finished(brokenRun.body.data.result_id)).body.data;
  t.like(failed, { status: 'failed', status_display: 'Failed', tone: 'danger', has_file: false, row_count: null });
  t.regex(failed.error_message, /threshold must be a number/);
  t.is(failed.rows.error, failed.error_message);
  t.deepEqual(failed.rows.rows, []);
  t.is((await finished(healthyRun.body.data.result_id)).body.data.status, 'done');
  t.is((await app.request('GET', `/api/mobile/reports/results/${brokenRun.body.data.result_id}/csv/`, { token: analyst.token })).status, 404);
});

test.serial('errors: data/report/reportresult/<pk>/ is 404; unknown results and reports 404; permissions 403; no token 401; bad paging 400', async (t) => {
  const reportId = await createReport({ name: 'x', kind: 'sanctions_hits', parameters: {} });
  const run = await app.request('POST', `/api/mobile/reports/${reportId}/run/`, { token: analyst.token });
  const resultId = run.body.data.result_id;
  await finished(resultId);
  const mirror = await app.request('GET', `/api/mobile/data/report/reportresult/${resultId}/`, { token: analyst.token });
  t.is(mirror.status, 404);
  t.false(mirror.body.status);
  for (const bad of ['999999', 'abc', '-1']) {
    t.is((await app.request('GET', `/api/mobile/reports/results/${bad}/`, { token: analyst.token })).status, 404, bad);
    t.is((await app.request('POST', `/api/mobile/reports/${bad}/run/`, { token: analyst.token })).status, 404, bad);
  }
  for (const query of ['page=0', 'page_size=201', 'page=x', 'other=1']) {
    t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/?${query}`, { token: analyst.token })).status, 400, query);
  }
  const stranger = await staffUser(app, { permissions: ['customer.view_customer'] });
  const strangerToken = (await pairDevice(app, clock, stranger.id)).accessToken;
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/`, { token: strangerToken })).status, 403);
  t.is((await app.request('POST', `/api/mobile/reports/${reportId}/run/`, { token: strangerToken })).status, 403);
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/csv/`, { token: strangerToken })).status, 403);
  t.is((await app.request('GET', `/api/mobile/reports/results/${resultId}/`)).status, 401);
});

test('CSV: quotes, line breaks and formula-looking text are escaped', (t) => {
  t.is(toCsv(['a', 'b'], [['x,y', 'say "hi"'], ['=SUM(A1)', null], [-5, 'line\nbreak']]), 'a,b\r\n"x,y","say ""hi"""\r\n\'=SUM(A1),\r\n-5,"line\nbreak"\r\n');
});
