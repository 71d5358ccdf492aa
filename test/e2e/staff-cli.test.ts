/** `warden staff ...` and `warden group create` against a test database, as an operator runs them. */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

const root = path.resolve(import.meta.dirname, '../..');
let database: TestDatabase;

test.before(async () => {
  database = await createTestDatabase();
});
test.after.always(async () => {
  await database?.drop();
});

// Tests read fields freely from the printed JSON.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function warden(...args: string[]): Promise<{ code: number; json: any }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: database.url },
    });
    return { code: 0, json: JSON.parse(stdout) };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!) };
  }
}

const count = async (table: string) => Number((await database.knex(table).count({ n: '*' }).first())!.n);

test.serial('group create with registry permissions; unknown permission refused by name, nothing written', async (t) => {
  const created = await warden('group', 'create', '--name', 'Analysts', '--perm', 'customer.view_customer', '--perm', 'engine.view_alert');
  t.is(created.code, 0);
  t.deepEqual(created.json.permissions, ['customer.view_customer', 'engine.view_alert']);
  const bad = await warden('group', 'create', '--name', 'Other', '--perm', 'customer.view_customer', '--perm', 'customer.fly_customer');
  t.is(bad.code, 1);
  t.regex(bad.json.error, /Unknown permission: customer\.fly_customer/);
  t.falsy(await database.knex('staff_groups').where({ name: 'Other' }).first());
  t.is((await warden('group', 'create')).code, 2);
});

test.serial('staff create, grant, list and deactivate', async (t) => {
  const created = await warden(
    'staff', 'create', '--username', 'admin', '--password', 'violet-harbour-lantern-42', '--email', 'admin@example.org',
    '--full-name', 'Ada Admin', '--superuser',
  );
  t.is(created.code, 0, JSON.stringify(created.json));
  t.like(created.json, { username: 'admin', email: 'admin@example.org', full_name: 'Ada Admin', is_superuser: true, is_active: true, has_usable_password: true });
  t.false('password_hash' in created.json);

  const agent = await warden('staff', 'create', '--username', 'vera', '--password', 'amber-meadow-flute-77', '--video-call-agent', '--group', 'Analysts');
  t.is(agent.code, 0);
  t.true(agent.json.video_call_agent);
  t.deepEqual(agent.json.groups, ['Analysts']);

  const granted = await warden('staff', 'grant', '--username', 'VERA', '--perm', 'engine.change_watchlist');
  t.is(granted.code, 0);
  t.deepEqual(granted.json.permissions, ['engine.change_watchlist']);

  const listed = await warden('staff', 'list');
  t.deepEqual(listed.json.map((user: { username: string }) => user.username), ['admin', 'vera']);

  const deactivated = await warden('staff', 'deactivate', '--username', 'vera');
  t.false(deactivated.json.is_active);
  t.is((await database.knex('admin_log_entries').where({ content_type: 'auth.user' })).length, 4);
});

test.serial('validation failures exit 1 with a clear error and write nothing', async (t) => {
  const users = await count('staff_users');
  const entries = await count('admin_log_entries');
  const weak = await warden('staff', 'create', '--username', 'bob', '--password', 'password');
  t.is(weak.code, 1);
  t.regex(weak.json.error, /too short/);
  t.regex(weak.json.error, /too common/);
  const duplicate = await warden('staff', 'create', '--username', 'ADMIN', '--password', 'violet-harbour-lantern-42');
  t.is(duplicate.code, 1);
  t.regex(duplicate.json.error, /already exists/);
  const group = await warden('staff', 'create', '--username', 'bob', '--password', 'violet-harbour-lantern-42', '--group', 'Ghosts');
  t.is(group.code, 1);
  t.regex(group.json.error, /Unknown group: Ghosts/);
  const perm = await warden('staff', 'grant', '--username', 'vera', '--perm', 'nope.nothing', '--group', 'Analysts');
  t.is(perm.code, 1);
  t.regex(perm.json.error, /Unknown permission: nope\.nothing/);
  const ghost = await warden('staff', 'deactivate', '--username', 'ghost');
  t.is(ghost.code, 1);
  t.regex(ghost.json.error, /No staff user with username "ghost"/);
  t.is((await warden('staff', 'create', '--username', 'bob')).code, 2, 'usage error');
  t.is(await count('staff_users'), users);
  t.is(await count('admin_log_entries'), entries);
});
