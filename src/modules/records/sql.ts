import type { Knex } from 'knex';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { copyIn, copyText, jsonCopyText, rowEncoder, type ColumnTypes } from '../../db/copy.ts';
import { onConnection, runStatement } from '../../db/knex.ts';
import type { ExecutionLogEntry } from '../rules/engine.ts';
import type { BatchTrace } from './trace.ts';
import type { FieldTable, FieldType } from './fields.ts';


const SQL_TYPES: Record<FieldType['kind'], string> = {
  text: 'text',
  choice: 'text',
  email: 'text',
  ip: 'text',
  currency: 'text',
  country_alpha3: 'text',
  number_choice: 'smallint',
  date: 'date',
  datetime: 'timestamptz',
  amount: 'numeric',
  non_negative_decimal: 'numeric',
  boolean: 'boolean',
  object: 'jsonb',
  array: 'jsonb',
};

/** The storage column of every field of a table, typed from its field kind. */
export function columnsOf(table: FieldTable): ColumnTypes {
  return Object.fromEntries(table.map((spec) => [spec.name, SQL_TYPES[spec.type.kind]]));
}

function identifier(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`bad identifier ${name}`);
  return `"${name}"`;
}

interface PreparedUpsert {
  name: string;
  /** The upsert with the execution logs joined in as a second CTE (small batches). */
  withLogs: string;
  /** Creates the staging table (a temporary table shaped like the table, emptied at commit) on a connection where it does not exist yet, and empties it. */
  createStaging: string;
  /** COPY of the rows into the staging table. */
  copy: string;
  /** COPY of rows known to be new straight into the table. */
  copyNew: string;
  /** The upsert of the staged rows, in key order. */
  fromStaging: string;
}

const preparedUpserts = new Map<string, PreparedUpsert>();

const LOG_COLUMNS = 'id, target, record_ref, score, decision, matched_rules, rule_version_set, rule_errors, data_context, duration_us, actor';
const LOG_RECORDSET =
  'id uuid, target text, record_ref text, score numeric, decision text, matched_rules json, rule_version_set text, rule_errors json, data_context json, duration_us integer, actor text';
const LOG_COPY = `copy execution_logs (${LOG_COLUMNS}, record_id) from stdin`;

/**
 * The statements of upsertRowsWithLogs for one table shape. Their text depends only on the table
 * and its columns, so they are named prepared statements: each connection plans them once, not
 * per batch (planning was 1-3 ms of a one-record request).
 */
function upsertStatements(table: string, conflictColumn: string, columns: ColumnTypes, keep: string[]): PreparedUpsert {
  const key = JSON.stringify([table, conflictColumn, columns, keep]);
  const known = preparedUpserts.get(key);
  if (known) return known;
  const names = Object.keys(columns);
  const recordset = names.map((name) => `${identifier(name)} ${columns[name]}`).join(', ');
  const list = names.map(identifier).join(', ');
  const updates = names
    .filter((name) => !keep.includes(name) && name !== conflictColumn)
    .map((name) => `${identifier(name)} = excluded.${identifier(name)}`)
    .concat(['"updated_at" = now()'])
    .join(', ');
  // Both paths upsert in key order, byte-wise (collation "C", whatever the database's collation),
  // so concurrent batches sharing keys lock them in the same order and cannot deadlock.
  const keyOrder = (source: string) => `order by coalesce(${source}${identifier(conflictColumn)}::text, ${source}id::text) collate "C"`;
  const returning = `returning id, log_id, coalesce(${identifier(conflictColumn)}::text, id::text) as key, (xmax = 0) as inserted`;
  const conflict = `on conflict (${identifier(conflictColumn)}) do update set ${updates}`;
  // json, not jsonb, for the parameters: jsonb would parse every document of the batch into its
  // binary form first; json_to_recordset parses only the columns typed jsonb in the table.
  const upsert = `insert into ${identifier(table)} (${list}) select ${list} from json_to_recordset($1::json) as r(${recordset}) ${keyOrder('r.')} ${conflict} ${returning}`;
  const staging = `warden_staged_${table}`;
  const prepared = {
    name: `warden_upsert_${preparedUpserts.size}_${table}`,
    withLogs: `with upserted as (${upsert}), logged as (
       insert into execution_logs (${LOG_COLUMNS}, record_id) select l.*, u.id
       from json_to_recordset($2::json) as l(${LOG_RECORDSET}) join upserted u on u.log_id = l.id
     )
     select id, log_id, key, inserted from upserted`,
    // Emptied too: commit empties it, but a caller's transaction may write the table twice.
    createStaging: `create temporary table if not exists ${identifier(staging)} (like ${identifier(table)} including defaults) on commit delete rows;
       delete from ${identifier(staging)}`,
    copy: `copy ${identifier(staging)} (${list}) from stdin`,
    copyNew: `copy ${identifier(table)} (${list}) from stdin`,
    fromStaging: `insert into ${identifier(table)} (${list}) select ${list} from ${identifier(staging)} ${keyOrder('')} ${conflict} ${returning}`,
  };
  preparedUpserts.set(key, prepared);
  return prepared;
}

/** Above this many logs they go by COPY: json_to_recordset took three times as long as COPY's own parsing of 1000 logs. */
export const COPY_FROM_LOGS = 32;

/** PostgreSQL's unique_violation: a row stored already, where the writer took it for new. */
const UNIQUE_VIOLATION = '23505';

/** Rows of a large batch serialised between two turns of the event loop. */
const ROWS_PER_TURN = 250;

/** Execution logs built between two turns of the event loop, so a large batch never holds the thread for long. */
const LOGS_PER_TURN = 100;

/** The execution logs of a batch, built on demand: `build(start, end)` makes entries start..end-1 of `count`. */
export interface LogSource {
  count: number;
  build(start: number, end: number): ExecutionLogEntry[];
}

function logJson(log: ExecutionLogEntry): string {
  return (
    `{"id":"${log.id}","target":"${log.target}","record_ref":${JSON.stringify(log.recordRef)},"score":${log.score},"decision":"${log.decision}",` +
    `"matched_rules":${log.matchedRules},"rule_version_set":${log.ruleVersionSet === null ? 'null' : `"${log.ruleVersionSet}"`},"rule_errors":${log.ruleErrors},"data_context":${log.dataContext},` +
    `"duration_us":${log.durationUs},"actor":${JSON.stringify(log.actor)}}`
  );
}

/** The COPY line of a log (a set id is hex, needing no escapes). */
function logLine(log: ExecutionLogEntry, recordId: string): string {
  return (
    `${log.id}\t${log.target}\t${log.recordRef === null ? '\\N' : copyText(log.recordRef)}\t${log.score}\t${log.decision}\t` +
    `${jsonCopyText(log.matchedRules)}\t${log.ruleVersionSet ?? '\\N'}\t${jsonCopyText(log.ruleErrors)}\t${jsonCopyText(log.dataContext)}\t` +
    `${log.durationUs}\t${copyText(log.actor)}\t${recordId}\n`
  );
}

type Stored = { id: string; log_id: string | null; key: string; inserted: boolean };

/**
 * Rows that are still being made while their write starts: the first `count` (by position) are
 * made, and `reach` waits until at least so many are (and fails with whatever stopped them).
 */
export class RowsMade {
  count = 0;
  private failure: { error: unknown } | null = null;
  private waiting: Array<{ count: number; resolve: () => void; reject: (error: unknown) => void }> = [];

  reach(count: number): Promise<void> {
    if (this.failure) return Promise.reject(this.failure.error);
    if (this.count >= count) return Promise.resolve();
    return new Promise((resolve, reject) => this.waiting.push({ count, resolve, reject }));
  }

  advance(count: number): void {
    this.count = count;
    this.waiting = this.waiting.filter((waiter) => (waiter.count <= count ? (waiter.resolve(), false) : true));
  }

  fail(error: unknown): void {
    this.failure = { error };
    for (const waiter of this.waiting) waiter.reject(error);
    this.waiting = [];
  }
}

/**
 * Rows of `rows` (by position) in COPY text, up to `ROWS_PER_TURN` per chunk, with a turn of the
 * event loop between chunks; `sent` is called once the last chunk is taken. With `made`, a chunk
 * holds the rows made so far, waiting for the next when none is.
 */
async function* rowChunks(
  rows: Record<string, unknown>[],
  order: readonly number[],
  encode: (row: Record<string, unknown>) => string,
  sent: () => void,
  made?: RowsMade,
): AsyncGenerator<string> {
  for (let start = 0; start < order.length; ) {
    if (start > 0) await nextTurn();
    if (made) await made.reach(order[start]! + 1);
    let chunk = '';
    let index = start;
    for (; index < Math.min(order.length, start + ROWS_PER_TURN) && (!made || order[index]! < made.count); index++) chunk += encode(rows[order[index]!]!);
    start = index;
    yield chunk;
  }
  sent();
}

/** The positions of `keys` in byte-wise order (collate "C", as the upserts lock keys). */
export function keyOrder(keys: readonly string[]): number[] {
  const bytes = keys.map((key) => Buffer.from(key));
  return keys.map((_, index) => index).sort((a, b) => Buffer.compare(bytes[a]!, bytes[b]!));
}

/**
 * The records of a batch and their execution logs, atomically. Up to COPY_FROM_LOGS logs, in ONE
 * statement: the upsert is a data-modifying CTE and the logs join it on log_id to learn each
 * record's stored id; one statement is atomic by itself, so no BEGIN/COMMIT round trips.
 *
 * Larger batches run in one transaction (the caller's when `db` is one: further set-based inserts
 * of the batch, such as its alerts, go in the same transaction):
 * - When the caller's reads found none of the rows stored (`allNew`), the rows go by COPY straight
 *   into the table, in key order, behind a savepoint: a row stored after all (by a batch running
 *   meanwhile, or one the reads could not see) makes PostgreSQL refuse the COPY with a unique
 *   violation, and the batch goes back to the savepoint and takes the upsert below.
 * - Otherwise the rows go by COPY into a staging table and are upserted from there in one
 *   statement, in key order; the logs are built while PostgreSQL runs it.
 * Then `afterRecords` runs, when given (the batch's alerts, which need the records' ids), and the
 * logs go by COPY, each slice sent as soon as it is built, naming each record by its row's id,
 * corrected where the upsert kept another. Rows must carry `id` (the stored id when known) and
 * `log_id`; each log's id is its row's log_id. Keys are written in the same order on every path,
 * so concurrent batches sharing keys lock them in the same order and cannot deadlock; results come
 * back in the order given.
 */
export async function upsertRowsWithLogs(
  db: Knex,
  table: string,
  conflictColumn: string,
  columns: ColumnTypes,
  rows: Record<string, unknown>[],
  logs: LogSource,
  trace?: BatchTrace,
  {
    keep = ['id', 'created_by'],
    allNew = false,
    afterRecords,
    made,
    keys: givenKeys,
  }: {
    keep?: string[];
    allNew?: boolean;
    /** Run in a large batch's transaction once its records are stored, before their logs are copied (the alerts): the logs are built meanwhile. */
    afterRecords?: (outcomes: ReadonlyArray<{ id: string; inserted: boolean }>) => Promise<void>;
    /**
     * For rows still being made (filled in `rows` by position as `made` says): the write starts
     * at once and each row goes as soon as it is made. Needs `keys` (the rows' conflict keys) and
     * takes the large batch's way whatever the count.
     */
    made?: RowsMade;
    keys?: string[];
  } = {},
): Promise<Array<{ id: string; inserted: boolean }>> {
  if (rows.length === 0) return [];
  // Rows without a conflict key (non-financial events sent without a ref) are always new: known by the id made for them.
  const keyOf = (row: Record<string, unknown>) => String(row[conflictColumn] ?? row.id);
  const keys = givenKeys ?? rows.map(keyOf);
  const statements = upsertStatements(table, conflictColumn, columns, keep);

  // knex has no named statements or COPY: both run on its connection (the transaction's, inside one).
  let stored: Stored[];
  if (logs.count <= COPY_FROM_LOGS && !made) {
    stored = await onConnection(db, async (connection) => {
      const values = [JSON.stringify(rows), `[${logs.build(0, logs.count).map(logJson).join(',')}]`];
      const result = await runStatement<Stored>(connection, { name: `${statements.name}_logged`, text: statements.withLogs, values });
      return result.rows;
    });
    if (trace) trace.roundTrips += 1;
    trace?.mark('write: records and logs in one statement');
  } else {
    const write = (trx: Knex) =>
      onConnection(trx, async (connection) => {
        const encode = rowEncoder(columns);
        // The staging table takes the rows as given (its upsert locks them in key order); a COPY into
        // the table itself locks them as it goes, so it sends them in key order (keyOrder).
        const asGiven = keys.map((_, index) => index);
        // Which record each log names: read once every row is made (the logs are built after; a
        // write that failed before may leave some unmade).
        const recordOfLog = new Map<string, string>();
        const readLogIds = () => {
          for (const row of rows) if (row?.log_id) recordOfLog.set(row.log_id as string, row.id as string);
        };
        const logChunk = (start: number) => {
          let chunk = '';
          for (const log of logs.build(start, Math.min(logs.count, start + LOGS_PER_TURN))) chunk += logLine(log, recordOfLog.get(log.id)!);
          return Buffer.from(chunk);
        };
        let rowsSent!: () => void;
        const sent = new Promise<void>((resolve) => (rowsSent = resolve));
        // The records are written first: straight in when the caller's reads found none stored,
        // else (or when PostgreSQL finds one stored after all) staged and upserted.
        let how = 'new rows copied into the table';
        const copyNew = async (): Promise<Stored[] | null> => {
          await runStatement(connection, 'savepoint warden_new_rows');
          if (trace) trace.roundTrips += 2;
          try {
            await copyIn(connection, statements.copyNew, rowChunks(rows, keyOrder(keys), encode, rowsSent, made));
            return rows.map((row, index) => ({ id: row.id as string, log_id: (row.log_id as string | null) ?? null, key: keys[index]!, inserted: true }));
          } catch (error) {
            if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
            await runStatement(connection, 'rollback to savepoint warden_new_rows');
            if (trace) trace.roundTrips += 1;
            how = 'new rows refused (one was stored), so staged and upserted';
            return null;
          }
        };
        const stageAndUpsert = async (): Promise<Stored[]> => {
          if (!allNew) how = 'rows staged and upserted';
          await runStatement(connection, statements.createStaging);
          await copyIn(connection, statements.copy, rowChunks(rows, asGiven, encode, rowsSent, made));
          const upserted = await runStatement<Stored>(connection, { name: `${statements.name}_staged`, text: statements.fromStaging });
          if (trace) trace.roundTrips += 3;
          return upserted.rows;
        };
        const writing = (allNew ? copyNew() : Promise.resolve(null)).then((results) => results ?? stageAndUpsert());
        // Awaited after the logs are built; a failure must not count as unhandled meanwhile.
        writing.catch(() => {});
        // The logs are built while PostgreSQL works: from when every row is sent (before, they would
        // hold the rows back) up to when the records are stored, then while the alerts are raised
        // (afterRecords); the rest as their COPY takes them.
        const built: Buffer[] = [];
        const buildLogsWhile = async (pending: Promise<unknown>) => {
          let settled = false;
          pending.then(
            () => (settled = true),
            () => (settled = true),
          );
          for (let start = built.length * LOGS_PER_TURN; start < logs.count && !settled; start += LOGS_PER_TURN) {
            await nextTurn();
            if (!settled) built.push(logChunk(start));
          }
        };
        try {
          await Promise.race([sent, writing.catch(() => {})]);
          readLogIds();
          await buildLogsWhile(writing);
        } catch (error) {
          // The connection goes back only once PostgreSQL has answered what it was sent.
          await writing.catch(() => {});
          throw error;
        }
        const results = await writing;
        trace?.mark(`write: BEGIN, ${how}, logs built meanwhile`);
        if (afterRecords) {
          const after = afterRecords(byPosition(keys, results, table));
          after.catch(() => {});
          await buildLogsWhile(after);
          await after;
          trace?.mark('alerts (cases, alerts, notifications), logs built meanwhile');
        }
        async function* logChunks(): AsyncGenerator<Buffer> {
          yield* built;
          for (let start = built.length * LOGS_PER_TURN; start < logs.count; start += LOGS_PER_TURN) {
            await nextTurn();
            yield logChunk(start);
          }
        }
        await copyIn(connection, LOG_COPY, logChunks());
        trace?.mark('write: COPY of the logs (the rest built meanwhile)');
        const corrections = results.filter((row) => row.log_id !== null && recordOfLog.get(row.log_id) !== row.id);
        if (corrections.length > 0) {
          await runStatement(connection, {
            text: 'update execution_logs l set record_id = c.record_id from json_to_recordset($1::json) as c(log_id uuid, record_id uuid) where l.id = c.log_id',
            values: [JSON.stringify(corrections.map((row) => ({ log_id: row.log_id, record_id: row.id })))],
          });
          trace?.mark('write: logs of records stored meanwhile corrected');
        }
        if (trace) trace.roundTrips += 1 + (corrections.length > 0 ? 1 : 0);
        return results;
      });
    stored = await (db.isTransaction ? write(db) : db.transaction(write));
  }
  return byPosition(keys, stored, table);
}

/** The stored rows by position (of `keys`): the one stored under each key. */
function byPosition(keys: readonly string[], stored: readonly Stored[], table: string): Array<{ id: string; inserted: boolean }> {
  const byKey = new Map<string, { id: string; inserted: boolean }>();
  for (const row of stored) byKey.set(row.key, { id: row.id, inserted: row.inserted });
  return keys.map((key) => {
    const found = byKey.get(key);
    if (!found) throw new Error(`upsert into ${table} returned no row for ${key}`);
    return found;
  });
}
