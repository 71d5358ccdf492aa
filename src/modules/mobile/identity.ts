import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
import { ForbiddenError, UnauthorizedError } from '../../http/errors.ts';
import { loadPrincipalWith, preparedName, principalFromRow, principalSql, type Principal, type StaffUser } from '../staff/principal.ts';
import { queryPrepared } from '../../db/knex.ts';
import { type Platform, REFRESH_TOKEN_TTL_SECONDS, UUID } from './constants.ts';
import { addSeconds } from '../../timestamps.ts';
import { deviceFromJson, revokeDevice, type DeviceJson, type MobileDevice } from './devices.ts';
import { hashSecret, newRefreshToken } from './secrets.ts';
import { isEligibleForMobile, presentedTicketHashes } from './tickets.ts';
import { AccessTokenError, MobileTokens } from './tokens.ts';

/** What the identity layer needs, built once per app by the mobile router (or by a benchmark). */
export interface Identity {
  db: Knex;
  config: Config;
  tokens: MobileTokens;
  now(): Date;
}

export const TICKET_REFUSED = 'QR ticket is invalid, expired or already used.';
export const NOT_ELIGIBLE = 'User account is not eligible for mobile access';
const REFRESH_REFUSED = 'Refresh token is invalid, expired or already used; pair the device again.';
const DEVICE_REVOKED = 'This device has been logged out; pair it again.';
export const ACCOUNT_INACTIVE = 'This account is no longer active.';

/** A device's pair of tokens, as pairing and refresh return them. */
export interface IssuedTokens {
  access_token: string;
  refresh_token: string;
  token_type: 'Bearer';
  expires_in: number;
  device_id: string;
}

export interface PairingRequest {
  ticket: string;
  deviceName: string;
  platform: Platform;
  appVersion: string;
}

/**
 * Pairing's statement: $1 now, $2 device id, $3 and $9 the presented ticket's hashes (the second
 * repeats the first when there is one), $4 name, $5 platform, $6 app version, $7 refresh token
 * hash, $8 its expiry. Two scalars, not an array: for `= any($3)` PostgreSQL's generic plan guesses
 * ten matches, finds it dearer than a custom plan and plans every pairing again (0.5 ms of a 5 ms budget).
 */
const PAIRING_SQL = `with ticket as (
  update mobile_login_tickets t
     set used_at = case when t.kind = 'login' then $1::timestamptz else t.used_at end,
         used_by_device = case when t.kind = 'login' then $2::uuid else t.used_by_device end
   where t.ticket_hash in ($3::text, $9::text) and t.revoked_at is null and t.expires_at > $1::timestamptz
     and (t.kind <> 'login' or t.used_at is null)
     and exists (select 1 from staff_users u where u.id = t.user_id and u.is_active and u.is_staff for key share)
  returning t.id, t.user_id, t.kind
), device as (
  insert into mobile_devices (id, user_id, name, platform, app_version, ticket_id, created_at, last_seen_at)
  select $2::uuid, ticket.user_id, $4::text, $5::text, $6::text, ticket.id, $1::timestamptz, $1::timestamptz from ticket
  returning id, user_id
), refresh as (
  insert into mobile_refresh_tokens (token_hash, device_id, created_at, expires_at)
  select $7::text, device.id, $1::timestamptz, $8::timestamptz from device
), audit as (
  insert into audit_log (actor_type, actor_id, action, entity, entity_id, details)
  select 'staff', device.user_id::text, 'mobile_device.pair', 'mobile_device', device.id::text,
         jsonb_build_object('name', $4::text, 'platform', $5::text, 'ticket_kind', ticket.kind)
    from device, ticket
)
${principalSql('(select user_id from device)')}`;

/**
 * Redeems a login or review ticket: one new device, its refresh token and its audit row, written
 * and the principal for the answer read by one statement (one round trip, as pairing is on the
 * budget of a hot path, p95 5 ms). The ticket is taken by an UPDATE whose condition is its
 * usability, so of two concurrent redemptions of a single-use ticket the second waits for the
 * first, re-reads the row (PostgreSQL's read-committed rule) and finds it used (401). Nothing is
 * written for a ticket that cannot be used or a user who may not pair. The user's row is locked
 * before the ticket's, in the order a deletion of the user takes them (its cascade reaches the
 * ticket): pairing and that deletion wait for each other instead of deadlocking.
 */
export async function pairDevice(identity: Identity, request: PairingRequest): Promise<{ tokens: IssuedTokens; principal: Principal }> {
  const { db } = identity;
  const now = identity.now();
  const deviceId = randomUUID();
  const refreshToken = newRefreshToken();
  const hashes = presentedTicketHashes(request.ticket);
  // One prepared statement. Every CTE that writes runs to completion although the select reads only
  // the device (PostgreSQL's rule); the select reads the user as it was before the statement,
  // which pairing does not change.
  const [row] = await queryPrepared(db, preparedName(PAIRING_SQL), PAIRING_SQL, [
    now,
    deviceId,
    hashes[0],
    request.deviceName,
    request.platform,
    request.appVersion,
    hashSecret(refreshToken),
    addSeconds(now, REFRESH_TOKEN_TTL_SECONDS),
    hashes[1] ?? hashes[0],
  ]);
  const principal = principalFromRow(row)?.principal;
  if (!principal) throw await pairingRefusal(db, hashes, now);
  const access = await identity.tokens.issue({ userId: principal.user.id, deviceId }, now);
  return { tokens: tokenPair(access, refreshToken, deviceId), principal };
}

/** Why a redemption wrote nothing: a usable ticket of a user who may not pair is a 403, anything else a 401. */
async function pairingRefusal(db: Knex, hashes: string[], now: Date): Promise<Error> {
  const ticket = (await db('mobile_login_tickets as t')
    .join('staff_users as u', 'u.id', 't.user_id')
    .whereIn('t.ticket_hash', hashes)
    .whereNull('t.revoked_at')
    .where('t.expires_at', '>', now)
    .where((usable) => usable.whereNot('t.kind', 'login').orWhereNull('t.used_at'))
    .first('u.is_active', 'u.is_staff')) as Pick<StaffUser, 'is_active' | 'is_staff'> | undefined;
  if (ticket && !isEligibleForMobile(ticket)) return new ForbiddenError(NOT_ELIGIBLE, 'account_not_eligible');
  return new UnauthorizedError(TICKET_REFUSED, 'ticket_invalid');
}

/** Refresh's statement: $1 device id, $2 now, $3 the presented token's hash, $4 the new token's hash, $5 its expiry. */
const REFRESH_SQL = `with device as (
  select d.user_id from mobile_devices d join staff_users u on u.id = d.user_id
   where d.id = $1::uuid and d.revoked_at is null and u.is_active and u.is_staff
   for update of d
), rotated as (
  update mobile_refresh_tokens r set rotated_at = $2::timestamptz
   where r.token_hash = $3::text and r.device_id = $1::uuid and r.rotated_at is null and r.expires_at > $2::timestamptz
     and exists (select 1 from device)
  returning r.device_id
), issued as (
  insert into mobile_refresh_tokens (token_hash, device_id, created_at, expires_at)
  select $4::text, rotated.device_id, $2::timestamptz, $5::timestamptz from rotated
)
select device.user_id from device, rotated`;

/**
 * Rotates a refresh token: the presented one is marked rotated and a new one stored, by one
 * statement whose condition is that both the token and its device are usable (the device's row is
 * locked, so a revocation waits for the rotation or the rotation sees it). A token presented again
 * after its rotation means two holders: the device is revoked (OAuth's refresh token reuse
 * detection) and the caller gets 401 like any refused refresh. Of two concurrent refreshes with one
 * token, the second waits for the first, finds the token rotated, and is that reuse.
 */
export async function refreshDevice(identity: Identity, deviceId: string, refreshToken: string): Promise<IssuedTokens> {
  const now = identity.now();
  if (!UUID.test(deviceId)) throw new UnauthorizedError(REFRESH_REFUSED, 'refresh_token_invalid');
  const presented = hashSecret(refreshToken);
  const next = newRefreshToken();
  const [row] = await queryPrepared<{ user_id: string }>(identity.db, preparedName(REFRESH_SQL), REFRESH_SQL, [
    deviceId,
    now,
    presented,
    hashSecret(next),
    addSeconds(now, REFRESH_TOKEN_TTL_SECONDS),
  ]);
  const userId = row?.user_id;
  if (!userId) throw await refreshRefusal(identity, deviceId, presented, now);
  return tokenPair(await identity.tokens.issue({ userId, deviceId }, now), next, deviceId);
}

/** Why a refresh rotated nothing: a token of this device rotated before is reuse (the device is revoked), anything else is invalid. */
async function refreshRefusal(identity: Identity, deviceId: string, presented: string, now: Date): Promise<Error> {
  const stored = (await identity.db('mobile_refresh_tokens').where({ token_hash: presented }).first('device_id', 'rotated_at')) as
    | { device_id: string; rotated_at: Date | null }
    | undefined;
  if (stored?.device_id !== deviceId || !stored.rotated_at) return new UnauthorizedError(REFRESH_REFUSED, 'refresh_token_invalid');
  await revokeDevice(identity.db, deviceId, 'refresh_token_reuse', { actor: { type: 'system', id: 'mobile-refresh' }, now });
  return new UnauthorizedError('Refresh token was already used; the device has been logged out.', 'refresh_token_reused');
}

function tokenPair(access: { token: string; expiresIn: number }, refreshToken: string, deviceId: string): IssuedTokens {
  return { access_token: access.token, refresh_token: refreshToken, token_type: 'Bearer', expires_in: access.expiresIn, device_id: deviceId };
}

/** Who is calling: the token's user, with permissions computed once, and the device it is bound to. */
export interface MobileCaller {
  principal: Principal;
  device: MobileDevice;
}

const TOKEN_MESSAGES = {
  token_missing: 'Authentication credentials were not provided.',
  token_invalid: 'Invalid access token.',
  token_expired: 'The access token has expired.',
} as const;

/** Seen-at stamps are written at most this often per device, not on every request. */
const LAST_SEEN_RESOLUTION_MS = 60_000;

/**
 * Checks a request's Authorization header: the token (signature, HS256 only, audience, expiry),
 * then the device it is bound to (exists, belongs to the token's user, not revoked) and the user
 * (active staff), all read fresh so that a logout, a revocation in the web admin or a deactivation
 * takes effect at the next request. Every refusal is a 401.
 */
export async function authenticateCaller<Extra extends Record<string, unknown> = Record<string, never>>(
  identity: Identity,
  authorization: string,
  options: { touch?: boolean; extra?: { [Name in keyof Extra]: string } } = {},
): Promise<MobileCaller & { extra: Extra }> {
  if (!authorization) throw new UnauthorizedError(TOKEN_MESSAGES.token_missing, 'token_missing');
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw new UnauthorizedError('Authorization header must be "Bearer <token>".', 'token_invalid');
  const now = identity.now();
  let claims;
  try {
    claims = await identity.tokens.verify(match[1]!, now);
  } catch (error) {
    if (!(error instanceof AccessTokenError)) throw error;
    throw new UnauthorizedError(TOKEN_MESSAGES[error.reason], error.reason);
  }
  // One round trip: the principal with the device row the token is bound to, and what the endpoint
  // asked to read beside them (me/ reads the user's devices and unread count this way).
  const loaded = await loadPrincipalWith<Extra & { device: DeviceJson | null }>(
    identity.db,
    claims.userId,
    { ...(options.extra ?? ({} as { [Name in keyof Extra]: string })), device: `select to_jsonb(d) || jsonb_build_object('read_only', exists (select 1 from mobile_login_tickets t where t.id = d.ticket_id and t.kind = 'review')) from mobile_devices d where d.id = $2` },
    [claims.deviceId],
  );
  const principal = loaded?.principal;
  const device = loaded?.extra.device ? deviceFromJson(loaded.extra.device) : undefined;
  if (!device || device.user_id !== claims.userId) throw new UnauthorizedError(TOKEN_MESSAGES.token_invalid, 'token_invalid');
  if (device.revoked_at) throw new UnauthorizedError(DEVICE_REVOKED, 'device_revoked');
  if (!principal || !isEligibleForMobile(principal.user)) throw new UnauthorizedError(ACCOUNT_INACTIVE, 'account_inactive');
  // touch false: a read the spec says leaves no heartbeat (dashboard/agent-summary/)
  if (options.touch !== false && (!device.last_seen_at || now.getTime() - device.last_seen_at.getTime() >= LAST_SEEN_RESOLUTION_MS)) {
    await identity.db('mobile_devices').where({ id: device.id }).update({ last_seen_at: now });
    device.last_seen_at = now;
  }
  const extra: Record<string, unknown> = { ...loaded!.extra };
  delete extra.device;
  return { principal, device, extra: extra as Extra };
}

/** auth/logout/: the device is revoked; its refresh token stops at once, its access token at the next check. */
export async function logoutDevice(identity: Identity, caller: MobileCaller): Promise<void> {
  await revokeDevice(identity.db, caller.device.id, 'logout', { actor: { type: 'staff', id: caller.principal.user.id }, now: identity.now() });
}
