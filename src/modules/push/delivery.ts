import type { AppContext } from '../../context.ts';
import { PushRetryable, type PushMessage, type PushOutcome } from './types.ts';

// The job reads the context, which names the provider clients of ./service.ts: kept apart from
// them, so the clients never import the context back.

interface DeliveryRow {
  id: string;
  kind: string;
  title: string;
  body: string;
  target_model: string | null;
  target_pk: string | null;
  push_provider: string | null;
  push_token: string | null;
  push_enabled: boolean;
  revoked_at: Date | null;
  is_active: boolean;
}

/**
 * The send-push job: one notification to one device. The device is read again at send time, so a
 * device revoked, switched off or re-registered since the notification was raised gets nothing.
 * A token the provider reports unregistered is cleared (only if it is still the device's token).
 * 429, 5xx and network failures throw, and pg-boss retries with backoff.
 */
export async function deliverPush(app: Pick<AppContext, 'db' | 'push' | 'logger'>, notificationId: string, deviceId: string): Promise<PushOutcome | null> {
  const row = (await app.db('notifications as n')
    .join('mobile_devices as d', 'd.user_id', 'n.user_id')
    .join('staff_users as u', 'u.id', 'n.user_id')
    .where('n.id', notificationId)
    .andWhere('d.id', deviceId)
    .first('n.id', 'n.kind', 'n.title', 'n.body', 'n.target_model', 'n.target_pk', 'd.push_provider', 'd.push_token', 'd.push_enabled', 'd.revoked_at', 'u.is_active')) as
    | DeliveryRow
    | undefined;
  if (!row || !row.push_token || !row.push_provider || !row.push_enabled || row.revoked_at || !row.is_active) return null;
  const message: PushMessage = {
    title: row.title,
    body: row.body,
    data: { notification_id: row.id, kind: row.kind, target_model: row.target_model, target_pk: row.target_pk },
  };
  let outcome: PushOutcome;
  try {
    outcome = await app.push.send(row.push_provider, row.push_token, message);
  } catch (error) {
    if (error instanceof PushRetryable) app.logger.info({ device: deviceId, reason: error.message }, 'push deferred; retrying');
    throw error;
  }
  if (outcome.kind === 'unregistered') {
    await app.db('mobile_devices').where({ id: deviceId, push_token: row.push_token }).update({ push_token: null, push_enabled: false });
    app.logger.info({ device: deviceId, reason: outcome.reason }, 'push token unregistered; cleared');
  } else if (outcome.kind === 'rejected') {
    app.logger.warn({ device: deviceId, reason: outcome.reason }, 'push refused by the provider');
  }
  await app.db('notifications').where({ id: notificationId }).whereNull('pushed_at').update({ pushed_at: new Date() });
  return outcome;
}
