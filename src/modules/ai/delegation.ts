import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
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
