import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { queryPrepared } from '../../db/knex.ts';

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
  return principalFromRow((await db.raw(principalSql('?'), [userId])).rows[0])?.principal ?? null;
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
 * The principal and, in the same statement, the named extra columns (SQL expressions over the
 * user's row `u`, e.g. a scalar subquery for the device a token is bound to, with their parameters
 * from $2 on in `values`): a mobile request's checks cost one round trip, and a prepared one (each
 * connection plans it once; planning this statement took about twice as long as running it).
 */
export async function loadPrincipalWith<Extra extends Record<string, unknown>>(
  db: Knex | Knex.Transaction,
  userId: string,
  extra: { [Name in keyof Extra]: string },
  values: unknown[] = [],
): Promise<{ principal: Principal; extra: Extra } | null> {
  const text = principalSql('$1', extra);
  const [row] = await queryPrepared(db, preparedName(text), text, [userId, ...values]);
  return principalFromRow<Extra>(row);
}

const PRINCIPAL_COLUMNS = `u.*, a.status as agent_status, a.in_call as agent_in_call, a.status_changed_at as agent_status_changed_at,
  array(select g.name from staff_user_groups ug join staff_groups g on g.id = ug.group_id where ug.user_id = u.id order by g.name collate "C") as group_names,
  array(select gp.codename from staff_user_groups ug join staff_group_permissions gp on gp.group_id = ug.group_id where ug.user_id = u.id
        union select up.codename from staff_user_permissions up where up.user_id = u.id) as codenames`;

/**
 * The select that loads a principal (see principalFromRow), as SQL: `userId` is an SQL expression
 * ($1, or what a statement that writes first selects by, as pairing does), `extra` names further
 * columns read in the same statement.
 */
export function principalSql(userId: string, extra: Record<string, string> = {}): string {
  const columns = [PRINCIPAL_COLUMNS, ...Object.entries(extra).map(([name, expression]) => `(${expression}) as extra_${name}`)];
  return `select ${columns.join(',\n  ')}\nfrom staff_users u left join staff_video_agents a on a.user_id = u.id where u.id = ${userId} limit 1`;
}

const preparedNames = new Map<string, string>();

/** A prepared statement's name, one per distinct text (a connection keeps each name for one text). */
export function preparedName(text: string): string {
  let name = preparedNames.get(text);
  if (!name) preparedNames.set(text, (name = `warden_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`));
  return name;
}

/** The principal and the extra columns of a principalSql row, or null where it found no user. */
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
