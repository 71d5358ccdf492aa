import type { AppContext } from '../../context.ts';
import type { Actor } from '../../actor.ts';
import { EVENT_TYPES, type EventType } from '../events/service.ts';
import { runBatch, sentText, skippedResult, type BatchPlan, type ValidRecord } from '../records/batch.ts';
import type { BatchTrace } from '../records/trace.ts';
import type { FieldTable } from '../records/fields.ts';
import { numericOrNull, ownCopy, withoutNulls, type Action } from '../records/results.ts';
import { columnsOf } from '../records/sql.ts';
import type { ColumnTypes } from '../../db/copy.ts';
import type { EvaluationInput } from '../rules/definitions.ts';
import { aggregatesOf, historyAround, historyRanges, readCustomers, type AggregateItem, type CustomerHistory, type CustomerRead } from './aggregates.ts';
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
export const UNSCORED_WARNING =
  'event_date: older than the scoring window (24 hours); stored unscored (rule_check false): no rule ran and no alert is raised for it.';

interface Accepted extends ValidRecord {
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

/** The country of a transaction for distinct-country aggregates: from geo, as sent. */
function geoCountry(geo: unknown): string | null {
  if (!geo || typeof geo !== 'object') return null;
  const value = (geo as Record<string, unknown>).country_code ?? (geo as Record<string, unknown>).country;
  return typeof value === 'string' && value.trim() ? value.trim().toUpperCase() : null;
}

function eventTypeLabel(type: number): string {
  return `${type} (${EVENT_TYPES[type as EventType]})`;
}

/** The customer columns a batch reads: what rules see, and the id the records point to. */
const CUSTOMER_COLUMNS = [...new Set(['id', 'customer_ref', 'raw', ...customerFields.map((spec) => spec.name), 'score', 'decision', 'sanction_score', 'sanction_topic', 'ip_address_score', 'email_risk_score'])];

/**
 * Each kind's storage columns, built once: every batch of the kind shares them. Spread afresh per
 * batch, the 50-key object cost each single-record request about 8 KB that outlived two young
 * collections (a heap sampling profile), and a scavenge every ~75 requests took 5-10 ms.
 */
const kindColumns = new WeakMap<TransactionKind, ColumnTypes>();

function storageColumns(kind: TransactionKind): ColumnTypes {
  let columns = kindColumns.get(kind);
  if (!columns) kindColumns.set(kind, (columns = { ...columnsOf(kind.fields), ...STORAGE_COLUMNS }));
  return columns;
}

function transactionPlan(app: AppContext, kind: TransactionKind, now: number): BatchPlan<Accepted, TransactionResult> {
  // The batch's customers and their stored history, read while the records are validated.
  let prefetched: ReturnType<typeof readCustomers> = Promise.resolve([]);
  const histories = new Map<string, CustomerHistory>();
  // The ids of the batch's refs stored already, from the same read.
  const storedIds = new Map<string, string>();
  return {
    fields: kind.fields,
    refField: 'transaction_ref',
    table: kind.table,
    columns: storageColumns(kind),
    target: kind.target,
    skipped: (ref, warnings, error) => skippedResult('transaction_ref', ref, { rule_check: false, log_id: null }, warnings, error),

    prefetch(inputs, trace) {
      // From the records as sent: a valid record's refs are these texts (trimmed, numbers as text),
      // so the reads below cover every valid record (ruleInputs reads again what they do not).
      const reads = new Map<string, CustomerRead>();
      const refs = new Set<string>();
      for (const input of inputs) {
        const customerRef = sentText(input.customer_ref);
        if (customerRef === null) continue;
        let read = reads.get(customerRef);
        if (!read) reads.set(customerRef, (read = { key: customerRef, lo: null, hi: null }));
        const around = typeof input.event_date === 'string' ? historyAround(Date.parse(input.event_date.trim())) : null;
        if (around) {
          read.lo = read.lo === null ? around.lo : Math.min(read.lo, around.lo);
          read.hi = read.hi === null ? around.hi : Math.max(read.hi, around.hi);
        }
        const ref = kind.target === 'financial' ? sentText(input.transaction_ref) : null;
        if (ref) refs.add(ref);
      }
      prefetched = readCustomers(app.db, 'customer_ref', [...reads.values()], [...refs], CUSTOMER_COLUMNS);
      // Awaited by accept; a failure must not count as unhandled meanwhile.
      prefetched.catch(() => {});
      if (trace) trace.roundTrips += 1;
    },

    async accept(valid, trace) {
      const [read, events] = await Promise.all([prefetched, app.events.all()]);
      trace?.mark('customers and history (read while validating: the rest of the wait)');
      const customers = new Map<string, Record<string, unknown>>();
      for (const { customer, history } of read) {
        customers.set(customer.customer_ref as string, customer);
        if (!history) continue;
        histories.set(customer.id as string, history);
        for (const entry of history.resent) storedIds.set(entry[0], entry[7]);
      }
      const acceptedTypes = kind.acceptedTypes.map(eventTypeLabel).join(' or ');
      // One event object per slug: the records of an event share it, and its decision context is serialised once.
      const eventViews = new Map<string, Accepted['event']>();
      return valid.map((record): Accepted | string => {
        const { values, warnings } = record;
        const customer = customers.get(values.customer_ref as string);
        if (!customer) return `Customer ${values.customer_ref} does not exist; send it to /api/customer/upsert/ first.`;
        const slug = values.event_slug as string;
        const event = events.get(slug);
        if (!event) return `Event ${slug} is not defined.`;
        if (!event.active) return `Event ${slug} is not active.`;
        if (!kind.acceptedTypes.includes(event.type)) {
          return `Event ${slug} is of type ${eventTypeLabel(event.type)}; this endpoint accepts type ${acceptedTypes}.`;
        }
        if (kind.target === 'non_financial' && values.transaction_ref === null) {
          warnings.push('transaction_ref: not given; the record cannot be deduplicated and is stored as a new event.');
        }
        let eventView = eventViews.get(slug);
        if (!eventView) eventViews.set(slug, (eventView = { slug: event.slug, name: event.name, type: event.type }));
        const eventDate = Date.parse(values.event_date as string);
        const ruleCheck = eventDate >= now - RULE_CHECK_WINDOW_MS;
        // A back-filled record is stored and counts in later aggregates, but is not scored: said, never silent.
        if (!ruleCheck) warnings.push(UNSCORED_WARNING);
        return Object.assign(record, { customer, event: eventView, eventDate, ruleCheck });
      });
    },

    // Only a financial batch's read looks for its stored refs (among its customers' transactions).
    storedId: kind.target === 'financial' ? (item) => (item.ref === null ? undefined : storedIds.get(item.ref)) : undefined,

    async ruleInputs(stored, trace) {
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
      const batchRefs = new Set(kind.target === 'financial' ? stored.flatMap((item) => (item.ref ? [item.ref] : [])) : []);
      // A customer whose history read before validation does not cover what its valid records need is read again, exactly.
      const missing: CustomerRead[] = [];
      for (const [customerId, range] of historyRanges(aggregateItems)) {
        const history = histories.get(customerId);
        if (!history || history.lo > range.lo || history.hi < range.hi) missing.push({ key: customerId, ...range });
      }
      if (missing.length) {
        for (const { customer, history } of await readCustomers(app.db, 'id', missing, [...batchRefs], ['id'])) histories.set(customer.id as string, history!);
        if (trace) trace.roundTrips += 1;
      }
      const aggregates = await aggregatesOf(aggregateItems, batchRefs, histories);
      trace?.mark('aggregates');
      // Records of one customer share one customer view: built once, and its decision context serialised once.
      const customerViews = new Map<Record<string, unknown>, Record<string, unknown>>();
      const inputs = stored.map((item): EvaluationInput | null => {
        if (!item.ruleCheck) return null;
        let customer = customerViews.get(item.customer);
        if (!customer) customerViews.set(item.customer, (customer = customerForRules(item.customer)));
        return { target: kind.target, record: ruleRecord(kind, item), customer, event: item.event, aggregates: aggregates.get(item.index)! };
      });
      trace?.mark('rule inputs');
      return inputs;
    },

    row: (item, evaluation) =>
      Object.assign(item.values, {
        customer_id: item.customer.id,
        country: geoCountry(item.values.geo),
        raw: item.raw,
        score: evaluation?.score ?? null,
        decision: evaluation?.decision ?? null,
        rule_check: item.ruleCheck,
      }),

    result: (item, stored, row, evaluation) => ({
      transaction_ref: item.ref,
      id: stored.id,
      action: stored.inserted ? 'created' : 'updated',
      score: evaluation?.score ?? null,
      decision: evaluation?.decision ?? null,
      rule_check: item.ruleCheck,
      log_id: row.log_id as string | null,
      warnings: item.warnings,
    }),
  };
}

/**
 * The record as rules see it: its extras, then its fields (amounts as numbers), without nulls;
 * what `withoutNulls({ ...extras, ...values, amount, fee_amount })` gives, in one pass.
 */
function ruleRecord(kind: TransactionKind, item: Accepted): Record<string, unknown> {
  const record: Record<string, unknown> = withoutNulls(item.extras);
  const financial = kind.target === 'financial';
  for (const name in item.values) {
    const value = financial && name === 'amount' ? Number(item.values.amount) : financial && name === 'fee_amount' ? numericOrNull(item.values.fee_amount) : item.values[name];
    if (value !== null && value !== undefined) record[name] = value;
  }
  return record;
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
  trace?: BatchTrace,
): Promise<TransactionResult[]> {
  return runBatch(app, transactionPlan(app, kind, now), inputs, actor, trace);
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
  const customer = ownCopy(row.raw as Record<string, unknown>);
  for (const name of CUSTOMER_RULE_FIELDS) customer[name] = row[name];
  if (row.birth_date instanceof Date) customer.birth_date = row.birth_date.toISOString().slice(0, 10);
  for (const name of ['score', 'sanction_score', 'ip_address_score', 'email_risk_score']) customer[name] = numericOrNull(row[name]);
  return withoutNulls(customer);
}
