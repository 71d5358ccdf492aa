import type { Knex } from 'knex';
import { storedAggregates, type DecisionContext, type FlatValues } from './evaluate.ts';

const SECTIONS = ['transaction', 'customer', 'aggregates', 'event'] as const;

/** A timestamp as the rules' context stores it (JSON dates: milliseconds and an offset). */
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** A timestamp in the API's one form: UTC to the second, no offset (the spec's dates rule); text that only looks like one (month 13, hour 25: a record's extra field) as it is. */
function apiTimestamp(value: string): string {
  const date = new Date(value);
  return Number.isNaN(date.getTime()) ? value : date.toISOString().slice(0, 19);
}

function apiValues(values: FlatValues): FlatValues {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, typeof value === 'string' && TIMESTAMP.test(value) ? apiTimestamp(value) : value]));
}

/**
 * The data_context of an execution log as the rules saw it: the batch stores it whole (the JSON
 * text of the rules module's DecisionContextWriter, four flat key/value sets, the aggregates in
 * their compact form), so it is read back as stored, never rebuilt from the record's present
 * state. A missing section reads as empty.
 */
export function storedDecisionContext(stored: unknown): DecisionContext {
  const parsed = typeof stored === 'string' ? (JSON.parse(stored) as unknown) : stored;
  const source = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  const context = {} as DecisionContext;
  for (const section of SECTIONS) {
    const values = section === 'aggregates' ? storedAggregates(source[section]) : source[section];
    context[section] = values !== null && typeof values === 'object' && !Array.isArray(values) ? (values as FlatValues) : {};
  }
  return context;
}

/** storedDecisionContext with timestamps in the API's form. */
export function decisionContextOf(stored: unknown): DecisionContext {
  const context = storedDecisionContext(stored);
  for (const section of SECTIONS) context[section] = apiValues(context[section]);
  return context;
}

/**
 * The context as a viewer may read it: the customer section (names, e-mail, documents) only for
 * those who may view customers, as everywhere else a customer is named (access.ts mayName).
 */
export function viewableDecisionContext(context: DecisionContext, mayView: (modelKey: string) => boolean): DecisionContext {
  return mayView('customer.customer') ? context : { ...context, customer: {} };
}

/** The data_context of one execution log, or null when the log is gone. */
export async function decisionContextOfLog(db: Knex, logId: string | null | undefined): Promise<DecisionContext | null> {
  if (!logId) return null;
  const row = (await db('execution_logs').where({ id: logId }).first('data_context')) as { data_context: unknown } | undefined;
  return row ? decisionContextOf(row.data_context) : null;
}
