/**
 * The ingestion hot path against its floor (issue 17), in one run on one database:
 * - the floor: one set-based statement per table, in one transaction, upserting the same 1000
 *   record rows the service writes and inserting one minimal execution-log row per record (its
 *   id, the record's id, score, decision, the codes of the matched rules), with no validation,
 *   aggregates or scoring; measured next to every batch (alternating), and also records alone;
 * - financial batches of 1000 (200 customers) with 0, 10, 30 and 100 rules over 50 stored
 *   transactions per customer, and with 30 rules over 1,000 per customer (950 of them older than
 *   the 30-day window); the phase breakdown, SQL round trips, heap growth and the longest
 *   event-loop stall of the 30-rule batch;
 * - the same 30-rule batch over HTTP against the floor plus a bare Koa echo of the same body;
 * - a customer batch of 1000 with screening over a generated 100,000-entry list against its floor.
 */
import http from 'node:http';
import { timeOrderedId } from '../src/ids.ts';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import Koa from 'koa';
import type { Knex } from 'knex';
import type { AppContext } from '../src/context.ts';
import { createApp } from '../src/app/http.ts';
import { upsertCustomers } from '../src/modules/customer/service.ts';
import { createCredential } from '../src/modules/merchant/service.ts';
import { BatchTrace } from '../src/modules/records/trace.ts';
import { upsertRowsWithLogs } from '../src/modules/records/sql.ts';
import { loadRules } from '../src/modules/rules/store.ts';
import { SanctionsIndex } from '../src/modules/screening/sanctions/matcher.ts';
import { replaceSource } from '../src/modules/screening/sanctions/store.ts';
import { FINANCIAL, upsertTransactions } from '../src/modules/transaction/service.ts';
import { benchmarkRules, financialRecords, seedHistory } from './fixture-data.ts';
import { generateSanctionEntries } from './generate-sanctions.ts';
import { random } from '../models/random.ts';
import os from 'node:os';
import { machineLine, writeSection } from './results.ts';
import { BENCH_ACTOR as system, withScoringService } from './scoring-service.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 15);
/**
 * Batches before the timed ones in each scenario. The first scenario runs in a fresh process: with
 * 2 warm-up batches its first timed batches still ran 20-30 % slower than its last (code not yet
 * optimised), which a serving process, warm after its first few batches, does not pay. With 5,
 * the first scenario (30 rules, 50 stored per customer) still took 141 ms against 115 ms for the
 * same rules over twenty times the history later in the same run.
 */
const WARMUP = 10;
/** Batches after the timed ones that measure heap growth (see financialScenario). */
const HEAP_RUNS = 2;
const CUSTOMERS = 200;
const HISTORY = 50;
const LONG_HISTORY = 1000;
const LIST_SIZE = 100_000;

v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}
function p95(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(0.95 * sorted.length))]!;
}
const ms = (value: number) => value.toFixed(1);

export const FINANCIAL_ROW_COLUMNS: Record<string, string> = {
  id: 'uuid', transaction_ref: 'text', customer_id: 'uuid', customer_ref: 'text', event_slug: 'text', amount: 'numeric',
  currency: 'text', io_type: 'smallint', event_date: 'timestamptz', payment_method: 'text', fee_amount: 'numeric',
  fee_currency: 'text', source_provider: 'text', source_ref: 'text', source_address: 'text', destination_provider: 'text',
  destination_ref: 'text', destination_address: 'text', status: 'text', event_description: 'text', session_id: 'text',
  device_id: 'text', ip_address: 'text', channel: 'smallint', user_agent: 'text', geo: 'jsonb', metadata: 'jsonb',
  country: 'text', raw: 'jsonb', score: 'numeric', decision: 'text', rule_check: 'boolean', log_id: 'uuid',
  created_by: 'text', updated_by: 'text',
};
const CUSTOMER_ROW_COLUMNS: Record<string, string> = {
  id: 'uuid', customer_ref: 'text', first_name: 'text', last_name: 'text', email: 'text', ip_address: 'text',
  birth_date: 'date', nationality: 'text', raw: 'jsonb', score: 'numeric', decision: 'text', sanction_score: 'numeric',
  sanction_topic: 'text[]', sanction_matches: 'jsonb', ip_address_score: 'numeric', ip_reasons: 'jsonb',
  email_risk_score: 'numeric', email_reasons: 'jsonb', log_id: 'uuid', created_by: 'text', updated_by: 'text',
};

interface FloorTimes {
  /** Records and minimal logs, one transaction. */
  full: number;
  /** Records alone, one transaction. */
  records: number;
  /** Records and minimal logs through the service's own large-batch writer (new rows and logs by COPY). */
  staged: number;
}

/**
 * The floor for `rows` (the rows the service writes, with fresh refs): one upsert statement for
 * the records and one insert for the minimal logs, in one transaction; then the records alone
 * (other refs), so the cost of the log rows shows; then the same records and minimal logs through
 * the service's own writer, which copies rows it knows to be new straight into the table (as the
 * batch's are: not the issue's form of the floor, but what writing them costs the service), so a
 * ratio against it shows what the batch adds beyond its own way of writing.
 * The floor's ids are made as the service makes its own (time-ordered, src/ids.ts).
 */
export async function floor(
  db: Knex,
  target: 'financial' | 'customer',
  table: string,
  conflict: string,
  columns: Record<string, string>,
  rows: Array<Record<string, unknown>>,
  matched: string[][],
): Promise<FloorTimes> {
  const names = Object.keys(columns);
  const list = names.map((name) => `"${name}"`).join(', ');
  const recordset = names.map((name) => `"${name}" ${columns[name]}`).join(', ');
  const updates = names.filter((name) => name !== 'id' && name !== conflict && name !== 'created_by').map((name) => `"${name}" = excluded."${name}"`).join(', ');
  const upsert = `insert into ${table} (${list}) select ${list} from json_to_recordset(?::json) as r(${recordset}) on conflict ("${conflict}") do update set ${updates} returning id`;
  const write = async (withLogs: boolean, suffix: string) => {
    const started = performance.now();
    await db.transaction(async (trx) => {
      const stored = await trx.raw(upsert, [JSON.stringify(rows.map((row) => ({ ...row, [conflict]: `${row[conflict]}${suffix}`, id: timeOrderedId(), log_id: timeOrderedId() })))]);
      if (!withLogs) return;
      const logs = (stored.rows as Array<{ id: string }>).map((row, position) => ({ id: timeOrderedId(), record_id: row.id, score: 0, decision: 'ACCEPT', matched_rules: matched[position] ?? [] }));
      await trx.raw(
        `insert into execution_logs (id, target, record_id, score, decision, matched_rules, data_context, duration_us, actor)
         select id, 'floor', record_id, score, decision, matched_rules, '{}', 0, 'floor'
         from json_to_recordset(?::json) as l(id uuid, record_id uuid, score numeric, decision text, matched_rules json)`,
        [JSON.stringify(logs)],
      );
    });
    return performance.now() - started;
  };
  const full = await write(true, '~floor');
  const records = await write(false, '~records');
  const stagedRows = rows.map((row) => ({ ...row, [conflict]: `${row[conflict]}~staged`, id: timeOrderedId(), log_id: timeOrderedId() }));
  const minimalLogs = {
    count: stagedRows.length,
    build: (start: number, end: number) =>
      stagedRows.slice(start, end).map((row, offset) => ({
        id: row.log_id, target, recordRef: row[conflict] as string, score: 0, decision: 'ACCEPT', matchedRules: JSON.stringify(matched[start + offset] ?? []),
        ruleVersionSet: null, ruleErrors: '[]', dataContext: '{}', durationUs: 0, actor: 'floor',
      })),
  };
  const started = performance.now();
  await upsertRowsWithLogs(db, table, conflict, columns, stagedRows, minimalLogs, undefined, { allNew: true });
  return { full, records, staged: performance.now() - started };
}

/** The rows the service writes for financial API records, built without validation or scoring. */
export function financialRows(records: Array<Record<string, unknown>>, customerIds: Map<string, string>): Array<Record<string, unknown>> {
  return records.map((record) => ({
    ...record,
    customer_id: customerIds.get(record.customer_ref as string),
    country: (record.geo as { country?: string } | undefined)?.country ?? null,
    raw: record,
    score: 0,
    decision: 'ACCEPT',
    rule_check: true,
    created_by: 'system:bench',
    updated_by: 'system:bench',
  }));
}

/** The alerts a batch raised for the records stored under these ids. */
async function countAlerts(db: Knex, recordIds: string[]): Promise<number> {
  const [row] = await db('alerts').whereIn('record_id', recordIds).count({ count: '*' });
  return Number(row!.count);
}

/** Removes what a run wrote (records, logs, and the alerts and cases the batch raised), so every run sees the same stored history. */
export async function cleanUp(db: Knex, table: string, conflict: string, refs: string[]): Promise<void> {
  const all = refs.flatMap((ref) => [ref, `${ref}~floor`, `${ref}~records`, `${ref}~staged`]);
  const ids = `select id from ${table} where "${conflict}" = any(?)`;
  await db.raw(`delete from execution_logs where record_id in (${ids})`, [all]);
  await db.raw(`delete from execution_logs where actor = 'floor'`);
  await db.raw(`delete from alerts where record_id in (${ids})`, [all]);
  if (table === 'customers') {
    await db.raw(`delete from alerts where customer_id in (${ids})`, [all]);
    await db.raw(`delete from cases where customer_id in (${ids})`, [all]);
    // The screening hits a run's matched customers got (inline, or by the job a large batch queues: still running it may leave a few, swept next time).
    await db.raw(`delete from screening_hits h where h.customer_id in (${ids}) or not exists (select 1 from customers c where c.id = h.customer_id)`, [all]);
  }
  await db(table).whereIn(conflict, all).delete();
  // Deleted rows stay in the indexes until vacuumed, and the next run's window scans would read them again;
  // every batch also updates the open cases of its customers (200 row versions a batch).
  await db.raw(`vacuum ${table}, execution_logs, alerts, cases`);
}

interface ScenarioResult {
  label: string;
  batch: number[];
  floor: number[];
  records: number[];
  /** The service's own writer with minimal logs (FloorTimes.staged). */
  staged: number[];
  phases: Array<Record<string, number>>;
  /** CPU milliseconds of this process per phase. */
  cpu: Array<Record<string, number>>;
  roundTrips: number;
  /** Alerts the batch raised (median), in its transaction. */
  alerts: number[];
  /** Peak heap growth of a batch started from a forced full GC (the heap runs). */
  heapGrowthMb: number;
  /** Batch times of the heap runs. */
  afterGc: number[];
  stallMs: number;
}

/**
 * Every scenario starts from the same state: the set-up before it (10,000 to 200,000 history rows,
 * a 100,000-entry list) leaves dirty pages that PostgreSQL would otherwise write out during the
 * scenario's first batches, against whichever of batch or floor happened to run then.
 */
async function settle(db: Knex): Promise<void> {
  await db.raw('checkpoint');
}

/** Alternates scored batches with their floor; removes what each pair wrote so the stored history stays the same. */
async function financialScenario(app: AppContext, label: string, prefix: string): Promise<ScenarioResult> {
  await settle(app.db);
  const customerIds = new Map((await app.db('customers').select('id', 'customer_ref')).map((row) => [row.customer_ref as string, row.id as string]));
  const result: ScenarioResult = { label, batch: [], floor: [], records: [], staged: [], phases: [], cpu: [], roundTrips: 0, alerts: [], heapGrowthMb: 0, afterGc: [], stallMs: 0 };
  for (let run = 0; run < WARMUP + RUNS + HEAP_RUNS; run++) {
    const records = financialRecords(1000, CUSTOMERS, `${prefix}${run}`, 7 + run, 20);
    // The heap runs start from a forced full GC and sample the heap every millisecond. The timed
    // runs do neither: a batch right after a forced full GC took 1.4-1.6x as long (measured side
    // by side; the GC threads were busy throughout the aggregates), which a serving process, never
    // forced, does not pay; the timed batches still pay every collection their own work causes.
    const heapRun = run >= WARMUP + RUNS;
    if (heapRun) collectGarbage();
    const heapBefore = process.memoryUsage().heapUsed;
    let heapPeak = heapBefore;
    const sampler = heapRun ? setInterval(() => (heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)), 1) : undefined;
    const stall = monitorEventLoopDelay({ resolution: 1 });
    stall.enable();
    const trace = new BatchTrace();
    const started = performance.now();
    const results = await upsertTransactions(app, FINANCIAL, records, system, Date.now(), trace);
    const elapsed = performance.now() - started;
    stall.disable();
    clearInterval(sampler);
    if (heapRun) heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
    if (results.some((item) => item.action !== 'created' || !item.rule_check)) throw new Error('benchmark batch was not fully scored');
    const logs = await app.db('execution_logs').whereIn('id', results.map((item) => item.log_id!)).select('id', 'matched_rules');
    const codes = new Map(logs.map((log) => [log.id as string, (log.matched_rules as Array<{ code: string }>).map((rule) => rule.code)]));
    const alerts = await countAlerts(app.db, results.map((item) => item.id!));
    const times = await floor(app.db, 'financial', 'financial_transactions', 'transaction_ref', FINANCIAL_ROW_COLUMNS, financialRows(records, customerIds), results.map((item) => codes.get(item.log_id!) ?? []));
    await cleanUp(app.db, 'financial_transactions', 'transaction_ref', records.map((record) => record.transaction_ref as string));
    if (run < WARMUP) continue;
    if (heapRun) {
      result.heapGrowthMb = Math.max(result.heapGrowthMb, (heapPeak - heapBefore) / 2 ** 20);
      result.afterGc.push(elapsed);
      continue;
    }
    result.alerts.push(alerts);
    result.batch.push(elapsed);
    result.floor.push(times.full);
    result.records.push(times.records);
    result.staged.push(times.staged);
    result.phases.push(trace.phases);
    result.cpu.push(trace.cpu);
    result.roundTrips = trace.roundTrips;
    result.stallMs = Math.max(result.stallMs, stall.max / 1e6);
  }
  await app.db.raw('vacuum analyze financial_transactions, execution_logs');
  return result;
}

async function useRules(app: AppContext, count: number): Promise<number> {
  const rules = count === 0 ? [] : await benchmarkRules(count);
  await loadRules(app.db, rules, system, { deactivateMissing: true });
  // The rule cache is dropped by a NOTIFY; wait until this process has the new set.
  for (let attempt = 0; attempt < 100; attempt++) {
    const active = (await app.rules.active()).filter((rule) => rule.target === 'financial').length;
    if (active === count) return active;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`rule cache did not pick up ${count} rules`);
}

/** A 1000-record batch over HTTP to Warden, against a bare Koa echo of the same body. */
async function httpScenario(app: AppContext): Promise<{ warden: number[]; echo: number[]; floor: number[]; stallMs: number }> {
  await settle(app.db);
  const { credential } = await createCredential(app.db, { client: 'Bench', allowedIps: ['*'] }, system);
  const { token } = await app.tokens.issue('merchant', credential.id, 3600);
  const warden = http.createServer(createApp(app).callback());
  const echoApp = new Koa();
  echoApp.use(async (ctx) => {
    const chunks: Buffer[] = [];
    for await (const chunk of ctx.req) chunks.push(chunk as Buffer);
    ctx.body = { status: true, message: 'echo', data: { results: JSON.parse(Buffer.concat(chunks).toString('utf8')) } };
  });
  const echo = http.createServer(echoApp.callback());
  await Promise.all([warden, echo].map((server) => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))));
  const url = (server: http.Server, path: string) => `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  const customerIds = new Map((await app.db('customers').select('id', 'customer_ref')).map((row) => [row.customer_ref as string, row.id as string]));
  const result = { warden: [] as number[], echo: [] as number[], floor: [] as number[], stallMs: 0 };
  try {
    for (let run = 0; run < RUNS + WARMUP; run++) {
      const records = financialRecords(1000, CUSTOMERS, `http${run}`, 500 + run, 20);
      const body = JSON.stringify(records);
      const stall = monitorEventLoopDelay({ resolution: 1 });
      stall.enable();
      let started = performance.now();
      const response = await fetch(url(warden, '/api/transaction/financial/upsert/'), {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body,
      });
      const parsed = (await response.json()) as { data: { results: Array<{ action: string; log_id: string }> } };
      const wardenMs = performance.now() - started;
      stall.disable();
      if (response.status !== 200 || parsed.data.results.some((item) => item.action !== 'created')) throw new Error(`HTTP batch failed: ${response.status}`);
      started = performance.now();
      const echoed = await fetch(url(echo, '/'), { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await echoed.json();
      const echoMs = performance.now() - started;
      const logs = await app.db('execution_logs').whereIn('id', parsed.data.results.map((item) => item.log_id)).select('id', 'matched_rules');
      const codes = new Map(logs.map((log) => [log.id as string, (log.matched_rules as Array<{ code: string }>).map((rule) => rule.code)]));
      const times = await floor(app.db, 'financial', 'financial_transactions', 'transaction_ref', FINANCIAL_ROW_COLUMNS, financialRows(records, customerIds), parsed.data.results.map((item) => codes.get(item.log_id) ?? []));
      await cleanUp(app.db, 'financial_transactions', 'transaction_ref', records.map((record) => record.transaction_ref as string));
      if (run < WARMUP) continue;
      result.warden.push(wardenMs);
      result.echo.push(echoMs);
      result.floor.push(times.full);
      result.stallMs = Math.max(result.stallMs, stall.max / 1e6);
    }
  } finally {
    await Promise.all([warden, echo].map((server) => new Promise((resolve) => server.close(resolve))));
  }
  return result;
}

/** Customer batches of 1000 with screening over the generated list, alternating with their floor. */
async function customerScenario(app: AppContext, names: string[]): Promise<ScenarioResult> {
  await settle(app.db);
  const result: ScenarioResult = { label: 'customers', batch: [], floor: [], records: [], staged: [], phases: [], cpu: [], roundTrips: 0, alerts: [], heapGrowthMb: 0, afterGc: [], stallMs: 0 };
  for (let run = 0; run < WARMUP + RUNS; run++) {
    const customers = Array.from({ length: 1000 }, (_, i) => ({
      customer_ref: `s${run}-${i}`,
      first_name: names[(run * 1000 + i) % names.length]!.split(' ')[0],
      last_name: names[(run * 1000 + i) % names.length]!.split(' ').slice(1).join(' '),
      email: `user${i}@example.com`,
      ip_address: `203.0.113.${i % 255}`,
      birth_date: '1980-05-05',
      nationality: 'DEU',
    }));
    const trace = new BatchTrace();
    const started = performance.now();
    const results = await upsertCustomers(app, customers, system, trace);
    const elapsed = performance.now() - started;
    // The floor writes the rows as the service stored them, screening results included (the
    // matches of a listed name are a few hundred bytes of JSON each, which the floor must write too).
    // (birth_date as text: a date read into a JS Date at local midnight could come back a day off.)
    const columns = Object.keys(CUSTOMER_ROW_COLUMNS).map((name) => (name === 'birth_date' ? app.db.raw('birth_date::text as birth_date') : name));
    const stored = await app.db('customers').whereIn('id', results.map((item) => item.id!)).select(columns);
    const logs = await app.db('execution_logs').whereIn('id', stored.map((row) => row.log_id)).select('matched_rules');
    const rows = stored.map((row) => ({ ...row, created_by: 'system:bench', updated_by: 'system:bench' }));
    const alerts = await countAlerts(app.db, results.map((item) => item.id!));
    const times = await floor(app.db, 'customer', 'customers', 'customer_ref', CUSTOMER_ROW_COLUMNS, rows, logs.map((log) => (log.matched_rules as Array<{ code: string }>).map((rule) => rule.code)));
    await cleanUp(app.db, 'customers', 'customer_ref', customers.map((customer) => customer.customer_ref));
    if (run < WARMUP) continue;
    result.alerts.push(alerts);
    result.batch.push(elapsed);
    result.floor.push(times.full);
    result.records.push(times.records);
    result.staged.push(times.staged);
    result.phases.push(trace.phases);
    result.cpu.push(trace.cpu);
    result.roundTrips = trace.roundTrips;
  }
  return result;
}

function phaseTable(result: ScenarioResult): string[] {
  const names = Object.keys(result.phases[0] ?? {});
  const total = median(result.batch);
  return [
    `| phase (${result.label}) | median ms | share | CPU ms of this process |`,
    '|---|---|---|---|',
    ...names.map((name) => {
      const value = median(result.phases.map((phases) => phases[name] ?? 0));
      return `| ${name} | ${ms(value)} | ${Math.round((100 * value) / total)} % | ${ms(median(result.cpu.map((cpu) => cpu[name] ?? 0)))} |`;
    }),
    `| **total** | **${ms(total)}** | | ${ms(median(result.cpu.map((cpu) => Object.values(cpu).reduce((sum, value) => sum + value, 0))))} |`,
  ];
}

/** The phases that read and use the stored history: validation (the read runs beside it), the rest of the read's wait, the aggregates. */
const historyPhases = (phases: Record<string, number>) =>
  Object.entries(phases).reduce((sum, [name, value]) => (name === 'validate' || name === 'aggregates' || name.startsWith('customers and history') ? sum + value : sum), 0);

const ratio = (result: ScenarioResult) => median(result.batch) / median(result.floor);
const row = (label: string, result: ScenarioResult, budget: string) =>
  `| ${label} | ${ms(median(result.batch))} (p95 ${ms(p95(result.batch))}) | ${ms(median(result.floor))} | ${ratio(result).toFixed(2)} | ${Math.round(1_000_000 / median(result.batch)).toLocaleString('en')} | ${budget} |`;

export async function benchIngest(): Promise<void> {
  await withScoringService(CUSTOMERS, async ({ app, knex }) => {
    await seedHistory(knex, HISTORY, false);

    const byRules = new Map<number, ScenarioResult>();
    for (const count of [30, 0, 10, 100]) {
      await useRules(app, count);
      byRules.set(count, await financialScenario(app, `${count} rules, ${HISTORY} stored per customer`, `r${count}-`));
      console.log(`${count} rules: batch ${ms(median(byRules.get(count)!.batch))} ms, floor ${ms(median(byRules.get(count)!.floor))} ms`);
    }
    await useRules(app, 30);
    const overHttp = await httpScenario(app);
    await seedHistory(knex, LONG_HISTORY - HISTORY, true);
    const longHistory = await financialScenario(app, `30 rules, ${LONG_HISTORY} stored per customer`, 'long-');
    console.log(`long history: batch ${ms(median(longHistory.batch))} ms`);

    const entries = generateSanctionEntries(LIST_SIZE, 7);
    for (const source of ['ofac', 'un', 'opensanctions'] as const) {
      await knex.transaction((trx) => replaceSource(trx, source, entries.filter((entry) => entry.source === source)));
    }
    const buildStarted = performance.now();
    const index = SanctionsIndex.build(entries);
    const buildMs = performance.now() - buildStarted;
    const next = random(99);
    const names = Array.from({ length: 2000 }, (_, i) => {
      const entry = entries[Math.floor(next() * entries.length)]!;
      return i % 2 ? entry.name : `${['Anna', 'Peter', 'Mehmet', 'Olga', 'Juan'][i % 5]} ${entry.name.split(' ').at(-1)}`;
    });
    for (const name of names.slice(0, 200)) index.screen({ name });
    const perName: number[] = [];
    for (const name of names) {
      const started = performance.now();
      index.screen({ name, schema: 'person' });
      perName.push(performance.now() - started);
    }
    const customers = await customerScenario(app, names);

    const main = byRules.get(30)!;
    const noRules = byRules.get(0)!;
    const httpFloor = median(overHttp.floor) + median(overHttp.echo);
    const lines = [
      '## Ingestion hot path against its floor (server side and HTTP)',
      '',
      `Machine: ${machineLine()}, load average ${os.loadavg()[0]!.toFixed(1)} at the end (other work shares the cores). ${process.env.DATABASE_URL ? 'PostgreSQL from DATABASE_URL' : 'Embedded PostgreSQL'} on the same machine, ` +
        `synchronous_commit on. ${CUSTOMERS} customers; ${HISTORY} stored financial transactions per customer over the last 30 days. ` +
        `Medians of ${RUNS} runs after ${WARMUP} warm-up runs; each batch alternates with its floor, and what both wrote is deleted (and vacuumed) before the next run. ` +
        'Command: `npm run bench ingest`.',
      '',
      '**The floor** is the bare cost of writing what the service must write, measured in the same run on the same tables: one set-based ' +
        'upsert (`json_to_recordset`, ON CONFLICT DO UPDATE) of the same 1000 record rows and one insert of a minimal execution-log row per ' +
        'record (its id, the record id, score, decision, matched rule codes; constants for the other NOT NULL columns), in one transaction, ' +
        'with no validation, aggregates or scoring.',
      '',
      '| batch of 1000 | median ms | floor ms | ratio | records/s | budget |',
      '|---|---|---|---|---|---|',
      row(`financial, 30 rules incl. velocity aggregates, ${HISTORY} stored per customer`, main, 'at most 2x (aim 1.5x)'),
      row('financial, no rules loaded', noRules, 'at most 2x'),
      row(`customers, screening over ${LIST_SIZE.toLocaleString('en')} list entries`, customers, 'at most 2x'),
      '',
      `Over HTTP (30 rules): ${ms(median(overHttp.warden))} ms per 1000-record request (p95 ${ms(p95(overHttp.warden))}), against the floor ` +
        `(${ms(median(overHttp.floor))} ms) plus a bare Koa echo of the same ${Math.round(JSON.stringify(financialRecords(1000, CUSTOMERS, 'x', 1, 20)).length / 1024)} KB body ` +
        `(${ms(median(overHttp.echo))} ms): ratio **${(median(overHttp.warden) / httpFloor).toFixed(2)}** (budget at most 2x), ` +
        `${Math.round(1_000_000 / median(overHttp.warden)).toLocaleString('en')} records/s.`,
      '',
      `The floor without the log rows (records alone): ${ms(median(main.records))} ms; the minimal log rows make the floor ` +
        `${(median(main.floor) / median(main.records)).toFixed(2)}x the records-only insert.`,
      '',
      "**Against the service's own writer.** The service writes a large batch's rows faster than the floor's statement does: rows its " +
        'reads found none of stored by COPY straight into the table (behind a savepoint, in case one was stored after all), its logs by ' +
        "COPY. The same records and minimal logs through that writer, measured beside each batch: " +
        `${ms(median(main.staged))} ms for the 30-rule rows (the batch is ${(median(main.batch) / median(main.staged)).toFixed(2)}x that), ` +
        `${ms(median(noRules.staged))} ms without rules (${(median(noRules.batch) / median(noRules.staged)).toFixed(2)}x), ` +
        `${ms(median(customers.staged))} ms for the customers (${(median(customers.batch) / median(customers.staged)).toFixed(2)}x). ` +
        'These ratios show what validation, the reads, scoring, the full logs and the alerts add beyond the service\'s own way of writing.',
      '',
      '### Where a 30-rule batch spends its time',
      '',
      ...phaseTable(main),
      '',
      `SQL statements per batch: ${main.roundTrips}, besides the alerts' own. The customers with their stored history in one statement (sent ` +
        'before validation, from the records as sent, and read while the records are validated; a range the valid records need beyond it would ' +
        'be read again); BEGIN; a savepoint and the records, new as the read found them, by COPY straight into the table (the logs built ' +
        'meanwhile; were one stored after all, PostgreSQL would refuse the COPY, and the batch would go back to the savepoint, COPY the ' +
        'records into a temporary staging table and upsert them from there); COPY of the execution logs; the alerts (cases module: the upsert of their cases, COPY of ' +
        'the alerts and one statement for the staff notifications, when any record raises one); COMMIT. A batch of up to 32 scored records writes its records and logs in one statement. ' +
        'Events and rules come from the NOTIFY-invalidated caches; the reads and the upserts are named prepared statements. ' +
        `Alerts raised per batch: ${median(main.alerts)} of 1000 records (these rules over this history flag every record), so the alerts' ` +
        `COPY writes 1000 alert rows and extends the cases of ${CUSTOMERS} customers in every batch: the "alerts and commit" phase. ` +
        `Peak heap growth during a batch started from a forced full GC: ${ms(main.heapGrowthMb)} MB (budget 50 MB; ${HEAP_RUNS} such batches, ` +
        `taking ${main.afterGc.map(ms).join(' and ')} ms, not in the medians above). Longest event-loop stall during a batch: ` +
        `${ms(main.stallMs)} ms server side, ${ms(overHttp.stallMs)} ms over HTTP (a /healthz arriving then waits at most that long; budget 50 ms).`,
      '',
      ...phaseTable(noRules),
      '',
      ...phaseTable(customers),
      '',
      '### Cost growth',
      '',
      '| financial batch of 1000 | median ms | floor ms | ratio |',
      '|---|---|---|---|',
      ...[0, 10, 30, 100].map((count) => {
        const result = byRules.get(count)!;
        return `| ${count} rules, ${HISTORY} stored per customer | ${ms(median(result.batch))} | ${ms(median(result.floor))} | ${ratio(result).toFixed(2)} |`;
      }),
      `| 30 rules, ${LONG_HISTORY} stored per customer (${LONG_HISTORY - HISTORY} older than 30 days) | ${ms(median(longHistory.batch))} | ${ms(median(longHistory.floor))} | ${ratio(longHistory).toFixed(2)} |`,
      '',
      `Validation with the customers-and-history read beside it, then the aggregates: ${ms(median(main.phases.map(historyPhases)))} ms at ${HISTORY} stored per customer, ` +
        `${ms(median(longHistory.phases.map(historyPhases)))} ms at ${LONG_HISTORY} (the window query reads only the window).`,
      '',
      `Screening one name over ${LIST_SIZE.toLocaleString('en')} entries (one thread, ${perName.length} names): median ${median(perName).toFixed(3)} ms, ` +
        `p95 ${p95(perName).toFixed(3)} ms (budget 1 ms). Index build: ${ms(buildMs)} ms (once per list version, shared with the workers).`,
    ];
    console.log(lines.join('\n'));
    await writeSection('ingest', lines.join('\n'));
  });
}
