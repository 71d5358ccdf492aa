import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
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

/**
 * The statement of raiseAlerts: the batch's alerts as one JSON parameter, the open case of each
 * customer opened or extended (priority the highest score seen, alert count added), then every
 * alert inserted pointing at its case. Customers are upserted in id order, so two batches sharing
 * customers lock their cases in the same order and cannot deadlock.
 */
const RAISE = `
  with input as (
    select * from json_to_recordset(?::json) as r(target text, record_id uuid, record_ref text, customer_id uuid, log_id uuid, kind text,
      score numeric, decision text, rule_codes text[])
  ), per_customer as (
    select customer_id, max(score) as priority, count(*)::int as alerts from input group by customer_id order by customer_id
  ), opened as (
    insert into cases (customer_id, priority, alert_count)
    select customer_id, priority, alerts from per_customer
    on conflict (customer_id) where status <> 'closed'
    do update set priority = greatest(cases.priority, excluded.priority), alert_count = cases.alert_count + excluded.alert_count, updated_at = now()
    returning id, customer_id
  )
  insert into alerts (case_id, customer_id, target, record_id, record_ref, log_id, kind, score, decision, rule_codes)
  select o.id, i.customer_id, i.target, i.record_id, i.record_ref, i.log_id, i.kind, i.score, i.decision, i.rule_codes
  from input i join opened o on o.customer_id = i.customer_id`;

/**
 * Raises the alerts of one batch inside the batch's transaction: one statement whatever the
 * number of records (an insert of alerts over an upsert of cases). Returns how many were raised.
 */
export async function raiseAlerts(trx: Knex.Transaction, records: readonly ScoredRecord[], settings: AlertSettings): Promise<number> {
  const alerts: object[] = [];
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
  await trx.raw(RAISE, [JSON.stringify(alerts)]);
  await notifyCaseAlerts(trx, [...new Set(alerts.map((alert) => (alert as { customer_id: string }).customer_id))]);
  return alerts.length;
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
