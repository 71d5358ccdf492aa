/**
 * The mobile identity layer's hot paths, budget p95 5 ms each: pairing (auth/qr/ with a fresh
 * single-use ticket), me/ (token, device and user checks plus the session info), and refresh.
 * Each is measured twice: through HTTP over loopback, one client at a time (client-side time, an
 * upper bound of the server's), and as the service calls alone (no HTTP, no JSON), which is the
 * server's own share. The user is realistic: two groups, direct grants, three other devices and
 * unread notifications.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import knexFactory from 'knex';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { bindAdminSite, permissionCodenames } from '../src/app/registrations.ts';
import { sessionInfo, sessionReads, type SessionReads } from '../src/modules/mobile/account.ts';
import { loadSigningKey } from '../src/auth/tokens.ts';
import { authenticateCaller, pairDevice, refreshDevice, type Identity } from '../src/modules/mobile/identity.ts';
import { MobileTokens } from '../src/modules/mobile/tokens.ts';
import { issueLoginTicket } from '../src/modules/mobile/tickets.ts';
import { createGroup, createUser } from '../src/modules/staff/service.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';
import { startService, stopService } from '../test/helpers/service.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 300);
const WARMUP = 30;
const BUDGET_MS = 5;

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}

interface Timing {
  /** wall-clock milliseconds per run */
  samples: number[];
  /** this process's CPU milliseconds per run (mean): the Node side's own work, which other load on the machine inflates far less than wall time */
  cpuMs: number;
  /** HTTP runs: the server's own time per run, from its Server-Timing header */
  server: number[];
}

/** The handler's time the service reports in its Server-Timing header (`app;dur=<ms>`). */
function serverTime(response: Response): number {
  return Number(/dur=([\d.]+)/.exec(response.headers.get('server-timing') ?? '')?.[1]);
}

/** Times `run` RUNS times after WARMUP untimed ones; `setup` (untimed) prepares each run's input. */
async function time<T>(setup: () => Promise<T>, run: (value: T) => Promise<number | void>): Promise<Timing> {
  const samples: number[] = [];
  const server: number[] = [];
  let cpuMicros = 0;
  for (let index = 0; index < WARMUP + RUNS; index++) {
    const value = await setup();
    const cpu = process.cpuUsage();
    const started = performance.now();
    const serverMs = await run(value);
    if (index < WARMUP) continue;
    samples.push(performance.now() - started);
    if (typeof serverMs === 'number') server.push(serverMs);
    const used = process.cpuUsage(cpu);
    cpuMicros += used.user + used.system;
  }
  return { samples, cpuMs: cpuMicros / 1000 / RUNS, server };
}

async function post(url: string, body: unknown): Promise<{ status: number; serverMs: number; json: { data: Record<string, string> } }> {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, serverMs: serverTime(response), json: (await response.json()) as { data: Record<string, string> } };
}

export async function benchMobileIdentity(): Promise<void> {
  const server = await benchDatabaseUrl();
  const name = `warden_bench_mobile_${randomBytes(3).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
  await admin.raw(`create database ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const db = createKnex(url.toString(), 10);
  try {
    await migrateToLatest(db);
    const site = await bindAdminSite(db);
    const options = { actor: { type: 'operator' as const, id: 'bench' }, known: new Set(permissionCodenames()) };
    await createGroup(db, { name: 'Analysts', permissions: ['customer.view_customer', 'engine.view_alert', 'engine.change_alert'] }, options);
    await createGroup(db, { name: 'Reviewers', permissions: ['engine.view_watchlist', 'engine.change_watchlist'] }, options);
    const user = await createUser(
      db,
      { username: 'officer', password: 'a sturdy bench passphrase', groups: ['Analysts', 'Reviewers'], permissions: ['transaction.view_financialevent'], video_call_agent: true },
      options,
    );
    await db('notifications').insert(Array.from({ length: 40 }, (_, index) => ({ user_id: user.id, kind: 'alert', title: `alert ${index}`, read: index % 3 === 0 })));

    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: url.toString() });
    // The timed pairings open their devices for a colleague with the same grants, so that the
    // officer whose me/ is measured keeps a realistic handful of devices, not several hundred.
    const colleague = await createUser(
      db,
      { username: 'colleague', password: 'a sturdy bench passphrase', groups: ['Analysts', 'Reviewers'], permissions: ['transaction.view_financialevent'], video_call_agent: true },
      options,
    );
    const ticketFor = async (userId: string) => (await issueLoginTicket(db, userId)).qr.ticket;
    const ownTicket = () => ticketFor(user.id);
    const ticket = () => ticketFor(colleague.id);
    const pairing = async (value: string) =>
      pairDevice(identity, { ticket: value, deviceName: 'bench phone', platform: 'android', appVersion: '1.0.0' });

    // The service calls first, on the identity layer alone: no HTTP server, and none of the
    // service's background work (job polling, worker threads) in the process's CPU time.
    const signingKey = loadSigningKey(db, config.jwtSecret);
    const identity: Identity = { db, config, tokens: new MobileTokens(() => signingKey), now: () => new Date() };
    for (let index = 0; index < 3; index++) await pairing(await ownTicket());
    const own = await pairing(await ownTicket());
    const authorization = `Bearer ${own.tokens.access_token}`;
    let pair = { device: own.tokens.device_id, refresh: own.tokens.refresh_token };
    const pairingService = await time(ticket, async (value) => {
      await pairing(value);
    });
    const meService = await time(async () => undefined, async () => {
      sessionInfo(config, site, await authenticateCaller<SessionReads>(identity, authorization, { extra: sessionReads() }));
    });
    const refreshService = await time(async () => pair, async (current) => {
      const next = await refreshDevice(identity, current.device, current.refresh);
      pair = { device: current.device, refresh: next.refresh_token };
    });

    // The HTTP runs go to the service as its own process, as it is deployed: this process's fetch
    // client then shares neither its event loop nor its heap, and Server-Timing is its own time.
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-bench-mobile-'));
    const service = await startService({ ...process.env, DATABASE_URL: url.toString(), PORT: '0', HOST: '127.0.0.1', WARDEN_DATA_DIR: dataDir, LOG_LEVEL: 'warn' });
    // Its worker threads (screening) load their code for a few seconds: not part of what is measured.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    const base = `${service.url}/api/mobile`;
    const pairingBody = (value: string) => ({ ticket: value, device_name: 'bench phone', platform: 'android', app_version: '1.0.0' });
    try {
      const paired = await post(`${base}/auth/qr/`, pairingBody(await ownTicket()));
      const bearer = { authorization: `Bearer ${paired.json.data.access_token}` };
      const pairingHttp = await time(ticket, async (value) => {
        const response = await post(`${base}/auth/qr/`, pairingBody(value));
        if (response.status !== 200) throw new Error(`pairing answered ${response.status}`);
        return response.serverMs;
      });
      const meHttp = await time(async () => undefined, async () => {
        const response = await fetch(`${base}/me/`, { headers: bearer });
        if (response.status !== 200) throw new Error(`me/ answered ${response.status}`);
        await response.arrayBuffer();
        return serverTime(response);
      });
      pair = { device: paired.json.data.device_id!, refresh: paired.json.data.refresh_token! };
      const refreshHttp = await time(async () => pair, async (current) => {
        const response = await post(`${base}/auth/refresh/`, { device_id: current.device, refresh_token: current.refresh });
        if (response.status !== 200) throw new Error(`refresh answered ${response.status}`);
        pair = { device: current.device, refresh: response.json.data.refresh_token! };
        return response.serverMs;
      });

      const row = (label: string, viaHttp: Timing, service: Timing) => {
        const p95 = percentile(viaHttp.server, 0.95);
        const pair = (samples: number[]) => `${percentile(samples, 0.5).toFixed(2)} / ${percentile(samples, 0.95).toFixed(2)} ms`;
        return `| ${label} | ${pair(service.samples)} | ${service.cpuMs.toFixed(2)} ms | ${pair(viaHttp.server)} | ${pair(viaHttp.samples)} | ${p95 <= BUDGET_MS ? 'yes' : '**no**'} |`;
      };
      const lines = [
        '## Mobile identity: pairing, me/, refresh',
        '',
        `Machine: ${machineLine()}; load average ${os.loadavg()[0]!.toFixed(1)} when it finished (other work shares the cores). ${RUNS} runs after ${WARMUP} warm-up, one client at a time, on a user with two groups, direct grants, an agent profile, five paired devices and 40 notifications (the timed pairings open their devices for a second user). Service: the service calls alone (server time without HTTP), wall time and the Node process's CPU time per call (PostgreSQL's own work not included; measured before the service's background work starts); HTTP: fetch over loopback, one client at a time; server time from the service's Server-Timing header (the whole middleware chain: request id, token, device and user checks, handler), client time as fetch sees it; the service runs as its own process (src/main.ts), the client in the benchmark's. Budget: server p95 ${BUDGET_MS} ms.`,
        '',
        '| path | service p50 / p95 | service Node CPU per call | HTTP server p50 / p95 | HTTP client p50 / p95 | server p95 within budget |',
        '|---|---|---|---|---|---|',
        row('pairing (auth/qr/, a new ticket each run)', pairingHttp, pairingService),
        row('me/ (token, device and user checks, session info)', meHttp, meService),
        row('refresh (auth/refresh/, rotating)', refreshHttp, refreshService),
      ];
      console.log(lines.join('\n'));
      await writeSection('mobile-identity', lines.join('\n'));
    } finally {
      await stopService(service.child);
      await fs.rm(dataDir, { recursive: true, force: true });
    }
  } finally {
    await db.destroy();
    await admin.raw(`drop database if exists ${name} with (force)`);
    await admin.destroy();
    await server.stop();
  }
}
