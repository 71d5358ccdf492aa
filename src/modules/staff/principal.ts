import type { Knex } from 'knex';

/** A row of staff_users, as the database returns it. */
export interface StaffUser {
  id: string;
  username: string;
  full_name: string;
  email: string;
  /** null: no usable password (the account pairs by ticket only) */
  password_hash: string | null;
  is_active: boolean;
  is_staff: boolean;
  is_superuser: boolean;
  timezone: string;
  language: string;
  mobile: string;
  date_format: string;
  time_format: string;
  show_today: boolean;
  last_login: Date | null;
  date_joined: Date;
  password_changed_at: Date | null;
}

/** The video-call agent profile (staff_video_agents); a user without one is not an agent. */
export interface VideoAgentProfile {
  status: string;
  in_call: boolean;
  status_changed_at: Date;
}

/**
 * Who is asking, with everything permission checks need, computed once per request. `granted`
 * holds the user's own and their groups' codenames (`app_label.codename`); a superuser's full
 * list comes from the registry, so `has` answers true for them without it.
 */
export interface Principal {
  user: StaffUser;
  groups: string[];
  granted: ReadonlySet<string>;
  isAgent: boolean;
  agent: VideoAgentProfile | null;
  has(codename: string): boolean;
}

/**
 * The principal of an existing user, or null: one statement, whatever the number of groups, since
 * every authenticated request (mobile, web, socket login) reads it.
 */
export async function loadPrincipal(db: Knex | Knex.Transaction, userId: string): Promise<Principal | null> {
  return (await loadPrincipalWith(db, userId, {}))?.principal ?? null;
}

/**
 * Whether the user's row still exists. A request whose user is deleted while it runs fails on a
 * foreign key to the gone row or on a principal it cannot reload; the request guards (mobile and
 * web) ask this after such a failure to answer it as they would a request made after the deletion.
 */
export async function staffUserExists(db: Knex, userId: string): Promise<boolean> {
  return (await db('staff_users').where({ id: userId }).first('id')) !== undefined;
}

/**
 * The principal and, in the same statement, the named extra columns (raw SQL expressions, e.g. a
 * scalar subquery for the device a token is bound to): a request's checks cost one round trip.
 */
export async function loadPrincipalWith<Extra extends Record<string, unknown>>(
  db: Knex | Knex.Transaction,
  userId: string,
  extra: { [Name in keyof Extra]: Knex.Raw },
): Promise<{ principal: Principal; extra: Extra } | null> {
  return principalFromRow<Extra>(await principalQuery(db, userId, extra));
}

/**
 * The select that loads a principal (see principalFromRow): `userId` is a value or an SQL
 * expression (a statement that writes first, such as pairing, selects its principal by what it
 * wrote), and `extra` names further columns read in the same statement.
 */
export function principalQuery(db: Knex | Knex.Transaction, userId: string | Knex.Raw, extra: Record<string, Knex.Raw> = {}): Knex.QueryBuilder {
  return db('staff_users as u')
    .leftJoin('staff_video_agents as a', 'a.user_id', 'u.id')
    .where('u.id', userId)
    .first(
      'u.*',
      'a.status as agent_status',
      'a.in_call as agent_in_call',
      'a.status_changed_at as agent_status_changed_at',
      db.raw(
        'array(select g.name from staff_user_groups ug join staff_groups g on g.id = ug.group_id where ug.user_id = u.id order by g.name collate "C") as group_names',
      ),
      db.raw(
        `array(select gp.codename from staff_user_groups ug join staff_group_permissions gp on gp.group_id = ug.group_id where ug.user_id = u.id
               union select up.codename from staff_user_permissions up where up.user_id = u.id) as codenames`,
      ),
      ...Object.entries(extra).map(([name, expression]) => db.raw('(?) as ??', [expression, `extra_${name}`])),
    );
}

/** The principal and the extra columns of a principalQuery row, or null where it found no user. */
export function principalFromRow<Extra extends Record<string, unknown>>(row: unknown): { principal: Principal; extra: Extra } | null {
  if (!row) return null;
  const {
    agent_status: agentStatus,
    agent_in_call: inCall,
    agent_status_changed_at: changedAt,
    group_names: groupNames,
    codenames,
    ...rest
  } = row as StaffUser & {
    agent_status: string | null;
    agent_in_call: boolean | null;
    agent_status_changed_at: Date | null;
    group_names: string[];
    codenames: string[];
  };
  const user = {} as Record<string, unknown>;
  const extras = {} as Record<string, unknown>;
  for (const [name, value] of Object.entries(rest)) {
    if (name.startsWith('extra_')) extras[name.slice(6)] = value;
    else user[name] = value;
  }
  const agent = agentStatus === null ? null : { status: agentStatus, in_call: Boolean(inCall), status_changed_at: changedAt! };
  return { principal: buildPrincipal(user as unknown as StaffUser, groupNames, new Set(codenames), agent), extra: extras as Extra };
}

export function buildPrincipal(user: StaffUser, groups: string[], granted: ReadonlySet<string>, agent: VideoAgentProfile | null): Principal {
  return {
    user,
    groups,
    // An inactive user keeps their grants on record but may use none of them.
    granted: user.is_active ? granted : new Set(),
    isAgent: agent !== null,
    agent,
    has(codename: string) {
      if (!user.is_active) return false;
      return user.is_superuser || granted.has(codename);
    },
  };
}
