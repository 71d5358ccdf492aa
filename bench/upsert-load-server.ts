/**
 * Child process of bench/upsert-load.ts: the Warden app with customers, events and the 30
 * benchmark rules. It times each request itself (from the request event to the response's
 * finish) so the parent can tell the service time from the queueing it sees, and reports its
 * memory on request.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createApp } from '../src/app/http.ts';
import { createLogger } from '../src/logger.ts';
import { defineEvent } from '../src/modules/events/service.ts';
import { createCredential } from '../src/modules/merchant/service.ts';
import { loadRules } from '../src/modules/rules/store.ts';
import { buildContext, KEEP_ALIVE_TIMEOUT_MS } from '../src/server.ts';
import { FINANCIAL, upsertTransactions } from '../src/modules/transaction/service.ts';
import { BatchTrace } from '../src/modules/records/trace.ts';
import { benchmarkRules, financialRecords, seedCustomers, seedHistory } from './fixture-data.ts';

/** Customers (c-0..), stored financial transactions per customer within the 30-day window (bench/single-record.ts sets both). */
const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 2000);
const HISTORY = Number(process.env.BENCH_HISTORY ?? 0);

const url = process.env.BENCH_DATABASE_URL!;
const system = { type: 'system', id: 'bench' } as const;
const knex = createKnex(url, 10);
await knex.raw('drop schema if exists public cascade; create schema public');
await migrateToLatest(knex);
// WARDEN_LIGHT_WORKERS and the other WARDEN_ settings pass through (bench/single-record.ts runs the batch with 1 and 2 workers).
const context = await buildContext(loadConfig({ ...process.env, LOG_LEVEL: 'silent', DATABASE_URL: url }), knex, createLogger('silent'));
await defineEvent(knex, { slug: 'deposit', name: 'Deposit', type: 1, active: true }, system);
await defineEvent(knex, { slug: 'withdrawal', name: 'Withdrawal', type: 1, active: true }, system);
await loadRules(knex, await benchmarkRules(), system);
await seedCustomers(knex, CUSTOMERS);
if (HISTORY > 0) await seedHistory(knex, HISTORY, false);
const { credential } = await createCredential(knex, { client: 'Bench', allowedIps: ['*'] }, system);
const { token } = await context.tokens.issue('merchant', credential.id, 3600);
const callback = createApp(context).callback();
let serviceTimes: number[] = [];
const server = http.createServer((request, response) => {
  const started = performance.now();
  response.once('finish', () => serviceTimes.push(performance.now() - started));
  void callback(request, response);
});
// As the service's own server: with Node's 5 s default, a keep-alive connection the load generator
// left idle could be closed by the server just as a request went out on it (one ECONNRESET in
// 180,000 requests of a 30-minute soak).
server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
/**
 * `count` single records (or, with `batch` over 1, `count` batches of that many records as the
 * ingest benchmark makes them) scored in this process without HTTP, one call at a time, each with
 * a BatchTrace: the median milliseconds of each phase, and of the whole call.
 */
async function tracedRecords(count: number, customers: number, batch = 1): Promise<{ phases: Record<string, number>; cpu: Record<string, number>; total: number; statements: Array<{ label: string; count: number; median: number }> }> {
  const phases: Array<Record<string, number>> = [];
  const cpu: Array<Record<string, number>> = [];
  const totals: number[] = [];
  const prefix = `traced-${Date.now()}`;
  // The statements knex runs (BEGIN, COMMIT, the alerts' and notifications' statements; the hot
  // path's own reads and writes run on the raw connection and are phases of the trace): their
  // round-trip times by the first words of their text.
  const statements = new Map<string, number[]>();
  const started = new Map<string, { at: number; label: string }>();
  const onQuery = (query: { __knexQueryUid: string; sql: string }) =>
    started.set(query.__knexQueryUid, { at: performance.now(), label: query.sql.replace(/\s+/g, ' ').trim().slice(0, 60) });
  const onResponse = (_response: unknown, query: { __knexQueryUid: string }) => {
    const begun = started.get(query.__knexQueryUid);
    if (!begun) return;
    started.delete(query.__knexQueryUid);
    statements.set(begun.label, [...(statements.get(begun.label) ?? []), performance.now() - begun.at]);
  };
  knex.on('query', onQuery);
  knex.on('query-response', onResponse);
  for (let index = 0; index < count; index++) {
    const record = {
      customer_ref: `c-${index % customers}`,
      event_slug: index % 2 ? 'deposit' : 'withdrawal',
      amount: ((index % 5000) + 1).toFixed(2),
      currency: 'EUR',
      transaction_ref: `${prefix}-${index}`,
      io_type: index % 2,
      event_date: new Date().toISOString(),
      device_id: `dev-${index % 300}`,
      ip_address: '198.51.100.7',
    };
    const records = batch > 1 ? financialRecords(batch, customers, `${prefix}-${index}`, 4000 + index, 20) : [record];
    const trace = new BatchTrace();
    const started = performance.now();
    await upsertTransactions(context, FINANCIAL, records, { type: 'system', id: 'bench' }, Date.now(), trace);
    totals.push(performance.now() - started);
    phases.push(trace.phases);
    cpu.push(trace.cpu);
  }
  knex.off('query', onQuery);
  knex.off('query-response', onResponse);
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1] ?? 0;
  const names = [...new Set(phases.flatMap((entry) => Object.keys(entry)))];
  return {
    phases: Object.fromEntries(names.map((name) => [name, median(phases.map((entry) => entry[name] ?? 0))])),
    cpu: Object.fromEntries(names.map((name) => [name, median(cpu.map((entry) => entry[name] ?? 0))])),
    total: median(totals),
    statements: [...statements].map(([label, times]) => ({ label, count: times.length, median: median(times) })),
  };
}

process.on('message', async (message: { type: string; count?: number; batch?: number }) => {
  if (message.type === 'trace') {
    process.send!({ type: 'trace', ...(await tracedRecords(message.count ?? 300, CUSTOMERS, message.batch)) });
  } else if (message.type === 'service-times') {
    process.send!({ type: 'service-times', times: serviceTimes });
    serviceTimes = [];
  } else if (message.type === 'memory') {
    process.send!({ type: 'memory', memory: process.memoryUsage() });
  }
});
process.send!({ type: 'ready', port: (server.address() as AddressInfo).port, token });
process.once('SIGINT', () => process.exit(0));
