/** The mobile data layer: list, detail, create, update, delete and autocomplete of registered models. */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { PendingApprovalConflict } from '../../src/modules/backoffice/errors.ts';
import { stripHtml } from '../../src/modules/mobile/present.ts';
import { listPage, recordDetail } from '../../src/modules/mobile/data.ts';
import { AdminSite } from '../../src/modules/backoffice/site.ts';
import { REGISTRATIONS } from '../../src/app/registrations.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import type { Context } from 'koa';
import { createGroup } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, operator, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
let adminToken: string;
let analystToken: string;
let editorToken: string;
let nobodyToken: string;
let customerId: string;
let caseId: string;
let newestEventId: string;

const DATA = '/api/mobile/data/';
const EVENTS = `${DATA}transaction/financialevent/`;
const GROUPS = `${DATA}auth/group/`;

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const knex = app.database.knex;
  const grants = { actor: operator, known: new Set(permissionCodenames()) };
  await createGroup(knex, { name: 'Analysts', permissions: ['customer.view_customer', 'transaction.view_financialevent', 'engine.change_watchlist'] }, grants);
  await createGroup(knex, { name: 'Group editors', permissions: ['auth.view_group', 'auth.add_group', 'auth.change_group', 'auth.delete_group'] }, grants);
  const admin = await staffUser(app, { is_superuser: true });
  const analyst = await staffUser(app, { groups: ['Analysts'] });
  const editor = await staffUser(app, { groups: ['Group editors'] });
  const nobody = await staffUser(app);
  adminToken = (await pairDevice(app, clock, admin.id)).accessToken;
  analystToken = (await pairDevice(app, clock, analyst.id)).accessToken;
  editorToken = (await pairDevice(app, clock, editor.id)).accessToken;
  nobodyToken = (await pairDevice(app, clock, nobody.id)).accessToken;

  customerId = randomUUID();
  await knex('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await knex('customers').insert({
    id: customerId, customer_ref: 'cus-1', first_name: 'Ada', last_name: '<script>alert(1)</script>', raw: '{}', score: 0, decision: 'ACCEPT',
    created_by: 't', updated_by: 't', created_at: new Date('2026-01-02T03:04:05.678Z'),
  });
  const rows = Array.from({ length: 250 }, (_, index) => ({
    id: randomUUID(),
    transaction_ref: `tx-${String(index).padStart(4, '0')}`,
    customer_id: customerId,
    customer_ref: 'cus-1',
    event_slug: 'payment',
    amount: (index + 1) * 10,
    currency: 'EUR',
    io_type: index % 2,
    event_date: new Date(Date.UTC(2026, 0, 1) + index * 3_600_000),
    raw: '{}',
    score: index % 100,
    decision: index % 3 === 0 ? 'REVIEW' : 'ACCEPT',
    rule_check: true,
    created_by: 't',
    updated_by: 't',
  }));
  newestEventId = rows.at(-1)!.id;
  await knex.batchInsert('financial_transactions', rows, 250);
  [{ id: caseId }] = await knex('cases').insert({ customer_id: customerId, postponed_until: '2026-02-03' }).returning('id');
});

test.after.always(async () => {
  await app?.close();
});

test('list: rows with pk, repr, display cells, ISO dates, tones of coloured columns only; pagination, applied, columns, timezone', async (t) => {
  const response = await app.request('GET', EVENTS, { token: analystToken });
  t.is(response.status, 200);
  t.true(response.body.status);
  const data = response.body.data;
  t.is(data.timezone, 'UTC');
  t.deepEqual(data.pagination, { page: 1, page_size: 100, total: 250, pages: 3, total_is_estimate: false });
  t.deepEqual(data.applied, { query: '', filters: {}, ordering: '' });
  t.deepEqual(data.columns, ['transaction_ref', 'customer_ref', 'event_slug', 'amount', 'currency', 'io_type', 'score', 'decision', 'event_date']);
  t.is(data.results.length, 100);
  // Default ordering -event_date: the newest first.
  t.deepEqual(data.results[0], {
    pk: newestEventId,
    repr: 'tx-0249',
    cells: {
      transaction_ref: 'tx-0249', customer_ref: 'cus-1', event_slug: 'payment', amount: '2500.00', currency: 'EUR',
      io_type: 'Outgoing', score: '49.00', decision: 'Review', event_date: '2026-01-11T09:00:00',
    },
    tones: { decision: 'warning' },
  });
  t.deepEqual(data.results[1].tones, { decision: 'success' });
});

test('list: p, page_size up to 200, q, o, filters and fields', async (t) => {
  const second = await app.request('GET', `${EVENTS}?p=2&page_size=50`, { token: analystToken });
  t.deepEqual(second.body.data.pagination, { page: 2, page_size: 50, total: 250, pages: 5, total_is_estimate: false });
  t.is(second.body.data.results[0].repr, 'tx-0199');

  const largest = await app.request('GET', `${EVENTS}?page_size=200`, { token: analystToken });
  t.is(largest.body.data.results.length, 200);

  const byAmount = await app.request('GET', `${EVENTS}?o=4&page_size=3`, { token: analystToken });
  t.deepEqual(byAmount.body.data.results.map((row: { cells: { amount: string } }) => row.cells.amount), ['10.00', '20.00', '30.00']);
  t.is(byAmount.body.data.applied.ordering, '4');
  // Score descending, then amount descending: the two events scored 99.
  const twoColumns = await app.request('GET', `${EVENTS}?o=-7.-4&page_size=2`, { token: analystToken });
  t.deepEqual(twoColumns.body.data.results.map((row: { cells: Record<string, string> }) => row.cells.amount), ['2000.00', '1000.00']);

  const searched = await app.request('GET', `${EVENTS}?q=tx-0007`, { token: analystToken });
  t.deepEqual(searched.body.data.results.map((row: { repr: string }) => row.repr), ['tx-0007']);
  t.is(searched.body.data.applied.query, 'tx-0007');

  const filtered = await app.request('GET', `${EVENTS}?decision__exact=REVIEW&score__range__gte=90&page_size=200`, { token: analystToken });
  t.true(filtered.body.data.results.length > 0);
  t.true(filtered.body.data.results.every((row: { cells: Record<string, string> }) => row.cells.decision === 'Review' && Number(row.cells.score) >= 90));
  t.deepEqual(filtered.body.data.applied.filters, { decision__exact: 'REVIEW', score__range__gte: '90' });

  const withFields = await app.request('GET', `${EVENTS}?page_size=1&fields=amount,event_date,rule_check,customer_id`, { token: analystToken });
  t.deepEqual(withFields.body.data.results[0].fields, { amount: '2500.00', event_date: '2026-01-11T09:00:00', rule_check: true, customer_id: customerId });

  const beyond = await app.request('GET', `${EVENTS}?p=99`, { token: analystToken });
  t.is(beyond.status, 200);
  t.deepEqual(beyond.body.data.results, []);
});

test('list: bools, joined columns, dates and stored markup kept as text', async (t) => {
  const customers = await app.request('GET', `${DATA}customer/customer/`, { token: adminToken });
  const customer = customers.body.data.results[0];
  t.is(customer.repr, 'Ada <script>alert(1)</script>');
  t.is(customer.cells.last_name, '<script>alert(1)</script>', 'stored values are data, never stripped');
  t.is(customer.cells.created_at, '2026-01-02T03:04:05');
  t.is(customer.cells.company_name, null);

  const cases = await app.request('GET', `${DATA}engine/watchlist/`, { token: analystToken });
  t.like(cases.body.data.results[0], { pk: caseId, cells: { customer_id__customer_ref: 'cus-1', status: 'Open', flagged: false, assignee_id__username: null }, tones: { status: 'info' } });

  await app.database.knex('rules').insert({ code: 'R1', name: 'Big', target: 'financial', event_slugs: [], expression: '{}', score: 10, active: true, version: 1, updated_by: 't' });
  const rules = await app.request('GET', `${DATA}engine/rule/`, { token: adminToken });
  t.like(rules.body.data.results[0], { pk: 'R1', cells: { active: true, version: '1' }, tones: { active: 'success' } });
});

test('display functions may return markup: the client gets its text', (t) => {
  t.is(stripHtml('<a href="/x">Case <b>42</b></a> &amp; more &#8364;&#x41;'), 'Case 42 & more €A');
  t.is(stripHtml('&#xD800; &bogus;'), '&#xD800; &bogus;');
});

test('list: every bad parameter is a 400 naming it, never a 500', async (t) => {
  const cases: [query: string, parameter: string][] = [
    ['nope__exact=1', 'nope__exact'],
    ['decision=REVIEW', 'decision'],
    ['score__range__gte=abc', 'score__range__gte'],
    ['event_date__range__gte=yesterday', 'event_date__range__gte'],
    ['event_date__range__gte=0000-01-01', 'event_date__range__gte'],
    // Direction is no longer a filter (issue 37: no index serves it); a smallint filter of customers is checked instead.
    ['io_type__exact=1', 'io_type__exact'],
    ['customer_type__exact=%00', 'customer_type__exact'],
    ['customer_type__exact=99999999999999999999', 'customer_type__exact'],
    ['customer_type__exact=1e99', 'customer_type__exact'],
    ['customer_type__exact=0.5', 'customer_type__exact'],
    ['decision__exact=A&decision__exact=B', 'decision__exact'],
    ['page_size=201', 'page_size'],
    ['page_size=0', 'page_size'],
    ['page_size=-5', 'page_size'],
    ['p=0', 'p'],
    ['p=abc', 'p'],
    ['p=99999999999999999999', 'p'],
    ['o=99', 'o'],
    ['o=0', 'o'],
    ['o=1..2', 'o'],
    ['o=name', 'o'],
    ['fields=nope', 'fields'],
    [`q=${'x'.repeat(201)}`, 'q'],
    [`decision__exact=${'x'.repeat(201)}`, 'decision__exact'],
  ];
  for (const [query, parameter] of cases) {
    const list = parameter === 'customer_type__exact' ? `${DATA}customer/customer/` : EVENTS;
    const response = await app.request('GET', `${list}?${query}`, { token: analystToken });
    t.is(response.status, 400, query.slice(0, 40));
    t.false(response.body.status);
    t.is(response.body.data.parameter, parameter, query.slice(0, 40));
  }
  const unknown = await app.request('GET', `${EVENTS}?colour=red`, { token: analystToken });
  t.is(unknown.body.message, 'Unknown parameter: colour.');
  // No search fields: q is refused rather than ignored; hidden columns cannot be asked for.
  t.is((await app.request('GET', `${DATA}engine/compliancedecision/?q=x`, { token: adminToken })).status, 400);
  t.is((await app.request('GET', `${DATA}merchant/credential/?fields=secret_hash`, { token: adminToken })).status, 400);
});

test('a user without view permission probing list, detail and autocomplete gets 403 and never data; an unknown model 404', async (t) => {
  for (const path of [EVENTS, `${EVENTS}${newestEventId}/`, `${EVENTS}autocomplete/?field=customer_id`, `${EVENTS}?q=tx-0001`]) {
    const response = await app.request('GET', path, { token: nobodyToken });
    t.is(response.status, 403, path);
    t.false(response.body.status);
    t.false(response.text.includes('tx-0'), path);
    t.false(response.text.includes('cus-1'), path);
  }
  t.is((await app.request('GET', `${DATA}engine/rule/`, { token: analystToken })).status, 403);
  const unknown = await app.request('GET', `${DATA}engine/nosuch/`, { token: adminToken });
  t.is(unknown.status, 404);
  t.is(unknown.body.data.reason, 'model_not_found');
  t.is((await app.request('GET', `${DATA}engine/nosuch/${randomUUID()}/`, { token: adminToken })).status, 404);
  t.is((await app.request('GET', EVENTS)).status, 401);
});

test('detail: typed fields with kind, value, display, editable, tone and relations; status_field and perms', async (t) => {
  const response = await app.request('GET', `${EVENTS}${newestEventId}/`, { token: analystToken });
  t.is(response.status, 200);
  const data = response.body.data;
  t.like(data, { pk: newestEventId, repr: 'tx-0249', timezone: 'UTC', status_field: 'decision', perms: { view: true, add: false, change: false, delete: false } });
  t.is(data.inlines, undefined);
  t.deepEqual(data.fields.customer_id, {
    type: 'field', label: 'Customer', kind: 'relation', value: customerId, display: 'Ada <script>alert(1)</script>', editable: false,
    related_model: 'customer.customer', related_pk: customerId,
  });
  // The analyst may not view events: no link, and the event is not named (its key is the display).
  t.deepEqual(data.fields.event_slug, { type: 'field', label: 'Event', kind: 'text', value: 'payment', display: 'payment', editable: false });
  t.deepEqual(data.fields.decision, { type: 'field', label: 'Decision', kind: 'badge', value: 'REVIEW', display: 'Review', editable: false, tone: 'warning' });
  t.like(data.fields.amount, { kind: 'number', value: '2500.00', display: '2500.00' });
  t.like(data.fields.event_date, { kind: 'date', value: '2026-01-11T09:00:00', display: '2026-01-11T09:00:00' });
  t.like(data.fields.rule_check, { kind: 'bool', value: true, display: 'Yes' });
  t.like(data.fields.io_type, { kind: 'text', value: 1, display: 'Outgoing' });

  const admin = await app.request('GET', `${EVENTS}${newestEventId}/`, { token: adminToken });
  t.like(admin.body.data.fields.event_slug, { kind: 'relation', related_model: 'engine.event', related_pk: 'payment' });
  t.like(admin.body.data.fields.status, { editable: true });
  t.like(admin.body.data.fields.amount, { editable: false }, 'read-only field');
  t.deepEqual(admin.body.data.perms, { view: true, add: false, change: true, delete: false });

  const theCase = await app.request('GET', `${DATA}engine/watchlist/${caseId}/`, { token: analystToken });
  t.like(theCase.body.data.fields.postponed_until, { kind: 'date', value: '2026-02-03', editable: true });
  t.like(theCase.body.data.fields.flagged, { kind: 'bool', value: false });
  t.like(theCase.body.data.fields.rationale, { kind: 'text', value: null, editable: true });
  t.like(theCase.body.data.fields.assignee_id, { kind: 'text', value: null, display: null }, 'no view permission on users');
});

test('detail: a related record\'s column that the fieldsets name is a display field with its value', async (t) => {
  const owner = await staffUser(app, { full_name: 'Grace <i>Hopper</i>', is_superuser: true });
  const { accessToken, deviceId } = await pairDevice(app, clock, owner.id, 'Grace phone');
  const response = await app.request('GET', `${DATA}mobile/device/${deviceId}/`, { token: accessToken });
  t.is(response.status, 200);
  t.deepEqual(response.body.data.fields.user_id__full_name, { type: 'display', label: 'Full name', kind: 'text', display: 'Grace <i>Hopper</i>', editable: false });
  const schema = await app.request('GET', '/api/mobile/schema/mobile/device/', { token: accessToken });
  t.true(schema.body.data.form.fieldsets[0].fields.includes('user_id__full_name'), 'the schema names it where the detail shows it');
});

test('detail: include_inlines=1 adds the related blocks (up to 50 rows, with total) the user may view', async (t) => {
  const response = await app.request('GET', `${DATA}customer/customer/${customerId}/?include_inlines=1`, { token: analystToken });
  t.is(response.status, 200);
  const inlines = response.body.data.inlines as { model: { model: string; endpoints: { data: string } }; verbose_name_plural: string; total: number; rows: { pk: string; repr: string; fields: Record<string, unknown> }[] }[];
  t.deepEqual(inlines.map((block) => [block.model.model, block.verbose_name_plural, block.total, block.rows.length]), [
    ['financialevent', 'Financial events', 250, 50],
    ['watchlist', 'Cases', 1, 1],
  ]);
  t.is(inlines[0]!.model.endpoints.data, EVENTS);
  t.like(inlines[0]!.rows[0], { pk: newestEventId, repr: 'tx-0249', fields: { transaction_ref: 'tx-0249', amount: '2500.00', decision: 'Review', event_date: '2026-01-11T09:00:00' } });
  const without = await app.request('GET', `${DATA}customer/customer/${customerId}/?include_inlines=0`, { token: analystToken });
  t.is(without.body.data.inlines, undefined);
});

test('detail: 404 for a missing or malformed pk and for report results; 400 for unknown parameters', async (t) => {
  for (const pk of [randomUUID(), 'not-a-uuid', 'x'.repeat(600), '%00']) {
    const response = await app.request('GET', `${EVENTS}${pk}/`, { token: analystToken });
    t.is(response.status, 404, pk.slice(0, 20));
    t.false(response.body.status);
  }
  const [report] = await app.database.knex('reports').insert({ name: 'Big', kind: 'transactions_above', parameters: '{}' }).returning('id');
  const [result] = await app.database.knex('report_results').insert({ report_id: report.id, status: 'done' }).returning('id');
  const reportResult = await app.request('GET', `${DATA}report/reportresult/${result.id}/`, { token: adminToken });
  t.is(reportResult.status, 404);
  t.is((await app.request('GET', `${DATA}report/reportresult/`, { token: adminToken })).status, 200, 'the list stays');
  t.is((await app.request('GET', `${EVENTS}${newestEventId}/?include_inlines=2`, { token: analystToken })).status, 400);
  t.is((await app.request('GET', `${EVENTS}${newestEventId}/?expand=1`, { token: analystToken })).body.data.parameter, 'expand');
});

test('create, partial update, full update and delete through the write chain, each with its audit row', async (t) => {
  const created = await app.request('POST', GROUPS, { token: editorToken, json: { name: 'Officers', permissions: ['auth.view_group', 'auth.add_group'], colour: 'red' } });
  t.is(created.status, 201);
  t.is(created.body.message, 'Created.');
  const pk = created.body.data.object.pk;
  t.deepEqual(created.body.data.object, { pk, repr: 'Officers', fields: { name: 'Officers', permissions: ['auth.add_group', 'auth.view_group'] } });
  t.false(created.body.data.pending_approval);
  t.deepEqual(created.body.data.warnings, ['colour']);
  t.like(created.body.data.messages[0], { level: 'success' });

  const patched = await app.request('PATCH', `${GROUPS}${pk}/`, { token: editorToken, json: { name: 'Senior officers' } });
  t.is(patched.status, 200);
  t.is(patched.body.message, 'Updated.');
  t.deepEqual(patched.body.data.object.fields, { name: 'Senior officers', permissions: ['auth.add_group', 'auth.view_group'] }, 'only the sent field changed');

  const put = await app.request('PUT', `${GROUPS}${pk}/`, { token: editorToken, json: { name: 'Officers' } });
  t.is(put.status, 200);
  t.deepEqual(put.body.data.object.fields, { name: 'Officers', permissions: [] }, 'a full update sets what was left out');
  const incomplete = await app.request('PUT', `${GROUPS}${pk}/`, { token: editorToken, json: { permissions: [] } });
  t.is(incomplete.status, 400);
  t.is(incomplete.body.data.errors.name[0].code, 'required');

  const deleted = await app.request('DELETE', `${GROUPS}${pk}/`, { token: editorToken });
  t.is(deleted.status, 200);
  t.is(deleted.body.message, 'Deleted.');
  t.is(deleted.body.data.object, undefined);
  t.is((await app.request('GET', `${GROUPS}${pk}/`, { token: editorToken })).status, 404);
  t.is((await app.request('DELETE', `${GROUPS}${pk}/`, { token: editorToken })).status, 404);

  const log = await app.database.knex('admin_log_entries').where({ content_type: 'auth.group', object_id: String(pk) }).orderBy('id').pluck('action_flag');
  t.deepEqual(log, [1, 2, 2, 3]);
});

test('writes: validation errors, over-long and wrongly typed fields, malformed bodies; never a 500', async (t) => {
  const empty = await app.request('POST', GROUPS, { token: editorToken, json: { name: '' } });
  t.is(empty.status, 400);
  t.is(empty.body.message, 'Validation failed.');
  t.deepEqual(empty.body.data.errors.name, [{ message: 'This field is required.', code: 'required' }]);
  const typed = await app.request('POST', GROUPS, { token: editorToken, json: { name: 42, permissions: 'auth.view_group', other: 1 } });
  t.is(typed.status, 400);
  t.is(typed.body.data.errors.name[0].code, 'invalid');
  t.is(typed.body.data.errors.permissions[0].code, 'invalid_list');
  t.deepEqual(typed.body.data.warnings, ['other']);
  const long = await app.request('POST', GROUPS, { token: editorToken, json: { name: 'x'.repeat(100_001) } });
  t.is(long.status, 400);
  t.is(long.body.data.errors.name[0].code, 'max_length');
  const unknownPermission = await app.request('POST', GROUPS, { token: editorToken, json: { name: 'Bad', permissions: ['no.such'] } });
  t.is(unknownPermission.body.data.errors.permissions[0].code, 'invalid_choice');
  const escalation = await app.request('POST', GROUPS, { token: editorToken, json: { name: 'Escalate', permissions: ['auth.add_user'] } });
  t.is(escalation.status, 400);
  t.is(escalation.body.data.errors.permissions[0].code, 'forbidden');

  const malformed = await app.request('POST', GROUPS, { token: editorToken, body: '{"name": ', headers: { 'content-type': 'application/json' } });
  t.is(malformed.status, 400);
  t.is(malformed.body.data.reason, 'invalid_json');
  t.is((await app.request('POST', GROUPS, { token: editorToken, json: ['name'] })).status, 400);
  t.is((await app.request('PATCH', `${GROUPS}1/`, { token: editorToken, json: null })).status, 400);
  t.is((await app.request('POST', GROUPS, { token: editorToken, body: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status, 415);
  t.is((await app.request('POST', GROUPS, { token: editorToken, json: { name: 'y'.repeat(1024 * 1024) } })).status, 413);

  // Wrongly typed values on other field types, through a superuser so that only validation answers.
  const theCase = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: adminToken, json: { postponed_until: '2026-02-30', flagged: 'maybe', assignee_id: 'not-a-user', status: 'gone' } });
  t.is(theCase.status, 400);
  t.deepEqual(Object.keys(theCase.body.data.errors).sort(), ['assignee_id', 'flagged', 'postponed_until', 'status']);
  const rationale = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: analystToken, json: { status: 'escalated' } });
  t.is(rationale.status, 400);
  t.is(rationale.body.data.errors.rationale[0].code, 'required');
  const escalated = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: analystToken, json: { status: 'escalated', rationale: 'Structuring.' } });
  t.is(escalated.status, 200);
  t.is(escalated.body.data.object.fields.status, 'escalated');
  // The audit entry's change, which the log entry's detail shows, keeps times in the spec's form.
  const postponed = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: analystToken, json: { postponed_until: '2026-03-04', rationale: 'Waiting for documents.' } });
  t.is(postponed.status, 200);
  const [entry] = await app.database.knex('admin_log_entries').where({ content_type: 'engine.watchlist', object_id: caseId }).orderBy('id', 'desc').limit(1);
  t.truthy(entry.change.postponed_until);
  t.notRegex(JSON.stringify(entry.change), /\d{2}:\d{2}:\d{2}(\.\d+)?Z/);
});

test('writes: 403 where the web would forbid, 404 for unknown models and records, 405 for unsupported methods', async (t) => {
  t.is((await app.request('POST', GROUPS, { token: analystToken, json: { name: 'Nope' } })).status, 403);
  t.is((await app.request('PATCH', `${DATA}customer/customer/${customerId}/`, { token: analystToken, json: { first_name: 'Eve' } })).status, 403);
  t.is((await app.request('DELETE', `${DATA}customer/customer/${customerId}/`, { token: adminToken })).status, 403, 'customers cannot be deleted');
  t.is((await app.request('POST', `${DATA}engine/compliancedecision/`, { token: adminToken, json: {} })).status, 403, 'append-only');
  t.is((await app.request('POST', `${DATA}customer/customer/`, { token: nobodyToken, json: { customer_ref: 'x' } })).status, 403);
  t.is((await app.database.knex('customers').where({ first_name: 'Eve' })).length, 0);

  t.is((await app.request('POST', `${DATA}engine/nosuch/`, { token: adminToken, json: {} })).status, 404);
  t.is((await app.request('PATCH', `${GROUPS}999999/`, { token: editorToken, json: { name: 'x' } })).status, 404);
  t.is((await app.request('PATCH', `${GROUPS}not-a-number/`, { token: editorToken, json: { name: 'x' } })).status, 404);

  for (const [method, path] of [['PUT', GROUPS], ['DELETE', GROUPS], ['POST', `${GROUPS}1/`], ['PATCH', `${GROUPS}autocomplete/`], ['DELETE', `${GROUPS}autocomplete/`], ['POST', `${GROUPS}autocomplete/`]] as const) {
    const response = await app.request(method, path, { token: editorToken, json: {} });
    t.is(response.status, 405, `${method} ${path}`);
    t.false(response.body.status);
    t.truthy(response.headers.get('allow'));
    // The autocomplete path only reads, whatever the detail path beside it allows.
    if (path.endsWith('autocomplete/')) t.is(response.headers.get('allow'), 'GET, HEAD', `${method} ${path}`);
  }
});

test('writes under an approval policy answer 202 and change nothing; a second change while one is pending is refused', async (t) => {
  const chain = app.context.backoffice;
  const origins = new Set<string>();
  chain.approvalHook = async (candidate) => {
    if (candidate.model.key !== 'engine.event') return null;
    origins.add(candidate.origin.channel);
    if (candidate.pk === 'pending') throw new PendingApprovalConflict('A change of this event is already waiting for approval.');
    return { requestId: 'request-1' };
  };
  try {
    await app.database.knex('events').insert({ slug: 'pending', name: 'Pending', type: 1 });
    const created = await app.request('POST', `${DATA}engine/event/`, { token: adminToken, json: { slug: 'refund', name: 'Refund', type: '1', active: true } });
    t.is(created.status, 202);
    t.is(created.body.message, 'Change submitted for approval.');
    t.like(created.body.data, { pending_approval: true, approval_request_id: 'request-1' });
    t.is(await app.database.knex('events').where({ slug: 'refund' }).first(), undefined);

    const renamed = await app.request('PATCH', `${DATA}engine/event/payment/`, { token: adminToken, json: { name: 'Card payment' } });
    t.is(renamed.status, 202);
    t.is((await app.database.knex('events').where({ slug: 'payment' }).first()).name, 'Payment');

    const conflict = await app.request('PATCH', `${DATA}engine/event/pending/`, { token: adminToken, json: { name: 'Again' } });
    t.is(conflict.status, 409);
    t.deepEqual(conflict.body.data.messages, [{ level: 'error', message: 'A change of this event is already waiting for approval.' }]);
    t.deepEqual([...origins], ['mobile'], 'the chain knows the write came from the mobile API');
  } finally {
    chain.approvalHook = null;
  }
});

test('autocomplete: field required, 20 a page with more, view permission on the target required', async (t) => {
  await app.database.knex('staff_groups').insert(Array.from({ length: 25 }, (_, index) => ({ name: `Team ${String(index).padStart(2, '0')}` })));
  const first = await app.request('GET', `${DATA}auth/user/autocomplete/?field=groups&q=team`, { token: adminToken });
  t.is(first.status, 200);
  t.is(first.body.data.results.length, 20);
  t.true(first.body.data.more);
  t.is(first.body.data.page, 1);
  t.deepEqual(Object.keys(first.body.data.results[0]).sort(), ['text', 'value']);
  t.is(first.body.data.results[0].text, 'Team 00');
  const second = await app.request('GET', `${DATA}auth/user/autocomplete/?field=groups&q=team&p=2`, { token: adminToken });
  t.deepEqual(second.body.data.results.map((option: { text: string }) => option.text), ['Team 20', 'Team 21', 'Team 22', 'Team 23', 'Team 24']);
  t.false(second.body.data.more);

  const customers = await app.request('GET', `${EVENTS}autocomplete/?field=customer_id&q=cus`, { token: analystToken });
  t.deepEqual(customers.body.data, { results: [{ value: customerId, text: 'Ada <script>alert(1)</script>' }], more: false, page: 1 });

  // The analyst may change cases but not view users: the assignee options are refused.
  const assignees = await app.request('GET', `${DATA}engine/watchlist/autocomplete/?field=assignee_id`, { token: analystToken });
  t.is(assignees.status, 403);
  t.is((await app.request('GET', `${DATA}auth/user/autocomplete/?field=groups`, { token: analystToken })).status, 403);

  for (const query of ['', '?q=x', '?field=name', '?field=nope', '?field=groups&p=0', '?field=groups&colour=red', '?field=groups&field=groups', `?field=groups&q=${'x'.repeat(201)}`]) {
    const response = await app.request('GET', `${DATA}auth/user/autocomplete/${query}`, { token: adminToken });
    t.is(response.status, 400, query.slice(0, 40));
    t.false(response.body.status);
  }
  t.is((await app.request('GET', `${DATA}auth/nosuch/autocomplete/?field=x`, { token: adminToken })).status, 404);
});

test('detail: a generic relation (model name plus pk in the row) is a relation while its record exists, text otherwise', async (t) => {
  const saved = await app.request('PATCH', `${DATA}customer/customer/${customerId}/`, { token: adminToken, json: { first_name: 'Ada' } });
  t.is(saved.status, 200);
  const entry = await app.database.knex('admin_log_entries').where({ content_type: 'customer.customer', object_id: customerId }).first();
  const logged = await app.request('GET', `${DATA}admin/logentry/${entry.id}/`, { token: adminToken });
  t.like(logged.body.data.fields.object_id, { kind: 'relation', value: customerId, display: 'Ada <script>alert(1)</script>', related_model: 'customer.customer', related_pk: customerId });
  t.like(logged.body.data.fields.user_id, { kind: 'relation', related_model: 'auth.user' });

  const [gone] = await app.database.knex('admin_log_entries').insert({ actor: 'x', action_flag: 3, content_type: 'auth.group', object_id: '999999', object_repr: 'Old' }).returning('id');
  const deleted = await app.request('GET', `${DATA}admin/logentry/${gone.id}/`, { token: adminToken });
  t.like(deleted.body.data.fields.object_id, { kind: 'text', value: '999999', display: '999999' });
  t.is(deleted.body.data.fields.object_id.related_model, undefined);

  const admin = await app.database.knex('staff_users').where({ is_superuser: true }).first();
  const [linked, unknown] = await app.database.knex('notifications').insert([
    { user_id: admin.id, kind: 'alert', title: 'Look', target_model: 'customer.customer', target_pk: customerId },
    { user_id: admin.id, kind: 'alert', title: 'Elsewhere', target_model: 'nosuch.model', target_pk: '1' },
  ]).returning('id');
  const notification = await app.request('GET', `${DATA}notification/notification/${linked.id}/`, { token: adminToken });
  t.like(notification.body.data.fields.target_pk, { label: 'Target', kind: 'relation', related_model: 'customer.customer', related_pk: customerId });
  const elsewhere = await app.request('GET', `${DATA}notification/notification/${unknown.id}/`, { token: adminToken });
  t.like(elsewhere.body.data.fields.target_pk, { kind: 'text', value: '1' });
});

test('detail: the modules\' detail blocks ride along (data_context of an execution log, the mark block of a scored record)', async (t) => {
  const context = { transaction: { amount: 2500, currency: 'EUR' }, customer: { customer_ref: 'cus-1' }, aggregates: { count_24h: 3 }, event: { slug: 'payment' } };
  const [log] = await app.database.knex('execution_logs').insert({
    id: randomUUID(), target: 'financial', record_id: newestEventId, record_ref: 'tx-0249', score: 49, decision: 'REVIEW', matched_rules: '[]',
    data_context: JSON.stringify(context), duration_us: 120, actor: 't',
  }).returning('id');
  const detail = await app.request('GET', `${DATA}engine/executionlog/${log.id}/`, { token: adminToken });
  t.is(detail.status, 200);
  t.deepEqual(detail.body.data.data_context, context);
  const event = await app.request('GET', `${EVENTS}${newestEventId}/`, { token: adminToken });
  t.is(typeof event.body.data.mark.allowed, 'boolean');
  t.is(event.body.data.data_context, undefined);
});

test('a declared display (markup allowed) reads as its text in list cells and as a display field in the detail', async (t) => {
  const knex = app.database.knex;
  const registrations = REGISTRATIONS.map((registration) =>
    registration.model === 'customer'
      ? {
          ...registration,
          columns: [...registration.columns, { name: 'badge_html', label: 'Badge' }],
          fields: { ...registration.fields, badge_html: { label: 'Badge', display: (row: Record<string, unknown>) => `<b>${String(row.first_name)}</b> &amp; co` } },
        }
      : registration,
  );
  const site = await AdminSite.bind(knex, registrations);
  const model = site.get('customer', 'customer')!;
  const admin = await knex('staff_users').where({ is_superuser: true }).first();
  const principal = (await loadPrincipal(knex, admin.id))!;
  const page = await listPage({ query: {} } as unknown as Context, site, knex, principal, model);
  t.is(page.results[0]!.cells.badge_html, 'Ada & co');
  const row = await knex('customers').where({ id: customerId }).first();
  const detail = await recordDetail(site, knex, principal, model, row, false);
  t.deepEqual((detail.fields as Record<string, unknown>).badge_html, { type: 'display', label: 'Badge', kind: 'text', display: 'Ada & co', editable: false });
});

test('writes: an optional field of a NOT NULL column is refused empty, keeps its default when left out, and text becomes empty', async (t) => {
  const cleared = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: adminToken, json: { account_action: null, rationale: 'x' } });
  t.is(cleared.status, 400);
  t.deepEqual(cleared.body.data.errors.account_action, [{ message: 'This field cannot be empty.', code: 'null' }]);
  const report = await app.request('POST', `${DATA}report/report/`, { token: adminToken, json: { name: 'Large deposits', kind: 'transactions_above' } });
  t.is(report.status, 201);
  t.deepEqual(report.body.data.object.fields.parameters, {}, 'the column default');
  t.is(report.body.data.object.fields.description, '');
  const blanked = await app.request('PATCH', `${DATA}report/report/${report.body.data.object.pk}/`, { token: adminToken, json: { description: null } });
  t.is(blanked.status, 200);
  t.is(blanked.body.data.object.fields.description, '');
});
