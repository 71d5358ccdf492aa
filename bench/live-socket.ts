/**
 * The staff live socket (issue 13): 2,000 logged-in sockets on one service process, a broadcast
 * published through PostgreSQL NOTIFY (as every writer publishes) must reach all of them within
 * 200 ms at p99; and the service's memory per idle logged-in socket. The service runs as its own
 * process (src/main.ts), so the clients' memory is not counted; latencies are taken by the
 * clients in this process, from just before the NOTIFY to each socket's receipt.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import { WebSocket } from 'ws';
import { loadSigningKey } from '../src/auth/tokens.ts';
import { createKnex } from '../src/db/knex.ts';
import { CHANNELS } from '../src/db/notifications.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { permissionCodenames } from '../src/app/registrations.ts';
import { createDevice } from '../src/modules/mobile/devices.ts';
import { MobileTokens } from '../src/modules/mobile/tokens.ts';
import { createUser } from '../src/modules/staff/service.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';
import { startService } from '../test/helpers/service.ts';

const SOCKETS = Number(process.env.BENCH_LIVE_SOCKETS ?? 2000);
const BROADCASTS = Number(process.env.BENCH_LIVE_BROADCASTS ?? 50);

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

async function memory(url: string): Promise<{ rss: number; heap: number }> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { rss: read('process_resident_memory_bytes'), heap: read('nodejs_heap_size_used_bytes') };
}

export async function benchLiveSocket(): Promise<void> {
  const server = await benchDatabaseUrl();
  const name = `warden_bench_live_${randomBytes(3).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
  await admin.raw(`create database ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const db = createKnex(url.toString(), 4);
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-bench-live-'));
  let service: { child: ChildProcess; url: string } | undefined;
  const sockets: WebSocket[] = [];
  try {
    await migrateToLatest(db);
    const operator = { actor: { type: 'operator' as const, id: 'bench' }, known: new Set(permissionCodenames()) };
    const user = await createUser(db, { username: 'watcher', password: null, permissions: ['customer.view_customer', 'engine.view_alert'] }, operator);
    const tokens = new MobileTokens(() => loadSigningKey(db, undefined));
    const now = new Date();
    const bearer: string[] = [];
    for (let index = 0; index < SOCKETS; index++) {
      const device = await createDevice(db, { id: randomUUID(), userId: user.id, name: `bench-${index}`, platform: 'other', appVersion: '1', ticketId: randomUUID() }, now);
      bearer.push((await tokens.issue({ userId: user.id, deviceId: device.id }, now)).token);
    }
    service = await startService({ ...process.env, DATABASE_URL: url.toString(), PORT: '0', HOST: '127.0.0.1', WARDEN_DATA_DIR: dataDir, LOG_LEVEL: 'warn', WARDEN_DB_POOL_MAX: '10' });
    const wsUrl = `${service.url.replace(/^http/, 'ws')}/api/mobile/ws/`;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const before = await memory(service.url);

    // sent time of the broadcast in flight, and each socket's receipt of it
    let sentAt = 0;
    let current = '';
    const received: number[] = [];
    let roundCount = 0;
    let waiting: (() => void) | undefined;
    const loginStarted = performance.now();
    for (let offset = 0; offset < SOCKETS; offset += 100) {
      await Promise.all(
        bearer.slice(offset, offset + 100).map(
          (token) =>
            new Promise<void>((resolve, reject) => {
              const ws = new WebSocket(wsUrl, { perMessageDeflate: false });
              sockets.push(ws);
              ws.on('error', reject);
              ws.on('open', () => ws.send(JSON.stringify({ type: 'login', payload: { token } })));
              ws.on('message', (data) => {
                const text = data.toString();
                if (text.startsWith('{"type":"login"')) return resolve();
                if (text.startsWith('{"type":"login_failed"')) return reject(new Error('login failed'));
                if (current && text.includes(current)) {
                  received.push(performance.now() - sentAt);
                  if (++roundCount === SOCKETS) waiting?.();
                }
              });
            }),
        ),
      );
    }
    const loginSeconds = (performance.now() - loginStarted) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 5000));
    const after = await memory(service.url);

    let missed = 0;
    for (let round = 0; round < BROADCASTS; round++) {
      current = `bench-${round}-${randomUUID()}`;
      const payload = JSON.stringify({ correlation_id: randomUUID(), timestamp: Date.now(), message: { to: 'mainstream', type: 'benchmark', model: 'customer.customer', data: { marker: current } } });
      roundCount = 0;
      const done = new Promise<void>((resolve) => {
        waiting = resolve;
        setTimeout(resolve, 5000);
      });
      sentAt = performance.now();
      await db.raw('select pg_notify(?, ?)', [CHANNELS.fanout, `live:${payload}`]);
      await done;
      missed += SOCKETS - roundCount;
      current = '';
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const perSocketHeap = (after.heap - before.heap) / SOCKETS;
    const perSocketRss = (after.rss - before.rss) / SOCKETS;
    const lines = [
      `Machine: ${machineLine()}. ${SOCKETS.toLocaleString('en')} sockets logged in on one service process (one user, a device each; logins took ${loginSeconds.toFixed(1)} s), ` +
        `${BROADCASTS} broadcasts one after another, each a PostgreSQL NOTIFY naming a model the user may view; latency from just before the NOTIFY to receipt, per socket, measured by the clients (another process).`,
      '',
      '| measure | value | budget |',
      '|---|---|---|',
      `| broadcast to all sockets, p50 / p99 / max | ${percentile(received, 0.5).toFixed(1)} / ${percentile(received, 0.99).toFixed(1)} / ${Math.max(...received).toFixed(1)} ms | p99 200 ms |`,
      `| deliveries missing after 5 s | ${missed} of ${(SOCKETS * BROADCASTS).toLocaleString('en')} | 0 |`,
      `| memory per idle logged-in socket (service process) | ${(perSocketHeap / 1024).toFixed(1)} KiB JS heap, ${(perSocketRss / 1024).toFixed(1)} KiB RSS | |`,
    ];
    const report = lines.join('\n');
    console.log(report);
    await writeSection('live-socket', `## Staff live socket, ${SOCKETS.toLocaleString('en')} sockets (\`npm run bench live-socket\`)\n\n${report}`);
  } finally {
    for (const ws of sockets) ws.terminate();
    if (service) {
      service.child.kill('SIGTERM');
      await new Promise((resolve) => service!.child.once('exit', resolve));
    }
    await db.destroy();
    await admin.raw(`drop database if exists ${name} with (force)`);
    await admin.destroy();
    await server.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}
