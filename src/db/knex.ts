import knexFactory, { type Knex } from 'knex';
import pg from 'pg';

// int8 values here are counts and ids well inside 2^53: hand them to JS as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export type Db = Knex;
export type Executor = Knex | Knex.Transaction;

export function createKnex(url: string, poolMax: number): Knex {
  return knexFactory({
    client: 'pg',
    // Sessions run in UTC, the service's one time zone (the mobile spec's timestamps carry no
    // offset): a timestamp a client sends back as it was shown, in a filter or a form, means the
    // same instant whatever the server's own TimeZone setting is.
    connection: { connectionString: url, options: '-c TimeZone=UTC' },
    pool: { min: 0, max: poolMax },
  });
}

/** A pool connection as pg gives it: what the hot path runs named statements and COPY on. */
export type Connection = { query: (...args: never[]) => unknown };

/** A statement as pg takes it: text alone, or with its values and, for a named prepared statement, its name. */
export type Statement = string | { name?: string; text: string; values?: unknown[] };

type CallbackClient = { query(statement: Statement, callback: (error: Error | null, result: { rows: unknown[] }) => void): void };

/**
 * Runs one statement on a connection through pg's callback form. pg's promise form (a query given
 * no callback) leaves every result it returns reachable for V8's young-generation collections
 * until the next full one: in a one-record request at 100/s, 27 KB a request (every row read, the
 * whole request around it) outlived a scavenge after the request had ended, scavenges took 3-4 ms
 * instead of under 1, and the promoted garbage brought a full collection every 2 s at 300/s
 * (README design notes, "A request's garbage dies young"). Given a callback at construction, pg
 * leaves nothing behind.
 */
export function runStatement<T = Record<string, unknown>>(connection: Connection, statement: Statement): Promise<{ rows: T[] }> {
  return new Promise((resolve, reject) =>
    (connection as unknown as CallbackClient).query(statement, (error, result) => (error ? reject(error) : resolve(result as { rows: T[] }))),
  );
}

/** Runs `work` on one of knex's connections (the transaction's own, when `db` is one), released after. */
export async function onConnection<T>(db: Knex, work: (connection: Connection) => Promise<T>): Promise<T> {
  const connection = await db.client.acquireConnection();
  try {
    return await work(connection);
  } finally {
    await db.client.releaseConnection(connection);
  }
}

/**
 * A named prepared statement ($1, $2... parameters): each connection plans it once, not per call
 * as knex's unnamed statements are (planning was a large part of a one-record request's reads).
 */
export async function queryPrepared<T>(db: Knex, name: string, text: string, values: unknown[]): Promise<T[]> {
  return onConnection(db, async (connection) => (await runStatement<T>(connection, { name, text, values })).rows);
}

const RETRYABLE = new Set(['40001', '40P01']);

/**
 * Runs `work` (one statement or one transaction), retrying a few times when PostgreSQL aborts it
 * for a serialization failure or a deadlock: both leave nothing written, so a retry is safe.
 */
export async function retryOnConflict<T>(work: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (!code || !RETRYABLE.has(code) || attempt >= 4) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5 * attempt + Math.random() * 10));
    }
  }
}
