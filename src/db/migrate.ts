import type { Knex } from 'knex';
import { migrationSource } from '../../migrations/index.ts';

const MIGRATION_LOCK_KEY = 7_265_001;

/**
 * Brings the schema up to date. An advisory lock serialises concurrent starters (several nodes,
 * or the CLI next to the server) on top of knex's own lock table.
 */
export async function migrateToLatest(db: Knex): Promise<string[]> {
  return db.transaction(async (trx) => {
    await trx.raw('select pg_advisory_xact_lock(?)', [MIGRATION_LOCK_KEY]);
    const [, applied] = (await trx.migrate.latest({ migrationSource, disableTransactions: false })) as [number, string[]];
    return applied;
  });
}
