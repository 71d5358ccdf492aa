import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Actor } from '../../actor.ts';
import { recordAudit } from '../../audit.ts';
import type { Executor } from '../../db/knex.ts';
import type { StaffUser } from '../staff/principal.ts';
import {
  LOGIN_TICKET_TTL_SECONDS,
  PAIRING_PATH,
  QR_TYPE,
  QR_VERSION,
  REVIEW_TICKET_DEFAULT_DAYS,
  REVIEW_TICKET_MAX_DAYS,
} from './constants.ts';
import { addSeconds, formatTimestamp } from '../../timestamps.ts';
import { revokeDevice } from './devices.ts';
import { canonicalReviewCode, hashSecret, newLoginTicket, newReviewCode } from './secrets.ts';

/** A row of mobile_login_tickets. */
export interface LoginTicket {
  id: string;
  ticket_hash: string;
  user_id: string;
  kind: 'login' | 'review';
  note: string;
  created_at: Date;
  expires_at: Date;
  used_at: Date | null;
  used_by_device: string | null;
  revoked_at: Date | null;
}

/** What the QR code holds (the spec's QR content). */
export interface QrPayload {
  v: typeof QR_VERSION;
  typ: typeof QR_TYPE;
  ticket: string;
  endpoint: string;
}

/** A ticket request that cannot be served; the message says why (unknown, inactive or non-staff user, superuser). */
export class TicketRefusedError extends Error {}

/** Only active staff accounts may hold a mobile session. */
export function isEligibleForMobile(user: Pick<StaffUser, 'is_active' | 'is_staff'>): boolean {
  return user.is_active && user.is_staff;
}

/**
 * The user a ticket is issued for, read in the issuing transaction with a key-share lock: a
 * concurrent delete of the user then waits for the ticket (or the ticket for the delete, and finds
 * no user) instead of deadlocking with it over the tickets its cascade removes.
 */
async function eligibleUser(trx: Knex.Transaction, userId: string): Promise<StaffUser> {
  const user = (await trx('staff_users').where({ id: userId }).forKeyShare().first()) as StaffUser | undefined;
  if (!user) throw new TicketRefusedError(`No staff user with id ${userId}.`);
  if (!isEligibleForMobile(user)) {
    throw new TicketRefusedError(`User ${user.username} is not eligible for mobile access (${user.is_active ? 'not staff' : 'inactive'}).`);
  }
  return user;
}

/**
 * A single-use login ticket for the user's own QR code, valid five minutes; only its hash is
 * kept. The web user page renders `qr` as a QR code; the command line prints it.
 */
export async function issueLoginTicket(db: Knex, userId: string, now: Date = new Date()): Promise<{ qr: QrPayload; expires_at: string }> {
  const ticket = newLoginTicket();
  const expiresAt = addSeconds(now, LOGIN_TICKET_TTL_SECONDS);
  await db.transaction(async (trx) => {
    await eligibleUser(trx, userId);
    // Spent and lapsed login tickets are worth nothing; dropping them here keeps the table small.
    await trx('mobile_login_tickets')
      .where({ user_id: userId, kind: 'login' })
      .andWhere((query) => query.whereNotNull('used_at').orWhere('expires_at', '<=', now))
      .delete();
    await trx('mobile_login_tickets').insert({
      id: randomUUID(),
      ticket_hash: hashSecret(ticket),
      user_id: userId,
      kind: 'login',
      created_at: now,
      expires_at: expiresAt,
    });
  });
  return { qr: { v: QR_VERSION, typ: QR_TYPE, ticket, endpoint: PAIRING_PATH }, expires_at: formatTimestamp(expiresAt) };
}

export interface ReviewTicketOptions {
  days?: number;
  note?: string;
  /** Issue one for a superuser too (a standing credential for the most powerful account). */
  force?: boolean;
  actor: Actor;
}

/**
 * A multi-use review ticket: a standing credential for a read-only reviewer account, typed by hand
 * in the app, valid `days` days until revoked. A device it opens is read-only (the guard refuses
 * every write from it with read_only_device), whatever the account's permissions. A user holds at most one: issuing deletes the previous.
 * The code is returned once; only its hash is kept.
 */
export async function issueReviewTicket(
  db: Knex,
  userId: string,
  options: ReviewTicketOptions,
  now: Date = new Date(),
): Promise<{ code: string; expires_at: string }> {
  const days = options.days ?? REVIEW_TICKET_DEFAULT_DAYS;
  if (!Number.isInteger(days) || days < 1 || days > REVIEW_TICKET_MAX_DAYS) {
    throw new TicketRefusedError(`--days must be a whole number from 1 to ${REVIEW_TICKET_MAX_DAYS}.`);
  }
  const code = newReviewCode();
  const expiresAt = addSeconds(now, days * 24 * 3600);
  await db.transaction(async (trx) => {
    const user = await eligibleUser(trx, userId);
    if (user.is_superuser && !options.force) {
      throw new TicketRefusedError(`User ${user.username} is a superuser: a standing review ticket for it needs --force.`);
    }
    const previous = (await trx('mobile_login_tickets').where({ user_id: userId, kind: 'review' }).delete().returning('id')) as { id: string }[];
    const replaced = previous.length;
    const id = randomUUID();
    await trx('mobile_login_tickets').insert({
      id,
      ticket_hash: hashSecret(canonicalReviewCode(code)!),
      user_id: userId,
      kind: 'review',
      note: options.note ?? '',
      created_at: now,
      expires_at: expiresAt,
    });
    // Devices the replaced ticket opened stay review devices (read-only; the guard reads the kind of
    // their ticket) and end with this ticket when it is revoked.
    if (replaced) await trx('mobile_devices').whereIn('ticket_id', previous.map((row) => row.id)).update({ ticket_id: id });
    await recordAudit(trx, options.actor, 'review_ticket.issue', 'mobile_login_ticket', id, { user_id: userId, days, replaced });
  });
  return { code, expires_at: formatTimestamp(expiresAt) };
}

export interface ReviewTicketListing {
  id: string;
  username: string;
  note: string;
  created_at: string;
  expires_at: string;
  revoked_at: string | null;
  state: 'valid' | 'expired' | 'revoked';
  devices: number;
}

/** Every review ticket with its user and the devices it opened; never the code. */
export async function listReviewTickets(db: Executor, now: Date = new Date()): Promise<ReviewTicketListing[]> {
  const rows = (await db('mobile_login_tickets as t')
    .join('staff_users as u', 'u.id', 't.user_id')
    .where('t.kind', 'review')
    .orderBy('u.username')
    .select('t.*', 'u.username', db.raw('(select count(*)::int from mobile_devices d where d.ticket_id = t.id) as devices'))) as (LoginTicket & {
    username: string;
    devices: number;
  })[];
  return rows.map((row) => ({
    id: row.id,
    username: row.username,
    note: row.note,
    created_at: formatTimestamp(row.created_at),
    expires_at: formatTimestamp(row.expires_at),
    revoked_at: formatTimestamp(row.revoked_at),
    state: row.revoked_at ? 'revoked' : row.expires_at <= now ? 'expired' : 'valid',
    devices: row.devices,
  }));
}

/**
 * Revokes the user's review ticket and logs out every device it opened: the credential and the
 * sessions it granted end together. Returns how many tickets and devices were revoked.
 */
export async function revokeReviewTickets(
  db: Knex,
  userId: string,
  actor: Actor,
  now: Date = new Date(),
): Promise<{ tickets: number; devices: number }> {
  return db.transaction(async (trx) => {
    const tickets = (await trx('mobile_login_tickets')
      .where({ user_id: userId, kind: 'review' })
      .whereNull('revoked_at')
      .update({ revoked_at: now })
      .returning('id')) as { id: string }[];
    let devices = 0;
    if (tickets.length) {
      const opened = (await trx('mobile_devices')
        .whereIn('ticket_id', tickets.map((ticket) => ticket.id))
        .whereNull('revoked_at')
        .select('id')) as { id: string }[];
      for (const device of opened) if (await revokeDevice(trx, device.id, 'review_ticket_revoked', { actor, now })) devices++;
      for (const ticket of tickets) await recordAudit(trx, actor, 'review_ticket.revoke', 'mobile_login_ticket', ticket.id, { user_id: userId, devices });
    }
    return { tickets: tickets.length, devices };
  });
}

/** The stored hashes a presented ticket may match: the ticket itself, and its review-code spelling when it has one. */
export function presentedTicketHashes(presented: string): string[] {
  const hashes = [hashSecret(presented)];
  const reviewCode = canonicalReviewCode(presented);
  if (reviewCode) hashes.push(hashSecret(reviewCode));
  return hashes;
}
