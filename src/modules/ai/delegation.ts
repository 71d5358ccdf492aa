import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { TooManyRequestsError } from '../../http/errors.ts';
import { loadPrincipal, type Principal } from '../staff/principal.ts';

/**
 * Delegated tokens: the gateway calls the MCP server as one staff user with a token the service
 * hands it for one job. The token expires (WARDEN_AI_DELEGATION_SECONDS); only its hash is stored.
 * A 'work' delegation is what a review or an assistant turn acts with; a 'probe' one lives only
 * while the assistant status checks the gateway, and is revoked right after.
 */
export interface Delegation {
  token: string;
  expiresAt: Date;
}

export type DelegationPurpose = 'work' | 'probe';

const hash = (token: string) => createHash('sha256').update(token).digest('hex');

export async function delegate(db: Knex, userId: string, seconds: number, now = new Date(), purpose: DelegationPurpose = 'work'): Promise<Delegation> {
  const token = `wdg_${randomBytes(24).toString('base64url')}`;
  const expiresAt = new Date(now.getTime() + seconds * 1000);
  await db('ai_delegations').insert({ token_hash: hash(token), user_id: userId, expires_at: expiresAt, purpose });
  // A new work delegation replaces the expired ones of this user (a refused one included: the
  // user acted again, which renews the assistant's authority), so the table holds only live ones.
  if (purpose === 'work') await db('ai_delegations').where('user_id', userId).where('expires_at', '<', now).delete();
  return { token, expiresAt };
}

export async function revoke(db: Knex, token: string): Promise<void> {
  await db('ai_delegations').where('token_hash', hash(token)).delete();
}

/**
 * The principal a delegated token acts as, read fresh (a deactivated user's token stops working);
 * null when unknown or expired. An expired token presented anyway is recorded as refused: the
 * gateway was still working with it, and the status says so (needs_reauth).
 */
export async function delegatedPrincipal(db: Knex, token: string, now = new Date()): Promise<Principal | null> {
  const row = (await db('ai_delegations').where('token_hash', hash(token)).first('id', 'user_id', 'expires_at', 'refused_at')) as
    | { id: string; user_id: string; expires_at: Date; refused_at: Date | null }
    | undefined;
  if (!row) return null;
  if (row.expires_at <= now) {
    if (!row.refused_at) await db('ai_delegations').where('id', row.id).update({ refused_at: now });
    return null;
  }
  const principal = await loadPrincipal(db, row.user_id);
  return principal && principal.user.is_active ? principal : null;
}

/** The user's newest work delegation, live or not, for the assistant status (expires_at, needs_reauth); null when there is none. */
export async function latestDelegation(db: Knex, userId: string): Promise<{ expiresAt: Date; refused: boolean } | null> {
  const row = (await db('ai_delegations').where({ user_id: userId, purpose: 'work' }).orderBy('created_at', 'desc').first('expires_at', 'refused_at')) as
    | { expires_at: Date; refused_at: Date | null }
    | undefined;
  return row ? { expiresAt: row.expires_at, refused: row.refused_at !== null } : null;
}

/**
 * How many AI jobs (reviews and assistant turns together) one user may have queued or running at
 * once. Each holds a gateway worker and a delegated token and bills the model for every call; a
 * person works through a few at a time, so more is a script or a mistake, and it would starve the
 * other users of the two workers per process. Beyond it the request is 429 (too_many_running).
 */
export const MAX_AI_JOBS_PER_USER = 3;

/** Retry-After of that 429: about how long a review or a short turn takes. */
export const AI_JOBS_RETRY_AFTER_SECONDS = 15;

export class TooManyAiJobsError extends TooManyRequestsError {
  constructor() {
    super(
      `You already have ${MAX_AI_JOBS_PER_USER} AI reviews or assistant answers queued or running; try again when one has finished.`,
      'too_many_running',
      AI_JOBS_RETRY_AFTER_SECONDS,
      { limit: MAX_AI_JOBS_PER_USER },
    );
  }
}

/**
 * Inside the transaction that queues an AI job for the user, before its row is written: takes the
 * user's AI-jobs lock (held to the commit), then counts the user's reviews queued or running and
 * conversations with a turn running; at MAX_AI_JOBS_PER_USER it throws TooManyAiJobsError. Parallel
 * requests of one user wait for each other at the lock and each counts what the others committed
 * (READ COMMITTED: the count runs after the lock is granted), so no more than the limit get through.
 */
export async function reserveAiJob(trx: Knex.Transaction, userId: string): Promise<void> {
  await trx.raw(`select pg_advisory_xact_lock(hashtext('warden_ai_jobs'), hashtext(?))`, [userId]);
  const result = (await trx.raw(
    `select (select count(*) from ai_reviews where requested_by = ? and status in ('queued', 'running'))
          + (select count(*) from assistant_conversations where user_id = ? and status = 'running') as running`,
    [userId, userId],
  )) as { rows: { running: string | number }[] };
  if (Number(result.rows[0]?.running ?? 0) >= MAX_AI_JOBS_PER_USER) throw new TooManyAiJobsError();
}
