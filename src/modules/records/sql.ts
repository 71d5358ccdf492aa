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
 * One statement for a whole batch: the rows travel as one JSON array parameter, are typed by
 * jsonb_to_recordset, and land with INSERT ... ON CONFLICT DO UPDATE. Every row carries an id
 * made by the caller; on conflict the stored row keeps its own. Returns, in the order given, the
 * stored id of each row and whether it was inserted (xmax = 0) or updated. `keep` columns are
 * written on insert only. Rows must have distinct conflict keys (see lastOccurrence).
 */
export async function upsertRows(
  trx: Knex.Transaction,
  table: string,
  conflictColumn: string | null,
  columns: ColumnTypes,
  rows: Record<string, unknown>[],
  keep: string[] = ['id', 'created_by'],
): Promise<Array<{ id: string; inserted: boolean }>> {
  if (rows.length === 0) return [];
  const names = Object.keys(columns);
  const recordset = names.map((name) => `${identifier(name)} ${columns[name]}`).join(', ');
  const list = names.map(identifier).join(', ');
  const updates = names
    .filter((name) => !keep.includes(name) && name !== conflictColumn)
    .map((name) => `${identifier(name)} = excluded.${identifier(name)}`)
    .concat(['"updated_at" = now()'])
    .join(', ');
  const conflict = conflictColumn ? `on conflict (${identifier(conflictColumn)}) do update set ${updates}` : '';
  const keyColumn = identifier(conflictColumn ?? 'id');
  const result = await trx.raw(
    `insert into ${identifier(table)} (${list}) select ${list} from jsonb_to_recordset(?::jsonb) as r(${recordset}) ${conflict} ` +
      `returning id, ${keyColumn} as key, (xmax = 0) as inserted`,
    [JSON.stringify(rows)],
  );
  const byKey = new Map<string, { id: string; inserted: boolean }>();
  for (const row of result.rows as Array<{ id: string; key: string | null; inserted: boolean }>) {
    byKey.set(row.key ?? row.id, { id: row.id, inserted: row.inserted });
  }
  return rows.map((row) => {
    const key = (conflictColumn ? row[conflictColumn] : null) ?? row.id;
    const stored = byKey.get(String(key));
    if (!stored) throw new Error(`upsert into ${table} returned no row for ${String(key)}`);
    return stored;
  });
}

/** Plain multi-row insert of a batch in one statement, typed the same way. */
export async function insertRows(trx: Knex.Transaction, table: string, columns: ColumnTypes, rows: Record<string, unknown>[]): Promise<void> {
  if (rows.length === 0) return;
  const names = Object.keys(columns);
  const recordset = names.map((name) => `${identifier(name)} ${columns[name]}`).join(', ');
  const list = names.map(identifier).join(', ');
  await trx.raw(`insert into ${identifier(table)} (${list}) select ${list} from jsonb_to_recordset(?::jsonb) as r(${recordset})`, [
    JSON.stringify(rows),
  ]);
}
