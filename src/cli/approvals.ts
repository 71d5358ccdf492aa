import { loadConfig } from '../config.ts';
import type { Database } from '../db/database.ts';
import { listApprovalPolicies, PolicyInputError, setApprovalPolicies, setDecisionWebhook } from '../app/policies.ts';
import { CliError, parseOptions } from './options.ts';

function count(value: string | undefined, name: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new CliError(`--${name} must be a whole number from 1 to 10.`, 2);
  return Number(value);
}

async function usageErrors<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof PolicyInputError) throw new CliError(error.message, 2);
    throw error;
  }
}

/** warden approval-policy set|list */
export async function approvalPolicyCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  switch (action) {
    case 'set': {
      const { values } = parseOptions(rest, {
        model: { type: 'string' },
        operations: { type: 'string' },
        stages: { type: 'string' },
        signatures: { type: 'string' },
        'signer-group': { type: 'string' },
        'signer-permission': { type: 'string' },
        inactive: { type: 'boolean' },
      });
      if (!values.model || !values.operations) throw new CliError('approval-policy set needs --model APP.MODEL --operations add,change,delete,decision', 2);
      const input = {
        model: values.model,
        operations: values.operations.split(',').map((operation) => operation.trim()).filter(Boolean),
        stages: count(values.stages, 'stages'),
        signatures: count(values.signatures, 'signatures'),
        signerGroup: values['signer-group'] ?? null,
        signerPermission: values['signer-permission'] ?? null,
        active: !values.inactive,
      };
      return usageErrors(() => setApprovalPolicies(knex, input));
    }
    case 'list':
      return listApprovalPolicies(knex);
    default:
      throw new CliError(`Unknown approval-policy command: ${action ?? '(none)'} (set, list)`, 2);
  }
}

/** warden decision-webhook set --api-key K --url U: where a merchant hears about compliance decisions (a public address, or one WARDEN_OUTBOUND_ALLOW names). */
export async function decisionWebhookCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  if (action !== 'set') throw new CliError(`Unknown decision-webhook command: ${action ?? '(none)'} (set)`, 2);
  const { values } = parseOptions(rest, { 'api-key': { type: 'string' }, url: { type: 'string' } });
  if (!values['api-key'] || !values.url) throw new CliError('decision-webhook set needs --api-key KEY --url URL', 2);
  return usageErrors(() => setDecisionWebhook(knex, values['api-key']!, values.url!, loadConfig().outboundAllow));
}
