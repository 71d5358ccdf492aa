import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
import { onConnection } from '../../db/knex.ts';
import { timeOrderedId } from '../../ids.ts';
import { copyIn, rowEncoder } from '../records/sql.ts';
import type { EvaluationResult } from '../rules/evaluate.ts';
import { notifyCaseAlerts } from '../notifications/raise.ts';

/** One stored, scored record of a batch, as the alerts need it. */
export interface ScoredRecord {
  target: 'customer' | 'financial' | 'non_financial';
  /** The stored id (the existing one when the ref was already known). */
  recordId: string;
  recordRef: string | null;
  /** The record's customer; for a customer record, the record itself. */
  customerId: string;
  logId: string;
  score: number;
  decision: string;
  ruleCodes: string[];
  /** A customer's sanctions screening score, null when not screened or not a customer. */
  sanctionScore?: number | null;
}

export interface AlertSettings {
  /** A customer whose sanctions score reaches this raises an alert whatever the rules decided. */
  sanctionThreshold: number;
}

/** Whether a scored record raises an alert, and of which kind: a sanctions hit names the stronger reason. */
export function alertKind(record: ScoredRecord, settings: AlertSettings): 'sanctions' | 'rules' | null {
  if (record.target === 'customer' && record.sanctionScore !== null && record.sanctionScore !== undefined && record.sanctionScore >= settings.sanctionThreshold) return 'sanctions';
  return record.decision === 'REVIEW' || record.decision === 'REJECT' ? 'rules' : null;
}

/** The alerts of one batch as raiseAlerts writes them. */
interface AlertRow {
  target: string;
  record_id: string;
  record_ref: string | null;
  customer_id: string;
  log_id: string;
  kind: 'sanctions' | 'rules';
  score: number;
  decision: string;
  rule_codes: string[];
}

/**
 * The open case of each customer of `alerts` (rows with customer_id and score) opened or extended:
 * priority the highest score seen, alert count added. Customers are upserted in id order, so two
 * batches sharing customers lock their cases in the same order and cannot deadlock.
 */
const openCases = (alerts: string) => `
  insert into cases (customer_id, priority, alert_count)
  select customer_id, max(score), count(*)::int from ${alerts} group by customer_id order by customer_id
  on conflict (customer_id) where status <> 'closed'
  do update set priority = greatest(cases.priority, excluded.priority), alert_count = cases.alert_count + excluded.alert_count, updated_at = now()
  returning id, customer_id`;

/** Above this many alerts they go by COPY: the alerts of a 1000-record batch took 30 ms as one json_to_recordset insert, 21 by COPY. */
export const COPY_FROM_ALERTS = 32;

/** The few alerts of a small batch, in one statement over the cases' upsert (one round trip). */
const RAISE = `
  with input as (
    select * from json_to_recordset(?::json) as r(target text, record_id uuid, record_ref text, customer_id uuid, log_id uuid, kind text,
      score numeric, decision text, rule_codes text[])
  ), opened as (${openCases('input')})
  insert into alerts (case_id, customer_id, target, record_id, record_ref, log_id, kind, score, decision, rule_codes)
  select o.id, i.customer_id, i.target, i.record_id, i.record_ref, i.log_id, i.kind, i.score, i.decision, i.rule_codes
  from input i join opened o on o.customer_id = i.customer_id`;

/** A large batch's cases, from its alerts' customers and scores. */
const OPEN_CASES = openCases('json_to_recordset(?::json) as r(customer_id uuid, score numeric)');

/** The columns a large batch COPYs its alerts into, with their types for the COPY text. */
const ALERT_COLUMNS = {
  id: 'uuid', case_id: 'uuid', customer_id: 'uuid', target: 'text', record_id: 'uuid', record_ref: 'text',
  log_id: 'uuid', kind: 'text', score: 'numeric', decision: 'text', rule_codes: 'text[]',
};
const ALERT_COPY = `copy alerts (${Object.keys(ALERT_COLUMNS).join(', ')}) from stdin`;
const alertLine = rowEncoder(ALERT_COLUMNS);

/**
 * Raises the alerts of one batch inside the batch's transaction. A few alerts go in one
 * statement; a large batch's upsert their customers' cases and then COPY the alerts, which
 * PostgreSQL parses at a third of json_to_recordset's cost. Returns how many were raised.
 */
export async function raiseAlerts(trx: Knex.Transaction, records: readonly ScoredRecord[], settings: AlertSettings): Promise<number> {
  const alerts: AlertRow[] = [];
  for (const record of records) {
    const kind = alertKind(record, settings);
    if (!kind) continue;
    alerts.push({
      target: record.target,
      record_id: record.recordId,
      record_ref: record.recordRef,
      customer_id: record.customerId,
      log_id: record.logId,
      kind,
      score: record.score,
      decision: record.decision,
      rule_codes: record.ruleCodes,
    });
  }
  if (alerts.length === 0) return 0;
  if (alerts.length <= COPY_FROM_ALERTS) await trx.raw(RAISE, [JSON.stringify(alerts)]);
  else await copyAlerts(trx, alerts);
  await notifyCaseAlerts(trx, [...new Set(alerts.map((alert) => alert.customer_id))]);
  return alerts.length;
}

async function copyAlerts(trx: Knex.Transaction, alerts: AlertRow[]): Promise<void> {
  const opened = (await trx.raw(OPEN_CASES, [JSON.stringify(alerts.map(({ customer_id, score }) => ({ customer_id, score })))])) as {
    rows: Array<{ id: string; customer_id: string }>;
  };
  const caseOf = new Map(opened.rows.map((row) => [row.customer_id, row.id]));
  let text = '';
  // Time-ordered ids append to the alerts' primary key (src/ids.ts).
  for (const alert of alerts) text += alertLine({ ...alert, id: timeOrderedId(), case_id: caseOf.get(alert.customer_id) });
  await onConnection(trx, (connection) => copyIn(connection, ALERT_COPY, [text]));
}

export function alertSettings(config: Config): AlertSettings {
  return { sanctionThreshold: config.thresholds.review };
}

/**
 * The batch write with its alerts, for the upsert skeleton: `write` stores the rows and their logs
 * (one statement); when any record of the batch raises an alert, that statement and the alerts
 * run in one transaction, so a batch is never stored without its alerts nor alerts without it. A
 * batch that raises none pays no BEGIN/COMMIT.
 */
export async function writeWithAlerts(
  db: Knex,
  batch: { target: ScoredRecord['target']; refField: string },
  rows: ReadonlyArray<Record<string, unknown>>,
  evaluations: ReadonlyArray<EvaluationResult | null>,
  settings: AlertSettings,
  write: (db: Knex) => Promise<Array<{ id: string; inserted: boolean }>>,
): Promise<Array<{ id: string; inserted: boolean }>> {
  const scored = (outcomes: ReadonlyArray<{ id: string }> | null): ScoredRecord[] => {
    const records: ScoredRecord[] = [];
    evaluations.forEach((evaluation, position) => {
      if (!evaluation) return;
      const row = rows[position]!;
      const recordId = outcomes ? outcomes[position]!.id : String(row.id);
      records.push({
        target: batch.target,
        recordId,
        recordRef: (row[batch.refField] as string | null | undefined) ?? null,
        customerId: batch.target === 'customer' ? recordId : String(row.customer_id),
        logId: String(row.log_id),
        score: evaluation.score,
        decision: evaluation.decision,
        ruleCodes: evaluation.matched.map((rule) => rule.code),
        sanctionScore: row.sanction_score === undefined || row.sanction_score === null ? null : Number(row.sanction_score),
      });
    });
    return records;
  };
  if (!scored(null).some((record) => alertKind(record, settings) !== null)) return write(db);
  return db.transaction(async (trx) => {
    const outcomes = await write(trx);
    await raiseAlerts(trx, scored(outcomes), settings);
    return outcomes;
  });
}
