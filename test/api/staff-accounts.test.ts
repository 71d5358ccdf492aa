/** Staff accounts against a real PostgreSQL: users, groups, grants, principal, login check, password change. */
import test from 'ava';
import type { Actor } from '../../src/actor.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import {
  authenticate,
  changePassword,
  createGroup,
  createUser,
  deactivateUser,
  grant,
  listUsers,
  StaffInputError,
} from '../../src/modules/staff/service.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const actor: Actor = { type: 'operator', id: 'test' };
const known = new Set(['customer.view_customer', 'customer.change_customer', 'engine.view_alert', 'engine.change_watchlist']);
const options = { actor, known };
const PASSWORD = 'violet-harbour-lantern-42';
let database: TestDatabase;

test.before(async () => {
  database = await createTestDatabase();
});
test.after.always(async () => {
  await database?.drop();
});

const count = async (table: string) => Number((await database.knex(table).count({ n: '*' }).first())!.n);

test.serial('create a user with groups, agent profile and permissions; the principal sees them all in one statement', async (t) => {
  const { knex } = database;
  await createGroup(knex, { name: 'Analysts', permissions: ['customer.view_customer', 'engine.view_alert'] }, options);
  const user = await createUser(
    knex,
    { username: 'Anna', password: PASSWORD, email: 'anna@example.org', full_name: 'Anna Berg', video_call_agent: true, groups: ['Analysts'], permissions: ['engine.change_watchlist'] },
    options,
  );
  t.is(user.username, 'Anna');
  t.true(user.password_hash!.startsWith('$argon2id$'));
  t.truthy(user.password_changed_at);

  const queries: string[] = [];
  const onQuery = (query: { sql: string }) => queries.push(query.sql);
  knex.on('query', onQuery);
  const principal = (await loadPrincipal(knex, user.id))!;
  knex.off('query', onQuery);
  t.is(queries.length, 1);
  t.deepEqual(principal.groups, ['Analysts']);
  t.deepEqual([...principal.granted].sort(), ['customer.view_customer', 'engine.change_watchlist', 'engine.view_alert']);
  t.true(principal.isAgent);
  t.is(principal.agent!.status, 'AWAY');
  t.true(principal.has('engine.view_alert'));
  t.false(principal.has('customer.change_customer'));
  t.is(await loadPrincipal(knex, '00000000-0000-4000-8000-000000000000'), null);

  const logged = await knex('admin_log_entries').where({ content_type: 'auth.user', object_id: user.id });
  t.is(logged.length, 1);
  t.is(logged[0].action_flag, 1);
  t.is(logged[0].actor, 'operator:test');
  t.deepEqual(logged[0].change.groups, ['Analysts']);
});

test.serial('usernames are unique regardless of case; bad input is refused with nothing written', async (t) => {
  const { knex } = database;
  const before = await count('staff_users');
  const duplicate = await t.throwsAsync(createUser(knex, { username: 'ANNA', password: PASSWORD }, options), { instanceOf: StaffInputError });
  t.regex(duplicate!.message, /already exists/);
  await t.throwsAsync(createUser(knex, { username: 'has space', password: PASSWORD }, options), { message: /valid username/ });
  await t.throwsAsync(createUser(knex, { username: 'bob', password: PASSWORD, email: 'not-an-email' }, options), { message: /valid email/ });
  const weak = await t.throwsAsync(createUser(knex, { username: 'bob', password: '12345' }, options));
  t.regex(weak!.message, /too short/);
  t.regex(weak!.message, /too common/);
  t.regex(weak!.message, /entirely numeric/);
  await t.throwsAsync(createUser(knex, { username: 'bobbyjones', password: 'bobbyjones12' }, options), { message: /too similar to the username/ });
  const unknownPerm = await t.throwsAsync(createUser(knex, { username: 'bob', password: PASSWORD, permissions: ['customer.view_customer', 'nope.fly'] }, options));
  t.regex(unknownPerm!.message, /^Unknown permission: nope\.fly \(/);
  const unknownGroup = await t.throwsAsync(createUser(knex, { username: 'bob', password: PASSWORD, groups: ['Analysts', 'Ghosts'] }, options));
  t.regex(unknownGroup!.message, /Unknown group: Ghosts/);
  t.is(await count('staff_users'), before);
});

test.serial('grant adds permissions and groups once; unknown ones write nothing', async (t) => {
  const { knex } = database;
  await createGroup(knex, { name: 'Case workers', permissions: ['engine.change_watchlist'] }, options);
  const summary = await grant(knex, 'anna', { permissions: ['customer.change_customer', 'engine.change_watchlist'], groups: ['Case workers'] }, options);
  t.deepEqual(summary.groups, ['Analysts', 'Case workers']);
  t.deepEqual(summary.permissions, ['customer.change_customer', 'engine.change_watchlist']);
  t.false('password_hash' in summary);

  const entries = await count('admin_log_entries');
  const again = await grant(knex, 'anna', { permissions: ['customer.change_customer'] }, options);
  t.deepEqual(again.permissions, ['customer.change_customer', 'engine.change_watchlist']);
  t.is(await count('admin_log_entries'), entries, 'a grant that changes nothing is not logged');

  await t.throwsAsync(grant(knex, 'anna', { permissions: ['customer.view_customer'], groups: ['Nobody'] }, options), { message: /Unknown group: Nobody/ });
  await t.throwsAsync(grant(knex, 'anna', { permissions: ['bogus.perm'] }, options), { message: /Unknown permission: bogus\.perm/ });
  await t.throwsAsync(grant(knex, 'nobody', { permissions: ['customer.view_customer'] }, options), { message: /No staff user with username "nobody"/ });
  const user = await knex('staff_users').where({ username: 'Anna' }).first();
  t.is(Number((await knex('staff_user_permissions').where({ user_id: user.id }).count({ n: '*' }).first())!.n), 2);

  await t.throwsAsync(createGroup(knex, { name: 'Analysts' }, options), { message: /already exists/ });
  await t.throwsAsync(createGroup(knex, { name: 'Tmp', permissions: ['x.y'] }, options), { message: /Unknown permission: x\.y/ });
  t.falsy(await knex('staff_groups').where({ name: 'Tmp' }).first());
});

test.serial('authenticate: any case of the username, right password, active accounts only', async (t) => {
  const { knex } = database;
  const user = await authenticate(knex, 'aNNa', PASSWORD);
  t.is(user?.username, 'Anna');
  t.truthy(user!.last_login);
  t.is(await authenticate(knex, 'anna', 'wrong password here'), null);
  t.is(await authenticate(knex, 'nobody', PASSWORD), null);
  await createUser(knex, { username: 'ticket-only', password: null }, options);
  t.is(await authenticate(knex, 'ticket-only', ''), null);
});

test.serial('changePassword returns Django PasswordChangeForm errors per field, and on success drops other web sessions', async (t) => {
  const { knex } = database;
  const user = await knex('staff_users').where({ username: 'Anna' }).first();
  const change = (form: Record<string, unknown>, keepSessionHash?: string) => changePassword(knex, user.id, form, { actor, keepSessionHash });

  t.deepEqual(await change({}), {
    ok: false,
    errors: {
      old_password: [{ message: 'This field is required.', code: 'required' }],
      new_password1: [{ message: 'This field is required.', code: 'required' }],
      new_password2: [{ message: 'This field is required.', code: 'required' }],
    },
  });
  t.deepEqual(await change({ old_password: 'not it at all', new_password1: 'amber-meadow-flute-77', new_password2: 'amber-meadow-flute-78' }), {
    ok: false,
    errors: {
      old_password: [{ message: 'Your old password was entered incorrectly. Please enter it again.', code: 'password_incorrect' }],
      new_password2: [{ message: 'The two password fields didn’t match.', code: 'password_mismatch' }],
    },
  });
  const weak = await change({ old_password: PASSWORD, new_password1: 'annaberg', new_password2: 'annaberg' });
  t.false(weak.ok);
  t.deepEqual(!weak.ok && weak.errors.new_password2!.map((error) => error.code), ['password_too_similar', 'password_too_short']);

  await knex('staff_web_sessions').insert([
    { id_hash: 'keep', user_id: user.id, csrf_token: 'a', created_at: knex.raw("now() - interval '1 hour'") },
    { id_hash: 'other', user_id: user.id, csrf_token: 'b' },
  ]);
  t.deepEqual(await change({ old_password: PASSWORD, new_password1: 'amber-meadow-flute-77', new_password2: 'amber-meadow-flute-77' }, 'keep'), { ok: true });
  const sessions = await knex('staff_web_sessions').where({ user_id: user.id });
  t.deepEqual(sessions.map((session) => session.id_hash), ['keep']);
  const updated = await knex('staff_users').where({ id: user.id }).first();
  t.true(updated.password_changed_at > user.password_changed_at);
  // the kept session starts with the new password, so the session check does not end it
  t.false(sessions[0].created_at < updated.password_changed_at);
  t.truthy(await authenticate(knex, 'anna', 'amber-meadow-flute-77'));
  t.is(await authenticate(knex, 'anna', PASSWORD), null);
});

test.serial('deactivate ends web sessions and every permission; list shows it', async (t) => {
  const { knex } = database;
  const user = await knex('staff_users').where({ username: 'Anna' }).first();
  await knex('staff_web_sessions').insert({ id_hash: 'live', user_id: user.id, csrf_token: 'c' });
  const summary = await deactivateUser(knex, 'anna', actor);
  t.false(summary.is_active);
  t.is(await count('staff_web_sessions'), 0);
  const principal = (await loadPrincipal(knex, user.id))!;
  t.false(principal.has('engine.view_alert'));
  t.is(await authenticate(knex, 'anna', 'amber-meadow-flute-77'), null);
  const listed = await listUsers(knex);
  t.deepEqual(listed.map((row) => [row.username, row.is_active, row.has_usable_password]), [
    ['Anna', false, true],
    ['ticket-only', true, false],
  ]);
  await t.throwsAsync(deactivateUser(knex, 'ghost', actor), { message: /No staff user/ });
});
