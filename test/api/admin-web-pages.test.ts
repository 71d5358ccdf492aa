/**
 * The generated web admin pages over real HTTP and PostgreSQL: index, changelist (columns, search,
 * sort, filters, pages, bad parameters), add/change/view forms, delete, history, bulk actions,
 * saved filters, permissions (403) and unknown models or records (404), escaping, CSRF.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createGroup, createUser } from '../../src/modules/staff/service.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const PASSWORD = 'violet-harbour-lantern-42';
const XSS = '<script>alert(1)</script>';
let app: TestApp;
let rootId: string;
let viewerId: string;
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };

test.before(async () => {
  app = await startTestApp();
  const db = app.database.knex;
  rootId = (await createUser(db, { username: 'root', password: PASSWORD, is_superuser: true }, operator)).id;
  await createGroup(db, { name: 'Customer viewers', permissions: ['customer.view_customer', 'mobile.view_device'] }, operator);
  viewerId = (await createUser(db, { username: 'viewer', password: PASSWORD, groups: ['Customer viewers'] }, operator)).id;
  // Dates read in the user's zone and format: 2026-01-10T23:30Z is 11 January in Tokyo.
  await db('staff_users').where({ id: rootId }).update({ timezone: 'Asia/Tokyo', date_format: 'DD.MM.YYYY', time_format: 'HH:mm', show_today: false });
  const customers = Array.from({ length: 120 }, (_, index) => ({
    id: randomUUID(),
    customer_ref: `cus-${String(index).padStart(3, '0')}`,
    first_name: index === 7 ? XSS : `First${index}`,
    last_name: `Last${index}`,
    raw: '{}',
    score: index % 100,
    decision: index % 3 === 0 ? 'REVIEW' : 'ACCEPT',
    created_by: 't',
    updated_by: 't',
    created_at: new Date(Date.UTC(2026, 0, 10, 23, 30) - index * 60_000),
  }));
  await db.batchInsert('customers', customers, 200);
  await db('mobile_devices').insert([
    { id: randomUUID(), user_id: viewerId, name: 'Viewer phone', platform: 'android' },
    { id: randomUUID(), user_id: rootId, name: 'Root phone', platform: 'ios' },
  ]);
});
test.after.always(async () => {
  await app?.close();
});

async function as(username: string) {
  const client = adminClient(app.url);
  const login = await client.login(username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  return client;
}

async function countOf(table: string, where: Record<string, unknown>): Promise<number> {
  const [row] = await app.database.knex(table).where(where).count('* as count');
  return Number(row?.count);
}

/** The CSRF token of any page the client can open. */
async function token(client: Awaited<ReturnType<typeof as>>): Promise<string> {
  return csrfTokenIn((await client.get('/admin/')).text);
}

test('the index lists the models a user may view, grouped, with add links where permitted', async (t) => {
  const root = await as('root');
  const page = await root.get('/admin/');
  t.is(page.status, 200);
  t.regex(page.text, /<h2>Monitoring<\/h2>/);
  t.regex(page.text, /<h2>Administration<\/h2>/);
  t.true(page.text.includes('href="/admin/auth/group/add/"'));
  t.false(page.text.includes('href="/admin/customer/customer/add/"'), 'customers cannot be added by hand');

  const viewer = await as('viewer');
  const limited = await viewer.get('/admin/');
  t.is(limited.status, 200);
  t.true(limited.text.includes('href="/admin/customer/customer/"'));
  t.true(limited.text.includes('href="/admin/mobile/device/"'));
  t.false(limited.text.includes('href="/admin/auth/group/"'));
  t.false(limited.text.includes('/add/"'));
});

test('the changelist shows columns, badges, counts and dates in the user zone and format, and escapes markup', async (t) => {
  const root = await as('root');
  const page = await root.get('/admin/customer/customer/');
  t.is(page.status, 200);
  t.true(page.text.includes('120 customers'));
  t.true(page.text.includes('page 1 of 2'));
  t.regex(page.text, /<span class="badge tone-warning">Review<\/span>/);
  t.true(page.text.includes('11.01.2026 08:30'), 'created_at of cus-000 in Asia/Tokyo, DD.MM.YYYY HH:mm');
  t.false(page.text.includes(XSS));
  t.true(page.text.includes('&lt;script>alert(1)&lt;/script>'), 'preact escapes < in text, which is enough to keep it text');
});

test('search, sort, filters and pages narrow and order the list', async (t) => {
  const root = await as('root');
  const search = await root.get('/admin/customer/customer/?q=cus-11');
  t.is(search.status, 200);
  t.true(search.text.includes('10 customers'));
  t.true(search.text.includes('cus-119'));
  t.false(search.text.includes('cus-099'));

  const ascending = await root.get('/admin/customer/customer/?o=1');
  t.true(ascending.text.indexOf('>cus-000<') < ascending.text.indexOf('>cus-001<'));
  t.regex(ascending.text, /aria-sort="ascending"/);
  t.true(ascending.text.includes('href="/admin/customer/customer/?o=-1"'), 'clicking the sorted header reverses it');
  const descending = await root.get('/admin/customer/customer/?o=-1');
  t.true(descending.text.indexOf('>cus-119<') < descending.text.indexOf('>cus-118<'));

  const filtered = await root.get('/admin/customer/customer/?decision__exact=REVIEW');
  t.true(filtered.text.includes('40 customers'));
  t.regex(filtered.text, /class="selected"><a href="[^"]*decision__exact=REVIEW" aria-current="true">Review</);
  const range = await root.get('/admin/customer/customer/?score__range__gte=90&score__range__lte=95');
  t.true(range.text.includes('6 customers'));

  const second = await root.get('/admin/customer/customer/?o=1&p=2');
  t.true(second.text.includes('>cus-119<'));
  t.false(second.text.includes('>cus-000<'));
  t.regex(second.text, /<span class="this-page" aria-current="page">2<\/span>/);
});

test('bad list parameters answer 400 with the message on the page, never a 500', async (t) => {
  const root = await as('root');
  for (const [query, message] of [
    ['nonsense=1', 'Unknown filter parameter: nonsense.'],
    ['score__range__gte=abc', 'score__range__gte must be a number.'],
    ['decision__exact=REVIEW&o=99', 'Ordering column 99 does not exist'],
    ['o=x', 'is not a list of column numbers'],
    ['p=0', 'is not a page number'],
  ] as const) {
    const page = await root.get(`/admin/customer/customer/?${query}`);
    t.is(page.status, 400, query);
    t.true(page.text.includes(message), query);
    t.regex(page.text, /class="errornote"/);
  }
});

test('unknown models and records are 404 pages; models and records without permission are 403 pages', async (t) => {
  const root = await as('root');
  t.is((await root.get('/admin/nothing/here/')).status, 404);
  t.is((await root.get('/admin/nothing/here/add/')).status, 404);
  t.is((await root.get(`/admin/customer/customer/${randomUUID()}/change/`)).status, 404);
  t.is((await root.get('/admin/customer/customer/not-a-uuid/change/')).status, 404);
  t.is((await root.get('/admin/auth/group/999999/history/')).status, 404);

  const viewer = await as('viewer');
  for (const path of ['/admin/auth/group/', '/admin/auth/group/add/', `/admin/auth/user/${rootId}/change/`, '/admin/admin/logentry/']) {
    const page = await viewer.get(path);
    t.is(page.status, 403, path);
    t.true(page.text.includes('Permission denied'), path);
  }
  const [{ id: customerId }] = await app.database.knex('customers').where({ customer_ref: 'cus-001' }).select('id');
  const view = await viewer.get(`/admin/customer/customer/${customerId}/change/`);
  t.is(view.status, 200);
  t.true(view.text.includes('<h1>View customer</h1>'));
  t.false(view.text.includes('name="first_name"'), 'no inputs without change permission');
  const write = await viewer.post(`/admin/customer/customer/${customerId}/change/`, { csrfmiddlewaretoken: await token(viewer), first_name: 'Changed' });
  t.is(write.status, 403);
  t.is((await app.database.knex('customers').where({ id: customerId }).first('first_name')).first_name, 'First1');
});

test('a group is created, shown, changed, listed in its history and deleted through the forms', async (t) => {
  const root = await as('root');
  const form = await root.get('/admin/auth/group/add/');
  t.is(form.status, 200);
  t.regex(form.text, /<select id="id_permissions" name="permissions" multiple/);
  const created = await root.post('/admin/auth/group/add/', { csrfmiddlewaretoken: csrfTokenIn(form.text), name: 'Analysts', permissions: 'customer.view_customer', _continue: '1' });
  t.is(created.status, 302);
  const group = await app.database.knex('staff_groups').where({ name: 'Analysts' }).first();
  t.truthy(group);
  t.is(created.location, `/admin/auth/group/${group.id}/change/`);
  const change = await root.get(created.location!);
  t.true(change.text.includes('The group &quot;Analysts&quot; was added successfully.'));
  t.regex(change.text, /<option value="customer.view_customer" selected>/);

  const renamed = await root.post(created.location!, { csrfmiddlewaretoken: csrfTokenIn(change.text), name: 'Senior analysts', permissions: 'customer.change_customer' });
  t.is(renamed.status, 302);
  t.is(renamed.location, '/admin/auth/group/');
  t.deepEqual(await app.database.knex('staff_group_permissions').where({ group_id: group.id }).pluck('codename'), ['customer.change_customer']);

  const history = await root.get(`/admin/auth/group/${group.id}/history/`);
  t.is(history.status, 200);
  t.true(history.text.includes('Added'));
  t.true(history.text.includes('Name: Analysts → Senior analysts'));

  const confirm = await root.get(`/admin/auth/group/${group.id}/delete/`);
  t.is(confirm.status, 200);
  t.true(confirm.text.includes('Are you sure you want to delete the group “Senior analysts”?'));
  const deleted = await root.post(`/admin/auth/group/${group.id}/delete/`, { csrfmiddlewaretoken: csrfTokenIn(confirm.text), post: 'yes' });
  t.is(deleted.status, 302);
  t.falsy(await app.database.knex('staff_groups').where({ id: group.id }).first());
  t.is(await countOf('admin_log_entries', { content_type: 'auth.group', object_id: String(group.id), action_flag: 3 }), 1);
});

test('validation errors come back next to their fields with the values typed, and nothing is written', async (t) => {
  const root = await as('root');
  const csrf = await token(root);
  const empty = await root.post('/admin/auth/group/add/', { csrfmiddlewaretoken: csrf, name: '' });
  t.is(empty.status, 400);
  t.regex(empty.text, /class="form-row field-name has-errors"[\s\S]*?This field is required\./);
  const user = await root.post('/admin/auth/user/add/', { csrfmiddlewaretoken: csrf, username: 'newbie', password: '123', timezone: 'Mars/Olympus', language: 'en', date_format: 'YYYY-MM-DD', time_format: 'HH:mm', is_staff: 'on', is_active: 'on' });
  t.is(user.status, 400);
  t.regex(user.text, /field-timezone has-errors[\s\S]*?Enter a valid IANA time zone\./);
  t.true(user.text.includes('value="newbie"'), 'the typed username is kept');
  t.false(user.text.includes('value="123"'), 'a typed password is never sent back');
  t.falsy(await app.database.knex('staff_users').where({ username: 'newbie' }).first());
});

test('a POST without its CSRF token is refused with 403 and changes nothing', async (t) => {
  const root = await as('root');
  const refused = await root.post('/admin/auth/group/add/', { name: 'Sneaky' });
  t.is(refused.status, 403);
  t.true(refused.text.includes('CSRF verification failed'));
  const wrong = await root.post('/admin/auth/group/add/', { csrfmiddlewaretoken: 'x'.repeat(43), name: 'Sneaky' });
  t.is(wrong.status, 403);
  t.falsy(await app.database.knex('staff_groups').where({ name: 'Sneaky' }).first());
});

test('a limited user cannot add through a forged form either', async (t) => {
  const viewer = await as('viewer');
  const refused = await viewer.post('/admin/auth/group/add/', { csrfmiddlewaretoken: await token(viewer), name: 'Escalated' });
  t.is(refused.status, 403);
  t.falsy(await app.database.knex('staff_groups').where({ name: 'Escalated' }).first());
});

test('view-only models show their records as text and refuse writes', async (t) => {
  const root = await as('root');
  const [entry] = await app.database.knex('admin_log_entries').select('id').limit(1);
  const page = await root.get(`/admin/admin/logentry/${entry.id}/change/`);
  t.is(page.status, 200);
  t.true(page.text.includes('<h1>View log entry</h1>'));
  t.false(page.text.includes('<form method="post" action="/admin/admin/logentry/'));
  const write = await root.post(`/admin/admin/logentry/${entry.id}/change/`, { csrfmiddlewaretoken: csrfTokenIn(page.text), actor: 'forged' });
  t.is(write.status, 403);
  t.is((await root.get(`/admin/admin/logentry/${entry.id}/delete/`)).status, 403);
});

test('the change form shows read-only fields as text and the related blocks', async (t) => {
  const root = await as('root');
  const [customer] = await app.database.knex('customers').where({ customer_ref: 'cus-007' }).select('id');
  await app.database.knex('cases').insert({ customer_id: customer.id });
  const page = await root.get(`/admin/customer/customer/${customer.id}/change/`);
  t.is(page.status, 200);
  t.regex(page.text, /<span class="label">Customer ref<\/span><div class="field-body"><span class="readonly">cus-007<\/span>/);
  t.regex(page.text, /<input type="text" id="id_first_name" name="first_name" value="&lt;script>alert\(1\)&lt;\/script>"/);
  t.regex(page.text, /<h2>Cases <span class="count">\(1\)<\/span><\/h2>/);
  t.false(page.text.includes(XSS));
  const saved = await root.post(`/admin/customer/customer/${customer.id}/change/`, { csrfmiddlewaretoken: csrfTokenIn(page.text), first_name: 'Grace', last_name: 'Hopper', birth_date: '1906-12-09' });
  t.is(saved.status, 302);
  const row = await app.database.knex('customers').where({ id: customer.id }).first('first_name', 'birth_date', 'customer_ref');
  t.is(row.first_name, 'Grace');
  t.is(row.customer_ref, 'cus-007', 'read-only fields are not written');
  const after = await root.get(`/admin/customer/customer/${customer.id}/change/`);
  t.true(after.text.includes('value="1906-12-09"'));
});

test('bulk actions confirm first, then run through the chain: revoking devices', async (t) => {
  const viewer = await as('viewer');
  const list = await viewer.get('/admin/mobile/device/');
  t.is(list.status, 200);
  t.true(list.text.includes('Viewer phone'));
  t.false(list.text.includes('Root phone'), 'a user without change permission sees only their own devices');
  const device = await app.database.knex('mobile_devices').where({ name: 'Viewer phone' }).first();
  const csrf = csrfTokenIn(list.text);
  const confirm = await viewer.post('/admin/mobile/device/', { csrfmiddlewaretoken: csrf, action: 'revoke', _selected_action: device.id, _changelist_filters: 'platform__exact=android' });
  t.is(confirm.status, 200);
  t.true(confirm.text.includes('Are you sure?'));
  t.true(confirm.text.includes('Viewer phone (android)'));
  t.is((await app.database.knex('mobile_devices').where({ id: device.id }).first()).revoked_at, null, 'nothing happens before the confirmation');
  const done = await viewer.post('/admin/mobile/device/', { csrfmiddlewaretoken: csrf, action: 'revoke', _selected_action: device.id, post: 'yes', _changelist_filters: 'platform__exact=android' });
  t.is(done.status, 302);
  t.is(done.location, '/admin/mobile/device/?platform__exact=android');
  t.not((await app.database.knex('mobile_devices').where({ id: device.id }).first()).revoked_at, null);
  t.true((await viewer.get(done.location!)).text.includes('Revoked 1 device(s).'));

  const none = await viewer.post('/admin/mobile/device/', { csrfmiddlewaretoken: csrf, action: 'revoke' });
  t.is(none.status, 302);
  t.true((await viewer.get('/admin/mobile/device/')).text.includes('Items must be selected'));
  const unknown = await viewer.post('/admin/mobile/device/', { csrfmiddlewaretoken: csrf, action: 'explode', _selected_action: device.id });
  t.is(unknown.status, 302);
  t.true((await viewer.get('/admin/mobile/device/')).text.includes('Unknown action: explode.'));
  // The message quotes the name: one PostgreSQL cannot store is shown with U+FFFD, not a 500.
  const unstorable = await viewer.post('/admin/mobile/device/', { csrfmiddlewaretoken: csrf, action: 'ex\u0000plode\ud800' });
  t.is(unstorable.status, 302);
  t.true((await viewer.get('/admin/mobile/device/')).text.includes('Unknown action: ex\ufffdplode\ufffd.'));
});

test('saved filters are kept per user, listed as shortcuts and deletable', async (t) => {
  const root = await as('root');
  const list = await root.get('/admin/customer/customer/?decision__exact=REVIEW&q=cus');
  const csrf = csrfTokenIn(list.text);
  t.regex(list.text, /name="query" value="decision__exact=REVIEW&amp;q=cus"/);
  const saved = await root.post('/admin/customer/customer/saved-filters/', { csrfmiddlewaretoken: csrf, name: 'To review', query: 'decision__exact=REVIEW&q=cus' });
  t.is(saved.status, 302);
  const row = await app.database.knex('staff_saved_filters').where({ user_id: rootId }).first();
  t.is(row.query, 'decision__exact=REVIEW&q=cus');
  t.true((await root.get('/admin/')).text.includes('href="/admin/customer/customer/?decision__exact=REVIEW&amp;q=cus">To review</a>'));
  t.true((await root.get('/admin/customer/customer/')).text.includes('>To review</a>'));

  const bad = await root.post('/admin/customer/customer/saved-filters/', { csrfmiddlewaretoken: csrf, name: 'Bad', query: 'nonsense=1' });
  t.is(bad.status, 302);
  t.true((await root.get('/admin/customer/customer/')).text.includes('The query names a filter this list does not have.'));
  const duplicate = await root.post('/admin/customer/customer/saved-filters/', { csrfmiddlewaretoken: csrf, name: 'To review', query: 'q=x' });
  t.is(duplicate.status, 302);
  t.is(await countOf('staff_saved_filters', { user_id: rootId }), 1);

  const viewer = await as('viewer');
  const foreign = await viewer.post(`/admin/customer/customer/saved-filters/${row.id}/delete/`, { csrfmiddlewaretoken: await token(viewer) });
  t.is(foreign.status, 404, "someone else's saved filter is not found");
  const removed = await root.post(`/admin/customer/customer/saved-filters/${row.id}/delete/`, { csrfmiddlewaretoken: csrf });
  t.is(removed.status, 302);
  t.falsy(await app.database.knex('staff_saved_filters').where({ id: row.id }).first());
});

test("any staff user opens their own page, changes their password (other sessions end, this one stays) and pairs a phone", async (t) => {
  const db = app.database.knex;
  await createUser(db, { username: 'walter', password: PASSWORD }, operator);
  const walter = await as('walter');
  const other = await as('walter');
  const walterId = (await db('staff_users').where({ username: 'walter' }).first()).id;
  const own = await walter.get(`/admin/auth/user/${walterId}/change/`);
  t.is(own.status, 200);
  t.true(own.text.includes('<h2>Change password</h2>'));
  t.true(own.text.includes('<h2>Pair a phone</h2>'));
  t.false(own.text.includes('<img'), 'no QR code until asked for');
  t.is((await walter.get(`/admin/auth/user/${rootId}/change/`)).status, 403);
  const csrf = csrfTokenIn(own.text);

  const wrong = await walter.post(`/admin/auth/user/${walterId}/password/`, { csrfmiddlewaretoken: csrf, old_password: 'nope', new_password1: 'x', new_password2: 'y' });
  t.is(wrong.status, 400);
  t.true(wrong.text.includes('Your old password was entered incorrectly.'));
  t.true(wrong.text.includes('The two password fields didn’t match.'));
  const newPassword = 'copper-meadow-signal-77';
  const changed = await walter.post(`/admin/auth/user/${walterId}/password/`, { csrfmiddlewaretoken: csrf, old_password: PASSWORD, new_password1: newPassword, new_password2: newPassword });
  t.is(changed.status, 302);
  const after = await walter.get(changed.location!);
  t.is(after.status, 200, 'this session stays');
  t.true(after.text.includes('Your password was changed.'));
  const ended = await other.get('/admin/');
  t.is(ended.status, 302, 'the other session ended');
  t.true(ended.location!.startsWith('/admin/login/'));
  t.is((await walter.post(`/admin/auth/user/${rootId}/password/`, { csrfmiddlewaretoken: csrf, old_password: PASSWORD })).status, 403);

  const pairing = await walter.post(`/admin/auth/user/${walterId}/pairing/`, { csrfmiddlewaretoken: csrf });
  t.is(pairing.status, 200);
  t.regex(pairing.text, /<img src="data:image\/png;base64,[A-Za-z0-9+/=]+" alt="QR code/);
  t.regex(pairing.headers.get('content-security-policy')!, /img-src 'self' data:/);
  t.is(await countOf('mobile_login_tickets', { user_id: walterId, kind: 'login' }), 1);
  t.is((await walter.post(`/admin/auth/user/${rootId}/pairing/`, { csrfmiddlewaretoken: csrf })).status, 403);
  t.false((await (await as('root')).get(`/admin/auth/user/${walterId}/change/`)).text.includes('Pair a phone'), "the QR section is only on the user's own page");
});

test('relations: a read-only fk shows its record linked, a small target is a select, and save hooks speak on the form', async (t) => {
  const root = await as('root');
  const db = app.database.knex;
  const [customer] = await db('customers').where({ customer_ref: 'cus-010' }).select('id');
  const [caseRow] = await db('cases').insert({ customer_id: customer.id }).returning('*');
  const url = `/admin/engine/watchlist/${caseRow.id}/change/`;
  const page = await root.get(url);
  t.is(page.status, 200);
  t.true(page.text.includes(`<a href="/admin/customer/customer/${customer.id}/change/">First10 Last10</a>`));
  t.regex(page.text, new RegExp(`<select id="id_assignee_id" name="assignee_id"><option value>---------</option>[\\s\\S]*?<option value="${viewerId}">viewer</option>`));
  const form = { csrfmiddlewaretoken: csrfTokenIn(page.text), status: caseRow.status, account_action: caseRow.account_action, postponed_until: '', rationale: '' };

  const assigned = await root.post(url, { ...form, assignee_id: viewerId });
  t.is(assigned.status, 302, 'assigning needs no rationale');
  t.is((await db('cases').where({ id: caseRow.id }).first()).assignee_id, viewerId);

  const flagged = await root.post(url, { ...form, assignee_id: viewerId, flagged: 'on' });
  t.is(flagged.status, 400);
  t.regex(flagged.text, /field-rationale has-errors[\s\S]*?A rationale is required to change flagged\./);
  t.false((await db('cases').where({ id: caseRow.id }).first()).flagged);
  const unknownUser = await root.post(url, { ...form, assignee_id: randomUUID() });
  t.is(unknownUser.status, 400);
  t.regex(unknownUser.text, /field-assignee_id has-errors[\s\S]*?Select a valid choice\./);

  // Past 100 possible assignees the select gives way to a typed id with the record's name beside it,
  // a link to look one up and, for the script, the field's autocomplete URL and an empty datalist.
  await db('staff_users').insert(Array.from({ length: 100 }, (_, index) => ({ id: randomUUID(), username: `bulk-${index}`, password_hash: null })));
  const large = await root.get(url);
  const input = new RegExp(`<input type="text" id="id_assignee_id" name="assignee_id" value="${viewerId}"[^>]*/>`).exec(large.text)?.[0] ?? '';
  t.true(input.includes('list="id_assignee_id_options"'));
  t.true(input.includes('data-autocomplete="/admin/engine/watchlist/autocomplete/?field=assignee_id"'));
  t.regex(large.text, /<datalist id="id_assignee_id_options"><\/datalist><span class="fk-repr">viewer<\/span><a class="fk-lookup" href="\/admin\/auth\/user\/" target="_blank" rel="noopener">Look up<\/a>/);
  const options = JSON.parse((await root.get('/admin/engine/watchlist/autocomplete/?field=assignee_id&q=bulk-1')).text);
  t.deepEqual(options.results.map((option: { text: string }) => option.text), ['bulk-1', ...Array.from({ length: 10 }, (_, index) => `bulk-1${index}`)]);
  const typed = await root.post(url, { ...form, assignee_id: rootId });
  t.is(typed.status, 302);
  t.is((await db('cases').where({ id: caseRow.id }).first()).assignee_id, rootId);

  // A reader of cases who may not view users gets no search box: the id alone.
  await createGroup(db, { name: 'Case readers', permissions: ['engine.view_watchlist', 'engine.change_watchlist'] }, operator);
  await createUser(db, { username: 'casereader', password: PASSWORD, groups: ['Case readers'] }, operator);
  const reader = await (await as('casereader')).get(url);
  t.regex(reader.text, /<input type="text" id="id_assignee_id" name="assignee_id"/);
  t.false(reader.text.includes('data-autocomplete'));
  t.false(reader.text.includes('fk-lookup'));
});

test('a many-to-many to more than 100 records keeps its current values and takes one more by ID; an unused box adds nothing', async (t) => {
  const db = app.database.knex;
  const teams = await db('staff_groups')
    .insert(Array.from({ length: 101 }, (_, index) => ({ name: `Team ${String(index).padStart(3, '0')}` })))
    .returning('id');
  const root = await as('root');
  const form = await root.get('/admin/auth/user/add/');
  const box = /<input type="text" id="id_groups_add" name="groups"[^>]*\/>/.exec(form.text)?.[0] ?? '';
  t.true(box.includes('data-autocomplete="/admin/auth/user/autocomplete/?field=groups"'));
  t.true(box.includes('placeholder="Add to groups by ID"'));
  const user = { csrfmiddlewaretoken: csrfTokenIn(form.text), password: 'quartz-lighthouse-meridian-9', is_active: 'on', is_staff: 'on', timezone: 'UTC', language: 'en', date_format: 'YYYY-MM-DD', time_format: 'HH:mm' };
  t.is((await root.post('/admin/auth/user/add/', { ...user, username: 'hopper', groups: String(teams[50]!.id) })).status, 302);
  const hopper = await db('staff_users').where({ username: 'hopper' }).first();
  t.deepEqual(await db('staff_user_groups').where({ user_id: hopper.id }).pluck('group_id'), [teams[50]!.id]);
  t.is((await root.post('/admin/auth/user/add/', { ...user, username: 'lovelace', groups: '' })).status, 302);
  const lovelace = await db('staff_users').where({ username: 'lovelace' }).first();
  t.deepEqual(await db('staff_user_groups').where({ user_id: lovelace.id }).pluck('group_id'), []);
  const page = await root.get(`/admin/auth/user/${hopper.id}/change/`);
  t.regex(page.text, new RegExp(`<select id="id_groups" name="groups" multiple[^>]*><option value="${teams[50]!.id}" selected>Team 050</option></select>`));
});

test('the autocomplete URL of a relation field answers its options as JSON, 20 a page, with the mobile API\'s permissions', async (t) => {
  const db = app.database.knex;
  const desks = await db('staff_groups')
    .insert(Array.from({ length: 25 }, (_, index) => ({ name: `Desk ${String(index).padStart(2, '0')}` })))
    .returning('id');
  const root = await as('root');
  const first = await root.get('/admin/auth/user/autocomplete/?field=groups&q=desk');
  t.is(first.status, 200);
  t.regex(first.headers.get('content-type') ?? '', /^application\/json/);
  const page = JSON.parse(first.text);
  t.is(page.results.length, 20);
  t.true(page.more);
  t.is(page.page, 1);
  t.deepEqual(page.results[0], { value: String(desks[0]!.id), text: 'Desk 00' });
  const second = JSON.parse((await root.get('/admin/auth/user/autocomplete/?field=groups&q=desk&p=2')).text);
  t.deepEqual(second.results.map((option: { text: string }) => option.text), ['Desk 20', 'Desk 21', 'Desk 22', 'Desk 23', 'Desk 24']);
  t.false(second.more);

  // The viewer sees devices but not users: no options of a device's user, none of a user's groups.
  const viewer = await as('viewer');
  t.is((await viewer.get('/admin/mobile/device/autocomplete/?field=user_id')).status, 403);
  t.is((await viewer.get('/admin/auth/user/autocomplete/?field=groups')).status, 403);
  for (const query of ['', '?q=x', '?field=', '?field=nope', '?field=username', '?field=groups&p=0', '?field=groups&p=x', '?field=groups&field=groups', `?field=groups&q=${'x'.repeat(201)}`, '?field=groups&q=%00']) {
    const response = await root.get(`/admin/auth/user/autocomplete/${query}`);
    t.is(response.status, 400, query.slice(0, 40));
    t.true(response.text.includes('<html'), 'a refusal is the admin error page');
  }
  t.is((await root.get('/admin/auth/nosuch/autocomplete/?field=x')).status, 404);
  const anonymous = await adminClient(app.url).get('/admin/auth/user/autocomplete/?field=groups');
  t.is(anonymous.status, 302);
  t.regex(anonymous.location ?? '', /^\/admin\/login\//);
});

test('a related record\'s column named in a fieldset shows its value; dates read "Today" when the user asks for it', async (t) => {
  const db = app.database.knex;
  await createUser(db, { username: 'vera', password: PASSWORD, full_name: 'Vera <b>Viewer</b>', is_superuser: true }, operator);
  const vera = await db('staff_users').where({ username: 'vera' }).first();
  await db('staff_users').where({ id: vera.id }).update({ show_today: true, time_format: 'HH:mm', timezone: 'UTC' });
  const [device] = await db('mobile_devices').insert({ id: randomUUID(), user_id: vera.id, name: 'Vera phone', platform: 'ios', last_seen_at: new Date() }).returning('*');
  const client = await as('vera');
  const page = await client.get(`/admin/mobile/device/${device.id}/change/`);
  t.is(page.status, 200);
  t.regex(page.text, /field-user_id__full_name[\s\S]*?<span class="label">Full name<\/span>[\s\S]*?<span class="readonly">Vera &lt;b>Viewer&lt;\/b><\/span>/);
  t.regex(page.text, /field-last_seen_at[\s\S]*?<span class="readonly">Today, \d\d:\d\d<\/span>/);
  const list = await client.get('/admin/mobile/device/?q=Vera');
  t.regex(list.text, /Today, \d\d:\d\d/);
  await db('staff_users').where({ id: vera.id }).update({ show_today: false, date_format: 'YYYY-MM-DD' });
  t.false((await client.get('/admin/mobile/device/?q=Vera')).text.includes('Today,'));
});

test('an API credential added through the web shows its secret once and stores only its hash', async (t) => {
  const root = await as('root');
  const form = await root.get('/admin/merchant/credential/add/');
  t.is(form.status, 200);
  const created = await root.post('/admin/merchant/credential/add/', { csrfmiddlewaretoken: csrfTokenIn(form.text), client: 'Acme web', active: 'on', allowed_ips: '["*"]', _continue: '1' });
  t.is(created.status, 302);
  const page = await root.get(created.location!);
  const secret = /API secret \(shown once, copy it now\): ([\w-]+)/.exec(page.text)?.[1];
  t.truthy(secret);
  const credential = await app.database.knex('merchant_credentials').where({ client: 'Acme web' }).first();
  t.regex(credential.secret_hash, /^\$argon2id\$/);
  t.false(JSON.stringify(credential).includes(secret!), 'the secret itself is stored nowhere in the row');
  const [entry] = await app.database.knex('admin_log_entries').where({ content_type: 'merchant.credential', object_id: String(credential.id) });
  t.false(JSON.stringify(entry.change).includes(secret!), 'nor in the audit log');
  const token = await app.request('POST', '/api/merchant/auth/token/', { json: { api_key: credential.api_key, api_secret: secret } });
  t.is(token.status, 200, 'the secret shown works');
  const again = await root.get(created.location!);
  t.false(again.text.includes(secret!), 'shown once');
});

test('a user is added through the web form: the password is hashed and never logged, groups saved', async (t) => {
  const root = await as('root');
  const form = await root.get('/admin/auth/user/add/');
  t.regex(form.text, /<input type="password" id="id_password" name="password"/);
  const group = await app.database.knex('staff_groups').where({ name: 'Customer viewers' }).first();
  const created = await root.post('/admin/auth/user/add/', {
    csrfmiddlewaretoken: csrfTokenIn(form.text),
    username: 'grace',
    password: 'quartz-lighthouse-meridian-9',
    full_name: 'Grace H',
    email: 'grace@example.org',
    is_active: 'on',
    is_staff: 'on',
    groups: String(group.id),
    timezone: 'Europe/Berlin',
    language: 'en',
    date_format: 'YYYY-MM-DD',
    time_format: 'HH:mm',
  });
  t.is(created.status, 302);
  const user = await app.database.knex('staff_users').where({ username: 'grace' }).first();
  t.regex(user.password_hash, /^\$argon2id\$/);
  t.false(user.is_superuser);
  t.deepEqual(await app.database.knex('staff_user_groups').where({ user_id: user.id }).pluck('group_id'), [group.id]);
  const [entry] = await app.database.knex('admin_log_entries').where({ content_type: 'auth.user', object_id: user.id });
  t.false(JSON.stringify(entry.change).includes('quartz'), 'the audit row holds no password');
  const grace = adminClient(app.url);
  t.is((await grace.login('grace', 'quartz-lighthouse-meridian-9')).status, 302);
  t.is((await grace.get('/admin/customer/customer/')).status, 200, 'the new user logs in with the group permissions');
});

test('every registered model renders its changelist, add page and change page for a superuser', async (t) => {
  const root = await as('root');
  const site = app.context.backoffice.site;
  for (const model of site.models.values()) {
    const list = await root.get(`/admin/${model.appLabel}/${model.model}/`);
    t.is(list.status, 200, `${model.key} changelist`);
    if (!model.disabled?.add) t.is((await root.get(`/admin/${model.appLabel}/${model.model}/add/`)).status, 200, `${model.key} add`);
    else t.is((await root.get(`/admin/${model.appLabel}/${model.model}/add/`)).status, 403, `${model.key} add is disabled`);
    const [row] = await app.database.knex(model.table).select(model.pk).limit(1);
    if (!row) continue;
    const pk = encodeURIComponent(String(row[model.pk]));
    t.is((await root.get(`/admin/${model.appLabel}/${model.model}/${pk}/change/`)).status, 200, `${model.key} change`);
    t.is((await root.get(`/admin/${model.appLabel}/${model.model}/${pk}/history/`)).status, 200, `${model.key} history`);
  }
});
