import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import knexFactory, { type Knex } from 'knex';
import { createApp } from '../src/app/http.ts';
import { loadConfig } from '../src/config.ts';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createLogger } from '../src/logger.ts';
import { buildContext } from '../src/server.ts';

/**
 * A database for one benchmark run: a fresh database on DATABASE_URL's server, or a throw-away
 * embedded PostgreSQL. Benchmarks never touch the data of a running service.
 */
export async function benchDatabaseUrl(): Promise<{ url: string; stop(): Promise<void> }> {
  if (process.env.DATABASE_URL) return { url: process.env.DATABASE_URL, stop: async () => {} };
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-bench-'));
  await fs.chmod(dataDir, 0o755);
  // Below Linux's ephemeral range (32768-60999), where an outgoing connection's local port could take it first.
  const embedded = await startEmbeddedPostgres({ dataDir, port: 26000 + Math.floor(Math.random() * 6000) });
  return {
    url: embedded.url,
    async stop() {
      await embedded.stop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs `work` on a database of its own on the benchmark's server (created, migrated, dropped
 * afterwards): large seeded tables never land in another benchmark's database.
 */
export async function withOwnDatabase<T>(prefix: string, work: (db: Knex, url: string) => Promise<T>): Promise<T> {
  const server = await benchDatabaseUrl();
  const name = `warden_bench_${prefix}_${randomBytes(3).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
  await admin.raw(`create database ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const db = createKnex(url.toString(), 10);
  try {
    await migrateToLatest(db);
    return await work(db, url.toString());
  } finally {
    await db.destroy();
    await admin.raw(`drop database if exists ${name} with (force)`);
    await admin.destroy();
    await server.stop();
  }
}

/** The service over HTTP on a loopback port, on `db`: its address, and close(). */
export async function serveBench(db: Knex, url: string): Promise<{ base: string; close(): Promise<void> }> {
  const app = await buildContext(loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: url }), db, createLogger('silent'));
  const server = http.createServer(createApp(app).callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await app.close();
    },
  };
}

/**
 * The list benchmarks' financial events: `events` of them 30 seconds apart (about a year for a
 * million), over the stored customers round-robin by customer_ref, a third REVIEW, amounts
 * spread over 10,000 values. The customers and the `payment` event must exist.
 */
export async function seedFinancialEvents(db: Knex, events: number): Promise<void> {
  const customers = Number(((await db('customers').count({ n: '*' }).first()) as { n: string }).n);
  await db.raw(`
    insert into financial_transactions (id, transaction_ref, customer_id, customer_ref, event_slug, amount, currency, io_type,
      event_date, raw, score, decision, rule_check, created_by, updated_by)
    select gen_random_uuid(), 'tx-' || i, c.id, c.customer_ref, 'payment', (i % 100000) / 10.0 + 1, 'EUR', i % 2,
      now() - (i || ' minutes')::interval / 2, '{}', i % 100,
      case when i % 3 = 0 then 'REVIEW' when i % 17 = 0 then 'REJECT' else 'ACCEPT' end, true, 'bench', 'bench'
    from generate_series(0, ${events - 1}) as i
    join (select id, customer_ref, row_number() over (order by customer_ref) - 1 as n from customers) c on c.n = i % ${customers}`);
}

/** `customers` plain customers (c-0, c-1, ...), the `payment` event and `events` financial events over them. */
export async function seedCustomersAndEvents(db: Knex, customers: number, events: number): Promise<void> {
  await db('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await db.raw(`
    insert into customers (id, customer_ref, first_name, last_name, raw, score, decision, created_by, updated_by)
    select gen_random_uuid(), 'c-' || i, 'First' || i, 'Last' || i, '{}', 0, 'ACCEPT', 'bench', 'bench'
    from generate_series(0, ${customers - 1}) as i`);
  await seedFinancialEvents(db, events);
}

