import type { AppContext } from '../../context.ts';
import { queryPrepared, retryOnConflict } from '../../db/knex.ts';
import type { Actor } from '../../actor.ts';
import { runBatch, sentText, skippedResult, type BatchPlan, type ValidRecord } from '../records/batch.ts';
import type { BatchTrace } from '../records/trace.ts';
import { ownCopy, withoutNulls, type Action } from '../records/results.ts';
import { columnsOf, COPY_FROM_LOGS } from '../records/sql.ts';
import { JsonText, type ColumnTypes } from '../../db/copy.ts';
import type { CustomerScreening, ScreeningSubject } from '../screening/service.ts';
import { dismissedMatches, sanctionSummary, upsertHits, withoutDismissed, type FingerprintSubject, type StoredMatches } from '../screening/hits.ts';
import type { ScreeningMatch } from '../screening/sanctions/matcher.ts';
import type { EvaluationInput } from '../rules/definitions.ts';
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

interface Accepted extends ValidRecord {
  ref: string;
  /** Null for a migration record, which is not screened. */
  screening: CustomerScreening | null;
}

/** The ids of stored customers by ref. */
const STORED_IDS = 'select customer_ref, id from customers where customer_ref = any($1::text[])';

/** The storage columns, built once (see storageColumns in the transaction module). */
const COLUMNS: ColumnTypes = { ...columnsOf(customerFields), ...STORAGE_COLUMNS };

/** A customer's rule input: the record as sent (extras included) and the customer with its screening scores. */
function ruleInput(item: Accepted): EvaluationInput {
  // What withoutNulls({ ...extras, ...values }) gives (extras are the fields outside the
  // table, so the two share no name), without the intermediate copies.
  const record = withoutNulls(item.extras);
  for (const name in item.values) {
    const value = item.values[name];
    if (value !== null && value !== undefined) record[name] = value;
  }
  // The record with the screening scores over it (an extra of the same name included).
  const customer = ownCopy(record);
  const scores: Record<string, unknown> = {
    sanction_score: item.screening?.sanction_score,
    sanction_topic: item.screening?.sanction_topic ?? [],
    ip_address_score: item.screening?.ip_address_score,
    email_risk_score: item.screening?.email_risk_score,
    ip_country: item.screening?.ip_country,
  };
  for (const name in scores) {
    const value = scores[name];
    if (value !== null && value !== undefined) customer[name] = value;
    else delete customer[name];
  }
  return { target: 'customer', record, customer, event: null, aggregates: {} };
}

/** Whether a screening returned matches (the workers write none as an empty JSON array). */
function hasMatches(screening: CustomerScreening | null | undefined): boolean {
  return screening !== null && screening !== undefined && screening.sanction_matches.text !== '[]';
}

/**
 * Drops from the screenings (by position in `subjects`) the matches an officer marked false
 * positive whose fingerprint still holds, and recomputes their sanction_score and sanction_topic
 * (screening/hits.ts). Only screenings with matches of customers that may be stored are looked
 * at, in one statement; a batch with none pays nothing. Returns whether it looked.
 */
async function dropDismissed(app: AppContext, subjects: Accepted[], screenings: CustomerScreening[], mayBeStored: (item: Accepted) => boolean): Promise<boolean> {
  const positions: number[] = [];
  screenings.forEach((screening, position) => {
    if (hasMatches(screening) && mayBeStored(subjects[position]!)) positions.push(position);
  });
  if (!positions.length) return false;
  const matches = new Map(positions.map((position) => [position, JSON.parse(screenings[position]!.sanction_matches.text) as ScreeningMatch[]]));
  const dismissed = await dismissedMatches(
    app.db,
    positions.map((position) => ({ ref: subjects[position]!.ref, subject: subjects[position]!.values as unknown as FingerprintSubject, matches: matches.get(position)! })),
  );
  for (const position of positions) {
    const keys = dismissed.get(subjects[position]!.ref);
    if (!keys) continue;
    const kept = withoutDismissed(matches.get(position)!, keys);
    const { score, topics } = sanctionSummary(kept);
    screenings[position] = { ...screenings[position]!, sanction_score: score, sanction_topic: topics, sanction_matches: new JsonText(JSON.stringify(kept)) };
  }
  return true;
}

/**
 * The customer batch plan. `matched` collects the stored customers whose screening kept matches,
 * for their screening hits, written once the batch is stored (upsertCustomers).
 */
function customerPlan(app: AppContext, matched: StoredMatches[]): BatchPlan<Accepted, CustomerResult> {
  // The ids of the batch's customers stored already, read while the records are validated (null: not read, or the read failed).
  let prefetched: Promise<Map<string, string> | null> = Promise.resolve(null);
  let storedIds = new Map<string, string>();
  // Whether storedIds holds every stored customer of the batch: then a customer it lacks is new, and has no hit to look at.
  let storedKnown = false;
  const mayBeStored = (item: Accepted) => !storedKnown || storedIds.has(item.ref);
  return {
    fields: customerFields,
    refField: 'customer_ref',
    table: 'customers',
    columns: COLUMNS,
    target: 'customer',
    skipped: (ref, warnings, error) =>
      skippedResult('customer_ref', ref, { sanction_score: null, sanction_topic: [], ip_address_score: null, email_risk_score: null }, warnings, error),

    prefetch(inputs, trace) {
      // Only a large batch's logs use the ids (records/sql.ts); a small one learns them from its one statement.
      if (inputs.length <= COPY_FROM_LOGS) return;
      // Refs as validation will read them (trimmed text, numbers as text); one that fails validation is not stored anyway.
      const refs = inputs.flatMap((input) => sentText(input.customer_ref) ?? []);
      // Only a guess: a failed read leaves the logs to be corrected after the upsert.
      prefetched = queryPrepared<{ customer_ref: string; id: string }>(app.db, 'warden_customer_ids', STORED_IDS, [refs]).then(
        (rows) => new Map(rows.map((row) => [row.customer_ref, row.id])),
        () => null,
      );
      if (trace) trace.roundTrips += 1;
    },

    async accept(valid) {
      const read = await prefetched;
      storedIds = read ?? new Map();
      storedKnown = read !== null;
      return valid.map((record) => {
        if (record.values.migration) record.warnings.push(MIGRATION_WARNING);
        return Object.assign(record, { ref: record.ref!, screening: null });
      });
    },

    storedId: (item) => storedIds.get(item.ref),

    // Customers are screened before their rules run, so a customer rule can use the scores. Each
    // customer is scored on its own: the batch writes each as soon as it is screened (`ready`).
    scoredDuringWrite: true,
    async ruleInputs(stored, trace, ready) {
      const screened = stored.flatMap((item, position) => (item.values.migration ? [] : [position]));
      const inputs = new Array<EvaluationInput>(stored.length);
      let assigned = 0;
      let count = 0;
      // The first screened customer with matches that may be stored: from it on, the screenings
      // wait for the batch's check of dismissed matches (dropDismissed) before their inputs are made.
      let held = screened.length;
      let scanned = 0;
      const releasable = (screenedCount: number, screenings: readonly CustomerScreening[]) => {
        for (; scanned < screenedCount && held === screened.length; scanned++) {
          if (hasMatches(screenings[scanned]) && mayBeStored(stored[screened[scanned]!]!)) held = scanned;
        }
        return Math.min(screenedCount, held);
      };
      // Hands the first `screenedCount` screenings to their items, then makes the inputs of every
      // item before the first one still being screened.
      const advance = (screenedCount: number, screenings: readonly CustomerScreening[]) => {
        for (; assigned < screenedCount; assigned++) stored[screened[assigned]!]!.screening = screenings[assigned]!;
        const upTo = screenedCount < screened.length ? screened[screenedCount]! : stored.length;
        for (; count < upTo; count++) inputs[count] = ruleInput(stored[count]!);
      };
      const screenings = await app.screening.screen(
        screened.map((position) => stored[position]!.values as unknown as ScreeningSubject),
        ready &&
          ((screenedCount, done) => {
            advance(releasable(screenedCount, done), done);
            ready(count, inputs);
          }),
      );
      trace?.mark('screening');
      // (A batch without a match goes past with one look at each screening.)
      if (screenings.some(hasMatches) && (await dropDismissed(app, screened.map((position) => stored[position]!), screenings, mayBeStored))) {
        if (trace) trace.roundTrips += 1;
        trace?.mark('dismissed matches');
      }
      advance(screened.length, screenings);
      return inputs;
    },

    row: (item, evaluation) =>
      Object.assign(item.values, {
        raw: item.raw,
      score: evaluation!.score,
      decision: evaluation!.decision,
        sanction_score: item.screening?.sanction_score ?? null,
        sanction_topic: item.screening?.sanction_topic ?? [],
        sanction_matches: item.screening?.sanction_matches ?? [],
        ip_address_score: item.screening?.ip_address_score ?? null,
        ip_reasons: item.screening?.ip_reasons ?? [],
        email_risk_score: item.screening?.email_risk_score ?? null,
        email_reasons: item.screening?.email_reasons ?? [],
      }),

    result: (item, stored, row) => {
      if (hasMatches(item.screening)) matched.push({ customerId: stored.id, matches: item.screening!.sanction_matches.text });
      return {
        customer_ref: item.ref,
        id: stored.id,
        action: stored.inserted ? 'created' : 'updated',
        score: row.score as number,
        decision: row.decision as string,
        sanction_score: row.sanction_score as number | null,
        sanction_topic: row.sanction_topic as string[],
        ip_address_score: row.ip_address_score as number | null,
        email_risk_score: row.email_risk_score as number | null,
        warnings: item.warnings,
      };
    },
  };
}

/**
 * Validates, screens (sanctions, IP, email; not for migration records), scores with the
 * customer rules and stores a batch of customers in one transaction; then the screening hits of
 * the customers whose screening kept matches, in one statement (none for a batch without a match),
 * or, for more than HITS_WRITTEN_INLINE of them, by a job.
 */
/** Matched customers of a batch whose hits are written before it answers; a larger batch queues them. */
export const HITS_WRITTEN_INLINE = 32;

export async function upsertCustomers(app: AppContext, inputs: Record<string, unknown>[], actor: Actor, trace?: BatchTrace): Promise<CustomerResult[]> {
  const matched: StoredMatches[] = [];
  const results = await runBatch(app, customerPlan(app, matched), inputs, actor, trace);
  if (matched.length > HITS_WRITTEN_INLINE) {
    // A large batch's hits (up to its whole size in matches, 45 ms for 1000 customers drawn from the
    // list, a quarter of the batch) are written by a job moments later; the batch pays its enqueueing.
    await app.db.transaction((trx) => app.jobs.writeScreeningHits(trx, matched.map((customer) => customer.customerId)));
    if (trace) trace.roundTrips += 4;
    trace?.mark('screening hits (queued)');
  } else if (matched.length) {
    await retryOnConflict(() => upsertHits(app.db, matched));
    if (trace) trace.roundTrips += 1;
    trace?.mark('screening hits');
  }
  return results;
}
