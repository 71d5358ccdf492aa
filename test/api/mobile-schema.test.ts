/** The mobile schema layer: schema/ (apps and menu with shortcuts) and schema/<app>/<model>/ from the registry. */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, operator, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
let adminToken: string;
let analystToken: string;
let analystId: string;
let nobodyToken: string;
let customerId: string;

const SCHEMA = '/api/mobile/schema/';

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const knex = app.database.knex;
  const grants = { actor: operator, known: new Set(permissionCodenames()) };
  await createGroup(knex, { name: 'Analysts', permissions: ['customer.view_customer', 'transaction.view_financialevent', 'engine.change_watchlist', 'engine.view_alert'] }, grants);
  const admin = await staffUser(app, { is_superuser: true });
  const analyst = await staffUser(app, { groups: ['Analysts'] });
  const nobody = await staffUser(app);
  analystId = analyst.id;
  adminToken = (await pairDevice(app, clock, admin.id)).accessToken;
  analystToken = (await pairDevice(app, clock, analyst.id)).accessToken;
  nobodyToken = (await pairDevice(app, clock, nobody.id)).accessToken;
  customerId = randomUUID();
  await knex('customers').insert({
    id: customerId, customer_ref: 'cus-1', first_name: 'Ada', last_name: 'Lovelace', birth_date: '1985-03-03', raw: '{}', score: 10, decision: 'ACCEPT',
    created_by: 't', updated_by: 't', created_at: new Date('2026-01-02T03:04:05.678Z'),
  });
  await knex('staff_saved_filters').insert([
    { user_id: analyst.id, app_label: 'customer', model: 'customer', name: 'High risk', query: '?decision__exact=REJECT&q=&score__range__gte=80&score__range__lte=' },
    { user_id: analyst.id, app_label: 'customer', model: 'customer', name: 'All', query: '' },
    // A saved filter of a model the analyst cannot view gives no shortcut anywhere.
    { user_id: analyst.id, app_label: 'engine', model: 'rule', name: 'Active', query: 'active__exact=true' },
  ]);
});

test.after.always(async () => {
  await app?.close();
});

test('schema/: only the models the user may view, grouped by app, with perms and endpoints', async (t) => {
  const response = await app.request('GET', SCHEMA, { token: analystToken });
  t.is(response.status, 200);
  t.true(response.body.status);
  const apps = response.body.data.apps as { app_label: string; models: { model: string }[] }[];
  t.deepEqual(apps.map((entry) => [entry.app_label, entry.models.map((model) => model.model)]), [
    ['customer', ['customer']],
    ['transaction', ['financialevent']],
    ['engine', ['alert', 'watchlist']],
  ]);
  const customer = apps[0]!.models[0];
  t.deepEqual(customer, {
    app_label: 'customer',
    model: 'customer',
    object_name: 'Customer',
    verbose_name: 'customer',
    verbose_name_plural: 'customers',
    is_proxy: false,
    perms: { view: true, add: false, change: false, delete: false },
    endpoints: { schema: '/api/mobile/schema/customer/customer/', data: '/api/mobile/data/customer/customer/' },
  });
  // change implies view (Django); the case model is add/delete-disabled for everyone.
  const cases = apps[2]!.models[1] as unknown as { perms: Record<string, boolean> };
  t.deepEqual(cases.perms, { view: true, add: false, change: true, delete: false });
});

test('schema/: the menu groups of the registrations, shortcuts from saved web filters, empty groups dropped', async (t) => {
  const response = await app.request('GET', SCHEMA, { token: analystToken });
  const menu = response.body.data.menu as { label: string; icon: string; items: Record<string, unknown>[] }[];
  t.deepEqual(menu.map((group) => [group.label, group.items.map((item) => item.model ?? item.url)]), [
    ['Monitoring', ['customer', 'financialevent']],
    ['Case work', ['alert', 'watchlist']],
    // The site's link entries the analyst holds the permission of (url items).
    ['Dashboard', ['/api/mobile/dashboard/widgets/']],
  ]);
  t.is(menu[0]!.icon, 'people');
  const customers = menu[0]!.items[0]!;
  t.like(customers, { type: 'model', label: 'Customers', icon: 'people', app_label: 'customer', model: 'customer', endpoints: { data: '/api/mobile/data/customer/customer/' } });
  const shortcuts = customers.shortcuts as { id: number; label: string; params: Record<string, string>; query: string; url: string }[];
  t.deepEqual(shortcuts.map(({ id: _id, ...shortcut }) => shortcut), [
    { label: 'All', params: {}, query: '', url: '/api/mobile/data/customer/customer/' },
    {
      label: 'High risk',
      params: { decision__exact: 'REJECT', score__range__gte: '80' },
      query: 'decision__exact=REJECT&score__range__gte=80',
      url: '/api/mobile/data/customer/customer/?decision__exact=REJECT&score__range__gte=80',
    },
  ]);
  t.true(shortcuts.every((shortcut) => Number.isInteger(shortcut.id)));
  t.deepEqual(menu[0]!.items[1]!.shortcuts, []);

  // The shortcut's url is a list the data endpoint accepts as it is.
  const listed = await app.request('GET', shortcuts[1]!.url, { token: analystToken });
  t.is(listed.status, 200);
  t.deepEqual(listed.body.data.applied.filters, { decision__exact: 'REJECT', score__range__gte: '80' });
});

test('schema/: a superuser sees every model; proxies are marked; a user with no permission gets empty apps and menu', async (t) => {
  const all = await app.request('GET', SCHEMA, { token: adminToken });
  const models = (all.body.data.apps as { models: { app_label: string; model: string; is_proxy: boolean }[] }[]).flatMap((entry) => entry.models);
  t.is(models.length, app.context.backoffice.site.models.size);
  t.true(models.find((model) => model.model === 'pendingapprovalrequest')!.is_proxy);
  t.false(models.find((model) => model.model === 'approvalrequest')!.is_proxy);

  const none = await app.request('GET', SCHEMA, { token: nobodyToken });
  t.is(none.status, 200);
  t.deepEqual(none.body.data, { apps: [], menu: [] });
});

test('schema/<app>/<model>/: perms, list columns with index/sortable/kind, card roles, filters, search', async (t) => {
  const response = await app.request('GET', `${SCHEMA}customer/customer/`, { token: analystToken });
  t.is(response.status, 200);
  const data = response.body.data;
  t.like(data, { app_label: 'customer', model: 'customer', object_name: 'Customer', is_proxy: false, perms: { view: true, add: false, change: false, delete: false } });
  t.deepEqual(data.list.columns.slice(0, 2), [
    { name: 'customer_ref', label: 'Reference', index: 1, sortable: true, kind: 'text' },
    // Not sortable: no index orders customers by name (issue 37); the search finds them.
    { name: 'first_name', label: 'First name', index: 2, sortable: false, kind: 'text' },
  ]);
  t.deepEqual(data.list.columns.find((column: { name: string }) => column.name === 'decision'), { name: 'decision', label: 'Decision', index: 7, sortable: false, kind: 'badge' });
  t.deepEqual(data.list.columns.find((column: { name: string }) => column.name === 'created_at'), { name: 'created_at', label: 'Created', index: 9, sortable: true, kind: 'date' });
  t.like(data.list, { title_column: 'customer_ref', status_column: 'decision', date_column: 'created_at', search_enabled: true, page_size: 100, max_page_size: 200 });
  const [decision, , score] = data.list.filters;
  t.deepEqual(decision, {
    title: 'Decision',
    class: 'ChoicesFilter',
    parameters: ['decision__exact'],
    choices: [
      { display: 'All', params: {}, selected: true },
      { display: 'Accept', params: { decision__exact: 'ACCEPT' }, selected: false },
      { display: 'Review', params: { decision__exact: 'REVIEW' }, selected: false },
      { display: 'Reject', params: { decision__exact: 'REJECT' }, selected: false },
    ],
    input: false,
  });
  t.deepEqual(score, { title: 'Score', class: 'RangeFilter', parameters: ['score__range__gte', 'score__range__lte'], choices: [], input: true });

  // Joined columns of a registered relation are sortable; search off where no search fields are declared.
  const cases = await app.request('GET', `${SCHEMA}engine/watchlist/`, { token: analystToken });
  t.deepEqual(cases.body.data.list.columns[0], { name: 'reference', label: 'Case', index: 1, sortable: true, kind: 'text' });
  t.deepEqual(cases.body.data.list.columns[1], { name: 'customer_id__customer_ref', label: 'Customer', index: 2, sortable: true, kind: 'text' });
  t.true(cases.body.data.list.search_enabled, 'cases are searched by their number');
  t.deepEqual(cases.body.data.list.filters.find((filter: { class: string }) => filter.class === 'IsNullFilter').parameters, ['assignee_id__isnull']);
});

test('schema/<app>/<model>/: form fields, fieldsets, read-only fields, form.error for a model whose add form cannot be generated', async (t) => {
  const response = await app.request('GET', `${SCHEMA}customer/customer/`, { token: analystToken });
  const form = response.body.data.form;
  const field = (name: string) => form.fields.find((candidate: { name: string }) => candidate.name === name);
  t.deepEqual(field('first_name'), { name: 'first_name', type: 'string', label: 'First name', required: false, disabled: true, help_text: '', max_length: null });
  t.deepEqual(field('customer_type'), {
    name: 'customer_type', type: 'choice', label: 'Customer type', required: false, disabled: true, help_text: '',
    choices: [{ value: '1', label: 'Individual' }, { value: '2', label: 'Company' }],
  });
  t.is(field('birth_date').type, 'date');
  t.is(field('score').type, 'decimal');
  t.deepEqual(form.fieldsets[1], { title: 'Contact', fields: ['email', 'phone', 'country', 'occupation', 'status'], classes: [], description: '' });
  t.deepEqual(form.fieldsets[3].classes, ['collapse']);
  t.true(form.readonly_fields.includes('score'));
  t.is(form.error, 'Customers are view-only here: they cannot be added.');

  // A superuser may change descriptive fields; scores stay read-only.
  const admin = await app.request('GET', `${SCHEMA}customer/customer/`, { token: adminToken });
  const adminField = (name: string) => admin.body.data.form.fields.find((candidate: { name: string }) => candidate.name === name);
  t.false(adminField('first_name').disabled);
  t.true(adminField('score').disabled);

  // fk fields name their registered target; m2m fields too, with their choices when declared.
  const events = await app.request('GET', `${SCHEMA}transaction/financialevent/`, { token: analystToken });
  const customerField = events.body.data.form.fields.find((candidate: { name: string }) => candidate.name === 'customer_id');
  t.like(customerField, {
    type: 'fk', label: 'Customer', related: { app_label: 'customer', model: 'customer', object_name: 'Customer' }, related_registered: true,
    autocomplete: '/api/mobile/data/transaction/financialevent/autocomplete/?field=customer_id',
  });
  const users = await app.request('GET', `${SCHEMA}auth/user/`, { token: adminToken });
  const userFields = users.body.data.form.fields as { name: string; type: string; related?: unknown; choices?: unknown[] }[];
  t.like(userFields.find((candidate) => candidate.name === 'groups'), { type: 'm2m', related: { app_label: 'auth', model: 'group', object_name: 'Group' } });
  t.is(userFields.find((candidate) => candidate.name === 'user_permissions')!.choices!.length, permissionCodenames().length);
  t.is(users.body.data.form.error, undefined, 'a superuser can add users');
  // Secrets are never part of a schema.
  t.false(userFields.some((candidate) => candidate.name === 'password_hash'));
  const credentials = await app.request('GET', `${SCHEMA}merchant/credential/`, { token: adminToken });
  t.false(JSON.stringify(credentials.body.data).includes('secret_hash'));
});

test('schema/<app>/<model>/: inlines the user may view with their permissions, and informational actions', async (t) => {
  const analyst = await app.request('GET', `${SCHEMA}customer/customer/`, { token: analystToken });
  t.deepEqual(analyst.body.data.inlines.map((inline: { model: { model: string }; label: string; perms: unknown }) => [inline.model.model, inline.label, inline.perms]), [
    ['financialevent', 'Financial events', { view: true, add: false, change: false, delete: false }],
    ['alert', 'alerts', { view: true, add: false, change: false, delete: false }],
    ['watchlist', 'Cases', { view: true, add: false, change: true, delete: false }],
  ]);
  t.deepEqual(analyst.body.data.actions, []);
  const devices = await app.request('GET', `${SCHEMA}mobile/device/`, { token: adminToken });
  t.deepEqual(devices.body.data.actions, [{ name: 'revoke', label: 'Revoke selected devices', allowed: true }]);
  t.is(devices.body.data.form.error, 'Devices are view-only here: they cannot be added.');
});

test('schema/<app>/<model>/?object_id=: the change form evaluated for one record', async (t) => {
  const response = await app.request('GET', `${SCHEMA}customer/customer/?object_id=${customerId}`, { token: adminToken });
  t.is(response.status, 200);
  const data = response.body.data;
  t.deepEqual(data.object, { pk: customerId, repr: 'Ada Lovelace' });
  t.deepEqual(data.perms, { view: true, add: false, change: true, delete: false });
  const field = (name: string) => data.form.fields.find((candidate: { name: string }) => candidate.name === name);
  t.is(field('first_name').value, 'Ada');
  t.false(field('first_name').disabled);
  t.is(field('birth_date').value, '1985-03-03');
  t.is(field('created_at').value, '2026-01-02T03:04:05');
  t.is(field('score').value, '10.00');
  t.is(data.form.error, undefined, 'a change form is no add form');

  // Without change permission every field of the change form is disabled.
  const viewer = await app.request('GET', `${SCHEMA}customer/customer/?object_id=${customerId}`, { token: analystToken });
  t.true(viewer.body.data.form.fields.every((candidate: { disabled: boolean }) => candidate.disabled));

  // m2m values of the record are part of it.
  const group = await app.database.knex('staff_groups').where({ name: 'Analysts' }).first();
  const user = await app.request('GET', `${SCHEMA}auth/user/?object_id=${analystId}`, { token: adminToken });
  t.deepEqual(user.body.data.form.fields.find((candidate: { name: string }) => candidate.name === 'groups').value, [String(group.id)]);
});

test('schema/<app>/<model>/?object_id=: 404 for a record that does not exist, a malformed pk, or one outside the user\'s scope', async (t) => {
  for (const objectId of [randomUUID(), 'not-a-uuid', 'x'.repeat(600)]) {
    const response = await app.request('GET', `${SCHEMA}customer/customer/?object_id=${objectId}`, { token: adminToken });
    t.is(response.status, 404, objectId.slice(0, 20));
    t.false(response.body.status);
  }
  // Notifications are scoped to their owner: another user's row is not visible, even to a superuser.
  const [{ id }] = await app.database.knex('notifications').insert({ user_id: analystId, kind: 'alert', title: 'private' }).returning('id');
  const foreign = await app.request('GET', `${SCHEMA}notification/notification/?object_id=${id}`, { token: adminToken });
  t.is(foreign.status, 404);
  t.false(foreign.text.includes('private'));
});

test('schema/<app>/<model>/: 404 for a model that is not registered, 403 (permission_denied) for one the user may not view; no schema leaks to a user without permission', async (t) => {
  const unknown = await app.request('GET', `${SCHEMA}customer/nosuchmodel/`, { token: adminToken });
  t.is(unknown.status, 404);
  t.is(unknown.body.data.reason, 'model_not_found');
  for (const [path, status] of [['engine/nosuchmodel/', 404], ['engine/rule/', 403], ['auth/user/', 403], [`customer/customer/?object_id=${customerId}`, 403]] as const) {
    const response = await app.request('GET', `${SCHEMA}${path}`, { token: nobodyToken });
    t.is(response.status, status, path);
    t.false(response.body.status, path);
    if (status === 403) t.is(response.body.data.reason, 'permission_denied', path);
    t.false(response.text.includes('columns'), path);
    t.false(response.text.includes('Lovelace'), path);
  }
  const rule = await app.request('GET', `${SCHEMA}engine/rule/`, { token: analystToken });
  t.is(rule.status, 403);
  t.is(rule.body.message, 'You do not have permission to view rules.');
});

test('schema endpoints: unknown or repeated parameters 400, other methods 405, no token 401, never a 500', async (t) => {
  const unknown = await app.request('GET', `${SCHEMA}customer/customer/?objectid=1`, { token: adminToken });
  t.is(unknown.status, 400);
  t.is(unknown.body.data.parameter, 'objectid');
  t.is((await app.request('GET', `${SCHEMA}?x=1`, { token: adminToken })).status, 400);
  const twice = await app.request('GET', `${SCHEMA}customer/customer/?object_id=a&object_id=b`, { token: adminToken });
  t.is(twice.status, 400);
  t.is((await app.request('GET', `${SCHEMA}customer/customer/?object_id=%00`, { token: adminToken })).status, 400);
  for (const [method, path] of [['POST', SCHEMA], ['DELETE', `${SCHEMA}customer/customer/`], ['PATCH', `${SCHEMA}customer/customer/`]] as const) {
    const response = await app.request(method, path, { token: adminToken, json: {} });
    t.is(response.status, 405, `${method} ${path}`);
    t.false(response.body.status);
  }
  t.is((await app.request('GET', SCHEMA)).status, 401);
  t.is((await app.request('GET', `${SCHEMA}customer/customer/`, { token: 'garbage' })).status, 401);
  // Odd path segments are an unknown model, not an error.
  t.is((await app.request('GET', `${SCHEMA}${'a'.repeat(300)}/%E2%80%AE/`, { token: adminToken })).status, 404);
});
