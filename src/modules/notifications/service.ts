import type { Knex } from 'knex';
import type { Executor } from '../../db/knex.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import type { LivePublisher } from '../../realtime/live-message.ts';

/**
 * The kinds of in-app notification (README: Notification kinds). `target` names the record the
 * app opens: app_label.model and pk.
 */
export const NOTIFICATION_KINDS = {
  alert: 'An alert on a case assigned to you, or on an unassigned case (everyone who may view cases)',
  approval_request: 'An approval request waiting for your signature',
  approval_approved: 'Your approval request was approved',
  approval_rejected: 'Your approval request was rejected',
  approval_forwarded: 'Your approval request moved on to its next stage',
  report_done: 'A report you started finished (or failed)',
  ai_review_done: 'An AI review you started finished',
  incoming_call: 'A video call is offered to you (agents)',
} as const;
export type NotificationKind = keyof typeof NOTIFICATION_KINDS;

/**
 * The kind names, for checking a kind a client names: a Set, since `kind in NOTIFICATION_KINDS`
 * also finds "__proto__", "constructor" and "toString" on Object.prototype.
 */
export const NOTIFICATION_KIND_NAMES: ReadonlySet<string> = new Set(Object.keys(NOTIFICATION_KINDS));

export function isNotificationKind(kind: unknown): kind is NotificationKind {
  return typeof kind === 'string' && NOTIFICATION_KIND_NAMES.has(kind);
}

export interface NewNotification {
  userIds: readonly string[];
  kind: NotificationKind;
  title: string;
  body?: string;
  target?: { model: string; pk: string } | null;
}

interface Delivery {
  live: LivePublisher;
  jobs: JobQueue;
}

/**
 * The live channel and job queue of each database, found from any transaction on it: knex hands
 * a transaction's client the same config object as its parent, so `notify` needs only the
 * caller's transaction. Bound by buildContext.
 */
const deliveries = new WeakMap<object, Delivery>();

export function bindNotifications(db: Knex, delivery: Delivery): void {
  deliveries.set(db.client.config as object, delivery);
}

/** The job queue bound to the database an executor works on (for jobs sent inside its transaction). */
export function boundJobs(executor: Knex | Knex.Transaction): JobQueue | undefined {
  return deliveries.get(executor.client.config as object)?.jobs;
}

/**
 * Raises one notification per user in the caller's transaction. At commit each is broadcast on
 * the live socket to its user (type `notification`) and a push job per active device with push on
 * is committed with it; on rollback nothing happens. Duplicate user ids are notified once.
 * Returns the new rows' ids.
 */
export async function notify(trx: Knex.Transaction, input: NewNotification): Promise<string[]> {
  const userIds = [...new Set(input.userIds)];
  if (!userIds.length) return [];
  const rows = (await trx('notifications')
    .insert(
      userIds.map((userId) => ({
        user_id: userId,
        kind: input.kind,
        title: input.title,
        body: input.body ?? '',
        target_model: input.target?.model ?? null,
        target_pk: input.target?.pk ?? null,
      })),
    )
    .returning(['id', 'user_id', 'created_at'])) as { id: string | number; user_id: string; created_at: Date }[];
  await announceNotifications(
    trx,
    rows.map((row) => ({ id: String(row.id), user_id: row.user_id, kind: input.kind, title: input.title, body: input.body ?? '', target: input.target ?? null, created_at: row.created_at })),
  );
  return rows.map((row) => String(row.id));
}

export interface RaisedNotification {
  id: string;
  user_id: string;
  kind: string;
  title: string;
  body: string;
  target: { model: string; pk: string } | null;
  created_at: Date;
}

/**
 * The delivery of notifications just inserted in `trx`: per user, one live message (the newest
 * row, with how many were raised) and one push job per active device with push on (the newest
 * row). A batch that raises hundreds for one user thus sends one message and one push, not hundreds.
 */
export async function announceNotifications(trx: Knex.Transaction, rows: readonly RaisedNotification[]): Promise<void> {
  const delivery = deliveries.get(trx.client.config as object);
  if (!delivery || !rows.length) return;
  const newest = new Map<string, { row: RaisedNotification; count: number }>();
  for (const row of rows) {
    const seen = newest.get(row.user_id);
    if (!seen || Number(row.id) > Number(seen.row.id)) newest.set(row.user_id, { row, count: (seen?.count ?? 0) + 1 });
    else seen.count++;
  }
  for (const { row, count } of newest.values()) {
    await delivery.live.publish(trx, {
      to: row.user_id,
      type: 'notification',
      data: { id: row.id, kind: row.kind, title: row.title, body: row.body, target: row.target, created_at: row.created_at.toISOString().slice(0, 19), count },
    });
  }
  const devices = (await trx('mobile_devices as d')
    .join('staff_users as u', 'u.id', 'd.user_id')
    .whereIn('d.user_id', [...newest.keys()])
    .whereNull('d.revoked_at')
    .where('d.push_enabled', true)
    .whereNotNull('d.push_token')
    .where('u.is_active', true)
    .select('d.id', 'd.user_id')) as { id: string; user_id: string }[];
  await delivery.jobs.sendPush(
    trx,
    devices.map((device) => ({ notificationId: newest.get(device.user_id)!.row.id, deviceId: device.id })),
  );
}

/** A notification as its user's lists (the web inbox, the mobile API) read it. */
export interface NotificationRow {
  id: string | number;
  kind: string;
  title: string;
  body: string;
  target_model: string | null;
  target_pk: string | null;
  read: boolean;
  created_at: Date;
}

/** The bell counter: the user's unread in-app notifications. */
export async function unreadNotifications(db: Executor, userId: string): Promise<number> {
  const row = (await db('notifications').where({ user_id: userId, read: false }).count({ count: '*' }).first()) as { count: number | string };
  return Number(row.count);
}
