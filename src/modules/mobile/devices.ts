import type { Knex } from 'knex';
import type { Actor } from '../../actor.ts';
import { recordAudit } from '../../audit.ts';
import type { Executor } from '../../db/knex.ts';
import { announce, CHANNELS } from '../../db/notifications.ts';
import type { Platform } from './constants.ts';

/** A row of mobile_devices. */
export interface MobileDevice {
  id: string;
  user_id: string;
  name: string;
  platform: Platform;
  app_version: string;
  ticket_id: string | null;
  created_at: Date;
  last_seen_at: Date | null;
  revoked_at: Date | null;
  revoked_reason: string | null;
  push_provider: string | null;
  push_token: string | null;
  push_enabled: boolean;
  /**
   * Opened with a review ticket (a standing credential for read-only reviewer accounts): every
   * write from it is refused, whatever the account may do. Read with the device by the guard.
   */
  read_only?: boolean;
}

/** A mobile_devices row as to_jsonb writes it: the timestamps are ISO strings. */
export type DeviceJson = Omit<MobileDevice, 'created_at' | 'last_seen_at' | 'revoked_at'> & {
  created_at: string;
  last_seen_at: string | null;
  revoked_at: string | null;
};

export function deviceFromJson(json: DeviceJson): MobileDevice {
  const date = (value: string | null) => (value === null ? null : new Date(value));
  return { ...json, created_at: new Date(json.created_at), last_seen_at: date(json.last_seen_at), revoked_at: date(json.revoked_at) };
}

/**
 * Where a revocation is announced: every process hears the device id once the revocation commits
 * (subscribe with NotificationHub.subscribe(DEVICE_REVOKED_CHANNEL, ...)), so a live socket of the
 * device closes wherever it is connected, whether the web admin, a logout or token reuse revoked it.
 */
export const DEVICE_REVOKED_CHANNEL = CHANNELS.mobileDevices;

export type RevocationReason = 'logout' | 'refresh_token_reuse' | 'admin' | 'review_ticket_revoked';

export interface NewDevice {
  id: string;
  userId: string;
  name: string;
  platform: Platform;
  appVersion: string;
  ticketId: string;
}

export async function createDevice(trx: Executor, device: NewDevice, now: Date): Promise<MobileDevice> {
  const [row] = (await trx('mobile_devices')
    .insert({
      id: device.id,
      user_id: device.userId,
      name: device.name,
      platform: device.platform,
      app_version: device.appVersion,
      ticket_id: device.ticketId,
      created_at: now,
      last_seen_at: now,
    })
    .returning('*')) as MobileDevice[];
  return row!;
}

/**
 * Revokes a device: its refresh tokens are deleted at once, its access token fails at the next
 * request (every request reads the device row), its push identity is dropped, and the revocation
 * is announced on DEVICE_REVOKED_CHANNEL at commit. Returns false when the device was unknown or
 * already revoked (nothing changes then).
 */
export async function revokeDevice(
  db: Executor,
  deviceId: string,
  reason: RevocationReason,
  options: { actor?: Actor; now?: Date } = {},
): Promise<boolean> {
  return db.transaction(async (trx) => {
    const revoked = await trx('mobile_devices')
      .where({ id: deviceId })
      .whereNull('revoked_at')
      .update({ revoked_at: options.now ?? new Date(), revoked_reason: reason, push_token: null, push_enabled: false })
      .returning(['id', 'user_id']);
    if (!revoked.length) return false;
    await trx('mobile_refresh_tokens').where({ device_id: deviceId }).delete();
    if (options.actor) await recordAudit(trx, options.actor, 'mobile_device.revoke', 'mobile_device', deviceId, { reason });
    await announce(trx, DEVICE_REVOKED_CHANNEL, deviceId);
    return true;
  });
}
