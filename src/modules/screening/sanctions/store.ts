import type { Knex } from 'knex';
import type { SanctionEntry, SanctionSource } from './importers.ts';

/** Rows per INSERT: 10 parameters each stays far below PostgreSQL's 65,535 bind parameters. */
const INSERT_CHUNK = 2000;

/** An entry as stored: a missing remark is NULL. */
type SanctionEntryRow = Omit<SanctionEntry, 'remarks'> & { remarks: string | null };

/**
 * Replaces every stored entry of `source` with `entries`: a re-import is the list as it is now,
 * so entries the list dropped disappear. Runs inside the caller's transaction, which readers see
 * all at once or not at all; an advisory lock per source makes concurrent imports of one source
 * wait for each other instead of failing on the unique key. Lists repeat an id now and then
 * (OpenSanctions merges, hand-edited files): the last record of an id wins.
 * Returns the number of rows stored.
 */
export async function replaceSource(trx: Knex.Transaction, source: SanctionSource, entries: SanctionEntry[]): Promise<number> {
  const byId = new Map<string, SanctionEntryRow>();
  for (const entry of entries) {
    if (entry.source !== source) throw new Error(`Entry ${entry.source}:${entry.source_id} does not belong to source ${source}.`);
    const { source_id, schema, name, aliases, birth_dates, nationalities, topics, programs } = entry;
    byId.set(source_id, { source, source_id, schema, name, aliases, birth_dates, nationalities, topics, programs, remarks: entry.remarks ?? null });
  }
  await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`sanction_entries:${source}`]);
  await trx('sanction_entries').where({ source }).delete();
  const rows = [...byId.values()];
  for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
    await trx('sanction_entries').insert(rows.slice(start, start + INSERT_CHUNK));
  }
  return rows.length;
}

/** Every stored entry, in import order, for building the screening index. */
export async function loadAllEntries(db: Knex | Knex.Transaction): Promise<SanctionEntry[]> {
  const rows = await db<SanctionEntryRow>('sanction_entries')
    .select('source', 'source_id', 'schema', 'name', 'aliases', 'birth_dates', 'nationalities', 'topics', 'programs', 'remarks')
    .orderBy('id');
  return rows.map(({ remarks, ...entry }) => (remarks === null ? entry : { ...entry, remarks }));
}
