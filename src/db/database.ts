import type { Knex } from 'knex';
import type { Config } from '../config.ts';
import { startEmbeddedPostgres, type EmbeddedPostgres } from './embedded.ts';
import { createKnex } from './knex.ts';
import { migrateToLatest } from './migrate.ts';

export interface Database {
  knex: Knex;
  /** Where the data lives, without the password, for start-up messages. */
  description: string;
  close(): Promise<void>;
}

/**
 * Connects to DATABASE_URL when set, otherwise to the embedded PostgreSQL under the data
 * directory (started here, or joined when another Warden process already runs it), and
 * migrates the schema.
 */
export async function openDatabase(config: Config, log: (message: string) => void): Promise<Database> {
  let embedded: EmbeddedPostgres | undefined;
  let url = config.databaseUrl;
  if (!url) {
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, log });
    url = embedded.url;
  }
  const knex = createKnex(url, config.dbPoolMax);
  try {
    await migrateToLatest(knex);
  } catch (error) {
    await knex.destroy();
    await embedded?.stop();
    throw error;
  }
  const where = new URL(url);
  return {
    knex,
    description: `${embedded ? 'embedded ' : ''}postgres://${where.host}${where.pathname}`,
    async close() {
      await knex.destroy();
      await embedded?.stop();
    },
  };
}
