import type { Knex } from 'knex';
import * as foundation from './20261122_0001_foundation.ts';
import * as ingestion from './20261122_0002_ingestion.ts';
import * as sanctions from './20261122_0003_sanctions.ts';
import * as kyc from './20261122_0004_kyc.ts';

type Migration = { up(knex: Knex): Promise<void>; down(knex: Knex): Promise<void> };

/** Every migration in the order it runs. Add new ones at the end. */
const migrations: [string, Migration][] = [
  ['20261122_0001_foundation', foundation],
  ['20261122_0002_ingestion', ingestion],
  ['20261122_0003_sanctions', sanctions],
  ['20261122_0004_kyc', kyc],
];

export const migrationSource: Knex.MigrationSource<[string, Migration]> = {
  getMigrations: async () => migrations,
  getMigrationName: ([name]) => name,
  getMigration: async ([, migration]) => migration,
};
