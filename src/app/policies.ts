import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { REGISTRATIONS } from './registrations.ts';
import { modelKey, permissionFor } from '../modules/backoffice/declare.ts';
import { APPROVAL_OPERATIONS } from '../modules/approvals/admin.ts';
import type { ApprovalOperation, PolicyRow } from '../modules/approvals/service.ts';
import { DECISION_TARGETS } from '../modules/cases/decisions.ts';
import { OutboundPolicy, OutboundRefused } from '../net/outbound.ts';

export class PolicyInputError extends Error {}

export interface PolicyInput {
  model: string;
  operations: string[];
  stages?: number;
  signatures?: number;
  signerGroup?: string | null;
  signerPermission?: string | null;
  active?: boolean;
}

/**
 * Sets the approval policy of a model for each named operation (one row per model and operation,
 * replaced when it exists). The model must be registered and the operation possible on it: a
 * view-only model has no add/change/delete to approve, and decisions exist on three models only.
 */
export async function setApprovalPolicies(db: Knex, input: PolicyInput): Promise<PolicyRow[]> {
  const registration = REGISTRATIONS.find((candidate) => modelKey(candidate.appLabel, candidate.model) === input.model);
  if (!registration) throw new PolicyInputError(`No model ${input.model} is registered (app_label.model, for example engine.rule).`);
  if (!input.operations.length) throw new PolicyInputError('Name at least one operation: add, change, delete, decision.');
  for (const operation of input.operations) {
    if (!(APPROVAL_OPERATIONS as readonly string[]).includes(operation)) throw new PolicyInputError(`Unknown operation ${operation}: add, change, delete or decision.`);
    if (operation === 'decision' && !DECISION_TARGETS[input.model]) throw new PolicyInputError(`Decisions are made only on ${Object.keys(DECISION_TARGETS).join(', ')}.`);
    if (operation !== 'decision' && registration.disabled?.[operation as 'add' | 'change' | 'delete']) throw new PolicyInputError(`${input.model} allows no ${operation} through the back office.`);
  }
  for (const [name, value] of [['stages', input.stages], ['signatures', input.signatures]] as const) {
    if (value !== undefined && (!Number.isInteger(value) || value < 1 || value > 10)) throw new PolicyInputError(`--${name} must be a whole number from 1 to 10.`);
  }
  let groupId: number | null = null;
  if (input.signerGroup) {
    const group = await db('staff_groups').where({ name: input.signerGroup }).first('id');
    if (!group) throw new PolicyInputError(`No group named ${input.signerGroup}.`);
    groupId = group.id;
  }
  if (input.signerPermission && !REGISTRATIONS.some((candidate) => (['view', 'add', 'change', 'delete'] as const).some((operation) => permissionFor(candidate, operation) === input.signerPermission) || candidate.customPermissions?.some((custom) => `${candidate.appLabel}.${custom.codename}` === input.signerPermission))) {
    throw new PolicyInputError(`Unknown permission ${input.signerPermission}.`);
  }
  return db.transaction(async (trx) => {
    const rows: PolicyRow[] = [];
    for (const operation of new Set(input.operations)) {
      const [row] = (await trx('approval_policies')
        .insert({
          content_type: input.model,
          operation: operation as ApprovalOperation,
          stages: input.stages ?? 1,
          signatures_per_stage: input.signatures ?? 1,
          signer_group_id: groupId,
          signer_permission: input.signerPermission ?? null,
          active: input.active ?? true,
        })
        .onConflict(['content_type', 'operation'])
        .merge()
        .returning('*')) as PolicyRow[];
      rows.push(row!);
    }
    return rows;
  });
}

export async function listApprovalPolicies(db: Knex): Promise<unknown[]> {
  return db('approval_policies as p')
    .leftJoin('staff_groups as g', 'g.id', 'p.signer_group_id')
    .orderBy(['p.content_type', 'p.operation'])
    .select('p.content_type as model', 'p.operation', 'p.stages', 'p.signatures_per_stage as signatures', 'g.name as signer_group', 'p.signer_permission', 'p.active');
}

/**
 * The merchant's webhook for compliance decisions; a new secret each time it is set (shown once).
 * The URL must be http(s) to a public address (src/net/outbound.ts), unless the configuration's
 * WARDEN_OUTBOUND_ALLOW (`outboundAllow`) names it.
 */
export async function setDecisionWebhook(db: Knex, apiKey: string, url: string, outboundAllow: readonly string[] = []): Promise<{ client: string; url: string; secret: string }> {
  let parsed: URL;
  try {
    parsed = new OutboundPolicy(outboundAllow).checkUrl(url);
  } catch (error) {
    if (error instanceof OutboundRefused) throw new PolicyInputError(`The webhook URL is refused: ${error.message}`);
    throw error;
  }
  const credential = await db('merchant_credentials').where({ api_key: apiKey }).first('id', 'client');
  if (!credential) throw new PolicyInputError(`No credential with api key ${apiKey}.`);
  const secret = randomBytes(32).toString('hex');
  await db('merchant_decision_webhooks').insert({ credential_id: credential.id, url: parsed.toString(), secret }).onConflict('credential_id').merge();
  return { client: credential.client, url: parsed.toString(), secret };
}
