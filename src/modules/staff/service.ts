import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import validator from 'validator';
import type { Actor } from '../../actor.ts';
import { REQUIRED, type FieldError, type FieldErrors } from '../../validation/form.ts';
import { isStorableText } from '../../validation/storable.ts';
import { hashPassword, validatePassword, verifyPassword } from './passwords.ts';
import type { StaffUser } from './principal.ts';

/**
 * Staff accounts and groups: every write validates first and then writes in one transaction
 * with its admin.logentry row, so a refused request leaves nothing behind.
 */

/** Input the caller can fix; its message names what was wrong. */
export class StaffInputError extends Error {}

export interface WriteOptions {
  actor: Actor;
  /** Every permission codename that exists (the registry's); grants outside it are refused. */
  known: ReadonlySet<string>;
}

export interface NewStaffUser {
  username: string;
  /** null: no usable password (the account can pair by ticket only) */
  password: string | null;
  email?: string;
  full_name?: string;
  is_superuser?: boolean;
  video_call_agent?: boolean;
  groups?: string[];
  permissions?: string[];
}

/** A user as shown to operators: everything but the password hash, with groups and direct permissions. */
export interface StaffUserSummary extends Omit<StaffUser, 'password_hash'> {
  has_usable_password: boolean;
  video_call_agent: boolean;
  groups: string[];
  permissions: string[];
}

/** Django's username validator: what the command line and the web's user form accept. */
export const USERNAME = /^[\p{L}\p{N}_.@+-]{1,150}$/u;
export const USERNAME_RULE = 'Enter a valid username: up to 150 letters, digits and @/./+/-/_ characters';
// Django's admin action flags, as admin_log_entries stores them.
const ADDITION = 1;
const CHANGE = 2;

/**
 * Checked when the username is unknown or has no password, so that answering "no such user"
 * costs the same argon2 time as a wrong password and timing does not reveal which names exist.
 */
const DUMMY_HASH = await hashPassword(randomBytes(32).toString('hex'));

export async function createUser(db: Knex, input: NewStaffUser, options: WriteOptions): Promise<StaffUser> {
  const username = input.username.trim();
  if (!USERNAME.test(username)) {
    throw new StaffInputError(`${USERNAME_RULE} (got "${input.username}").`);
  }
  const email = (input.email ?? '').trim();
  if (email && !validator.isEmail(email)) throw new StaffInputError(`Enter a valid email address (got "${email}").`);
  const fullName = (input.full_name ?? '').trim();
  if (input.password !== null) {
    const problems = validatePassword(input.password, { username, email, full_name: fullName });
    if (problems.length) throw new StaffInputError(`Password refused: ${problems.map((problem) => problem.message).join(' ')}`);
  }
  const permissions = checkPermissions(input.permissions ?? [], options.known);
  const passwordHash = input.password === null ? null : await hashPassword(input.password);
  return db.transaction(async (trx) => {
    const taken = await trx('staff_users').whereRaw('lower(username) = lower(?)', [username]).first('username');
    if (taken) throw new StaffInputError(`A user with username "${taken.username}" already exists.`);
    const groupIds = await findGroups(trx, input.groups ?? []);
    const [user] = (await trx('staff_users')
      .insert({
        id: randomUUID(),
        username,
        email,
        full_name: fullName,
        password_hash: passwordHash,
        is_superuser: Boolean(input.is_superuser),
        password_changed_at: passwordHash ? trx.fn.now() : null,
      })
      .returning('*')) as StaffUser[];
    if (input.video_call_agent) await trx('staff_video_agents').insert({ user_id: user!.id });
    if (groupIds.length) await trx('staff_user_groups').insert(groupIds.map((group) => ({ user_id: user!.id, group_id: group.id })));
    if (permissions.length) await trx('staff_user_permissions').insert(permissions.map((codename) => ({ user_id: user!.id, codename })));
    await logEntry(trx, options.actor, ADDITION, 'auth.user', user!.id, username, {
      username,
      email,
      full_name: fullName,
      is_superuser: user!.is_superuser,
      video_call_agent: Boolean(input.video_call_agent),
      groups: groupIds.map((group) => group.name),
      user_permissions: permissions,
    });
    return user!;
  });
}

/** Adds permissions and group memberships to a user; what the user already has is left as is. */
export async function grant(
  db: Knex,
  username: string,
  additions: { permissions?: string[]; groups?: string[] },
  options: WriteOptions,
): Promise<StaffUserSummary> {
  const permissions = checkPermissions(additions.permissions ?? [], options.known);
  return db.transaction(async (trx) => {
    const user = await findUser(trx, username);
    const groups = await findGroups(trx, additions.groups ?? []);
    const addedGroups = groups.length
      ? ((await trx('staff_user_groups')
          .insert(groups.map((group) => ({ user_id: user.id, group_id: group.id })))
          .onConflict(['user_id', 'group_id'])
          .ignore()
          .returning('group_id')) as { group_id: number }[])
      : [];
    const addedPermissions = permissions.length
      ? ((await trx('staff_user_permissions')
          .insert(permissions.map((codename) => ({ user_id: user.id, codename })))
          .onConflict(['user_id', 'codename'])
          .ignore()
          .returning('codename')) as { codename: string }[])
      : [];
    if (addedGroups.length || addedPermissions.length) {
      const added = new Set(addedGroups.map((row) => row.group_id));
      await logEntry(trx, options.actor, CHANGE, 'auth.user', user.id, user.username, {
        groups_added: groups.filter((group) => added.has(group.id)).map((group) => group.name),
        user_permissions_added: addedPermissions.map((row) => row.codename).sort(),
      });
    }
    return (await summarize(trx, [user]))[0]!;
  });
}

/** Deactivates a user and ends their web sessions; their grants stay on record. */
export async function deactivateUser(db: Knex, username: string, actor: Actor): Promise<StaffUserSummary> {
  return db.transaction(async (trx) => {
    const user = await findUser(trx, username);
    if (user.is_active) {
      await trx('staff_users').where({ id: user.id }).update({ is_active: false });
      await trx('staff_web_sessions').where({ user_id: user.id }).delete();
      await logEntry(trx, actor, CHANGE, 'auth.user', user.id, user.username, { is_active: [true, false] });
      user.is_active = false;
    }
    return (await summarize(trx, [user]))[0]!;
  });
}

export async function describeUser(db: Knex | Knex.Transaction, userId: string): Promise<StaffUserSummary | undefined> {
  return (await summarize(db, (await db('staff_users').where({ id: userId })) as StaffUser[]))[0];
}

export async function listUsers(db: Knex | Knex.Transaction): Promise<StaffUserSummary[]> {
  return summarize(db, (await db('staff_users').orderByRaw('lower(username)')) as StaffUser[]);
}

export async function createGroup(db: Knex, input: { name: string; permissions?: string[] }, options: WriteOptions) {
  const name = input.name.trim();
  if (!name || name.length > 150) throw new StaffInputError('A group needs a name of 1 to 150 characters.');
  const permissions = checkPermissions(input.permissions ?? [], options.known);
  return db.transaction(async (trx) => {
    if (await trx('staff_groups').where({ name }).first('id')) throw new StaffInputError(`A group named "${name}" already exists.`);
    const [group] = (await trx('staff_groups').insert({ name }).returning(['id', 'name'])) as { id: number; name: string }[];
    if (permissions.length) await trx('staff_group_permissions').insert(permissions.map((codename) => ({ group_id: group!.id, codename })));
    await logEntry(trx, options.actor, ADDITION, 'auth.group', String(group!.id), name, { name, permissions });
    return { id: group!.id, name, permissions };
  });
}

/**
 * The active user with this username (any case) and password, or null. An unknown name, an
 * inactive account and an account without a password cost one argon2 verification like a real
 * check. Sets last_login on success.
 */
export async function authenticate(db: Knex, username: string, password: string): Promise<StaffUser | null> {
  // A name PostgreSQL cannot hold (NUL) names no user: not looked up, still checked against the dummy hash.
  const user = isStorableText(username) ? ((await db('staff_users').whereRaw('lower(username) = lower(?)', [username.trim()]).first()) as StaffUser | undefined) : undefined;
  const matches = await verifyPassword(user?.password_hash ?? DUMMY_HASH, password);
  if (!user || !user.password_hash || !matches || !user.is_active) return null;
  const [updated] = (await db('staff_users').where({ id: user.id }).update({ last_login: db.fn.now() }).returning('*')) as StaffUser[];
  return updated!;
}

export interface PasswordChangeForm {
  old_password?: unknown;
  new_password1?: unknown;
  new_password2?: unknown;
}

/**
 * Django's PasswordChangeForm: the old password must match, the two new ones must agree and
 * pass every validator. Errors come back per field as `{message, code}` lists. On success the
 * hash and password_changed_at are updated and the user's web sessions are deleted, except the
 * one whose hash is `keepSessionHash` (the session that made the change stays signed in).
 */
export async function changePassword(
  db: Knex,
  userId: string,
  form: PasswordChangeForm,
  options: { actor: Actor; keepSessionHash?: string },
): Promise<{ ok: true } | { ok: false; errors: FieldErrors }> {
  const user = (await db('staff_users').where({ id: userId }).first()) as StaffUser | undefined;
  if (!user) throw new StaffInputError(`No staff user with id ${userId}.`);
  const errors: FieldErrors = {};
  const add = (field: string, error: FieldError) => (errors[field] ??= []).push(error);
  const text = (value: unknown) => (typeof value === 'string' ? value : '');
  const oldPassword = text(form.old_password);
  const password1 = text(form.new_password1);
  const password2 = text(form.new_password2);

  if (!oldPassword) add('old_password', REQUIRED);
  else if (!user.password_hash || !(await verifyPassword(user.password_hash, oldPassword))) {
    add('old_password', { message: 'Your old password was entered incorrectly. Please enter it again.', code: 'password_incorrect' });
  }
  if (!password1) add('new_password1', REQUIRED);
  if (!password2) add('new_password2', REQUIRED);
  if (password1 && password2 && password1 !== password2) {
    add('new_password2', { message: 'The two password fields didn’t match.', code: 'password_mismatch' });
  } else if (password2) {
    for (const problem of validatePassword(password2, user)) add('new_password2', problem);
  }
  if (Object.keys(errors).length) return { ok: false, errors };

  const passwordHash = await hashPassword(password2);
  await db.transaction(async (trx) => {
    await trx('staff_users').where({ id: userId }).update({ password_hash: passwordHash, password_changed_at: trx.fn.now() });
    const others = trx('staff_web_sessions').where({ user_id: userId });
    if (options.keepSessionHash) {
      others.whereNot({ id_hash: options.keepSessionHash });
      // now() is the transaction's start: the kept session begins with the new password, not before it.
      await trx('staff_web_sessions').where({ id_hash: options.keepSessionHash, user_id: userId }).update({ created_at: trx.fn.now() });
    }
    await others.delete();
    await logEntry(trx, options.actor, CHANGE, 'auth.user', userId, user.username, { password: 'changed' });
  });
  return { ok: true };
}

export function checkPermissions(codenames: readonly string[], known: ReadonlySet<string>): string[] {
  const unknown = codenames.filter((codename) => !known.has(codename));
  if (unknown.length) {
    throw new StaffInputError(
      `Unknown permission${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')} (permissions are app_label.codename, for example customer.view_customer).`,
    );
  }
  return [...new Set(codenames)].sort();
}

async function findUser(trx: Knex.Transaction, username: string): Promise<StaffUser> {
  const user = (await trx('staff_users').whereRaw('lower(username) = lower(?)', [username.trim()]).first()) as StaffUser | undefined;
  if (!user) throw new StaffInputError(`No staff user with username "${username}".`);
  return user;
}

async function findGroups(trx: Knex.Transaction, names: readonly string[]): Promise<{ id: number; name: string }[]> {
  const wanted = [...new Set(names.map((name) => name.trim()))];
  if (!wanted.length) return [];
  const found = (await trx('staff_groups').whereIn('name', wanted).select('id', 'name')) as { id: number; name: string }[];
  const missing = wanted.filter((name) => !found.some((group) => group.name === name));
  if (missing.length) throw new StaffInputError(`Unknown group${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}.`);
  return found;
}

async function summarize(db: Knex | Knex.Transaction, users: StaffUser[]): Promise<StaffUserSummary[]> {
  if (!users.length) return [];
  const ids = users.map((user) => user.id);
  // one after the other: inside a transaction they share one connection
  const groups = await db('staff_user_groups as ug').join('staff_groups as g', 'g.id', 'ug.group_id').whereIn('ug.user_id', ids).select('ug.user_id', 'g.name').orderBy('g.name');
  const permissions = await db('staff_user_permissions').whereIn('user_id', ids).select('user_id', 'codename').orderBy('codename');
  const agents = await db('staff_video_agents').whereIn('user_id', ids).select('user_id');
  const agentIds = new Set(agents.map((row: { user_id: string }) => row.user_id));
  return users.map(({ password_hash: passwordHash, ...user }) => ({
    ...user,
    has_usable_password: passwordHash !== null,
    video_call_agent: agentIds.has(user.id),
    groups: groups.filter((row: { user_id: string }) => row.user_id === user.id).map((row: { name: string }) => row.name),
    permissions: permissions.filter((row: { user_id: string }) => row.user_id === user.id).map((row: { codename: string }) => row.codename),
  }));
}

/** One admin.logentry row in the writing transaction; the actor's username is kept as it was at the time. */
async function logEntry(
  trx: Knex.Transaction,
  actor: Actor,
  actionFlag: number,
  contentType: string,
  objectId: string,
  objectRepr: string,
  change: Record<string, unknown>,
): Promise<void> {
  let actorText = `${actor.type}:${actor.id}`;
  if (actor.type === 'staff') {
    const row = await trx('staff_users').where({ id: actor.id }).first('username');
    if (row) actorText = row.username;
  }
  await trx('admin_log_entries').insert({
    user_id: actor.type === 'staff' ? actor.id : null,
    actor: actorText,
    action_flag: actionFlag,
    content_type: contentType,
    object_id: objectId,
    object_repr: objectRepr,
    change,
  });
}
