import { randomUUID } from 'node:crypto';
import type { AppContext, Actor } from '../../context.ts';
import { retryOnConflict } from '../../db/knex.ts';
import { lastOccurrence, reportRepeatedRefs } from '../records/batch.ts';
import { validateRecord } from '../records/fields.ts';
import { SKIPPED_DECISION, SKIPPED_SCORE, withoutNulls, type Action } from '../records/results.ts';
import { columnsOf, upsertRowsWithLogs } from '../records/sql.ts';
import type { EvaluationInput } from '../rules/definitions.ts';
import { EXECUTION_LOG_COLUMNS, evaluateInPool, executionLogRow } from '../rules/engine.ts';
import type { CustomerScreening, ScreeningSubject } from '../screening/service.ts';
import { customerFields } from './schemas.ts';

export interface CustomerResult {
  customer_ref: string | null;
  id: string | null;
  action: Action;
  score: number;
  decision: string;
  sanction_score: number | null;
  sanction_topic: string[];
  ip_address_score: number | null;
  email_risk_score: number | null;
  warnings: string[];
  error?: string;
}

const STORAGE_COLUMNS = {
  id: 'uuid',
  raw: 'jsonb',
  score: 'numeric',
  decision: 'text',
  sanction_score: 'numeric',
  sanction_topic: 'text[]',
  sanction_matches: 'jsonb',
  ip_address_score: 'numeric',
  ip_reasons: 'jsonb',
  email_risk_score: 'numeric',
  email_reasons: 'jsonb',
  log_id: 'uuid',
  created_by: 'text',
  updated_by: 'text',
};

const MIGRATION_WARNING = 'migration: sanctions, IP and email screening skipped (historical migration).';

interface Accepted {
  index: number;
  ref: string;
  values: Record<string, unknown>;
  extras: Record<string, unknown>;
  raw: Record<string, unknown>;
  warnings: string[];
}

/**
 * Validates, screens (sanctions, IP, email; not for migration records), scores with the
 * customer rules and stores a batch of customers in one transaction.
 */
export async function upsertCustomers(app: AppContext, inputs: Record<string, unknown>[], actor: Actor): Promise<CustomerResult[]> {
  const results = new Array<CustomerResult>(inputs.length);
  const accepted: Accepted[] = [];
  inputs.forEach((input, index) => {
    const record = validateRecord(customerFields, input);
    if (!record.ok) {
      const ref = input.customer_ref;
      results[index] = {
        customer_ref: typeof ref === 'string' ? ref : ref === undefined || ref === null ? null : String(ref),
        id: null,
        action: 'skipped',
        score: SKIPPED_SCORE,
        decision: SKIPPED_DECISION,
        sanction_score: null,
        sanction_topic: [],
        ip_address_score: null,
        email_risk_score: null,
        warnings: [],
        error: record.error,
      };
      return;
    }
    if (record.values.migration) record.warnings.push(MIGRATION_WARNING);
    accepted.push({ index, ref: record.values.customer_ref as string, values: record.values, extras: record.extras, raw: input, warnings: record.warnings });
  });

  const lastIndex = lastOccurrence(accepted);
  const stored = accepted.filter((item) => lastIndex.get(item.ref) === item.index);
  const screenedItems = stored.filter((item) => !item.values.migration);
  const screenings = await app.screening.screen(screenedItems.map((item) => item.values as unknown as ScreeningSubject));
  const screeningByIndex = new Map<number, CustomerScreening>(screenedItems.map((item, position) => [item.index, screenings[position]!]));

  const evaluationInputs: EvaluationInput[] = stored.map((item) => {
    const screening = screeningByIndex.get(item.index);
    const record = withoutNulls({ ...item.extras, ...item.values });
    return {
      target: 'customer',
      record,
      customer: withoutNulls({
        ...record,
        sanction_score: screening?.sanction_score,
        sanction_topic: screening?.sanction_topic ?? [],
        ip_address_score: screening?.ip_address_score,
        email_risk_score: screening?.email_risk_score,
        ip_country: screening?.ip_country,
      }),
      event: null,
      aggregates: {},
    };
  });
  const evaluations = await evaluateInPool(app, evaluationInputs);

  const by = `${actor.type}:${actor.id}`;
  const rows = stored.map((item, position) => {
    const screening = screeningByIndex.get(item.index);
    const evaluation = evaluations[position]!;
    return {
      ...item.values,
      id: randomUUID(),
      raw: item.raw,
      score: evaluation.score,
      decision: evaluation.decision,
      sanction_score: screening?.sanction_score ?? null,
      sanction_topic: screening?.sanction_topic ?? [],
      sanction_matches: screening?.sanction_matches ?? [],
      ip_address_score: screening?.ip_address_score ?? null,
      ip_reasons: screening?.ip_reasons ?? [],
      email_risk_score: screening?.email_risk_score ?? null,
      email_reasons: screening?.email_reasons ?? [],
      log_id: randomUUID(),
      created_by: by,
      updated_by: by,
    };
  });
  const columns = { ...columnsOf(customerFields), ...STORAGE_COLUMNS };

  const logs = stored.map((item, position) => executionLogRow(rows[position]!.log_id, 'customer', item.ref, evaluations[position]!, by));
  const outcomes = await retryOnConflict(() => upsertRowsWithLogs(app.db, 'customers', 'customer_ref', columns, rows, EXECUTION_LOG_COLUMNS, logs));

  stored.forEach((item, position) => {
    const row = rows[position]!;
    results[item.index] = {
      customer_ref: item.ref,
      id: outcomes[position]!.id,
      action: outcomes[position]!.inserted ? 'created' : 'updated',
      score: row.score,
      decision: row.decision,
      sanction_score: row.sanction_score,
      sanction_topic: row.sanction_topic,
      ip_address_score: row.ip_address_score,
      email_risk_score: row.email_risk_score,
      warnings: item.warnings,
    };
  });
  reportRepeatedRefs(accepted, lastIndex, results, 'customer_ref');
  return results;
}
