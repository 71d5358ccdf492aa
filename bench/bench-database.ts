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
