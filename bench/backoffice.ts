/**
 * The back-office list over 1,000,000 stored financial events (issues 10 and 11): a 200-row page
 * with a filter, a search and an ordering, measured three ways on one database:
 * - the registry's query layer alone (`listRows`: one page query and one count), server time;
 * - the mobile data API, GET /api/mobile/data/transaction/financialevent/ with a paired device;
 * - the web admin changelist, GET /admin/transaction/financialevent/ with a session cookie;
 * plus the mobile detail of one record, pairing and me/. The HTTP figures are taken by the client
 * over loopback, so they bound the server time from above. Budgets: list p95 30 ms, pairing and
 * me/ p95 5 ms.
 */
import http from 'node:http';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import knexFactory from 'knex';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createApp } from '../src/app/http.ts';
import { createLogger } from '../src/logger.ts';
import { listRows, type ListParameters } from '../src/modules/backoffice/query.ts';
import { permissionCodenames } from '../src/app/registrations.ts';
import { startSession, SESSION_COOKIE } from '../src/modules/backoffice/web/session.ts';
import { issueLoginTicket } from '../src/modules/mobile/tickets.ts';
import { loadPrincipal } from '../src/modules/staff/principal.ts';
import { createUser } from '../src/modules/staff/service.ts';
import { buildContext } from '../src/server.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

const EVENTS = Number(process.env.BENCH_BACKOFFICE_EVENTS ?? 1_000_000);
const CUSTOMERS = 2000;
const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const WARMUP = 20;

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}
const ms = (value: number) => value.toFixed(2);

interface Scenario {
  name: string;
  parameters: ListParameters;
  query: string;
}

/** The customer ref prefix a compliance officer types, a decision filter, and the newest first. */
const SCENARIOS: Scenario[] = [
  {
    name: 'filter + search + ordering (budget)',
    parameters: { page: 1, pageSize: 200, search: 'c-123', order: [-9], filters: { decision__exact: 'REVIEW' } },
    query: 'q=c-123&decision__exact=REVIEW&o=-9&page_size=200',
  },
  {
    name: 'filter + ordering, no search (about 330,000 rows match)',
    parameters: { page: 1, pageSize: 200, search: '', order: [-9], filters: { decision__exact: 'REVIEW' } },
    query: 'decision__exact=REVIEW&o=-9&page_size=200',
  },
  {
    name: 'range filter + search + ordering by amount',
    parameters: { page: 1, pageSize: 200, search: 'c-77', order: [-4], filters: { score__range__gte: '40' } },
    query: 'q=c-77&score__range__gte=40&o=-4&page_size=200',
  },
  {
    name: 'exact reference search',
    parameters: { page: 1, pageSize: 200, search: 'tx-424242', order: [], filters: {} },
    query: 'q=tx-424242&page_size=200',
  },
];

async function seed(db: ReturnType<typeof createKnex>): Promise<void> {
  await db('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await db.raw(`
    insert into customers (id, customer_ref, first_name, last_name, raw, score, decision, created_by, updated_by)
    select gen_random_uuid(), 'c-' || i, 'First' || i, 'Last' || i, '{}', 0, 'ACCEPT', 'bench', 'bench'
    from generate_series(0, ${CUSTOMERS - 1}) as i`);
  // One statement: 1,000,000 events over a year, customers round-robin, a third REVIEW.
  await db.raw(`
    insert into financial_transactions (id, transaction_ref, customer_id, customer_ref, event_slug, amount, currency, io_type,
      event_date, raw, score, decision, rule_check, created_by, updated_by)
    select gen_random_uuid(), 'tx-' || i, c.id, c.customer_ref, 'payment', (i % 100000) / 10.0 + 1, 'EUR', i % 2,
      now() - (i || ' minutes')::interval / 2, '{}', i % 100,
      case when i % 3 = 0 then 'REVIEW' when i % 17 = 0 then 'REJECT' else 'ACCEPT' end, true, 'bench', 'bench'
    from generate_series(0, ${EVENTS - 1}) as i
    join (select id, customer_ref, row_number() over (order by customer_ref) - 1 as n from customers) c on c.n = i % ${CUSTOMERS}`);
  // A table in service has been vacuumed (visibility map and hint bits set); measuring a freshly
  // bulk-loaded one would time autovacuum's first pass over a million rows instead of the list.
  await db.raw('vacuum analyze');
}

async function timeRuns(run: () => Promise<void>): Promise<number[]> {
  for (let index = 0; index < WARMUP; index++) await run();
  const samples: number[] = [];
  for (let index = 0; index < RUNS; index++) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  return samples;
}

export async function benchBackoffice(): Promise<void> {
  const server = await benchDatabaseUrl();
  // A database of its own on the server, dropped afterwards: a million rows never land in another benchmark's.
  const name = `warden_bench_backoffice_${randomBytes(3).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
  await admin.raw(`create database ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const db = createKnex(url.toString(), 10);
  const lines: string[] = [];
  try {
    await migrateToLatest(db);
    const seeding = performance.now();
    await seed(db);
    console.log(`seeded ${EVENTS} events in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
    const operator = { actor: { type: 'operator' as const, id: 'bench' }, known: new Set(permissionCodenames()) };
    const user = await createUser(db, { username: 'officer', password: 'a sturdy bench passphrase', permissions: ['transaction.view_financialevent'] }, operator);
    const principal = (await loadPrincipal(db, user.id))!;
    // The timed pairings open their devices for a colleague, so that the officer whose me/ is
    // measured keeps the one device the list requests use, not several hundred.
    const colleague = await createUser(db, { username: 'colleague', password: 'a sturdy bench passphrase', permissions: ['transaction.view_financialevent'] }, operator);

    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: url.toString() });
    const app = await buildContext(config, db, createLogger('silent'));
    const httpServer = http.createServer(createApp(app).callback());
    await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', () => resolve()));
    const base = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`;
    try {
      const site = app.backoffice.site;
      const model = site.get('transaction', 'financialevent')!;

      // Pairing: a fresh ticket per run (single use), timed alone.
      const pairingServer: number[] = [];
      const pairing = await timeRunsWithSetup(
        () => issueLoginTicket(db, colleague.id).then((ticket) => ticket.qr.ticket),
        async (ticket) => {
          const response = await fetch(`${base}/api/mobile/auth/qr/`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ ticket, device_name: 'bench', platform: 'other', app_version: '1' }),
          });
          if (response.status !== 200) throw new Error(`pairing answered ${response.status}: ${await response.text()}`);
          await response.arrayBuffer();
          pairingServer.push(Number(/dur=([\d.]+)/.exec(response.headers.get('server-timing') ?? '')?.[1]));
        },
      );
      const ticket = (await issueLoginTicket(db, user.id)).qr.ticket;
      const paired = await (await fetch(`${base}/api/mobile/auth/qr/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ticket, device_name: 'bench', platform: 'other', app_version: '1' }),
      })).json() as { data: { access_token: string } };
      const bearer = { authorization: `Bearer ${paired.data.access_token}` };
      const me = await timeHttp(`${base}/api/mobile/me/`, bearer);
      const { cookieValue } = await startSession(db, user.id);
      const cookie = { cookie: `${SESSION_COOKIE}=${cookieValue}` };

      lines.push(
        `Machine: ${machineLine()}. ${EVENTS.toLocaleString('en')} financial events over ${CUSTOMERS} customers (a third REVIEW), ${RUNS} runs after ${WARMUP} warm-up, one client at a time.`,
        '',
        '| scenario | rows matched | query layer p50 / p95 | mobile list server p50 / p95 | web changelist server p50 / p95 |',
        '|---|---|---|---|---|',
      );
      for (const scenario of SCENARIOS) {
        const first = await listRows(site, db, model, principal, scenario.parameters);
        const layer = await timeRuns(async () => {
          await listRows(site, db, model, principal, scenario.parameters);
        });
        const mobile = await timeHttp(`${base}/api/mobile/data/transaction/financialevent/?${scenario.query}`, bearer);
        const web = await timeHttp(`${base}/admin/transaction/financialevent/?${scenario.query.replace('&page_size=200', '')}`, cookie);
        lines.push(
          `| ${scenario.name} | ${first.totalIsEstimate ? '~' : ''}${first.total.toLocaleString('en')} | ${ms(percentile(layer, 0.5))} / ${ms(percentile(layer, 0.95))} ms | ${mobile} | ${web} |`,
        );
        console.log(lines.at(-1));
      }
      lines[0] += ` Load average ${os.loadavg()[0]!.toFixed(1)} after the list runs (other work shares the cores).`;
      const [{ id }] = await db('financial_transactions').where({ transaction_ref: `tx-${Math.floor(EVENTS / 2)}` }).select('id');
      const detail = await timeHttp(`${base}/api/mobile/data/transaction/financialevent/${id}/?include_inlines=1`, bearer);
      lines.push(
        '',
        `Mobile detail of one event with its inlines: ${detail}. Pairing (auth/qr/, a new ticket each): server p50 ${ms(percentile(pairingServer.slice(WARMUP), 0.5))} ms, p95 ${ms(percentile(pairingServer.slice(WARMUP), 0.95))} ms (client p95 ${ms(percentile(pairing, 0.95))}). me/: ${me}.`,
        '',
        'HTTP figures are server time from the Server-Timing header (the handler, body serialisation excluded), with the client-observed p95 beside it; the client runs in the same process. The query layer and the mobile list fetch 200-row pages (page_size=200); the web changelist shows the page size its registration sets (100 rows).',
        '',
        'Counts are exact while PostgreSQL expects at most 100,000 matching rows and its estimate above that (shown with ~), so no page ever counts a million rows.',
      );
    } finally {
      httpServer.closeAllConnections();
      await new Promise((resolve) => httpServer.close(resolve));
      await app.close();
    }
    const report = lines.join('\n');
    console.log(report);
    await writeSection('backoffice', `## Back-office list over 1,000,000 events (\`npm run bench backoffice\`)\n\n${report}`);
  } finally {
    await db.destroy();
    await admin.raw(`drop database if exists ${name} with (force)`);
    await admin.destroy();
    await server.stop();
  }

  async function timeHttp(address: string, headers: Record<string, string>): Promise<string> {
    const probe = await fetch(address, { headers });
    if (probe.status !== 200) return `not measured (HTTP ${probe.status})`;
    await probe.arrayBuffer();
    const server: number[] = [];
    const samples = await timeRuns(async () => {
      const response = await fetch(address, { headers });
      await response.arrayBuffer();
      server.push(Number(/dur=([\d.]+)/.exec(response.headers.get('server-timing') ?? '')?.[1]));
    });
    const served = server.slice(WARMUP);
    return `${ms(percentile(served, 0.5))} / ${ms(percentile(served, 0.95))} ms (client ${ms(percentile(samples, 0.95))})`;
  }
}

async function timeRunsWithSetup<T>(setup: () => Promise<T>, run: (value: T) => Promise<void>): Promise<number[]> {
  const samples: number[] = [];
  for (let index = 0; index < WARMUP + RUNS; index++) {
    const value = await setup();
    const started = performance.now();
    await run(value);
    if (index >= WARMUP) samples.push(performance.now() - started);
  }
  return samples;
}
