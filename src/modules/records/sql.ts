import type { Knex } from 'knex';
import type { FieldTable, FieldType } from './fields.ts';

export type ColumnTypes = Record<string, string>;

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

/**
 * The records of a batch and their execution logs in ONE statement: the upsert is a
 * data-modifying CTE, and the logs join it on log_id to learn each record's stored id. One
 * statement is atomic by itself, so the batch needs no BEGIN/COMMIT round trips: either every
 * row of both tables is written or none is. Rows must carry `log_id`; logs carry `id` = that
 * log_id and every log column but `record_id`. Rows are written in key order, so concurrent
 * batches sharing keys lock them in the same order and cannot deadlock; results come back in
 * the order given.
 */
export async function upsertRowsWithLogs(
  db: Knex,
  table: string,
  conflictColumn: string,
  columns: ColumnTypes,
  rows: Record<string, unknown>[],
  logColumns: ColumnTypes,
  logs: Record<string, unknown>[],
  keep: string[] = ['id', 'created_by'],
): Promise<Array<{ id: string; inserted: boolean }>> {
  if (rows.length === 0) return [];
  // Rows without a conflict key (non-financial events sent without a ref) are always new: known by the id made for them.
  const keyOf = (row: Record<string, unknown>) => String(row[conflictColumn] ?? row.id);
  const inKeyOrder = [...rows].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : keyOf(a) > keyOf(b) ? 1 : 0));
  const names = Object.keys(columns);
  const recordset = names.map((name) => `${identifier(name)} ${columns[name]}`).join(', ');
  const list = names.map(identifier).join(', ');
  const updates = names
    .filter((name) => !keep.includes(name) && name !== conflictColumn)
    .map((name) => `${identifier(name)} = excluded.${identifier(name)}`)
    .concat(['"updated_at" = now()'])
    .join(', ');
  const logNames = Object.keys(logColumns).filter((name) => name !== 'record_id');
  const logRecordset = logNames.map((name) => `${identifier(name)} ${logColumns[name]}`).join(', ');
  const logList = logNames.map(identifier).join(', ');
  const result = await db.raw(
    `with upserted as (
       insert into ${identifier(table)} (${list}) select ${list} from jsonb_to_recordset(?::jsonb) as r(${recordset})
       on conflict (${identifier(conflictColumn)}) do update set ${updates}
       returning id, log_id, coalesce(${identifier(conflictColumn)}::text, id::text) as key, (xmax = 0) as inserted
     ), logged as (
       insert into execution_logs (${logList}, record_id)
       select ${logNames.map((name) => `l.${identifier(name)}`).join(', ')}, u.id
       from jsonb_to_recordset(?::jsonb) as l(${logRecordset}) join upserted u on u.log_id = l.id
     )
     select id, key, inserted from upserted`,
    [JSON.stringify(inKeyOrder), JSON.stringify(logs)],
  );
  const byKey = new Map<string, { id: string; inserted: boolean }>();
  for (const row of result.rows as Array<{ id: string; key: string; inserted: boolean }>) byKey.set(row.key, { id: row.id, inserted: row.inserted });
  return rows.map((row) => {
    const key = keyOf(row);
    const stored = byKey.get(key);
    if (!stored) throw new Error(`upsert into ${table} returned no row for ${key}`);
    return stored;
  });
}
