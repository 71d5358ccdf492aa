import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';
import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import type { Actor } from '../../actor.ts';
import type { Executor } from '../../db/knex.ts';
import { ForbiddenError, UnauthorizedError } from '../../http/errors.ts';
import { IpRangeList, isIpOrCidr } from '../../net/ip-ranges.ts';
import { announce, CHANNELS } from '../../db/notifications.ts';
import { MerchantCredential } from './models.ts';

export class InvalidInputError extends Error {}
export class CredentialNotFoundError extends Error {
  constructor(apiKey: string) {
    super(`No credential with api_key ${apiKey}.`);
  }
}

export const INVALID_CREDENTIALS = 'Invalid credentials provided.';
export const IP_NOT_ALLOWED = 'Access from this IP address is not allowed.';
export const CREDENTIAL_INACTIVE = 'This credential is not active.';

/**
 * Checked against an unknown api_key so that a wrong key costs the same time as a wrong secret
 * and response timing does not reveal which keys exist.
 */
const DUMMY_HASH = await hash(randomBytes(32).toString('hex'));

export function validateIpEntries(entries: readonly string[]): string[] {
  const cleaned = entries.map((entry) => entry.trim()).filter(Boolean);
  if (cleaned.includes('*') && cleaned.length > 1) {
    throw new InvalidInputError('"*" allows every IP and must be the only entry.');
  }
  for (const entry of cleaned) {
    if (entry !== '*' && !isIpOrCidr(entry)) throw new InvalidInputError(`"${entry}" is not an IP address or CIDR range.`);
  }
  return [...new Set(cleaned)];
}

export async function createCredential(
  db: Knex,
  input: { client: string; allowedIps: string[] },
  actor: Actor,
): Promise<{ credential: MerchantCredential; apiSecret: string }> {
  const client = input.client.trim();
  if (!client) throw new InvalidInputError('The credential needs a holder name (--name).');
  const allowedIps = validateIpEntries(input.allowedIps);
  const apiKey = `wk_${randomBytes(16).toString('hex')}`;
  const apiSecret = randomBytes(32).toString('base64url');
  const secretHash = await hash(apiSecret);
  const credential = await db.transaction(async (trx) => {
    const created = await MerchantCredential.query(trx).insertAndFetch({
      client,
      api_key: apiKey,
      secret_hash: secretHash,
      allowed_ips: allowedIps,
      created_by: `${actor.type}:${actor.id}`,
    });
    await recordAudit(trx, actor, 'credential.create', 'merchant_credential', created.id, { client, allowed_ips: allowedIps });
    return created;
  });
  return { credential, apiSecret };
}

export async function listCredentials(db: Executor): Promise<MerchantCredential[]> {
  return MerchantCredential.query(db).orderBy('created_at');
}

async function updateCredential(
  db: Knex,
  apiKey: string,
  changes: Partial<Pick<MerchantCredential, 'active' | 'allowed_ips' | 'secret_hash'>>,
  actor: Actor,
  action: string,
  options: { revokeTokens?: boolean; audited?: Record<string, unknown> } = {},
): Promise<MerchantCredential> {
  return db.transaction(async (trx) => {
    const [updated] = await MerchantCredential.query(trx)
      .patch({ ...changes, ...(options.revokeTokens ? { token_epoch: trx.raw('token_epoch + 1') as never } : {}), updated_at: new Date() })
      .where({ api_key: apiKey })
      .returning('*');
    if (!updated) throw new CredentialNotFoundError(apiKey);
    await recordAudit(trx, actor, action, 'merchant_credential', updated.id, options.audited ?? changes);
    // Delivered at commit to every node's credential cache.
    await announce(trx, CHANNELS.credentials, updated.id);
    return updated;
  });
}

/**
 * Deactivation also ends every token issued so far: reactivating the credential later does not
 * bring them back; its holder asks for a new one.
 */
export function setCredentialActive(db: Knex, apiKey: string, active: boolean, actor: Actor) {
  return updateCredential(db, apiKey, { active }, actor, active ? 'credential.activate' : 'credential.deactivate', { revokeTokens: !active });
}

/** A new secret for the credential, returned once; the old secret and every token issued with it stop working. */
export async function rotateSecret(db: Knex, apiKey: string, actor: Actor): Promise<{ credential: MerchantCredential; apiSecret: string }> {
  const apiSecret = randomBytes(32).toString('base64url');
  const credential = await updateCredential(db, apiKey, { secret_hash: await hash(apiSecret) }, actor, 'credential.rotate', {
    revokeTokens: true,
    audited: { secret: 'rotated' },
  });
  return { credential, apiSecret };
}

export function setAllowedIps(db: Knex, apiKey: string, entries: string[], actor: Actor) {
  return updateCredential(db, apiKey, { allowed_ips: validateIpEntries(entries) }, actor, 'credential.allow_ip');
}

/** Throws the spec's 403s for an inactive credential or a caller IP outside its list. */
export function assertCredentialUsable(
  credential: MerchantCredential,
  callerIp: string,
  allowList = new IpRangeList(credential.allowed_ips),
): void {
  if (!credential.active) throw new ForbiddenError(CREDENTIAL_INACTIVE, 'credential_inactive');
  if (!allowList.contains(callerIp)) {
    throw new ForbiddenError(IP_NOT_ALLOWED, 'ip_not_allowed');
  }
}

/** The token endpoint's checks, in the spec's order: credentials (401), active (403), IP (403). */
export async function authenticate(
  db: Executor,
  apiKey: string,
  apiSecret: string,
  callerIp: string,
): Promise<MerchantCredential> {
  const credential = await MerchantCredential.query(db).findOne({ api_key: apiKey });
  const secretMatches = await verify(credential?.secret_hash ?? DUMMY_HASH, apiSecret);
  if (!credential || !secretMatches) throw new UnauthorizedError(INVALID_CREDENTIALS, 'invalid_credentials');
  assertCredentialUsable(credential, callerIp);
  return credential;
}
