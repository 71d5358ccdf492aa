import test from 'ava';
import { randomUUID } from 'node:crypto';
import { AdminSite } from '../../src/modules/backoffice/site.ts';
import { bindAdminSite, permissionCodenames, REGISTRATIONS } from '../../src/app/registrations.ts';
import { RegistryError } from '../../src/modules/backoffice/declare.ts';
import { listRows, getRow, inlineBlocks, autocomplete, QueryError } from '../../src/modules/backoffice/query.ts';
import { deleteObject, runAction, saveObject, type WriteChain } from '../../src/modules/backoffice/write.ts';
import { PermissionDenied, ValidationFailed } from '../../src/modules/backoffice/errors.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createUser, createGroup } from '../../src/modules/staff/service.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import type { ModelRegistration } from '../../src/modules/backoffice/registry.ts';

let database: TestDatabase;
let site: AdminSite;
let chain: WriteChain;
let admin: Principal;
let viewer: Principal;
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };

async function principal(username: string, options: { superuser?: boolean; groups?: string[]; permissions?: string[] } = {}): Promise<Principal> {
  const user = await createUser(
    database.knex,
    { username, password: 'a sturdy passphrase 42', is_superuser: options.superuser, groups: options.groups, permissions: options.permissions },
    operator,
  );
  return (await loadPrincipal(database.knex, user.id))!;
}

async function seedTransactions(count: number) {
  const customerId = randomUUID();
  await database.knex('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await database.knex('customers').insert({ id: customerId, customer_ref: 'cus-1', first_name: 'Ada', last_name: '<script>alert(1)</script>', raw: '{}', score: 0, decision: 'ACCEPT', created_by: 't', updated_by: 't' });
  const rows = Array.from({ length: count }, (_, index) => ({
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
  await database.knex.batchInsert('financial_transactions', rows, 500);
  return customerId;
}

test.before(async () => {
  database = await createTestDatabase();
  site = await bindAdminSite(database.knex);
  chain = { site, db: database.knex, approvalHook: null };
  admin = await principal('root', { superuser: true });
  await createGroup(database.knex, { name: 'Viewers', permissions: ['transaction.view_financialevent', 'auth.view_group'] }, operator);
  viewer = await principal('viewer', { groups: ['Viewers'] });
  await seedTransactions(250);
});

test.after.always(async () => {
  await database?.drop();
});

test('every model of the issue is registered, with view/add/change/delete permissions', (t) => {
  const keys = [...site.models.keys()].sort();
  t.deepEqual(keys, [
    'admin.logentry', 'approval.approvalpolicy', 'approval.approvalrequest', 'approval.pendingapprovalrequest', 'auth.group', 'auth.user',
    'customer.customer', 'document.artifact', 'document.documentverificationsession', 'document.flow', 'engine.alert', 'engine.casenote', 'engine.compliancedecision',
    'engine.event', 'engine.executionlog', 'engine.rule', 'engine.watchlist', 'merchant.credential', 'mobile.device', 'notification.notification',
    'report.report', 'report.reportresult', 'screening.sanctionentry', 'screening.screeninghit', 'transaction.financialevent', 'transaction.nonfinancialevent',
  ]);
  t.true(permissionCodenames().includes('transaction.view_financialevent'));
  t.true(permissionCodenames().includes('engine.change_watchlist'));
  t.is(permissionCodenames().length, REGISTRATIONS.length * 4);
});

test('field types come from the database columns', (t) => {
  const rule = site.get('engine', 'rule')!;
  const types = Object.fromEntries(rule.formFields.map((field) => [field.name, field.type]));
  t.is(types.score, 'decimal');
  t.is(types.active, 'boolean');
  t.is(types.expression, 'json');
  t.is(types.target, 'choice');
  t.is(types.updated_at, 'datetime');
  const name = rule.formFields.find((field) => field.name === 'name')!;
  t.true(name.required);
});

test('start-up checks name the registration and the field that does not exist', async (t) => {
  const broken: ModelRegistration[] = REGISTRATIONS.map((registration) =>
    registration.model === 'rule' ? { ...registration, columns: [...registration.columns, { name: 'no_such_column' }] } : registration,
  );
  const error = await t.throwsAsync(AdminSite.bind(database.knex, broken), { instanceOf: RegistryError });
  t.regex(error!.message, /engine\.rule: list column "no_such_column"/);

  const badFilter = REGISTRATIONS.map((registration) => (registration.model === 'customer' ? { ...registration, filters: [{ type: 'choice' as const, field: 'nope' }] } : registration));
  t.regex((await t.throwsAsync(AdminSite.bind(database.knex, badFilter)))!.message, /customer\.customer: filter "nope"/);

  const badInline = REGISTRATIONS.map((registration) => (registration.model === 'customer' ? { ...registration, inlines: [{ model: 'engine.alert', fk: 'nope' }] } : registration));
  t.regex((await t.throwsAsync(AdminSite.bind(database.knex, badInline)))!.message, /customer\.customer: inline engine\.alert has no column "nope"/);

  // A database foreign key that the registration neither relates nor marks plain.
  const unrelated = REGISTRATIONS.map((registration) => (registration.model === 'compliancedecision' ? { ...registration, fields: { ...registration.fields, case_id: {} } } : registration));
  t.regex((await t.throwsAsync(AdminSite.bind(database.knex, unrelated)))!.message, /engine\.compliancedecision: column "case_id" references cases/);

  const unregistered = REGISTRATIONS.filter((registration) => registration.model !== 'event');
  t.regex((await t.throwsAsync(AdminSite.bind(database.knex, unregistered)))!.message, /relates to engine\.event, which is not registered/);

  // A computed column exists only where the registration annotates its rows, and only in lists.
  const unannotated = REGISTRATIONS.map((registration) => (registration.model === 'approvalrequest' ? { ...registration, annotate: undefined } : registration));
  t.regex((await t.throwsAsync(AdminSite.bind(database.knex, unannotated)))!.message, /approval\.approvalrequest: field "action" is computed, but the model does not annotate its rows/);
  const computedInForm = REGISTRATIONS.map((registration) => (registration.model === 'approvalrequest' ? { ...registration, readonly: [...registration.readonly!, 'action'] } : registration));
  t.regex((await t.throwsAsync(AdminSite.bind(database.knex, computedInForm)))!.message, /approval\.approvalrequest: read-only field "action"/);
});

test('permissions: superuser all, group grants, inactive none, change implies view', async (t) => {
  const financial = site.get('transaction', 'financialevent')!;
  t.deepEqual(site.perms(admin, financial), { view: true, add: false, change: true, delete: false });
  t.deepEqual(site.perms(viewer, financial), { view: true, add: false, change: false, delete: false });
  t.false(site.can(viewer, site.get('customer', 'customer')!, 'view'));
  t.is(site.permissionsOf(admin).length, permissionCodenames().length);
  t.deepEqual(site.permissionsOf(viewer).sort(), ['auth.view_group', 'transaction.view_financialevent']);
  // Compliance decisions are append-only for everyone, superusers included.
  t.deepEqual(site.perms(admin, site.get('engine', 'compliancedecision')!), { view: true, add: false, change: false, delete: false });
  const editor = await principal('editor', { permissions: ['engine.change_rule'] });
  t.true(site.can(editor, site.get('engine', 'rule')!, 'view'));
  await database.knex('staff_users').where({ id: editor.user.id }).update({ is_active: false });
  const inactive = (await loadPrincipal(database.knex, editor.user.id))!;
  t.false(site.can(inactive, site.get('engine', 'rule')!, 'view'));
});

test('lists: a page, exact count, filter, search, ordering by column index, joined columns', async (t) => {
  const financial = site.get('transaction', 'financialevent')!;
  const all = await listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 100, search: '', order: [], filters: {} });
  t.is(all.total, 250);
  t.false(all.totalIsEstimate);
  t.is(all.rows.length, 100);
  t.is(all.pages, 3);
  t.is(all.rows[0]!.transaction_ref, 'tx-0249', 'default ordering -event_date');

  const review = await listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 200, search: '', order: [4], filters: { decision__exact: 'REVIEW', score__range__gte: '10' } });
  t.true(review.rows.every((row) => row.decision === 'REVIEW' && Number(row.score) >= 10));
  const amounts = review.rows.map((row) => Number(row.amount));
  t.deepEqual(amounts, [...amounts].sort((a, b) => a - b));

  const found = await listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 10, search: 'tx-0007', order: [-1], filters: {} });
  t.deepEqual(found.rows.map((row) => row.transaction_ref), ['tx-0007']);
  const prefix = await listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 10, search: 'CUS-', order: [], filters: {} });
  t.is(prefix.total, 250, 'customer_ref prefix search is case-insensitive');

  await t.throwsAsync(listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 10, search: '', order: [], filters: { nope__exact: '1' } }), { instanceOf: QueryError, message: /nope__exact/ });
  await t.throwsAsync(listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 10, search: '', order: [], filters: { score__range__gte: 'abc' } }), { instanceOf: QueryError });
  await t.throwsAsync(listRows(site, database.knex, financial, viewer, { page: 1, pageSize: 10, search: '', order: [99], filters: {} }), { instanceOf: QueryError });

  // A joined column orders a list where it is offered (a case's customer); on alerts it is not (issue 37: no index of theirs serves it).
  const cases = site.get('engine', 'watchlist')!;
  const byCustomer = await listRows(site, database.knex, cases, admin, { page: 1, pageSize: 10, search: '', order: [2], filters: {} });
  t.deepEqual(byCustomer.rows.map((row) => row.customer_id__customer_ref), byCustomer.rows.map(() => 'cus-1'));
  await t.throwsAsync(listRows(site, database.knex, site.get('engine', 'alert')!, admin, { page: 1, pageSize: 10, search: '', order: [2], filters: {} }), { instanceOf: QueryError });
});

test('detail and inlines: a record with its related blocks, unknown pks are not found', async (t) => {
  const customer = site.get('customer', 'customer')!;
  const [{ id }] = await database.knex('customers').select('id');
  const row = (await getRow(database.knex, customer, admin, id))!;
  t.is(customer.repr(row), 'Ada <script>alert(1)</script>');
  const blocks = await inlineBlocks(site, database.knex, customer, admin, row);
  const financial = blocks.find((block) => block.model.key === 'transaction.financialevent')!;
  t.is(financial.total, 250);
  t.is(financial.rows.length, 50);
  t.is(await getRow(database.knex, customer, admin, 'not-a-uuid'), undefined);
  t.is(await getRow(database.knex, site.get('report', 'reportresult')!, admin, '99999999999'), undefined);
});

test('write chain: add with validation, audit row, change diff, delete, all in the log', async (t) => {
  const group = site.get('auth', 'group')!;
  const invalid = await t.throwsAsync(saveObject(chain, group, admin, null, { name: '', permissions: ['no.such_perm'] }), { instanceOf: ValidationFailed });
  t.deepEqual(Object.keys(invalid!.errors).sort(), ['name', 'permissions']);
  t.is(invalid!.errors.name![0]!.code, 'required');

  const created = await saveObject(chain, group, admin, null, { name: 'Officers', permissions: ['engine.view_alert', 'engine.change_watchlist'], extra: 1 });
  t.is(created.status, 'created');
  t.deepEqual(created.warnings, ['extra']);
  const pk = created.pk!;
  t.deepEqual((await database.knex('staff_group_permissions').where({ group_id: pk }).orderBy('codename').pluck('codename')), ['engine.change_watchlist', 'engine.view_alert']);

  const changed = await saveObject(chain, group, admin, pk, { permissions: ['engine.view_alert'] }, { partial: true });
  t.is(changed.status, 'updated');
  const entries = await database.knex('admin_log_entries').where({ content_type: 'auth.group', object_id: pk }).orderBy('id');
  t.is(entries.length, 2);
  t.is(entries[0].action_flag, 1);
  t.deepEqual(entries[1].change, { permissions: [['engine.change_watchlist', 'engine.view_alert'], ['engine.view_alert']] });

  const unstorable = await t.throwsAsync(saveObject(chain, group, admin, pk, { name: 'a\u0000b' }, { partial: true }), { instanceOf: ValidationFailed });
  t.regex(unstorable!.errors.name![0]!.message, /NUL/);
  const rule = site.get('engine', 'rule')!;
  let deep: unknown = 1;
  for (let level = 0; level < 100; level++) deep = [deep];
  const tooDeep = await t.throwsAsync(saveObject(chain, rule, admin, null, { code: 'DEEP', name: 'Deep', target: 'financial', expression: deep, score: 1 }), { instanceOf: ValidationFailed });
  t.regex(tooDeep!.errors.expression![0]!.message, /deeper than 64/);

  await t.throwsAsync(deleteObject(chain, group, viewer, pk), { instanceOf: PermissionDenied });
  const deleted = await deleteObject(chain, group, admin, pk);
  t.is(deleted.status, 'deleted');
  t.is(await database.knex('staff_groups').where({ id: pk }).first(), undefined);
  t.is((await database.knex('admin_log_entries').where({ content_type: 'auth.group', object_id: pk, action_flag: 3 })).length, 1);
});

test('write chain: no privilege escalation, read-only fields ignored, view-only refused', async (t) => {
  const group = site.get('auth', 'group')!;
  const manager = await principal('manager', { permissions: ['auth.add_group', 'auth.view_group'] });
  const refused = await t.throwsAsync(saveObject(chain, group, manager, null, { name: 'Escalate', permissions: ['auth.add_user'] }), { instanceOf: ValidationFailed });
  t.is(refused!.errors.permissions![0]!.code, 'forbidden');
  const rule = site.get('engine', 'rule')!;
  await t.throwsAsync(saveObject(chain, rule, viewer, null, { code: 'X1' }), { instanceOf: PermissionDenied });
  await t.throwsAsync(saveObject(chain, site.get('engine', 'compliancedecision')!, admin, null, {}), { instanceOf: PermissionDenied });
});

test('rules saved through the registry are checked like rule files and bump their version', async (t) => {
  const rule = site.get('engine', 'rule')!;
  const bad = await t.throwsAsync(saveObject(chain, rule, admin, null, { code: 'BIG', name: 'Big', target: 'financial', event_slugs: [], expression: { eval: ['x'] }, score: 50, active: true }), { instanceOf: ValidationFailed });
  t.truthy(bad!.errors.expression);
  const saved = await saveObject(chain, rule, admin, null, { code: 'BIG', name: 'Big', target: 'financial', event_slugs: [], expression: { '>=': [{ var: 'customer.sanction_score' }, 85] }, score: 50, active: true });
  t.is(saved.row!.version, 1);
  t.is(saved.row!.updated_by, 'staff:root');
  const renamed = await saveObject(chain, rule, admin, 'BIG', { name: 'Large' }, { partial: true });
  t.is(renamed.row!.version, 1, 'a name is not behaviour');
  const rescored = await saveObject(chain, rule, admin, 'BIG', { score: 60 }, { partial: true });
  t.is(rescored.row!.version, 2);
});

test('case changes need a rationale and are kept in the case history', async (t) => {
  const [{ id: customerId }] = await database.knex('customers').select('id');
  const [caseRow] = await database.knex('cases').insert({ customer_id: customerId }).returning('*');
  const cases = site.get('engine', 'watchlist')!;
  const refused = await t.throwsAsync(saveObject(chain, cases, admin, caseRow.id, { status: 'escalated' }, { partial: true }), { instanceOf: ValidationFailed });
  t.is(refused!.errors.rationale![0]!.code, 'required');
  await saveObject(chain, cases, admin, caseRow.id, { status: 'escalated', rationale: 'Structuring pattern.' }, { partial: true });
  const history = await database.knex('case_history').where({ case_id: caseRow.id });
  t.is(history.length, 1);
  t.is(history[0].rationale, 'Structuring pattern.');
  t.deepEqual(history[0].changes, { status: ['open', 'escalated'] });
  // Assigning needs no rationale.
  await saveObject(chain, cases, admin, caseRow.id, { assignee_id: admin.user.id }, { partial: true });
});

test('autocomplete and actions respect scope and permission', async (t) => {
  const users = site.get('auth', 'user')!;
  const options = await autocomplete(database.knex, users, admin, 'ro', 1);
  t.deepEqual(options.results.map((option) => option.text), ['root']);
  t.false(options.more);

  const [device] = await database.knex('mobile_devices').insert({ id: randomUUID(), user_id: viewer.user.id, name: 'Pixel', platform: 'android' }).returning('*');
  const devices = site.get('mobile', 'device')!;
  const noPermission = await t.throwsAsync(runAction(chain, devices, viewer, 'revoke', [device.id]), { instanceOf: PermissionDenied });
  t.truthy(noPermission);
  const message = await runAction(chain, devices, admin, 'revoke', [device.id, 'not-a-uuid']);
  t.regex(message.message, /Revoked 1 device/);
  t.truthy((await database.knex('mobile_devices').where({ id: device.id }).first()).revoked_at);
});
