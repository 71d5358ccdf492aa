import type { Config } from '../../config.ts';
import { recordAudit } from '../../audit.ts';
import { HttpError } from '../../http/errors.ts';
import { z } from '../../http/openapi.ts';
import { choiceOf, validateForm, type FieldErrors } from '../../validation/form.ts';
import type { AdminSite } from '../backoffice/site.ts';
import { throttledPasswordChange } from '../backoffice/web/throttle.ts';
import { LANGUAGE_CODES, LANGUAGES, TIMEZONE_SET, TIMEZONES } from '../staff/preferences.ts';
import { changePassword } from '../staff/service.ts';
import { loadPrincipal, type Principal } from '../staff/principal.ts';
import { USER_MODEL, WEBSOCKET_PATH } from './constants.ts';
import { formatTimestamp } from '../../timestamps.ts';
import type { MobileDevice } from './devices.ts';
import { pushIdentity as providerIdentity } from '../push/service.ts';
import type { Identity, MobileCaller } from './identity.ts';
import { setAgentAvailability } from '../videocall/agent.ts';
import { unreadNotifications } from '../notifications/service.ts';

/** The account menu's forms: the languages and zones of the web's user form, nothing else. */
export const PREFERENCES_FORM = z.object({
  language: choiceOf(LANGUAGE_CODES, 16).optional(),
  timezone: choiceOf(TIMEZONE_SET, 64).optional(),
});

export const AVAILABILITY_FORM = z.object({ available: z.boolean() });

// Types and lengths only: the password form itself (staff/service.ts) says what is missing or wrong,
// and argon2 never sees a megabyte of password.
const PASSWORD = z.string().max(4096).optional();
export const PASSWORD_FORM = z.object({ old_password: PASSWORD, new_password1: PASSWORD, new_password2: PASSWORD });

// The answers' shapes, for the OpenAPI document; the functions below build them.
const PAIRING_USER = z.object({
  id: z.string(),
  username: z.string(),
  full_name: z.string(),
  email: z.string(),
  is_superuser: z.boolean(),
  timezone: z.string(),
  language: z.string(),
  mobile: z.string(),
  profile_target: z.object({ model: z.string(), pk: z.string() }),
  agent_dashboard: z.boolean(),
});
export const SESSION_USER = PAIRING_USER.extend({
  date_format: z.string(),
  time_format: z.string(),
  show_today: z.boolean(),
  has_usable_password: z.boolean(),
  video_call: z.object({ status: z.string(), in_call: z.boolean(), status_changed_at: z.string().nullable() }).nullable(),
}).openapi('MobileSessionUser');
export const PUSH_IDENTITY = z.object({ provider: z.string(), app_id: z.string() }).nullable();
const DEVICE = z.object({ id: z.string(), name: z.string(), platform: z.string() });
export const SESSION_INFO = z.object({
  user: SESSION_USER,
  datetime_timezone: z.literal('UTC'),
  websocket_url: z.string().nullable(),
  push: PUSH_IDENTITY,
  groups: z.array(z.string()),
  permissions: z.array(z.string()),
  unread_notifications: z.number().int(),
  device: DEVICE,
  devices: z.array(DEVICE.extend({ last_seen_at: z.string().nullable(), current: z.boolean() })),
});
export const TOKENS = z.object({
  access_token: z.string(),
  refresh_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  device_id: z.string(),
  websocket_url: z.string().nullable(),
  push: PUSH_IDENTITY,
});
export const PAIRING = TOKENS.extend({ user: PAIRING_USER });
const CHOICE = z.object({ value: z.string(), label: z.string() });
export const PREFERENCES = z.object({ language: z.string(), timezone: z.string(), languages: z.array(CHOICE).readonly(), timezones: z.array(z.string()).readonly() });

/** The user as the pairing answer carries it. */
export function pairingUser(principal: Principal): z.infer<typeof PAIRING_USER> {
  const { user } = principal;
  return {
    id: user.id,
    username: user.username,
    full_name: user.full_name,
    email: user.email,
    is_superuser: user.is_superuser,
    timezone: user.timezone,
    language: user.language,
    mobile: user.mobile,
    profile_target: { model: USER_MODEL, pk: user.id },
    agent_dashboard: principal.isAgent,
  };
}

/** The user as me/ and every account-menu write carry it: the pairing fields plus the web preferences and the agent state. */
export function sessionUser(principal: Principal): z.infer<typeof SESSION_USER> {
  const { user, agent } = principal;
  return {
    ...pairingUser(principal),
    date_format: user.date_format,
    time_format: user.time_format,
    show_today: user.show_today,
    has_usable_password: user.password_hash !== null,
    video_call: agent ? { status: agent.status, in_call: agent.in_call, status_changed_at: formatTimestamp(agent.status_changed_at) } : null,
  };
}

/** The live socket's address, given out only when the service knows the address devices reach it at. */
export function websocketUrl(config: Config): string | null {
  if (!config.publicUrl) return null;
  return `${config.publicUrl.replace(/^http/, 'ws')}${WEBSOCKET_PATH}`;
}

/** The push service the app should register with ({provider, app_id}), or null without push (src/modules/push). */
export function pushIdentity(config: Config): z.infer<typeof PUSH_IDENTITY> {
  return providerIdentity(config);
}

function deviceSummary(device: Pick<MobileDevice, 'id' | 'name' | 'platform'>) {
  return { id: device.id, name: device.name, platform: device.platform };
}

/**
 * What me/ reads beside the caller's checks, in their statement (authenticateCaller's `extra`):
 * the user's active devices and the bell counter. me/ is then one round trip.
 */
export function sessionReads(): { [Name in keyof SessionReads]: string } {
  return {
    devices: `select coalesce(jsonb_agg(jsonb_build_object('id', d.id, 'name', d.name, 'platform', d.platform, 'last_seen_at', d.last_seen_at,
      'created_at', d.created_at)), '[]') from mobile_devices d where d.user_id = u.id and d.revoked_at is null`,
    unread: 'select count(*)::int from notifications n where n.user_id = u.id and not n.read',
  };
}

/** The fields of a device me/ lists. */
type ListedDevice = Pick<MobileDevice, 'id' | 'name' | 'platform' | 'last_seen_at' | 'created_at'>;

export type SessionReads = {
  devices: (Omit<ListedDevice, 'last_seen_at' | 'created_at'> & { last_seen_at: string | null; created_at: string })[];
  unread: number;
};

/** Most recently seen first, never-seen last, then the newest. */
function byRecentUse(a: ListedDevice, b: ListedDevice): number {
  const seen = (device: ListedDevice) => device.last_seen_at?.getTime() ?? -Infinity;
  return seen(b) - seen(a) || b.created_at.getTime() - a.created_at.getTime();
}

/** GET me/: the session info of the spec, from a caller authenticated with sessionReads. */
export function sessionInfo(config: Config, site: AdminSite, caller: MobileCaller & { extra: SessionReads }): z.infer<typeof SESSION_INFO> {
  const { principal, device } = caller;
  // The caller's own device as the checks left it: a heartbeat they wrote is newer than the statement's read.
  const devices: ListedDevice[] = caller.extra.devices
    .map((json) => (json.id === device.id ? device : { ...json, last_seen_at: json.last_seen_at === null ? null : new Date(json.last_seen_at), created_at: new Date(json.created_at) }))
    .sort(byRecentUse);
  return {
    user: sessionUser(principal),
    datetime_timezone: 'UTC',
    websocket_url: websocketUrl(config),
    push: pushIdentity(config),
    groups: principal.groups,
    // Every codename the user holds, as the registry names them (all of them for a superuser).
    permissions: site.permissionsOf(principal).sort(),
    unread_notifications: caller.extra.unread,
    device: deviceSummary(device),
    devices: devices.map((other) => ({
      ...deviceSummary(other),
      last_seen_at: formatTimestamp(other.last_seen_at),
      current: other.id === device.id,
    })),
  };
}

/** GET me/preferences/: the current choices and every valid one. */
export function preferences(principal: Principal): z.infer<typeof PREFERENCES> {
  return {
    language: principal.user.language,
    timezone: principal.user.timezone,
    languages: LANGUAGES,
    timezones: TIMEZONES,
  };
}

/** The caller's principal read again after a write, for the user payload the write answers with. */
async function reload(identity: Identity, userId: string): Promise<Principal> {
  return (await loadPrincipal(identity.db, userId))!;
}

/** PATCH me/preferences/: language and timezone, each optional, each checked against its choices. */
export async function updatePreferences(identity: Identity, caller: MobileCaller, body: Record<string, unknown>): Promise<Principal> {
  const values = validateForm(PREFERENCES_FORM, body);
  const changes = Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined));
  const userId = caller.principal.user.id;
  if (Object.keys(changes).length) {
    await identity.db.transaction(async (trx) => {
      await trx('staff_users').where({ id: userId }).update(changes);
      await recordAudit(trx, { type: 'staff', id: userId }, 'staff_user.preferences', 'staff_user', userId, changes);
    });
  }
  return reload(identity, userId);
}

export const AVAILABLE = 'AVAILABLE';
export const AWAY = 'AWAY';

/**
 * POST me/video-call-availability/: an agent switches between AVAILABLE and AWAY. The change and
 * the in-call check are one statement, so a call that starts at the same moment is never overwritten.
 */
export async function setVideoCallAvailability(identity: Identity, caller: MobileCaller, body: Record<string, unknown>): Promise<Principal> {
  const userId = caller.principal.user.id;
  if (!caller.principal.isAgent) throw new HttpError(403, 'You are not a video-call agent.', 'not_an_agent');
  const { available } = validateForm(AVAILABILITY_FORM, body);
  await setAgentAvailability(identity, userId, available, identity.now());
  return reload(identity, userId);
}

/**
 * POST me/password/: the web's password change form and validators. The device's session stays
 * (tokens are bound to the device, not the password); the user's web sessions end. The old password
 * is a login guess: it counts in the user's login throttle, and once that trips the change answers
 * 429 rate_limited (LoginThrottledError, with retry_after) until the window passes.
 */
export async function changeOwnPassword(
  identity: Identity,
  caller: MobileCaller,
  body: Record<string, unknown>,
): Promise<{ ok: true; principal: Principal } | { ok: false; errors: FieldErrors }> {
  const userId = caller.principal.user.id;
  const form = validateForm(PASSWORD_FORM, body);
  const result = await throttledPasswordChange(identity.db, caller.principal.user.username, () =>
    changePassword(identity.db, userId, form, { actor: { type: 'staff', id: userId } }),
  );
  if (!result.ok) return result;
  return { ok: true, principal: await reload(identity, userId) };
}
