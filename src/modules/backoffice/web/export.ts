import { Readable } from 'node:stream';
import type { Context } from 'koa';
import type { AppContext } from '../../../context.ts';
import { runStatement, type Connection } from '../../../db/knex.ts';
import { isHidden, mayName } from '../access.ts';
import { annotateRows, columnLabel, listQuery, QueryError } from '../query.ts';
import type { BoundModel, ColumnDeclaration, Row } from '../registry.ts';
import { parseChangelistQuery, showChangelist } from './changelist.tsx';
import { adminState, forbidden, modelFromParams } from './common.tsx';

/**
 * CSV export of a changelist: GET /admin/<app>/<model>/export.csv with the changelist's own query
 * parameters (filters, `q`, `o`; `p` is ignored), for anyone who may view the model.
 *
 * - Rows: the list's own query (query.ts listQuery: scope, filters, search, ordering) without a
 *   page, read through a server-side cursor (DECLARE ... NO SCROLL CURSOR in a read-only
 *   transaction, FETCH of BATCH rows) on one pooled connection, each batch formatted and handed to
 *   the response only when the previous one has drained (a Readable fed by an async generator:
 *   backpressure). At most one batch is in memory, whatever the export's size. The connection is
 *   released when the export ends, fails, or the client goes away (Koa destroys the stream).
 * - Columns: the list's columns that the viewer sees there, less hidden fields and less joined
 *   columns of models the viewer may not view (the list blanks them; the export leaves them out).
 *   The header row holds the columns' labels.
 * - Values as stored: choices by their stored value (not their label), booleans true/false, times
 *   as ISO 8601 UTC to the second (2026-01-10T23:30:00Z), dates as YYYY-MM-DD, JSON as JSON; a
 *   redacted field as the viewer may read it, a computed column as the list computes it, a
 *   display-only column as its display text. A text cell a spreadsheet would run as a formula
 *   (starting with = + - @ tab or CR, and not a plain number) is prefixed with a quote.
 * - Bad parameters are the changelist's 400 page; no view permission is a 403.
 * - Audit: one admin_log_entries row per export, written when it ends: action_flag 2, the model's
 *   content type, object_id '', object_repr "CSV export", change {"export": {"rows": N, "query":
 *   "<query string>", "complete": bool}} (complete is false when the client went away first).
 */

/** Rows a FETCH reads: the most held in memory at once. */
const BATCH = 1000;
const CURSOR = 'warden_export';

interface ExportColumn {
  name: string;
  label: string;
  value: (row: Row) => string;
}

export async function exportChangelist(ctx: Context, app: AppContext): Promise<void> {
  const state = adminState(ctx);
  const site = app.backoffice.site;
  const model = modelFromParams(app, ctx.params);
  if (!site.can(state.principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
  const search = new URLSearchParams(ctx.querystring);
  let built: ReturnType<typeof listQuery>;
  try {
    built = listQuery(site, app.db, model, state.principal, parseChangelistQuery(search));
  } catch (caught) {
    if (!(caught instanceof QueryError)) throw caught;
    // The same parameters on the changelist: its 400 page, with the message and a way out.
    return showChangelist(ctx, app);
  }
  const principal = state.principal;
  const columns = exportColumns(model, built.hidden, (key) => mayName(site, principal, key));
  const { sql, bindings } = built.query.toSQL().toNative();

  const connection = (await app.db.client.acquireConnection()) as Connection;
  let released = false;
  const release = async (failed: boolean) => {
    if (released) return;
    released = true;
    try {
      await runStatement(connection, 'rollback');
    } catch {
      failed = true;
    }
    // A connection whose transaction could not be ended is not handed to the next request.
    if (failed) (connection as unknown as { __knex__disposed?: unknown }).__knex__disposed = 'export failed';
    await app.db.client.releaseConnection(connection);
  };
  let first: Row[];
  try {
    await runStatement(connection, 'begin read only');
    await runStatement(connection, { text: `declare ${CURSOR} no scroll cursor for ${sql}`, values: bindings as unknown[] });
    first = await fetchBatch(connection);
  } catch (error) {
    await release(true);
    throw error;
  }

  let rows = 0;
  let complete = false;
  const audit = async () => {
    await app.db('admin_log_entries').insert({
      user_id: principal.user.id,
      actor: principal.user.username,
      action_flag: 2,
      content_type: model.key,
      object_id: '',
      object_repr: 'CSV export',
      change: JSON.stringify({ export: { rows, query: search.toString().slice(0, 2000), complete } }),
    });
  };

  // Ends the export once: the connection back to the pool, then the audit row.
  let finished = false;
  const finish = async () => {
    if (finished) return;
    finished = true;
    // A stopped export (client gone, a failed FETCH) ends with the same rollback; a failed rollback drops the connection.
    await release(false).catch((error: unknown) => app.logger.warn({ err: error }, 'export: releasing the connection failed'));
    await audit().catch((error: unknown) => app.logger.warn({ err: error }, 'export: audit row not written'));
  };
  let started = false;
  // A response that ends before the body is first read (HEAD, a client gone at once) never runs
  // the generator, whose finally then never runs either: the response's close ends the export.
  ctx.res.once('close', () => {
    if (!started) void finish();
  });

  async function* lines(): AsyncGenerator<string> {
    if (finished) return;
    started = true;
    try {
      yield csvLine(columns.map((column) => column.label));
      let batch = first;
      for (;;) {
        if (batch.length) {
          const hidden = built.hidden;
          if (hidden.length) for (const row of batch) for (const name of hidden) row[name] = null;
          await annotateRows(site, app.db, model, principal, batch);
          let text = '';
          for (const row of batch) text += csvLine(columns.map((column) => column.value(row)));
          rows += batch.length;
          yield text;
        }
        if (batch.length < BATCH) break;
        batch = await fetchBatch(connection);
      }
      complete = true;
    } finally {
      await finish();
    }
  }

  const filename = `${model.appLabel}-${model.model}-${new Date().toISOString().slice(0, 19).replace(/:/g, '')}Z.csv`;
  ctx.status = 200;
  ctx.type = 'text/csv; charset=utf-8';
  ctx.set('Content-Disposition', `attachment; filename="${filename}"`);
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.body = Readable.from(lines(), { objectMode: false, highWaterMark: 64 * 1024 });
}

async function fetchBatch(connection: Connection): Promise<Row[]> {
  return (await runStatement<Row>(connection, `fetch ${BATCH} from ${CURSOR}`)).rows;
}

/** The list's columns as the viewer may see them, each with how its cell reads. */
function exportColumns(model: BoundModel, hiddenJoins: string[], mayView: (modelKey: string) => boolean): ExportColumn[] {
  return model.columns
    .filter((column) => !isHidden(model, column.name) && !hiddenJoins.includes(column.name))
    .map((column) => ({ name: column.name, label: columnLabel(model, column), value: cellReader(model, column, mayView) }));
}

function cellReader(model: BoundModel, column: ColumnDeclaration, mayView: (modelKey: string) => boolean): (row: Row) => string {
  const name = column.name;
  const declaration = model.fields?.[name];
  const udt = model.columnTypes.get(name)?.udtName;
  // A display-only column (no stored value, not joined, not computed) reads as the list shows it.
  if (!model.columnTypes.has(name) && !name.includes('__') && !declaration?.computed && declaration?.display) {
    const display = declaration.display;
    return (row) => display(row);
  }
  const redact = declaration?.redact;
  return (row) => {
    let value = row[name];
    if (redact && value !== null && value !== undefined) value = redact(value, mayView);
    return storedText(value, udt);
  };
}

/** A stored value as text: see the module comment. */
export function storedText(value: unknown, udt?: string): string {
  if (value === null || value === undefined) return '';
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) return '';
    // node-pg reads a date column as local midnight: its local fields are the stored date.
    if (udt === 'date') return `${String(value.getFullYear()).padStart(4, '0')}-${String(value.getMonth() + 1).padStart(2, '0')}-${String(value.getDate()).padStart(2, '0')}`;
    return `${value.toISOString().slice(0, 19)}Z`;
  }
  if (Buffer.isBuffer(value)) return '';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

const FORMULA = /^[=+\-@\t\r]/;
const PLAIN_NUMBER = /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/;

/** One RFC 4180 line; a cell a spreadsheet would run as a formula is prefixed with a quote (as reports' toCsv), a plain negative number is left as it is. */
export function csvLine(cells: string[]): string {
  let line = '';
  for (let index = 0; index < cells.length; index++) {
    let text = cells[index]!;
    if (FORMULA.test(text) && !PLAIN_NUMBER.test(text)) text = `'${text}`;
    if (/[",\r\n]/.test(text)) text = `"${text.replace(/"/g, '""')}"`;
    line += index ? `,${text}` : text;
  }
  return `${line}\r\n`;
}
