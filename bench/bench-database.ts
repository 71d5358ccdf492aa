import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/db/embedded.ts';

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
