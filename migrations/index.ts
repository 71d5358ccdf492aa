import type { Knex } from 'knex';
import * as foundation from './20261122_0001_foundation.ts';

type Migration = { up(knex: Knex): Promise<void>; down(knex: Knex): Promise<void> };

/** Every migration in the order it runs. Add new ones at the end. */
const migrations: [string, Migration][] = [['20261122_0001_foundation', foundation]];

export const migrationSource: Knex.MigrationSource<[string, Migration]> = {
  getMigrations: async () => migrations,
  getMigrationName: ([name]) => name,
  getMigration: async ([, migration]) => migration,
};
