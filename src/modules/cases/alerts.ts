import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
import { onConnection, runStatement } from '../../db/knex.ts';
import { timeOrderedId } from '../../ids.ts';
import { arrayLiteral, copyIn, copyText } from '../../db/copy.ts';
import type { EvaluationResult } from '../rules/evaluate.ts';
import { announceCaseAlerts, CASE_ALERT_NOTIFICATION_VALUES, caseAlertNotificationsSql, notifyCaseAlerts, type InsertedNotification } from '../notifications/raise.ts';

/** One stored, scored record of a batch, as the alerts need it. */
export interface ScoredRecord {
  target: 'customer' | 'financial' | 'non_financial';
  /** The stored id (the existing one when the ref was already known). */
  recordId: string;
  recordRef: string | null;
  /** The record's customer; for a customer record, the record itself. */
  customerId: string;
  /**
   * Whether this batch's transaction inserted the customer (a customer record stored new): such a
   * customer has no case yet, since cases are opened only here, for customers already stored.
   */
  customerIsNew?: boolean;
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
export function alertKind(record: Pick<ScoredRecord, 'target' | 'decision' | 'sanctionScore'>, settings: AlertSettings): 'sanctions' | 'rules' | null {
  if (record.target === 'customer' && record.sanctionScore !== null && record.sanctionScore !== undefined && record.sanctionScore >= settings.sanctionThreshold) return 'sanctions';
  return record.decision === 'REVIEW' || record.decision === 'REJECT' ? 'rules' : null;
}

/** The alerts of one batch as raiseAlerts writes them. */
interface AlertRow {
  target: string;
  record_id: string;
  record_ref: string | null;
  customer_id: string;
  customer_is_new: boolean;
  log_id: string;
  kind: 'sanctions' | 'rules';
  score: number;
  decision: string;
  rule_codes: string[];
}

/**
 * The open case of each customer of `source` (rows of `columns`: customer_id, priority,
 * alert_count, and the id a new case takes where given) opened or extended: priority the highest
 * score seen, alert count added. Customers are upserted in id order, so two batches sharing
 * customers lock their cases in the same order and cannot deadlock.
 */
const openCases = (columns: string, source: string) => `
  insert into cases (${columns})
  ${source} order by customer_id
  on conflict (customer_id) where status <> 'closed'
  do update set priority = greatest(cases.priority, excluded.priority), alert_count = cases.alert_count + excluded.alert_count, updated_at = now()
  returning id, customer_id, assignee_id, alert_count, reference`;

/** Above this many alerts they go by COPY: the alerts of a 1000-record batch took 30 ms as one json_to_recordset insert, 21 by COPY. */
export const COPY_FROM_ALERTS = 32;

/**
 * The few alerts of a small batch and the notifications of their cases' people, in one prepared
 * statement over the cases' upsert: one round trip, planned once per connection (a one-record
 * request spent 1.5 ms planning and sending the alerts' and the notifications' statements apart).
 * The notifications read the cases as the upsert returns them (a statement's CTEs see the tables
 * as they were before it).
 */
const RAISE_AND_NOTIFY = {
  name: 'warden_raise_alerts',
  text: `
  with input as (
    select * from json_to_recordset($1::json) as r(target text, record_id uuid, record_ref text, customer_id uuid, log_id uuid, kind text,
      score numeric, decision text, rule_codes text[])
  ), opened as (${openCases('customer_id, priority, alert_count', 'select customer_id, max(score), count(*)::int from input group by customer_id')}
  ), alerted as (
    insert into alerts (case_id, customer_id, target, record_id, record_ref, log_id, kind, score, decision, rule_codes)
    select o.id, i.customer_id, i.target, i.record_id, i.record_ref, i.log_id, i.kind, i.score, i.decision, i.rule_codes
    from input i join opened o on o.customer_id = i.customer_id
  ), ${caseAlertNotificationsSql('opened', '$2::text[]', '$3')}
  select * from notified`,
};

/**
 * A large batch's cases, one row per customer (its highest score and its number of alerts, counted
 * here), a new one under a time-ordered id made here: appended to the cases' key like the alerts'
 * (src/ids.ts), where gen_random_uuid()'s lands anywhere (740 new cases, scratch: 11.0-11.3 ms against 12.8-13.4).
 */
const OPEN_CASES = openCases(
  'id, customer_id, priority, alert_count',
  'select id, customer_id, priority, alert_count from json_to_recordset($1::json) as r(id uuid, customer_id uuid, priority numeric, alert_count integer)',
);

/** The cases of customers this batch inserted, which can only be new: by COPY (740 cases: 4.9 ms, against 12.1 by the upsert). */
const CASE_COPY = 'copy cases (id, customer_id, priority, alert_count) from stdin';

const ALERT_COPY = 'copy alerts (id, case_id, customer_id, target, record_id, record_ref, log_id, kind, score, decision, rule_codes) from stdin';

/** An alert's COPY line after its case: uuids, a kind, a decision and a score the service made as they are; the ref and the codes escaped. */
function alertTail(alert: AlertRow): string {
  return (
    `\t${alert.customer_id}\t${alert.target}\t${alert.record_id}\t${alert.record_ref === null ? '\\N' : copyText(alert.record_ref)}\t${alert.log_id}\t` +
    `${alert.kind}\t${alert.score}\t${alert.decision}\t${copyText(arrayLiteral(alert.rule_codes))}\n`
  );
}

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
      customer_is_new: record.customerIsNew === true,
      log_id: record.logId,
      kind,
      score: record.score,
      decision: record.decision,
      rule_codes: record.ruleCodes,
    });
  }
  if (alerts.length === 0) return 0;
  if (alerts.length <= COPY_FROM_ALERTS) {
    const notified = await onConnection(trx, (connection) =>
      runStatement<InsertedNotification>(connection, { ...RAISE_AND_NOTIFY, values: [JSON.stringify(alerts), ...CASE_ALERT_NOTIFICATION_VALUES] }),
    );
    await announceCaseAlerts(trx, notified.rows);
  } else {
    await copyAlerts(trx, alerts);
    await notifyCaseAlerts(trx, [...new Set(alerts.map((alert) => alert.customer_id))]);
  }
  return alerts.length;
}

async function copyAlerts(trx: Knex.Transaction, alerts: AlertRow[]): Promise<void> {
  type Case = { id: string; customer_id: string; priority: number; alert_count: number; is_new: boolean };
  const cases = new Map<string, Case>();
  for (const alert of alerts) {
    const open = cases.get(alert.customer_id);
    if (!open) cases.set(alert.customer_id, { id: timeOrderedId(), customer_id: alert.customer_id, priority: alert.score, alert_count: 1, is_new: alert.customer_is_new });
    else {
      open.priority = Math.max(open.priority, alert.score);
      open.alert_count += 1;
    }
  }
  const fresh: Case[] = [];
  const stored: Case[] = [];
  for (const open of cases.values()) (open.is_new ? fresh : stored).push(open);
  await onConnection(trx, async (connection) => {
    // Stored customers' cases are upserted (one may be open already); sent at once, and the
    // alerts' lines are built while PostgreSQL opens them.
    const opening = stored.length
      ? runStatement<{ id: string; customer_id: string }>(connection, { text: OPEN_CASES, values: [JSON.stringify(stored)] })
      : Promise.resolve({ rows: [] });
    opening.catch(() => {});
    // Time-ordered ids append to the alerts' primary key (src/ids.ts).
    const ids = alerts.map(() => timeOrderedId());
    const tails = alerts.map(alertTail);
    const caseOf = new Map((await opening).rows.map((row) => [row.customer_id, row.id]));
    if (fresh.length) {
      // Ordered by customer like the upsert's, though no other batch can touch a new customer's case.
      fresh.sort((a, b) => (a.customer_id < b.customer_id ? -1 : a.customer_id > b.customer_id ? 1 : 0));
      let lines = '';
      for (const open of fresh) {
        lines += `${open.id}\t${open.customer_id}\t${open.priority}\t${open.alert_count}\n`;
        caseOf.set(open.customer_id, open.id);
      }
      await copyIn(connection, CASE_COPY, [lines]);
    }
    let text = '';
    alerts.forEach((alert, index) => (text += `${ids[index]}\t${caseOf.get(alert.customer_id)}${tails[index]}`));
    await copyIn(connection, ALERT_COPY, [text]);
  });
}

export function alertSettings(config: Config): AlertSettings {
  return { sanctionThreshold: config.thresholds.review };
}

/**
 * The batch write with its alerts, for the upsert skeleton: `write` stores the rows and their logs
 * (one statement, or a large batch's COPYs, calling `afterRecords` between the records and their
 * logs); when any record of the batch raises an alert, the write and the alerts run in one
 * transaction, so a batch is never stored without its alerts nor alerts without it. A batch that
 * raises none pays no BEGIN/COMMIT. With `scoredDuringWrite` (rows and evaluations still being
 * filled in while `write` runs, complete once the records are stored) the transaction is always
 * opened.
 */
export async function writeWithAlerts(
  db: Knex,
  batch: { target: ScoredRecord['target']; refField: string },
  rows: ReadonlyArray<Record<string, unknown>>,
  evaluations: ReadonlyArray<EvaluationResult | null>,
  settings: AlertSettings,
  write: (db: Knex, afterRecords: (outcomes: ReadonlyArray<{ id: string; inserted: boolean }>) => Promise<void>) => Promise<Array<{ id: string; inserted: boolean }>>,
  { scoredDuringWrite = false }: { scoredDuringWrite?: boolean } = {},
): Promise<Array<{ id: string; inserted: boolean }>> {
  const sanctionScoreOf = (row: Record<string, unknown>) => (row.sanction_score === undefined || row.sanction_score === null ? null : Number(row.sanction_score));
  const raises =
    scoredDuringWrite ||
    evaluations.some(
      (evaluation, position) => evaluation !== null && alertKind({ target: batch.target, decision: evaluation.decision, sanctionScore: sanctionScoreOf(rows[position]!) }, settings) !== null,
    );
  if (!raises) return write(db, async () => {});
  const scored = (outcomes: ReadonlyArray<{ id: string; inserted: boolean }>): ScoredRecord[] => {
    const records: ScoredRecord[] = [];
    evaluations.forEach((evaluation, position) => {
      if (!evaluation) return;
      const row = rows[position]!;
      const recordId = outcomes[position]!.id;
      records.push({
        target: batch.target,
        recordId,
        recordRef: (row[batch.refField] as string | null | undefined) ?? null,
        customerId: batch.target === 'customer' ? recordId : String(row.customer_id),
        customerIsNew: batch.target === 'customer' && outcomes[position]!.inserted,
        logId: String(row.log_id),
        score: evaluation.score,
        decision: evaluation.decision,
        ruleCodes: evaluation.matched.map((rule) => rule.code),
        sanctionScore: sanctionScoreOf(row),
      });
    });
    return records;
  };
  return db.transaction(async (trx) => {
    // A large batch's write raises them once its records are stored, before it copies their logs
    // (it builds the logs while PostgreSQL opens the cases); a small one's write does not.
    let raised = false;
    const outcomes = await write(trx, async (stored) => {
      raised = true;
      await raiseAlerts(trx, scored(stored), settings);
    });
    if (!raised) await raiseAlerts(trx, scored(outcomes), settings);
    return outcomes;
  });
}
