import type { Knex } from 'knex';

/**
 * Indexes that let every ordering, filter and search the large lists offer (financial and
 * non-financial events, execution logs, alerts, customers, the audit log) answer a 200-row page
 * and its total over a million rows within the 30 ms list budget (issue 37; test/db/list-plans.test.ts
 * explains each one, bench/backoffice.ts times them). The shapes follow the query layer
 * (src/modules/backoffice/query.ts):
 * - an ordering `o=±n` is `ORDER BY column, pk` in one direction, so an index on `(column, id)`
 *   serves both directions, read forwards or backwards; for a nullable column it is declared
 *   `nulls first`, as lists sort nulls lowest;
 * - a range filter keeping up to 20,000 rows is read by the one-statement page, which gathers the
 *   key and default-ordering value of every match: the column's index INCLUDEs that ordering's
 *   date, so they come from the index alone (an index-only scan), not one heap visit per match;
 * - an equality filter (decision, kind, type, action) is read with the default ordering, so it
 *   leads an index followed by that ordering's full key `(column, date, id)`: a page of a rare
 *   value is a range of that index, and its exact total an index-only count of the same range;
 * - a `^field` search is `lower(field) like 'term%'`, served by a text_pattern_ops index on
 *   lower(field), and an `=field` search by a plain index; every search term ORs all of a model's
 *   search fields, so one unindexed field turns the search into a full scan.
 * Orderings already served are left alone: the event and log dates and the references have
 * indexes (0002, 0012, 0013), which an incremental sort on the pk completes.
 *
 * Write cost: financial_transactions is on the ingest hot path, so it gets three indexes (amount,
 * score, decision), not one per column; the columns left without one are no longer sortable or
 * filterable (see the registrations). Plain CREATE INDEX locks writes on the table while it builds:
 * on a large existing table run these by hand with CREATE INDEX CONCURRENTLY before migrating.
 */
const INDEXES: [name: string, definition: string][] = [
  // Financial events: amount (sort both ways and range), score (sort and range), decision filter.
  ['financial_transactions_amount_id', 'financial_transactions (amount, id) include (event_date)'],
  ['financial_transactions_score_id', 'financial_transactions (score nulls first, id) include (event_date)'],
  ['financial_transactions_decision_date', 'financial_transactions (decision, event_date, id)'],
  // Non-financial events: the same, without amounts.
  ['non_financial_events_score_id', 'non_financial_events (score nulls first, id) include (event_date)'],
  ['non_financial_events_decision_date', 'non_financial_events (decision, event_date, id)'],
  // Execution logs: the record search (=record_ref) and its ordering, score, decision filter.
  ['execution_logs_record_ref_id', 'execution_logs (record_ref nulls first, id)'],
  ['execution_logs_score_id', 'execution_logs (score, id) include (created_at)'],
  ['execution_logs_decision_created', 'execution_logs (decision, created_at, id)'],
  // Alerts: the record search and ordering, score, decision and kind filters; the case-assignee
  // filter reads cases by assignee first ("assigned to me"), then their alerts by case_id.
  ['alerts_record_ref_id', 'alerts (record_ref nulls first, id)'],
  ['alerts_score_id', 'alerts (score, id) include (created_at)'],
  ['alerts_decision_created', 'alerts (decision, created_at, id)'],
  ['alerts_kind_created', 'alerts (kind, created_at, id)'],
  // The status filter's index (0011's status, created_at) with the pk, so that its matches' keys are read from the index.
  ['alerts_status_created', 'alerts (status, created_at, id)'],
  ['cases_assignee_id', 'cases (assignee_id)'],
  // Customers: the search's other prefix fields, the scores, decision and type filters.
  ['customers_last_name_prefix', 'customers (lower(last_name) text_pattern_ops)'],
  ['customers_email_prefix', 'customers (lower(email) text_pattern_ops)'],
  ['customers_company_name_prefix', 'customers (lower(company_name) text_pattern_ops)'],
  ['customers_score_id', 'customers (score, id) include (created_at)'],
  ['customers_sanction_score_id', 'customers (sanction_score nulls first, id) include (created_at)'],
  ['customers_decision_created', 'customers (decision, created_at, id)'],
  ['customers_type_created', 'customers (customer_type, created_at, id)'],
  // The audit log: its four search fields and the action filter.
  ['admin_log_entries_content_type_prefix', 'admin_log_entries (lower(content_type) text_pattern_ops)'],
  ['admin_log_entries_object_repr_prefix', 'admin_log_entries (lower(object_repr) text_pattern_ops)'],
  ['admin_log_entries_object_id', 'admin_log_entries (object_id)'],
  ['admin_log_entries_actor_prefix', 'admin_log_entries (lower(actor) text_pattern_ops)'],
  ['admin_log_entries_flag_time', 'admin_log_entries (action_flag, action_time, id)'],
];

export async function up(knex: Knex): Promise<void> {
  for (const [name, definition] of INDEXES) await knex.raw(`create index ${name} on ${definition}`);
  // Replaced by alerts_status_created (the same leading columns, and the pk).
  await knex.raw('drop index if exists alerts_status_created_at_index');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('create index if not exists alerts_status_created_at_index on alerts (status, created_at)');
  for (const [name] of [...INDEXES].reverse()) await knex.raw(`drop index if exists ${name}`);
}
