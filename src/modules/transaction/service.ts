import { randomUUID } from 'node:crypto';
import type { AppContext, Actor } from '../../context.ts';
import { retryOnConflict } from '../../db/knex.ts';
import { EVENT_TYPES, type EventType } from '../events/service.ts';
import { lastOccurrence, reportRepeatedRefs } from '../records/batch.ts';
import { validateRecord, type FieldTable } from '../records/fields.ts';
import { numericOrNull, SKIPPED_DECISION, SKIPPED_SCORE, withoutNulls, type Action } from '../records/results.ts';
import { columnsOf, upsertRowsWithLogs } from '../records/sql.ts';
import type { EvaluationInput } from '../rules/definitions.ts';
import { EXECUTION_LOG_COLUMNS, evaluateInPool, executionLogRow, type Evaluation } from '../rules/engine.ts';
import { computeAggregates, type AggregateItem } from './aggregates.ts';
import { customerFields } from '../customer/schemas.ts';
import { financialFields, nonFinancialFields } from './schemas.ts';

export interface TransactionKind {
  target: 'financial' | 'non_financial';
  table: string;
  fields: FieldTable;
  acceptedTypes: EventType[];
}

export const FINANCIAL: TransactionKind = {
  target: 'financial',
  table: 'financial_transactions',
  fields: financialFields,
  acceptedTypes: [1],
};

export const NON_FINANCIAL: TransactionKind = {
  target: 'non_financial',
  table: 'non_financial_events',
  fields: nonFinancialFields,
  acceptedTypes: [0, 2],
};

export interface TransactionResult {
  transaction_ref: string | null;
  id: string | null;
  action: Action;
  score: number | null;
  decision: string | null;
  rule_check: boolean;
  log_id: string | null;
  warnings: string[];
  error?: string;
}

/** Rule engine not run for records whose event_date is older than this (rule_check false). */
const RULE_CHECK_WINDOW_MS = 24 * 3_600_000;

interface Accepted {
  index: number;
  ref: string | null;
  values: Record<string, unknown>;
  extras: Record<string, unknown>;
  raw: Record<string, unknown>;
  warnings: string[];
  customer: Record<string, unknown>;
  event: { slug: string; name: string; type: number };
  eventDate: number;
  ruleCheck: boolean;
}

const STORAGE_COLUMNS = {
  id: 'uuid',
  customer_id: 'uuid',
  country: 'text',
  raw: 'jsonb',
  score: 'numeric',
  decision: 'text',
  rule_check: 'boolean',
  log_id: 'uuid',
  created_by: 'text',
  updated_by: 'text',
};

function skipped(ref: unknown, warnings: string[], error: string): TransactionResult {
  return {
    transaction_ref: typeof ref === 'string' ? ref : ref === undefined || ref === null ? null : String(ref),
    id: null,
    action: 'skipped',
    score: SKIPPED_SCORE,
    decision: SKIPPED_DECISION,
    rule_check: false,
    log_id: null,
    warnings,
    error,
  };
}

/** The country of a transaction for distinct-country aggregates: from geo, as sent. */
function geoCountry(geo: unknown): string | null {
  if (!geo || typeof geo !== 'object') return null;
  const value = (geo as Record<string, unknown>).country_code ?? (geo as Record<string, unknown>).country;
  return typeof value === 'string' && value.trim() ? value.trim().toUpperCase() : null;
}

function eventTypeLabel(type: number): string {
  return `${type} (${EVENT_TYPES[type as EventType]})`;
}

/**
 * Validates, scores and stores a batch of financial or non-financial records. Record-level
 * problems skip only that record; the writes of the whole batch are one transaction.
 */
export async function upsertTransactions(
  app: AppContext,
  kind: TransactionKind,
  inputs: Record<string, unknown>[],
  actor: Actor,
  now = Date.now(),
): Promise<TransactionResult[]> {
  const results = new Array<TransactionResult>(inputs.length);
  const validated = inputs.map((input) => validateRecord(kind.fields, input));

  const customerRefs = [...new Set(validated.flatMap((record) => (record.ok ? [record.values.customer_ref as string] : [])))];
  const [customerRows, events] = await Promise.all([
    customerRefs.length ? app.db('customers').select('*').whereIn('customer_ref', customerRefs) : [],
    app.events.all(),
  ]);
  const customers = new Map<string, Record<string, unknown>>(customerRows.map((row: Record<string, unknown>) => [row.customer_ref as string, row]));

  const accepted: Accepted[] = [];
  validated.forEach((record, index) => {
    const input = inputs[index]!;
    if (!record.ok) {
      results[index] = skipped(input.transaction_ref, [], record.error);
      return;
    }
    const { values, extras, warnings } = record;
    const customer = customers.get(values.customer_ref as string);
    if (!customer) {
      results[index] = skipped(values.transaction_ref, warnings, `Customer ${values.customer_ref} does not exist; send it to /api/customer/upsert/ first.`);
      return;
    }
    const slug = values.event_slug as string;
    const event = events.get(slug);
    const accepted_types = kind.acceptedTypes.map(eventTypeLabel).join(' or ');
    let eventError: string | null = null;
    if (!event) eventError = `Event ${slug} is not defined.`;
    else if (!event.active) eventError = `Event ${slug} is not active.`;
    else if (!kind.acceptedTypes.includes(event.type)) {
      eventError = `Event ${slug} is of type ${eventTypeLabel(event.type)}; this endpoint accepts type ${accepted_types}.`;
    }
    if (eventError || !event) {
      results[index] = skipped(values.transaction_ref, warnings, eventError!);
      return;
    }
    if (kind.target === 'non_financial' && values.transaction_ref === null) {
      warnings.push('transaction_ref: not given; the record cannot be deduplicated and is stored as a new event.');
    }
    const eventDate = Date.parse(values.event_date as string);
    accepted.push({
      index,
      ref: values.transaction_ref as string | null,
      values,
      extras,
      raw: input,
      warnings,
      customer,
      event: { slug: event.slug, name: event.name, type: event.type },
      eventDate,
      ruleCheck: eventDate >= now - RULE_CHECK_WINDOW_MS,
    });
  });

  // A ref repeated within the batch: the last occurrence is the one stored and scored.
  const lastIndex = lastOccurrence(accepted);
  const stored = accepted.filter((item) => item.ref === null || lastIndex.get(item.ref) === item.index);

  const aggregateItems: AggregateItem[] = stored.map((item) => ({
    index: item.index,
    customerId: item.customer.id as string,
    eventDate: item.eventDate,
    wanted: item.ruleCheck,
    contribution:
      kind.target === 'financial'
        ? {
            amount: Number(item.values.amount),
            ioType: item.values.io_type as number,
            deviceId: item.values.device_id as string | null,
            ip: item.values.ip_address as string | null,
            country: geoCountry(item.values.geo),
          }
        : null,
  }));
  const batchRefs = kind.target === 'financial' ? stored.flatMap((item) => (item.ref ? [item.ref] : [])) : [];
  const aggregates = await computeAggregates(app.db, aggregateItems, batchRefs);

  const scored = stored.filter((item) => item.ruleCheck);
  const evaluationInputs: EvaluationInput[] = scored.map((item) => ({
    target: kind.target,
    record: withoutNulls({
      ...item.extras,
      ...item.values,
      ...(kind.target === 'financial' ? { amount: Number(item.values.amount), fee_amount: numericOrNull(item.values.fee_amount) } : {}),
    }),
    customer: customerForRules(item.customer),
    event: item.event,
    aggregates: aggregates.get(item.index)!,
  }));
  const evaluations = await evaluateInPool(app, evaluationInputs);
  const evaluationByIndex = new Map<number, Evaluation>(scored.map((item, position) => [item.index, evaluations[position]!]));

  const by = `${actor.type}:${actor.id}`;
  const rows: Record<string, unknown>[] = stored.map((item) => {
    const evaluation = evaluationByIndex.get(item.index);
    return {
      ...item.values,
      id: randomUUID(),
      customer_id: item.customer.id,
      country: geoCountry(item.values.geo),
      raw: item.raw,
      score: evaluation?.score ?? null,
      decision: evaluation?.decision ?? null,
      rule_check: item.ruleCheck,
      log_id: evaluation ? randomUUID() : null,
      created_by: by,
      updated_by: by,
    };
  });
  const columns = { ...columnsOf(kind.fields), ...STORAGE_COLUMNS };

  const logs = stored.flatMap((item, position) => {
    const evaluation = evaluationByIndex.get(item.index);
    return evaluation ? [executionLogRow(rows[position]!.log_id as string, kind.target, item.ref, evaluation, by)] : [];
  });
  const outcomes = await retryOnConflict(() => upsertRowsWithLogs(app.db, kind.table, 'transaction_ref', columns, rows, EXECUTION_LOG_COLUMNS, logs));

  stored.forEach((item, position) => {
    const evaluation = evaluationByIndex.get(item.index);
    results[item.index] = {
      transaction_ref: item.ref,
      id: outcomes[position]!.id,
      action: outcomes[position]!.inserted ? 'created' : 'updated',
      score: evaluation?.score ?? null,
      decision: evaluation?.decision ?? null,
      rule_check: item.ruleCheck,
      log_id: rows[position]!.log_id as string | null,
      warnings: item.warnings,
    };
  });
  reportRepeatedRefs(accepted, lastIndex, results, 'transaction_ref');
  return results;
}

const CUSTOMER_RULE_FIELDS = [
  ...customerFields.map((spec) => spec.name),
  'score',
  'decision',
  'sanction_score',
  'sanction_topic',
  'ip_address_score',
  'email_risk_score',
];

/**
 * The customer as rules see it: its fields, its own risk result and screening scores as numbers,
 * raw extras underneath; no bookkeeping columns, no nulls.
 */
export function customerForRules(row: Record<string, unknown>): Record<string, unknown> {
  const customer: Record<string, unknown> = { ...(row.raw as Record<string, unknown>) };
  for (const name of CUSTOMER_RULE_FIELDS) customer[name] = row[name];
  if (row.birth_date instanceof Date) customer.birth_date = row.birth_date.toISOString().slice(0, 10);
  for (const name of ['score', 'sanction_score', 'ip_address_score', 'email_risk_score']) customer[name] = numericOrNull(row[name]);
  return withoutNulls(customer);
}
