import { timeOrderedId } from '../../ids.ts';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { wholeTurn } from '../../turns.ts';
import type { Context } from 'koa';
import type { Actor } from '../../actor.ts';
import type { AppContext } from '../../context.ts';
import { retryOnConflict } from '../../db/knex.ts';
import { BadRequestError, PayloadTooLargeError } from '../../http/errors.ts';
import { readJsonBody } from '../../http/json-body.ts';
import { isStorableText } from '../../validation/storable.ts';
import type { EvaluationInput } from '../rules/definitions.ts';
import { ExecutionLogWriter, ruleScorer, scoreRecords, type Evaluation, type ExecutionLogEntry } from '../rules/engine.ts';
import { storeRuleVersionSets } from '../rules/version-sets.ts';
import { DecisionContextWriter } from '../rules/evaluate.ts';
import { alertSettings, writeWithAlerts } from '../cases/alerts.ts';
import { shapeOf, validateRecord, type FieldTable, type RecordShape } from './fields.ts';
import { SKIPPED_DECISION, SKIPPED_SCORE, type Action } from './results.ts';
import { COPY_FROM_LOGS, keyOrder, RowsMade, upsertRowsWithLogs, type LogSource } from './sql.ts';
import type { ColumnTypes } from '../../db/copy.ts';
import type { BatchTrace } from './trace.ts';

export const MAX_RECORDS_PER_REQUEST = 1000;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * Reads an upsert body: one object or an array of 1 to 1000 objects. The request-level errors of
 * the spec, in the order a caller would fix them.
 */
export async function readUpsertBatch(ctx: Context, limitBytes: number): Promise<Record<string, unknown>[]> {
  const body = await readJsonBody(ctx, limitBytes);
  if (Array.isArray(body)) {
    if (body.length === 0) throw new BadRequestError('Payload contains no records.', 'no_records');
    if (body.length > MAX_RECORDS_PER_REQUEST) {
      throw new PayloadTooLargeError(
        `Payload contains ${body.length} records; at most ${MAX_RECORDS_PER_REQUEST} are accepted per request.`,
        'too_many_records',
      );
    }
    body.forEach((element, index) => {
      if (element === null || typeof element !== 'object' || Array.isArray(element)) {
        throw new BadRequestError(`Record at index ${index} is not a JSON object (received ${describe(element)}).`, 'record_not_object', {
          index,
          received: describe(element),
        });
      }
    });
    return body as Record<string, unknown>[];
  }
  if (body !== null && typeof body === 'object') return [body as Record<string, unknown>];
  throw new BadRequestError(`A JSON object (or an array of objects) is required; received ${describe(body)}.`, 'object_required');
}

/**
 * A ref as validation will read it, when it can be valid: text trimmed, a number as its text. Text
 * PostgreSQL cannot take (NUL) fails validation anyway and must not reach the prefetch's query.
 */
export function sentText(value: unknown): string | null {
  if (typeof value === 'string') return isStorableText(value) ? value.trim() : null;
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : null;
}

/**
 * For refs repeated within one batch: the batch index of each ref's last occurrence, the one
 * stored (every earlier occurrence is written over by it).
 */
export function lastOccurrence(items: ReadonlyArray<{ index: number; ref: string | null }>): Map<string, number> {
  const last = new Map<string, number>();
  for (const item of items) if (item.ref !== null) last.set(item.ref, item.index);
  return last;
}

/**
 * Every occurrence of a ref repeated in one batch reports the stored (last) record, as if the
 * occurrences had been sent one after another: only the first can be 'created'.
 */
export function reportRepeatedRefs<R extends { action: string; warnings: string[] }>(
  items: ReadonlyArray<{ index: number; ref: string | null; warnings: string[] }>,
  lastIndex: Map<string, number>,
  results: R[],
  refField: string,
): void {
  const groups = new Map<string, Array<{ index: number; warnings: string[] }>>();
  for (const item of items) if (item.ref) groups.set(item.ref, [...(groups.get(item.ref) ?? []), item]);
  for (const [ref, occurrences] of groups) {
    if (occurrences.length < 2) continue;
    const final = results[lastIndex.get(ref)!]!;
    occurrences.forEach(({ index, warnings }, occurrence) => {
      if (occurrence === occurrences.length - 1) return;
      results[index] = {
        ...final,
        action: occurrence === 0 && final.action === 'created' ? 'created' : 'updated',
        warnings: [...warnings, `${refField}: repeated later in this batch; the later record was stored.`],
      };
    });
    if (final.action === 'created') results[lastIndex.get(ref)!] = { ...final, action: 'updated' };
  }
}

/** Batches above this many records give the event loop a turn between phases and chunks. */
const RECORDS_PER_TURN = 250;

/** A record that passed validation. */
export interface ValidRecord {
  index: number;
  /** The normalized dedup key (customer_ref, transaction_ref); null for an event sent without one. */
  ref: string | null;
  values: Record<string, unknown>;
  extras: Record<string, unknown>;
  /** The record as sent, stored as `raw`. */
  raw: Record<string, unknown>;
  warnings: string[];
}

/**
 * A skipped record's result: the spec's shown case is score 100 and REJECT, with the ref as sent
 * (text) and the record type's own fields (`extra`) before the warnings and the error.
 */
export function skippedResult<Field extends string, Extra extends object>(
  refField: Field,
  ref: unknown,
  extra: Extra,
  warnings: string[],
  error: string,
): Record<Field, string | null> & { id: null; action: Action; score: number; decision: string } & Extra & { warnings: string[]; error: string } {
  return {
    // Only scalars are echoed: String() of an object with its own toString (sent as JSON) throws.
    [refField]: typeof ref === 'string' ? ref : typeof ref === 'number' || typeof ref === 'boolean' ? String(ref) : null,
    id: null,
    action: 'skipped' as Action,
    score: SKIPPED_SCORE,
    decision: SKIPPED_DECISION,
    ...extra,
    warnings,
    error,
  } as Record<Field, string | null> & { id: null; action: Action; score: number; decision: string } & Extra & { warnings: string[]; error: string };
}

/** What one record type adds to the batch skeleton (runBatch). */
export interface BatchPlan<Item extends ValidRecord, Result extends { action: string; warnings: string[] }> {
  fields: FieldTable;
  refField: 'customer_ref' | 'transaction_ref';
  table: string;
  /** Storage columns of a row (the field table's and the bookkeeping ones). */
  columns: ColumnTypes;
  target: EvaluationInput['target'];
  skipped(ref: unknown, warnings: string[], error: string): Result;
  /** Starts, from the records as sent, the reads the batch will need, so they run while the records are validated. */
  prefetch?(inputs: Record<string, unknown>[], trace?: BatchTrace): void;
  /** Each valid record becomes an item to store, or the text of why it is skipped. May read the database. */
  accept(valid: ValidRecord[], trace?: BatchTrace): Promise<Array<Item | string>>;
  /**
   * The id the item's record is stored under when the batch's reads found it stored already; given
   * by a plan whose reads look for every record of the batch. A large batch's logs name their
   * records by it before the upsert answers, and a batch where it finds no record stored is copied
   * straight into the table (records/sql.ts); a wrong or missing guess costs a correction or the
   * upsert after all, never a wrong log or a lost record.
   */
  storedId?(item: Item): string | undefined;
  /**
   * The rule input of each item to store, or null for one stored without scoring. A plan whose
   * records are scored each on its own (no record's input depends on another's) may report
   * progress through `ready`: `ready(count, inputs)` once the first `count` inputs are final. The
   * batch then writes each record as soon as it is scored (scoredDuringWrite), with `stored` in
   * the order the write locks the refs (records/sql.ts keyOrder), so the first ready are the first sent.
   */
  ruleInputs(stored: Item[], trace?: BatchTrace, ready?: (count: number, inputs: ReadonlyArray<EvaluationInput | null>) => void): Promise<Array<EvaluationInput | null>>;
  /** Set by a plan that reports progress through ruleInputs' `ready` (see there). */
  scoredDuringWrite?: boolean;
  /**
   * The row to store: the item's values completed in place with the storage columns (copying 40
   * columns per record cost more than serialising them; the values are not read once the batch is
   * scored). id, log_id, created_by and updated_by are added.
   */
  row(item: Item, evaluation: Evaluation | null): Record<string, unknown>;
  result(item: Item, stored: { id: string; inserted: boolean }, row: Record<string, unknown>, evaluation: Evaluation | null): Result;
}

/**
 * The one batch skeleton of the upsert endpoints: validate every record (a bad one is skipped,
 * the others go on), let the record type accept or skip each, store a ref repeated in the batch
 * once (its last occurrence), score, then write every row, its execution log and its alert in
 * one transaction (records/sql.ts) and report one result per record in the order sent.
 */
export async function runBatch<Item extends ValidRecord, Result extends { action: string; warnings: string[] }>(
  app: AppContext,
  plan: BatchPlan<Item, Result>,
  inputs: Record<string, unknown>[],
  actor: Actor,
  trace?: BatchTrace,
): Promise<Result[]> {
  const large = inputs.length > RECORDS_PER_TURN;
  plan.prefetch?.(inputs, trace);
  trace?.mark('reads sent');
  const results = new Array<Result>(inputs.length);
  const valid: ValidRecord[] = [];
  const shape = rowShape(plan.fields, plan.columns);
  for (let index = 0; index < inputs.length; index++) {
    if (large && index > 0 && index % RECORDS_PER_TURN === 0) await nextTurn();
    const input = inputs[index]!;
    const record = validateRecord(plan.fields, input, shape);
    if (!record.ok) results[index] = plan.skipped(input[plan.refField], [], record.error);
    else valid.push({ index, ref: record.values[plan.refField] as string | null, values: record.values, extras: record.extras, raw: input, warnings: record.warnings });
  }
  trace?.mark('validate');

  const accepted: Item[] = [];
  const decisions = await plan.accept(valid, trace);
  decisions.forEach((decision, position) => {
    if (typeof decision !== 'string') accepted.push(decision);
    else results[valid[position]!.index] = plan.skipped(valid[position]!.ref, valid[position]!.warnings, decision);
  });
  const lastIndex = lastOccurrence(accepted);
  const stored = accepted.filter((item) => item.ref === null || lastIndex.get(item.ref) === item.index);
  if (large && plan.scoredDuringWrite && stored.length > COPY_FROM_LOGS && stored.every((item) => item.ref !== null)) {
    const written = await scoreWhileWriting(app, plan, keyOrder(stored.map((item) => item.ref!)).map((position) => stored[position]!), actor, trace);
    return report(plan, written, accepted, lastIndex, results, trace);
  }

  // The accepting above and the rule inputs below (a financial batch's aggregates) are each
  // tens of milliseconds of one uninterrupted stretch on a slow core: a whole turn between them.
  if (large) await wholeTurn();
  const ruleInputs = await plan.ruleInputs(stored, trace);
  if (large) await nextTurn();
  const scoredInputs = ruleInputs.filter((input): input is EvaluationInput => input !== null);
  const scored = await scoreRecords(app, scoredInputs);
  trace?.mark('rules');
  if (large) await nextTurn();

  const by = `${actor.type}:${actor.id}`;
  const evaluations = new Array<Evaluation | null>(stored.length).fill(null);
  const rows = new Array<Record<string, unknown>>(stored.length);
  // The positions (in `stored`) of the scored records, one execution log each.
  const logged: number[] = [];
  let next = 0;
  stored.forEach((item, position) => {
    const evaluation = ruleInputs[position] ? scored[next++]! : null;
    evaluations[position] = evaluation;
    rows[position] = completeRow(plan, item, evaluation, by);
    if (evaluation) logged.push(position);
  });
  const allNew = noneStored(plan, stored);
  const logs = new BatchLogs(plan, by, stored, rows, evaluations, () => ruleInputs, logged);
  // The rule-version sets the logs will name, stored first (usually known already: no statement).
  const storedSets = await storeRuleVersionSets(app.db, scored.map((evaluation) => evaluation.rule_versions));
  if (storedSets && trace) trace.roundTrips += 1;
  trace?.mark('rows');

  // Alerts for REVIEW/REJECT results and sanctions hits are raised in the batch's own transaction.
  const outcomes = await retryOnConflict(() =>
    writeWithAlerts(app.db, plan, rows, evaluations, alertSettings(app.config), (db, afterRecords) => upsertRowsWithLogs(db, plan.table, plan.refField, plan.columns, rows, logs, trace, { allNew, afterRecords })),
  );
  // BEGIN and COMMIT for a large batch (alerts, when raised, add their statement).
  if (trace && logs.count > COPY_FROM_LOGS) trace.roundTrips += 2;
  trace?.mark('alerts and commit');

  const written = stored.map((item, position) => ({ item, outcome: outcomes[position]!, row: rows[position]!, evaluation: evaluations[position]! }));
  return report(plan, written, accepted, lastIndex, results, trace);
}

const rowShapes = new WeakMap<ColumnTypes, RecordShape>();

/** The shape a record's values start as (see shapeOf): its fields, then room for the row's other columns. */
function rowShape(fields: FieldTable, columns: ColumnTypes): RecordShape {
  let shape = rowShapes.get(columns);
  if (!shape) rowShapes.set(columns, (shape = shapeOf(fields, Object.keys(columns))));
  return shape;
}

/** An item's row to store: the plan's row with its id (the stored one when the batch's reads found it), its log's id and who wrote it. */
function completeRow<Item extends ValidRecord, Result extends { action: string; warnings: string[] }>(
  plan: BatchPlan<Item, Result>,
  item: Item,
  evaluation: Evaluation | null,
  by: string,
): Record<string, unknown> {
  const row = plan.row(item, evaluation);
  row.id = plan.storedId?.(item) ?? timeOrderedId();
  row.log_id = evaluation ? timeOrderedId() : null;
  row.created_by = by;
  row.updated_by = by;
  return row;
}

/** Whether the batch's reads found none of its records stored (only a plan that looks can say so). */
function noneStored<Item extends ValidRecord, Result extends { action: string; warnings: string[] }>(plan: BatchPlan<Item, Result>, stored: Item[]): boolean {
  return plan.storedId !== undefined && stored.every((item) => plan.storedId!(item) === undefined);
}

/**
 * The execution logs of the records at `logged` (positions in `stored`), built when the write asks
 * for them: the decision contexts are the largest part of the write, and a large batch builds them
 * while its records are being written.
 *
 * A class, not an object literal with a `count` getter: V8 gives each such literal its own hidden
 * class, kept in the old generation with the getter's closure, so every young object of the batch
 * the closure reached (rows, inputs, the request around them) outlived each young-generation
 * collection until the next full one. Measured on a one-record request: 4.3 KB a request survived a
 * scavenge from this alone (README design notes, "A request's garbage dies young").
 */
class BatchLogs<Item extends ValidRecord, Result extends { action: string; warnings: string[] }> implements LogSource {
  private readonly writer: ExecutionLogWriter;

  constructor(
    plan: BatchPlan<Item, Result>,
    by: string,
    private readonly stored: Item[],
    private readonly rows: Array<Record<string, unknown>>,
    private readonly evaluations: Array<Evaluation | null>,
    private readonly ruleInputs: () => ReadonlyArray<EvaluationInput | null>,
    private readonly logged: number[],
  ) {
    const contexts = new DecisionContextWriter();
    this.writer = new ExecutionLogWriter(plan.target, by, (input) => contexts.json(input));
  }

  get count(): number {
    return this.logged.length;
  }

  build(start: number, end: number): ExecutionLogEntry[] {
    const inputs = this.ruleInputs();
    return this.logged
      .slice(start, end)
      .map((position) => this.writer.entry(this.rows[position]!.log_id as string, this.stored[position]!.ref, this.evaluations[position]!, inputs[position]!));
  }
}

/**
 * The rest of runBatch for a plan that scores its records as they become ready (scoredDuringWrite):
 * the write starts at once, each record's row is made as soon as its rule input is ready, and the
 * COPY takes the rows as they are made, so PostgreSQL stores the first records while the rest are
 * still being screened. `stored` is in key order. Returns the outcomes with each item's row and evaluation.
 */
async function scoreWhileWriting<Item extends ValidRecord, Result extends { action: string; warnings: string[] }>(
  app: AppContext,
  plan: BatchPlan<Item, Result>,
  stored: Item[],
  actor: Actor,
  trace?: BatchTrace,
): Promise<Array<{ item: Item; outcome: { id: string; inserted: boolean }; row: Record<string, unknown>; evaluation: Evaluation | null }>> {
  const by = `${actor.type}:${actor.id}`;
  const score = await ruleScorer(app);
  const evaluations = new Array<Evaluation | null>(stored.length).fill(null);
  const rows = new Array<Record<string, unknown>>(stored.length);
  const made = new RowsMade();
  let ruleInputs: ReadonlyArray<EvaluationInput | null> = [];
  const logged: number[] = [];
  const logs = new BatchLogs(plan, by, stored, rows, evaluations, () => ruleInputs, logged);
  // Rows are made one stretch at a time, in order: each stretch scored, its rows made and its
  // rule-version sets stored (before any log names them) before the next.
  let making = Promise.resolve();
  const ready = (count: number, inputs: ReadonlyArray<EvaluationInput | null>) => {
    ruleInputs = inputs;
    making = making.then(async () => {
      const from = made.count;
      if (count <= from) return;
      const scoredPositions: number[] = [];
      for (let position = from; position < count; position++) if (inputs[position]) scoredPositions.push(position);
      const scored = score(scoredPositions.map((position) => inputs[position]!));
      scoredPositions.forEach((position, index) => (evaluations[position] = scored[index]!));
      for (let position = from; position < count; position++) {
        rows[position] = completeRow(plan, stored[position]!, evaluations[position]!, by);
        if (evaluations[position]) logged.push(position);
      }
      await storeRuleVersionSets(app.db, scored.map((evaluation) => evaluation.rule_versions));
      made.advance(count);
    });
    making.catch((error) => made.fail(error));
  };
  const scoring = plan.ruleInputs(stored, trace, ready).then((inputs) => {
    ready(stored.length, inputs);
    return making;
  });
  // Whatever stops the scoring stops the write (its COPY waits for rows that will not come).
  scoring.catch((error) => made.fail(error));
  const allNew = noneStored(plan, stored);
  const keys = stored.map((item) => item.ref!);
  const writing = retryOnConflict(() =>
    writeWithAlerts(
      app.db,
      plan,
      rows,
      evaluations,
      alertSettings(app.config),
      (db, afterRecords) => upsertRowsWithLogs(db, plan.table, plan.refField, plan.columns, rows, logs, trace, { allNew, made, keys, afterRecords }),
      { scoredDuringWrite: true },
    ),
  );
  // Both settle before the batch answers, so a failure answers only once the write is rolled back.
  const [scored, written] = await Promise.allSettled([scoring.then(() => trace?.mark('rules and rows (after the last record was screened)')), writing]);
  if (scored.status === 'rejected') throw scored.reason;
  if (written.status === 'rejected') throw written.reason;
  const outcomes = written.value;
  if (trace) trace.roundTrips += 2;
  trace?.mark('alerts and commit');
  return stored.map((item, position) => ({ item, outcome: outcomes[position]!, row: rows[position]!, evaluation: evaluations[position]! }));
}

/** Each stored record's result, in the order sent; an earlier occurrence of a repeated ref reports the stored one (reportRepeatedRefs). */
function report<Item extends ValidRecord, Result extends { action: string; warnings: string[] }>(
  plan: BatchPlan<Item, Result>,
  written: Array<{ item: Item; outcome: { id: string; inserted: boolean }; row: Record<string, unknown>; evaluation: Evaluation | null }>,
  accepted: Item[],
  lastIndex: Map<string, number>,
  results: Result[],
  trace?: BatchTrace,
): Result[] {
  for (const { item, outcome, row, evaluation } of written) results[item.index] = plan.result(item, outcome, row, evaluation);
  reportRepeatedRefs(accepted, lastIndex, results, plan.refField);
  trace?.mark('results');
  return results;
}
