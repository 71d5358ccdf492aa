import type { Knex } from 'knex';
import type { FieldErrors, ModelRegistration, Row } from '../backoffice/registry.ts';
import { ValidationFailed } from '../backoffice/errors.ts';
import { hashPassword, validatePassword } from './passwords.ts';
import { LANGUAGES, TIMEZONE_SET } from './preferences.ts';
import type { Principal } from './principal.ts';
import { USERNAME, USERNAME_RULE } from './service.ts';

/** A user may hand out only what they hold themselves: no privilege escalation through the back office. */
function escalation(cleaned: Row, principal: Principal, before: Row | null = null): FieldErrors | undefined {
  if (principal.user.is_superuser) return undefined;
  if (cleaned.is_superuser === true) return { is_superuser: [{ message: 'Only a superuser can make another user a superuser.', code: 'forbidden' }] };
  if (cleaned.is_superuser === false && before?.is_superuser === true) return { is_superuser: [{ message: 'Only a superuser can demote a superuser.', code: 'forbidden' }] };
  const codenames = (cleaned.user_permissions ?? cleaned.permissions ?? []) as string[];
  const beyond = codenames.filter((codename) => !principal.has(codename));
  if (beyond.length) {
    const field = cleaned.user_permissions !== undefined ? 'user_permissions' : 'permissions';
    return { [field]: [{ message: `You cannot grant permissions you do not hold: ${beyond.slice(0, 5).join(', ')}.`, code: 'forbidden' }] };
  }
  return undefined;
}

/**
 * Groups carry permissions: a user who is not a superuser may put someone (themselves included)
 * into a group only when they hold every permission it grants. Checked in the write's transaction,
 * against the groups the record is not already in.
 */
async function groupEscalation(trx: Knex.Transaction, principal: Principal, userId: string | null, cleaned: Row): Promise<void> {
  if (principal.user.is_superuser || !Array.isArray(cleaned.groups) || !cleaned.groups.length) return;
  const current = userId ? ((await trx('staff_user_groups').where({ user_id: userId }).pluck('group_id')) as number[]).map(String) : [];
  const joining = (cleaned.groups as unknown[]).map(String).filter((group) => !current.includes(group));
  if (!joining.length) return;
  const granted = (await trx('staff_group_permissions as gp')
    .join('staff_groups as g', 'g.id', 'gp.group_id')
    .whereIn('gp.group_id', joining.map(Number))
    .select('g.name', 'gp.codename')) as { name: string; codename: string }[];
  const beyond = granted.filter((grant) => !principal.has(grant.codename));
  if (beyond.length) {
    const groups = [...new Set(beyond.map((grant) => grant.name))];
    throw new ValidationFailed({
      groups: [{ message: `You cannot add a user to a group that grants permissions you do not hold: ${groups.slice(0, 5).join(', ')}.`, code: 'forbidden' }],
    });
  }
}

/** An installation keeps one active superuser: the last one cannot be deactivated, demoted or deleted. */
async function keepsASuperuser(trx: Knex.Transaction, before: Row, values: Row | null): Promise<void> {
  if (!before.is_superuser || !before.is_active) return;
  if (values && values.is_active !== false && values.is_superuser !== false) return;
  // Serialised: two superusers deactivating each other at once must not both see the other active.
  await trx.raw("select pg_advisory_xact_lock(hashtext('warden_last_superuser'))");
  const others = await trx('staff_users').where({ is_superuser: true, is_active: true }).whereNot({ id: before.id }).first('id');
  if (!others) throw new ValidationFailed({ __all__: [{ message: 'This is the last active superuser: make another user a superuser first.', code: 'last_superuser' }] });
}

export const userAdmin: ModelRegistration = {
  appLabel: 'auth',
  model: 'user',
  table: 'staff_users',
  verboseName: 'user',
  repr: (row) => String(row.username),
  reprColumns: ['username'],
  columns: [
    { name: 'username' },
    { name: 'full_name', label: 'Full name' },
    { name: 'email' },
    { name: 'is_active', label: 'Active', kind: 'bool' },
    { name: 'is_superuser', label: 'Superuser', kind: 'bool' },
    { name: 'last_login', label: 'Last login' },
  ],
  titleColumn: 'username',
  dateColumn: 'last_login',
  filters: [{ type: 'choice', field: 'is_active', title: 'Active' }, { type: 'choice', field: 'is_superuser', title: 'Superuser' }],
  searchFields: ['^username', 'full_name', '^email'],
  ordering: ['username'],
  fields: {
    password_hash: { hidden: true },
    password: { virtual: true, type: 'string', required: false, maxLength: 4096, help: 'Required for a new user; change it later on the password form.' },
    groups: { type: 'm2m', related: 'auth.group', through: { table: 'staff_user_groups', sourceColumn: 'user_id', targetColumn: 'group_id' }, virtual: true },
    user_permissions: { type: 'm2m', label: 'User permissions', through: { table: 'staff_user_permissions', sourceColumn: 'user_id', targetColumn: 'codename' }, virtual: true, permissionChoices: true },
    timezone: { help: 'An IANA time zone name, such as Europe/Istanbul.' },
    language: { choices: LANGUAGES },
    date_format: { help: 'How dates read on the web: YYYY-MM-DD, DD.MM.YYYY, MM/DD/YYYY ...' },
    time_format: { help: 'HH:mm (24 hours) or h:mm a (12 hours).' },
    show_today: { label: 'Show "Today"' },
  },
  form: ['username', 'password', 'full_name', 'email', 'is_active', 'is_staff', 'is_superuser', 'groups', 'user_permissions', 'timezone', 'language', 'mobile',
    'date_format', 'time_format', 'show_today', 'last_login', 'date_joined'],
  fieldsets: [
    { title: null, fields: ['username', 'password'] },
    { title: 'Personal info', fields: ['full_name', 'email', 'mobile'] },
    { title: 'Permissions', fields: ['is_active', 'is_staff', 'is_superuser', 'groups', 'user_permissions'] },
    { title: 'Preferences', fields: ['timezone', 'language', 'date_format', 'time_format', 'show_today'] },
    { title: 'Important dates', fields: ['last_login', 'date_joined'] },
  ],
  readonly: ['last_login', 'date_joined'],
  // A superuser's account is changed or deleted by superusers only: whoever else may change users
  // could otherwise demote or deactivate every superuser.
  objectPermission: (principal, operation, row) => operation === 'view' || principal.user.is_superuser || !row.is_superuser,
  hooks: {
    clean(cleaned, before, principal) {
      const errors: FieldErrors = {};
      if (typeof cleaned.username === 'string' && !USERNAME.test(cleaned.username)) {
        errors.username = [{ message: `${USERNAME_RULE}.`, code: 'invalid' }];
      }
      if (typeof cleaned.timezone === 'string' && !TIMEZONE_SET.has(cleaned.timezone)) errors.timezone = [{ message: 'Enter a valid IANA time zone.', code: 'invalid' }];
      if (!before && typeof cleaned.password !== 'string') errors.password = [{ message: 'This field is required.', code: 'required' }];
      if (before && cleaned.password) errors.password = [{ message: 'Change a password with the password form.', code: 'invalid' }];
      if (!before && typeof cleaned.password === 'string') {
        const attributes = { username: String(cleaned.username ?? ''), full_name: String(cleaned.full_name ?? ''), email: String(cleaned.email ?? '') };
        const problems = validatePassword(cleaned.password, attributes);
        if (problems.length) errors.password = problems;
      }
      return Object.keys(errors).length ? errors : escalation(cleaned, principal, before);
    },
    async beforeDelete({ trx, row }) {
      await keepsASuperuser(trx, row, null);
    },
    async beforeSave({ trx, values, cleaned, before, principal }) {
      await groupEscalation(trx, principal, before ? String(before.id) : null, cleaned);
      if (before) await keepsASuperuser(trx, before, values);
      if (!before) values.password_hash = await hashPassword(String(cleaned.password));
      // A deactivated user's web sessions end with it; the device checks refuse its tokens.
      if (before && values.is_active === false) values.password_changed_at = new Date();
    },
  },
  menu: { group: 'Administration', icon: 'person' },
};

export const groupAdmin: ModelRegistration = {
  appLabel: 'auth',
  model: 'group',
  table: 'staff_groups',
  verboseName: 'group',
  repr: (row) => String(row.name),
  reprColumns: ['name'],
  columns: [{ name: 'name' }],
  titleColumn: 'name',
  searchFields: ['name'],
  ordering: ['name'],
  fields: {
    permissions: { type: 'm2m', through: { table: 'staff_group_permissions', sourceColumn: 'group_id', targetColumn: 'codename' }, virtual: true, permissionChoices: true },
  },
  form: ['name', 'permissions'],
  hooks: {
    clean(cleaned, _before, principal) {
      if (typeof cleaned.name === 'string' && cleaned.name.length > 150) return { name: [{ message: 'At most 150 characters.', code: 'max_length' }] };
      return escalation(cleaned, principal);
    },
  },
  menu: { group: 'Administration', icon: 'group' },
};
