/**
 * The fuzzer's staff side on a fresh app: two identities, a superuser and a limited user (a few
 * view permissions of its own), each paired as a mobile device and holding a web admin session;
 * the registry's models as the fuzzer sees them; and the live values behind every placeholder.
 *
 * The fuzzer may log a device out, reuse a rotated refresh token, revoke a device, deactivate or
 * demote its own user, change its password or end its web session: every one of these is part of
 * what is fuzzed, none may blind the rest of the run. So an answer that says a live credential
 * was lost (401 to a live bearer token, a redirect to the login page for a live session cookie)
 * repairs that identity before the next request of its worker, and a checkpoint between batches
 * repairs an identity whose user row drifted (flags, groups, direct permissions, password). A
 * repair puts the user row back as it was made (the fixture's own writes, not the service's),
 * pairs a new device through POST auth/qr/ and opens a new web session. The checkpoint also
 * re-reads a few pks of every model, so rows the fuzzer created or deleted are named as they are.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt, SignJWT } from 'jose';
import { filterParameters } from '../../src/modules/backoffice/query.ts';
import { permissionCodenames } from '../../src/app/registrations.ts';
import type { BoundModel } from '../../src/modules/backoffice/registry.ts';
import { saveObject } from '../../src/modules/backoffice/write.ts';
import { LOGIN_PATH } from '../../src/modules/backoffice/web/shell.tsx';
import { SESSION_COOKIE, startSession } from '../../src/modules/backoffice/web/session.ts';
import { issueLoginTicket, TicketRefusedError } from '../../src/modules/mobile/tickets.ts';
import { notify } from '../../src/modules/notifications/service.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import type { TestApp } from '../helpers/app.ts';
import { fillText, type FuzzCredentials, type FuzzRequest } from './openapi-fuzz.ts';
import { PK_SLOTS, pkPlaceholders, type FuzzModel, type StaffFuzzTarget } from './registry-fuzz.ts';
import { live } from './values.ts';

const PASSWORD = 'fuzz: correct horse battery staple 42';
/** A password the validators accept: a change to it succeeds (and the checkpoint puts the old one back). */
const NEW_PASSWORD = 'fuzz: another horse battery staple 43';
const OPERATOR = { type: 'operator', id: 'fuzz' } as const;
/** The limited identity's only permissions: some models' view, nothing else. */
const LIMITED_PERMISSIONS = ['customer.view_customer', 'transaction.view_financialevent', 'engine.view_alert', 'engine.view_watchlist', 'report.view_report', 'mobile.view_device', 'notification.view_notification'];

interface Identity {
  name: string;
  userId: string;
  username: string;
  superuser: boolean;
  /** Its own permission codenames, sorted (no groups: a group is a row the fuzzer may delete by id). */
  permissions: string[];
  passwordHash: string;
  /** The live values its placeholders stand for: access (and its tampered forms), refresh, device, cookie, csrf. */
  values: Map<string, string>;
  /** Bumped by every repair: an answer to a request sent with an older credential repairs nothing. */
  generation: number;
  repairing?: Promise<void>;
}

interface Lease {
  identity: Identity;
  kind: 'mobile' | 'web';
  generation: number;
}

export interface StaffFuzz {
  target: StaffFuzzTarget;
  credentials: FuzzCredentials;
  /** Repairs made, by identity and cause (`super: lost credential`, `limited: user row changed`). */
  repairs: Map<string, number>;
}

/**
 * Makes the identities and the target. `protectedPks` are rows the fuzzer must not name (by model
 * key): the integration side's own merchant credential, events and flow, which no repair restores.
 */
export async function prepareStaffFuzz(app: TestApp, protectedPks: Record<string, string[]>): Promise<StaffFuzz> {
  const db = app.database.knex;
  const site = app.context.backoffice.site;
  const now = () => app.context.now?.() ?? new Date();
  const known = new Set(permissionCodenames());
  const limitedPermissions = LIMITED_PERMISSIONS.filter((codename) => known.has(codename)).sort();

  let made = 0;
  const makeUser = async (name: string, superuser: boolean, permissions: string[]) => {
    made++;
    return createUser(db, { username: `fuzz-${name}-${made}`, password: PASSWORD, is_superuser: superuser, video_call_agent: superuser, permissions }, { actor: OPERATOR, known });
  };
  const identity = async (name: string, superuser: boolean): Promise<Identity> => {
    const permissions = superuser ? [] : limitedPermissions;
    const user = await makeUser(name, superuser, permissions);
    return { name, userId: user.id, username: user.username, superuser, permissions, passwordHash: user.password_hash!, values: new Map(), generation: 0 };
  };
  const identities = [await identity('super', true), await identity('limited', false)];
  const byName = new Map(identities.map((each) => [each.name, each]));

  const pair = async (userId: string) => {
    const { qr } = await issueLoginTicket(db, userId, now());
    const response = await app.request('POST', '/api/mobile/auth/qr/', { json: { ticket: qr.ticket, device_name: 'fuzz', platform: 'android', app_version: '1.0.0' } });
    if (response.status !== 200) throw new Error(`pairing failed: ${response.status} ${response.text}`);
    return response.body.data as { access_token: string; refresh_token: string; device_id: string };
  };
  const otherKey = new TextEncoder().encode(randomBytes(32).toString('hex'));
  const connect = async (each: Identity) => {
    const tokens = await pair(each.userId);
    const [header, payload] = tokens.access_token.split('.');
    const web = await startSession(db, each.userId);
    const values: Array<[string, string]> = [
      ['access', tokens.access_token],
      ['access-tampered', `${tokens.access_token.slice(0, -3)}${tokens.access_token.endsWith('AAA') ? 'BBB' : 'AAA'}`],
      ['access-unsigned', `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${payload}.`],
      ['access-other-key', await new SignJWT(decodeJwt(tokens.access_token)).setProtectedHeader(JSON.parse(Buffer.from(header!, 'base64url').toString())).sign(otherKey)],
      ['refresh', tokens.refresh_token],
      ['device', tokens.device_id],
      ['cookie', web.cookieValue],
      ['csrf', web.session.csrfToken],
      ['user', each.userId],
      ['username', each.username],
      ['password', PASSWORD],
    ];
    each.values = new Map(values);
  };
  for (const each of identities) await connect(each);

  // Credentials that must stay refused: a logged-out device's access token, and a refresh token already rotated (its reuse revokes that device).
  const decoy = await makeUser('decoy', false, []);
  const revoked = await pair(decoy.id);
  await app.request('POST', '/api/mobile/auth/logout/', { token: revoked.access_token });
  const rotated = await pair(decoy.id);
  const refreshed = await app.request('POST', '/api/mobile/auth/refresh/', { json: { device_id: rotated.device_id, refresh_token: rotated.refresh_token } });
  if (refreshed.status !== 200) throw new Error(`refresh failed: ${refreshed.text}`);

  // Rows only a service write makes: a notification for each identity, a report.
  await db.transaction((trx) => notify(trx, { userIds: identities.map((each) => each.userId), kind: 'report_done', title: 'fuzz' }));
  const superPrincipal = (await loadPrincipal(db, identities[0]!.userId))!;
  await saveObject(app.context.backoffice, site.models.get('report.report')!, superPrincipal, null, { name: 'fuzz', kind: 'customers_by_risk' });

  // The rows each placeholder pk:<model>:<slot> names, read again at every checkpoint.
  const models = [...site.models.values()];
  const pools = new Map<string, string[]>();
  const readPools = () =>
    Promise.all(
      models.map(async (model) => {
        const rows = (await db(model.table)
          .whereNotIn(model.pk, protectedPks[model.key] ?? [])
          .orderBy(model.pk, 'desc')
          .limit(PK_SLOTS)
          .select(model.pk)) as Array<Record<string, unknown>>;
        pools.set(model.key, rows.map((row) => String(row[model.pk])));
      }),
    );
  await readPools();

  const repairs = new Map<string, number>();
  const repair = (each: Identity, cause: string): Promise<void> => {
    each.repairing ??= (async () => {
      // The fuzzer's own requests run meanwhile and may delete the user again: a few tries.
      for (let attempt = 1; ; attempt++) {
        try {
          await restore(each);
          await connect(each);
          break;
        } catch (error) {
          if (attempt === 3) throw error;
        }
      }
      each.generation++;
      const key = `${each.name}: ${cause}`;
      repairs.set(key, (repairs.get(key) ?? 0) + 1);
    })().finally(() => {
      each.repairing = undefined;
    });
    return each.repairing;
  };
  /** The user row as it was made: active staff, its superuser flag, no groups, its own permissions, its password. A deleted user is made again. */
  const restore = async (each: Identity) => {
    const flags = { is_active: true, is_staff: true, is_superuser: each.superuser, password_hash: each.passwordHash };
    // One transaction: the update locks the row, so a concurrent delete waits for the whole restore.
    const kept = await db.transaction(async (trx) => {
      if (!(await trx('staff_users').where({ id: each.userId }).update(flags))) return false;
      await trx('staff_user_groups').where({ user_id: each.userId }).delete();
      await trx('staff_user_permissions').where({ user_id: each.userId }).delete();
      if (each.permissions.length) await trx('staff_user_permissions').insert(each.permissions.map((codename) => ({ user_id: each.userId, codename })));
      return true;
    });
    if (!kept) {
      const user = await makeUser(each.name, each.superuser, each.permissions);
      Object.assign(each, { userId: user.id, username: user.username, passwordHash: user.password_hash! });
    }
  };
  /** Whether the user row still is as made (a change through the data API or the web admin). */
  const drifted = async (each: Identity): Promise<boolean> => {
    const [user, groups, permissions] = await Promise.all([
      db('staff_users').where({ id: each.userId }).first('is_active', 'is_staff', 'is_superuser', 'password_hash'),
      db('staff_user_groups').where({ user_id: each.userId }).count({ count: '*' }).first(),
      db('staff_user_permissions').where({ user_id: each.userId }).pluck('codename'),
    ]);
    return (
      !user || !user.is_active || !user.is_staff || user.is_superuser !== each.superuser || user.password_hash !== each.passwordHash ||
      Number(groups?.count) > 0 || (permissions as string[]).sort().join() !== each.permissions.join()
    );
  };

  const valueOf = (name: string, ticket: string | undefined): string => {
    const [kind, first, second] = name.split(':');
    if (kind === 'ticket') return ticket!;
    if (kind === 'pk') return pools.get(first!)?.[Number(second)] ?? absentPk(site.models.get(first!));
    const value = byName.get(first!)?.values.get(kind!);
    if (value === undefined) throw new Error(`no live value for ${name}`);
    return value;
  };

  /** A fresh single-use login ticket of the limited identity, for a request that wants a real one (its user is made again if the fuzzer deleted it). */
  const freshTicket = async (): Promise<string> => {
    const holder = byName.get('limited')!;
    try {
      return (await issueLoginTicket(db, holder.userId, now())).qr.ticket;
    } catch (error) {
      if (!(error instanceof TicketRefusedError)) throw error;
      await repair(holder, 'user row changed');
      return (await issueLoginTicket(db, holder.userId, now())).qr.ticket;
    }
  };

  const credentials: FuzzCredentials = {
    async fill(request) {
      const texts = [request.path, ...Object.values(request.headers), ...(typeof request.body === 'string' ? [request.body] : []), ...(request.body instanceof FormData ? formTexts(request.body) : [])];
      const ticket = texts.some((text) => text.includes(live('ticket'))) ? await freshTicket() : undefined;
      const fill = (text: string) => fillText(text, (name) => valueOf(name, ticket));
      const filled: FuzzRequest = {
        ...request,
        path: fill(request.path),
        headers: Object.fromEntries(Object.entries(request.headers).map(([header, value]) => [header, fill(value)])),
        ...(request.body === undefined ? {} : { body: typeof request.body === 'string' ? fill(request.body) : fillForm(request.body, fill) }),
      };
      const leases: Lease[] = [];
      for (const each of identities) {
        if (request.headers.authorization === `Bearer ${live(`access:${each.name}`)}`) leases.push({ identity: each, kind: 'mobile', generation: each.generation });
        if (request.headers.cookie === `${SESSION_COOKIE}=${live(`cookie:${each.name}`)}`) leases.push({ identity: each, kind: 'web', generation: each.generation });
      }
      return { request: filled, lease: leases };
    },
    async answered(lease, status, location) {
      for (const { identity: each, kind, generation } of lease as Lease[]) {
        const lost = kind === 'mobile' ? status === 401 : status === 302 && (location ?? '').startsWith(LOGIN_PATH);
        if (lost && generation === each.generation) await repair(each, 'lost credential');
      }
    },
    async checkpoint() {
      await readPools();
      for (const each of identities) if (await drifted(each)) await repair(each, 'user row changed');
    },
  };

  const poolsOf = (...keys: string[]) => keys.flatMap((key) => pkPlaceholders(key));
  const target: StaffFuzzTarget = {
    identities: identities.map((each) => each.name),
    models: models.map((model) => fuzzModel(model)),
    pathValues: {
      id: poolsOf('notification.notification'),
      session: poolsOf('document.documentverificationsession'),
      pk: poolsOf('report.report', 'report.reportresult'),
      user: [...identities.map((each) => live(`user:${each.name}`)), ...poolsOf('auth.user')],
    },
    knownValues: {
      ticket: [live('ticket')],
      refresh_token: [...identities.map((each) => live(`refresh:${each.name}`)), rotated.refresh_token],
      device_id: [...identities.map((each) => live(`device:${each.name}`)), rotated.device_id],
      old_password: identities.map((each) => live(`password:${each.name}`)),
      new_password1: [NEW_PASSWORD],
      new_password2: [NEW_PASSWORD],
    },
    deadTokens: [revoked.access_token],
  };
  return { target, credentials, repairs };
}

function fuzzModel(model: BoundModel): FuzzModel {
  const visible = model.formFields.filter((field) => !field.declaration.hidden);
  return {
    key: model.key,
    app: model.appLabel,
    model: model.model,
    pks: pkPlaceholders(model.key),
    fields: visible.map((field) => ({
      name: field.name,
      type: field.type,
      required: field.required,
      maxLength: field.maxLength,
      choices: field.choices?.map((choice) => choice.value) ?? [],
      related: field.related,
    })),
    filters: [...filterParameters(model)],
    columns: model.columns.map((column) => column.name),
    storedColumns: [...model.columnTypes.keys()].filter((name) => !model.fields?.[name]?.hidden),
    actions: (model.actions ?? []).map((action) => action.name),
  };
}

/** A pk of the model's type that names no row (its table has fewer rows than slots). */
function absentPk(model: BoundModel | undefined): string {
  const udt = model?.columnTypes.get(model.pk)?.udtName;
  return udt === 'uuid' ? '00000000-0000-0000-0000-000000000000' : udt?.startsWith('int') ? '2147483000' : 'fuzz-absent';
}

function formTexts(form: FormData): string[] {
  return [...(form as unknown as Iterable<[string, FormDataEntryValue]>)].flatMap(([name, value]) => (typeof value === 'string' ? [name, value] : [name]));
}

function fillForm(form: FormData, fill: (text: string) => string): FormData {
  const filled = new FormData();
  for (const [name, value] of form as unknown as Iterable<[string, FormDataEntryValue]>) {
    if (typeof value === 'string') filled.append(fill(name), fill(value));
    else filled.append(fill(name), value, value.name);
  }
  return filled;
}
