import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Knex } from 'knex';
import { announce, CHANNELS } from '../../../db/notifications.ts';
import { storableCopy } from '../../../validation/storable.ts';
import { loadPrincipal, type Principal } from '../../staff/principal.ts';

/**
 * Web admin sessions. The cookie carries 32 random bytes; only their sha256 is stored, so a copy
 * of the table cannot be replayed. A session ends when it has been idle too long, when its
 * user is deactivated, and when the user's password changed after it began.
 */

export const SESSION_COOKIE = 'warden_session';

export type MessageLevel = 'success' | 'info' | 'warning' | 'error';
export interface FlashMessage {
  level: MessageLevel;
  text: string;
}

export interface AdminSession {
  idHash: string;
  csrfToken: string;
  createdAt: Date;
  /** Messages left by an earlier request (a save before its redirect), not yet shown. */
  messages: FlashMessage[];
}

// last_seen_at is written at most this often: an admin page view need not always write.
const TOUCH_AFTER_SECONDS = 60;

export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** Compares two secrets in constant time (for their length). */
export function sameSecret(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/** A new session for a user who just logged in; returns the cookie value, shown only now. */
export async function startSession(db: Knex, userId: string): Promise<{ cookieValue: string; session: AdminSession }> {
  const cookieValue = newToken();
  const csrfToken = newToken();
  const [row] = await db('staff_web_sessions')
    .insert({ id_hash: hashToken(cookieValue), user_id: userId, csrf_token: csrfToken })
    .returning(['id_hash', 'created_at']);
  return { cookieValue, session: { idHash: row.id_hash, csrfToken, createdAt: row.created_at, messages: [] } };
}

/**
 * The session and principal behind a cookie value, or null when it is unknown or ended; an ended
 * session's row is deleted on the way.
 */
export async function resolveSession(
  db: Knex,
  cookieValue: string,
  idleSeconds: number,
): Promise<{ session: AdminSession; principal: Principal } | null> {
  const idHash = hashToken(cookieValue);
  const row = (await db('staff_web_sessions as s')
    .join('staff_users as u', 'u.id', 's.user_id')
    .where('s.id_hash', idHash)
    .first(
      's.user_id',
      's.csrf_token',
      's.created_at',
      's.messages',
      'u.is_active',
      db.raw('s.last_seen_at < now() - make_interval(secs => ?) as idle', [idleSeconds]),
      db.raw('s.last_seen_at < now() - make_interval(secs => ?) as stale', [TOUCH_AFTER_SECONDS]),
      db.raw('coalesce(u.password_changed_at > s.created_at, false) as password_changed'),
    )) as
    | { user_id: string; csrf_token: string; created_at: Date; messages: FlashMessage[]; is_active: boolean; idle: boolean; stale: boolean; password_changed: boolean }
    | undefined;
  if (!row) return null;
  if (row.idle || !row.is_active || row.password_changed) {
    await endSession(db, idHash);
    return null;
  }
  const principal = await loadPrincipal(db, row.user_id);
  if (!principal) return null;
  if (row.stale) await db('staff_web_sessions').where({ id_hash: idHash }).update({ last_seen_at: db.fn.now() });
  return { session: { idHash, csrfToken: row.csrf_token, createdAt: row.created_at, messages: row.messages }, principal };
}

/** Ends a session; its web live sockets, on any process, close at once. */
export async function endSession(db: Knex, idHash: string): Promise<void> {
  await db('staff_web_sessions').where({ id_hash: idHash }).delete();
  await announce(db, CHANNELS.webSessions, idHash);
}

/** Queues a message for the next page this session renders (typically after a redirect). */
export async function addMessage(db: Knex, session: AdminSession, flash: FlashMessage): Promise<void> {
  // Messages quote input (an unknown action's name): jsonb takes no NUL and no lone surrogate.
  const message = { ...flash, text: storableCopy(flash.text) };
  await db('staff_web_sessions')
    .where({ id_hash: session.idHash })
    .update({ messages: db.raw('messages || ?::jsonb', [JSON.stringify([message])]) });
  session.messages.push(message);
}

/** The session's pending messages, removed from it: each is shown once. */
export async function takeMessages(db: Knex, session: AdminSession): Promise<FlashMessage[]> {
  if (!session.messages.length) return [];
  const taken = session.messages;
  session.messages = [];
  await db('staff_web_sessions').where({ id_hash: session.idHash }).update({ messages: db.raw("'[]'::jsonb") });
  return taken;
}
