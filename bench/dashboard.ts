/**
 * The mobile dashboard blocks over 1,000,000 stored financial events (issue 13): widgets (six
 * cards), decisions by day (30 days), high-volume customers (30-day sums), the video-call lobby
 * and the agent summary, each measured as server time (the block's queries alone) and over HTTP
 * with a paired device; and the web admin's index, which shows the same cards and blocks plus the
 * viewer's own counts (issue 37), over HTTP with a session cookie. Budget: p95 50 ms per block and
 * for the index page.
 */
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import knexFactory from 'knex';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createApp } from '../src/app/http.ts';
import { createLogger } from '../src/logger.ts';
import { agentSummary, cards, CARDS, decisionsByDay, highVolumeCustomers, lobby } from '../src/modules/dashboard/blocks.ts';
import { permissionCodenames } from '../src/app/registrations.ts';
import { issueLoginTicket } from '../src/modules/mobile/tickets.ts';
import { SESSION_COOKIE, startSession } from '../src/modules/backoffice/web/session.ts';
import { loadPrincipal } from '../src/modules/staff/principal.ts';
import { createUser } from '../src/modules/staff/service.ts';
import { buildContext } from '../src/server.ts';
import { benchDatabaseUrl, seedFinancialEvents } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

const EVENTS = Number(process.env.BENCH_DASHBOARD_EVENTS ?? 1_000_000);
const CUSTOMERS = 2000;
const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const WARMUP = 20;

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}
const ms = (value: number) => value.toFixed(2);

/** A million events 30 seconds apart (about a year), with the case work a dashboard counts. */
async function seed(db: ReturnType<typeof createKnex>, agentId: string): Promise<void> {
  await db('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await db.raw(`
    insert into customers (id, customer_ref, first_name, last_name, raw, score, decision, created_by, updated_by, created_at)
    select gen_random_uuid(), 'c-' || i, 'First' || i, 'Last' || i, '{}', i % 100, case when i % 20 = 0 then 'REJECT' else 'ACCEPT' end,
      'bench', 'bench', now() - (i || ' hours')::interval
    from generate_series(0, ${CUSTOMERS - 1}) as i`);
  await seedFinancialEvents(db, EVENTS);
  await db.raw(`
    insert into cases (customer_id, status, opened_at, alert_count)
    select id, case when row_number() over () % 2 = 0 then 'closed' else 'open' end, now() - (random() * 300 || ' days')::interval, 50 from customers`);
  // every tenth event alerted: 100,000 alerts
  await db.raw(`
    insert into alerts (case_id, customer_id, target, record_id, record_ref, kind, score, decision, rule_codes, status, created_at)
    select k.id, t.customer_id, 'financial', t.id, t.transaction_ref, 'rules', t.score, t.decision, array['R' || (t.score::int % 30)],
      case when random() < 0.2 then 'open' else 'closed' end, t.event_date
    from financial_transactions t join cases k on k.customer_id = t.customer_id
    where t.transaction_ref like 'tx-%0'`);
  await db.raw(`
    insert into compliance_decisions (target_model, target_id, decision, score, description, actor, actor_id, created_at)
    select 'financialevent', gen_random_uuid(), case when i % 2 = 0 then 'ACCEPT' else 'REJECT' end, 50, 'bench', 'bench', ?,
      now() - (i || ' minutes')::interval
    from generate_series(1, 20000) as i`, [agentId]);
  await db.raw(`
    insert into approval_requests (content_type, object_id, operation, diff, payload, maker, status, created_at)
    select 'customer.customer', 'obj-' || i, 'change', '{}', '{}', 'bench', case when i % 5 = 0 then 'pending' else 'approved' end,
      now() - (i || ' hours')::interval
    from generate_series(1, 2000) as i`);
  await db('verification_flows').insert({ code: 'video', name: 'Video', required_artifact_types: ['doc_front'], requires_video_call: true });
  await db.raw(`
    insert into verification_sessions (id, customer_ref, flow_code, status, required_artifact_types, pending_artifact_types, requires_video_call,
      videocall_token, created_by, created_at)
    select 's-' || i, 'c-' || (i % ${CUSTOMERS}), 'video', case when i <= 50 then 'open' else 'completed' end, '{doc_front}', '{}', true, 'vc', 'bench',
      now() - (i || ' minutes')::interval
    from generate_series(1, 20000) as i`);
  await db.raw(`
    update video_call_queue set status = 'ended', agent_id = ?, taken_at = enqueued_at, ended_at = enqueued_at + interval '7 minutes'
    where session_id in (select id from verification_sessions where status = 'completed' order by created_at desc limit 300)`, [agentId]);
  await db.raw('vacuum analyze');
}

async function timeRuns(run: () => Promise<unknown>): Promise<number[]> {
  for (let index = 0; index < WARMUP; index++) await run();
  const samples: number[] = [];
  for (let index = 0; index < RUNS; index++) {
    const started = performance.now();
    await run();
    samples.push(performance.now() - started);
  }
  return samples;
}

export async function benchDashboard(): Promise<void> {
  const server = await benchDatabaseUrl();
  const name = `warden_bench_dashboard_${randomBytes(3).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
  await admin.raw(`create database ${name}`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  const db = createKnex(url.toString(), 10);
  const lines: string[] = [];
  try {
    await migrateToLatest(db);
    const operator = { actor: { type: 'operator' as const, id: 'bench' }, known: new Set(permissionCodenames()) };
    const user = await createUser(db, { username: 'agent', password: null, is_superuser: true, video_call_agent: true }, operator);
    const seeding = performance.now();
    await seed(db, user.id);
    console.log(`seeded ${EVENTS} events in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
    const principal = (await loadPrincipal(db, user.id))!;
    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: url.toString() });
    const app = await buildContext(config, db, createLogger('silent'));
    const httpServer = http.createServer(createApp(app).callback());
    await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', () => resolve()));
    const base = `http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`;
    try {
      const ticket = (await issueLoginTicket(db, user.id)).qr.ticket;
      const paired = (await (await fetch(`${base}/api/mobile/auth/qr/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ticket, device_name: 'bench', platform: 'other' }),
      })).json()) as { data: { access_token: string } };
      const headers = { authorization: `Bearer ${paired.data.access_token}` };
      const blocks: [string, string, () => Promise<unknown>][] = [
        ['widgets (6 cards)', 'widgets/', () => cards(db, CARDS, new Date())],
        ['decisions-by-day (30 days)', 'decisions-by-day/', () => decisionsByDay(db, new Date())],
        ['high-volume-customers (30 days)', 'high-volume-customers/', () => highVolumeCustomers(db, new Date(), true)],
        ['lobby', 'lobby/', () => lobby(db, principal, new Date())],
        ['agent-summary', 'agent-summary/', () => agentSummary(db, principal, new Date())],
      ];
      lines.push(
        `Machine: ${machineLine()}. ${EVENTS.toLocaleString('en')} financial events over ${CUSTOMERS} customers (about 86,000 in the last 30 days), ` +
          `about 100,000 alerts, 20,000 compliance decisions, 20,000 verification sessions; ${RUNS} runs after ${WARMUP} warm-up, one client at a time.`,
        '',
        '| block | server (queries) p50 / p95 | HTTP p50 / p95 | budget p95 |',
        '|---|---|---|---|',
      );
      for (const [label, path, run] of blocks) {
        const direct = await timeRuns(run);
        const probe = await fetch(`${base}/api/mobile/dashboard/${path}`, { headers });
        if (probe.status !== 200) throw new Error(`${path} answered ${probe.status}: ${await probe.text()}`);
        await probe.arrayBuffer();
        const overHttp = await timeRuns(async () => {
          const response = await fetch(`${base}/api/mobile/dashboard/${path}`, { headers });
          await response.arrayBuffer();
        });
        lines.push(`| ${label} | ${ms(percentile(direct, 0.5))} / ${ms(percentile(direct, 0.95))} ms | ${ms(percentile(overHttp, 0.5))} / ${ms(percentile(overHttp, 0.95))} ms | 50 ms |`);
        console.log(lines.at(-1));
      }
      // The web admin's index: every count, card and block of the dashboard in one page.
      const { cookieValue } = await startSession(db, user.id);
      const cookie = { cookie: `${SESSION_COOKIE}=${cookieValue}` };
      const index = await fetch(`${base}/admin/`, { headers: cookie });
      const html = await index.text();
      if (index.status !== 200 || !html.includes('decisions-title')) throw new Error(`the admin index answered ${index.status} without the dashboard`);
      const page = await timeRuns(async () => {
        const response = await fetch(`${base}/admin/`, { headers: cookie });
        await response.arrayBuffer();
      });
      lines.push(`| web admin index (all counts, cards and blocks) | | ${ms(percentile(page, 0.5))} / ${ms(percentile(page, 0.95))} ms | 50 ms |`);
      console.log(lines.at(-1));
    } finally {
      httpServer.closeAllConnections();
      await new Promise((resolve) => httpServer.close(resolve));
      await app.close();
    }
    const report = lines.join('\n');
    console.log(report);
    await writeSection('dashboard', `## Dashboard blocks over 1,000,000 events (\`npm run bench dashboard\`)\n\n${report}`);
  } finally {
    await db.destroy();
    await admin.raw(`drop database if exists ${name} with (force)`);
    await admin.destroy();
    await server.stop();
  }
}
