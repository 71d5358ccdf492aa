import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import type { Actor } from '../../actor.ts';
import { ARTIFACT_TYPES, isArtifactType } from './constants.ts';
import { OutboundPolicy, OutboundRefused, STRICT_OUTBOUND } from '../../net/outbound.ts';

export interface Flow {
  code: string;
  name: string;
  active: boolean;
  required_artifact_types: string[];
  requires_video_call: boolean;
  notify_url: string | null;
  notify_secret: string | null;
  is_default: boolean;
}

export class FlowInputError extends Error {}

export interface FlowInput {
  code: string;
  name?: string;
  artifacts: string[];
  videoCall: boolean;
  isDefault: boolean;
  active: boolean;
  notifyUrl: string | null;
}

/**
 * Notification targets must be HTTPS to a public address (src/net/outbound.ts): an address in a
 * refused range is refused whatever form it is written in (`https://0x7f000001/`, `[::1]`,
 * `localhost`). Plain HTTP is accepted only to an IP address that WARDEN_OUTBOUND_ALLOW names, for
 * local set-ups and tests. Returns the URL normalised.
 */
export function validateNotifyUrl(value: string, policy: OutboundPolicy = STRICT_OUTBOUND): string {
  let url: URL;
  try {
    url = policy.checkUrl(value);
  } catch (error) {
    if (error instanceof OutboundRefused) throw new FlowInputError(`--notify: ${error.message}`);
    throw error;
  }
  if (url.protocol !== 'https:' && !policy.allowsLiteral(url.hostname)) {
    throw new FlowInputError('--notify: the result notification URL must use https (http only to an address WARDEN_OUTBOUND_ALLOW names).');
  }
  return url.toString();
}

/**
 * Creates or updates a flow. Making it the default takes the flag from any other flow in the same
 * transaction. A notify URL gets an HMAC secret on first use; it is returned so the operator can
 * configure the receiver. `outboundAllow` is the configuration's WARDEN_OUTBOUND_ALLOW (none: only
 * public addresses).
 */
export async function defineFlow(db: Knex, input: FlowInput, actor: Actor, outboundAllow: readonly string[] = []): Promise<Flow> {
  if (!/^[a-z0-9][a-z0-9_.-]{0,63}$/.test(input.code)) {
    throw new FlowInputError(`"${input.code}" is not a valid flow code: lower-case letters, digits, _ . - (at most 64).`);
  }
  const artifacts = [...new Set(input.artifacts.map((artifact) => artifact.trim()).filter(Boolean))];
  if (artifacts.length === 0) throw new FlowInputError('A flow needs at least one artifact type (--artifacts).');
  const unknown = artifacts.filter((artifact) => !isArtifactType(artifact));
  if (unknown.length) throw new FlowInputError(`Unknown artifact type(s): ${unknown.join(', ')}. Known: ${ARTIFACT_TYPES.join(', ')}.`);
  const notifyUrl = input.notifyUrl ? validateNotifyUrl(input.notifyUrl, new OutboundPolicy(outboundAllow)) : null;
  return db.transaction(async (trx) => {
    const existing = (await trx('verification_flows').where({ code: input.code }).first()) as Flow | undefined;
    if (input.isDefault) await trx('verification_flows').where({ is_default: true }).whereNot({ code: input.code }).update({ is_default: false });
    const row = {
      code: input.code,
      name: input.name ?? existing?.name ?? input.code,
      active: input.active,
      required_artifact_types: artifacts,
      requires_video_call: input.videoCall,
      notify_url: notifyUrl,
      notify_secret: notifyUrl ? (existing?.notify_secret ?? randomBytes(32).toString('base64url')) : null,
      is_default: input.isDefault,
      updated_at: trx.fn.now(),
    };
    const [flow] = await trx('verification_flows').insert(row).onConflict('code').merge().returning('*');
    await recordAudit(trx, actor, 'flow.define', 'verification_flow', input.code, { ...row, notify_secret: undefined, updated_at: undefined });
    return flow as Flow;
  });
}

export async function listFlows(db: Knex): Promise<Flow[]> {
  return db('verification_flows').select('*').orderBy('code');
}

/** The flow a create-session call names, or the default flow when it names none; null when there is none usable. */
export async function findUsableFlow(db: Knex, code: string | undefined): Promise<Flow | null> {
  const query = db('verification_flows').where({ active: true });
  const flow = await (code ? query.where({ code }) : query.where({ is_default: true })).first();
  return (flow as Flow | undefined) ?? null;
}
