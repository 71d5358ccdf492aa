import type { Knex } from 'knex';
import { loadConfig, type Config } from '../src/config.ts';
import type { AppContext } from '../src/context.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createLogger } from '../src/logger.ts';
import { defineEvent } from '../src/modules/events/service.ts';
import { buildContext } from '../src/server.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { seedCustomers } from './fixture-data.ts';

export const BENCH_ACTOR = { type: 'system', id: 'bench' } as const;

/**
 * The scoring benchmarks' set-up: the service's context on a freshly migrated bench schema, with
 * the deposit and withdrawal events and `customers` customers; all of it is closed after `work`.
 */
export async function withScoringService(
  customers: number,
  work: (service: { app: AppContext; knex: Knex; config: Config; url: string }) => Promise<void>,
): Promise<void> {
  const database = await benchDatabaseUrl();
  const knex = createKnex(database.url, 10);
  try {
    await knex.raw('drop schema if exists public cascade; create schema public');
    await migrateToLatest(knex);
    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: database.url });
    const app = await buildContext(config, knex, createLogger('silent'));
    try {
      await defineEvent(knex, { slug: 'deposit', name: 'Deposit', type: 1, active: true }, BENCH_ACTOR);
      await defineEvent(knex, { slug: 'withdrawal', name: 'Withdrawal', type: 1, active: true }, BENCH_ACTOR);
      await seedCustomers(knex, customers);
      await work({ app, knex, config, url: database.url });
    } finally {
      await app.close();
    }
  } finally {
    await knex.destroy();
    await database.stop();
  }
}
