import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import type { Connection } from './knex.ts';

/**
 * PostgreSQL's COPY text format: values escaped as COPY reads them, rows encoded by column type,
 * and the stream that sends them. The hot path's writers (records/sql.ts) and the alerts they
 * raise (cases/alerts.ts) write through here.
 */

/** PostgreSQL type names of a table's columns, by column. */
export type ColumnTypes = Record<string, string>;

const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };

/** A value in COPY's text format: backslash, tab, newline and carriage return escaped. */
export function copyText(value: string): string {
  return /[\\\t\n\r]/.test(value) ? value.replace(/[\\\t\n\r]/g, (character) => COPY_ESCAPES[character]!) : value;
}

/** JSON text in COPY's text format: JSON holds no raw tab, newline or carriage return (it escapes them), only backslashes to double. */
export function jsonCopyText(json: string): string {
  return json.includes('\\') ? json.replaceAll('\\', '\\\\') : json;
}

/** A text[] in PostgreSQL's array syntax: every element quoted, quotes and backslashes escaped. */
export function arrayLiteral(values: unknown[]): string {
  return `{${values.map((value) => (value === null || value === undefined ? 'NULL' : `"${String(value).replace(/["\\]/g, '\\$&')}"`)).join(',')}}`;
}

/** Column types whose text never holds a tab, newline, carriage return or backslash (values the service made or validated). */
const PLAIN_TYPES = new Set(['uuid', 'numeric', 'smallint', 'integer', 'boolean', 'date', 'timestamptz']);

/**
 * A jsonb value already serialised (screening matches, made in the worker that found them): the
 * COPY writer takes its text as it is; JSON.stringify of a row, the small batches' way, reads it back.
 */
export class JsonText {
  constructor(readonly text: string) {}

  toJSON(): unknown {
    return JSON.parse(this.text);
  }
}

/** How one column's non-null value is written in COPY's text format. */
function valueEncoder(type: string): (value: unknown) => string {
  if (type === 'jsonb') return (value) => jsonCopyText(value instanceof JsonText ? value.text : JSON.stringify(value));
  if (type.endsWith('[]')) return (value) => copyText(arrayLiteral(value as unknown[]));
  const text = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value));
  return PLAIN_TYPES.has(type) ? text : (value) => copyText(text(value));
}

/** The COPY line of a row, by column (what json_to_recordset made of the row's JSON before). */
export function rowEncoder(columns: ColumnTypes): (row: Record<string, unknown>) => string {
  const names = Object.keys(columns);
  const encoders = names.map((name) => valueEncoder(columns[name]!));
  return (row) => {
    let line = '';
    for (let index = 0; index < names.length; index++) {
      const value = row[names[index]!];
      line += `${index === 0 ? '' : '\t'}${value === null || value === undefined ? '\\N' : encoders[index]!(value)}`;
    }
    return `${line}\n`;
  };
}

/**
 * Sends `chunks` of COPY text to `statement` (a COPY ... FROM STDIN) on the connection. Through
 * pipeline, not bare writes: a failure on either side ends the COPY (CopyFail when this side
 * throws) and reports PostgreSQL's own error, so the transaction can roll back.
 */
export function copyIn(connection: Connection, statement: string, chunks: Iterable<string | Buffer> | AsyncIterable<string | Buffer>): Promise<void> {
  return pipeline(Readable.from(chunks), connection.query(copyFrom(statement) as never) as unknown as Writable);
}
