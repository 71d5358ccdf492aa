/**
 * The scoring path against honest floors (issue 39), the service in its own process
 * (bench/upsert-load-server.ts) over 200 customers with 100 stored transactions each in the 30-day
 * window and the 30 benchmark rules (velocity aggregates included); the load, the floors and a bare
 * HTTP echo (bench/echo-server.ts, its own process) from this one.
 *
 * `npm run bench single-record`: one record per request, one at a time, against the floor of
 * writing that record and its minimal log row in one committed transaction (one statement from a
 * plain pg client, a named prepared statement) into tables with only the indexes the scoring path
 * reads, plus the echo's round trip of the same body; the phases of one record inside the service;
 * the steady open-loop rows at 100 and 300 requests/s.
 *
 * `npm run bench ingest-floor`: the 1000-record batch over HTTP against the fastest floor (the
 * records and minimal logs by COPY into minimal-index tables, or the service's own writer if that is
 * faster) plus the echo; the first round's floor (json_to_recordset into the full tables) as a
 * second row; the same COPY into tables with every index the back office has, so the indexes' share
 * shows; then records/s with 1 and 2 light workers, one client and two.
 */
import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import pg from 'pg';
import { createKnex } from '../src/db/knex.ts';
import { copyIn, rowEncoder } from '../src/db/copy.ts';
import { timeOrderedId } from '../src/ids.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { financialRecords } from './fixture-data.ts';
import { cleanUp, FINANCIAL_ROW_COLUMNS, financialRows, floor as firstRoundFloor } from './ingest.ts';
import { machineLine, writeSection } from './results.ts';
import { percentile, probeStorage, recordSource, startServer, steady, type Server } from './upsert-load.ts';

const CUSTOMERS = 200;
const HISTORY = 100;
const SERVER_ENV = { BENCH_CUSTOMERS: String(CUSTOMERS), BENCH_HISTORY: String(HISTORY) };
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const PER_ROUND = Number(process.env.BENCH_PER_ROUND ?? 500);
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 15);
const BATCH_RUNS = Number(process.env.BENCH_RUNS ?? 15);
const BATCH_WARMUP = 5;
const UPSERT = '/api/transaction/financial/upsert/';

const ms = (value: number) => value.toFixed(2);
const load = () => os.loadavg().map((value) => value.toFixed(2)).join(' ');
function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** The bare echo in its own process. */
async function startEcho(): Promise<{ port: number; stop(): Promise<void> }> {
  const child: ChildProcess = fork(path.resolve(import.meta.dirname, 'echo-server.ts'), { execArgv: ['--import', 'tsx'] });
  const { port } = await new Promise<{ port: number }>((resolve, reject) => {
    child.once('message', (message) => resolve(message as { port: number }));
    child.once('exit', (code) => reject(new Error(`echo exited with ${code}`)));
  });
  return {
    port,
    async stop() {
      child.kill('SIGINT');
      await new Promise((resolve) => child.once('exit', resolve));
    },
  };
}

/** POSTs `body` on a keep-alive agent; the milliseconds to the end of the response, and its body. */
function post(agent: http.Agent, port: number, route: string, body: string, token?: string): Promise<{ ms: number; status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    if (token) headers.authorization = `Bearer ${token}`;
    const request = http.request({ host: '127.0.0.1', port, path: route, method: 'POST', agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ ms: performance.now() - started, status: response.statusCode!, text: Buffer.concat(chunks).toString('utf8') }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** The scoring path's indexes on financial_transactions: its key, the conflict key, the history window. */
const WINDOW_INDEX = '(customer_id, event_date) include (amount, io_type, device_id, ip_address, country, transaction_ref)';

/**
 * Floor tables in the same database, shaped exactly as the service's (same columns and defaults)
 * and holding the same stored history: `warden_floor` with only the indexes the scoring path reads
 * (the records' primary key, the unique transaction_ref it upserts on, the history window; the
 * logs' primary key), `warden_full` with every index the service's tables have (the back office's).
 */
async function createFloorTables(db: Knex): Promise<void> {
  await db.raw(`drop schema if exists warden_floor cascade; create schema warden_floor;
    create table warden_floor.financial_transactions (like public.financial_transactions including defaults);
    alter table warden_floor.financial_transactions add primary key (id);
    create unique index on warden_floor.financial_transactions (transaction_ref);
    create index on warden_floor.financial_transactions ${WINDOW_INDEX};
    create table warden_floor.execution_logs (like public.execution_logs including defaults);
    alter table warden_floor.execution_logs add primary key (id);
    insert into warden_floor.financial_transactions select * from public.financial_transactions;
    drop schema if exists warden_full cascade; create schema warden_full;
    create table warden_full.financial_transactions (like public.financial_transactions including all);
    create table warden_full.execution_logs (like public.execution_logs including all);
    insert into warden_full.financial_transactions select * from public.financial_transactions`);
  await db.raw('vacuum analyze warden_floor.financial_transactions, warden_floor.execution_logs, warden_full.financial_transactions, warden_full.execution_logs');
}

/** The indexes of a table, by name. */
async function indexNames(db: Knex, schema: string, table: string): Promise<string[]> {
  const result = await db.raw('select indexname from pg_indexes where schemaname = ? and tablename = ? order by indexname', [schema, table]);
  return (result.rows as Array<{ indexname: string }>).map((row) => row.indexname);
}

const SINGLE_COLUMNS = ['id', 'transaction_ref', 'customer_id', 'customer_ref', 'event_slug', 'amount', 'currency', 'io_type', 'event_date', 'device_id', 'ip_address', 'raw', 'score', 'decision', 'rule_check', 'log_id', 'created_by', 'updated_by'];
const SINGLE_TYPES = ['uuid', 'text', 'uuid', 'text', 'text', 'numeric', 'text', 'smallint', 'timestamptz', 'text', 'text', 'jsonb', 'numeric', 'text', 'boolean', 'uuid', 'text', 'text'];
/** One record and its minimal log row, one statement (one committed transaction), as the floor writes it. */
const SINGLE_FLOOR_SQL = `with r as (
  insert into warden_floor.financial_transactions (${SINGLE_COLUMNS.join(', ')}) values (${SINGLE_TYPES.map((type, index) => `$${index + 1}::${type}`).join(', ')})
  on conflict (transaction_ref) do update set ${SINGLE_COLUMNS.filter((name) => name !== 'id' && name !== 'transaction_ref' && name !== 'created_by').map((name) => `${name} = excluded.${name}`).join(', ')}
  returning id, log_id)
insert into warden_floor.execution_logs (id, target, record_id, score, decision, matched_rules, data_context, duration_us, actor)
select r.log_id, 'financial', r.id, 0, 'ACCEPT', '[]', '{}', 0, 'floor' from r`;

/** Writes one record (the body as sent) and its minimal log row; milliseconds to the commit's answer. */
async function floorWrite(client: pg.Client, body: string, customerIds: Map<string, string>): Promise<number> {
  const record = JSON.parse(body) as Record<string, unknown>;
  const values = [
    timeOrderedId(), `floor-${record.transaction_ref}`, customerIds.get(record.customer_ref as string), record.customer_ref, record.event_slug, record.amount, record.currency,
    record.io_type, record.event_date, record.device_id, record.ip_address, body, 0, 'ACCEPT', true, timeOrderedId(), 'floor', 'floor',
  ];
  const started = performance.now();
  await client.query({ name: 'warden_floor_single', text: SINGLE_FLOOR_SQL, values });
  return performance.now() - started;
}

async function customerIdsOf(db: Knex): Promise<Map<string, string>> {
  return new Map((await db('customers').select('id', 'customer_ref')).map((row) => [row.customer_ref as string, row.id as string]));
}

interface Round {
  service: number[];
  floor: number[];
  echo: number[];
  serviceTimes: number[];
  load: string;
}

/** `npm run bench single-record`. */
export async function benchSingleRecord(): Promise<void> {
  const database = await benchDatabaseUrl();
  const server = await startServer(SERVER_ENV, database);
  const echo = await startEcho();
  const db = createKnex(database.url, 2);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const echoAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    await createFloorTables(db);
    const customerIds = await customerIdsOf(db);
    const next = recordSource(CUSTOMERS);
    const one = async (round: Round | null) => {
      const body = next();
      const service = await post(agent, server.port, UPSERT, body, server.token);
      if (service.status !== 200 || !service.text.includes('"action":"created"')) throw new Error(`service answered ${service.status}: ${service.text.slice(0, 300)}`);
      const floor = await floorWrite(client, body, customerIds);
      const echoed = await post(echoAgent, echo.port, '/', body);
      if (round) {
        round.service.push(service.ms);
        round.floor.push(floor);
        round.echo.push(echoed.ms);
      }
    };
    for (let index = 0; index < 300; index++) await one(null);
    await server.ask('service-times');
    const rounds: Round[] = [];
    for (let r = 0; r < ROUNDS; r++) {
      const round: Round = { service: [], floor: [], echo: [], serviceTimes: [], load: '' };
      for (let index = 0; index < PER_ROUND; index++) await one(round);
      round.serviceTimes = (await server.ask<{ times: number[] }>('service-times')).times;
      round.load = load();
      rounds.push(round);
      console.log(`round ${r + 1}: service ${ms(median(round.service))} ms, floor ${ms(median(round.floor))} + echo ${ms(median(round.echo))} ms, load ${round.load}`);
    }
    const trace = await server.ask<{ phases: Record<string, number>; cpu: Record<string, number>; total: number; statements: Array<{ label: string; count: number; median: number }> }>('trace');
    const traceLoad = load();
    await server.ask('service-times');
    // Service time of the same requests over HTTP, measured inside the server (request event to the response's finish).
    const httpService = median(rounds.flatMap((round) => round.serviceTimes));

    const steadyRows: string[] = [];
    let storage = '';
    for (const [rate, budget] of [
      [100, 'p99 10 ms'],
      [300, 'p99 25 ms'],
    ] as const) {
      const probe = probeStorage();
      const result = await steady(server, rate, DURATION_S, 10, next);
      const flushes = await probe.stop();
      if (result.failed > 0) throw new Error(`${result.failed} of ${result.sent} requests failed: ${JSON.stringify(result.failures)}`);
      const { times } = await server.ask<{ times: number[] }>('service-times');
      steadyRows.push(
        `| steady ${rate} requests/s | ${ms(percentile(result.latencies, 0.5))} | ${ms(percentile(result.latencies, 0.99))} | ${ms(percentile(times, 0.5))} | ${ms(percentile(times, 0.99))} | ` +
          `${ms(percentile(result.lateness, 0.99))} | ${ms(percentile(flushes, 0.99))} | ${load()} | ${budget} |`,
      );
      storage += ` ${rate}/s: fdatasync median ${ms(percentile(flushes, 0.5))} ms, longest ${ms(Math.max(...flushes))} ms.`;
      console.log(steadyRows.at(-1));
    }

    const ratio = (round: Round) => median(round.service) / (median(round.floor) + median(round.echo));
    const ratios = rounds.map(ratio);
    const phaseNames = Object.keys(trace.phases);
    const lines = [
      '## One record per request against its floor (issue 39)',
      '',
      `Machine: ${machineLine()}. ${process.env.DATABASE_URL ? 'PostgreSQL from DATABASE_URL' : 'Embedded PostgreSQL'}, synchronous_commit on. The service in its own process ` +
        `(bench/upsert-load-server.ts: ${CUSTOMERS} customers with ${HISTORY} stored financial transactions each in the 30-day window, the 30 benchmark rules with velocity aggregates); ` +
        'the load, the floor and the echo from this process, the echo itself a bare node:http server in a third process. Command: `npm run bench single-record`.',
      '',
      `**The floor** of one record: the same record (the body as sent in \`raw\`, its columns typed) and a minimal execution-log row, written by a plain pg client in ONE ` +
        'committed statement (a named prepared upsert with the log insert as a CTE: one round trip, one commit) into tables shaped as the service\'s, holding the same history, with ' +
        'only the indexes the scoring path reads (records: primary key, unique transaction_ref, the history window; logs: primary key); plus a bare HTTP echo of the same body ' +
        `(parsed and answered back). Each request is followed by its floor write and its echo; ${ROUNDS} rounds of ${PER_ROUND} after 300 warm-up triples. Load average (1, 5, 15 min) after each round.`,
      '',
      '| round | service median ms (p99) | floor write median ms (p99) | echo median ms | ratio service / (write + echo) | load average |',
      '|---|---|---|---|---|---|',
      ...rounds.map(
        (round, index) =>
          `| ${index + 1} | ${ms(median(round.service))} (${ms(percentile(round.service, 0.99))}) | ${ms(median(round.floor))} (${ms(percentile(round.floor, 0.99))}) | ${ms(median(round.echo))} | ${ratios[index]!.toFixed(2)} | ${round.load} |`,
      ),
      '',
      `Median of the rounds' ratios: **${median(ratios).toFixed(2)}** (budget at most 2x, aim 1.5x).`,
      '',
      `### Where one record's time goes`,
      '',
      `${300} records scored inside the server without HTTP, one at a time (upsertTransactions with a BatchTrace; load ${traceLoad}): median ${ms(trace.total)} ms a record. ` +
        `The same requests over HTTP took a median ${ms(httpService)} ms inside the server (request event to the response's finish), so parsing the body, ` +
        `authenticating, routing and serialising the answer take about ${ms(Math.max(0, httpService - trace.total))} ms; the rest of the client's time is the loopback round trip.`,
      '',
      '| phase | median ms | CPU ms of the server |',
      '|---|---|---|',
      ...phaseNames.map((name) => `| ${name} | ${ms(trace.phases[name]!)} | ${ms(trace.cpu[name]!)} |`),
      '',
      'The statements knex ran for those records (the write transaction\'s BEGIN and COMMIT, the alerts\' and notifications\' statements), median round trip each:',
      '',
      '| statement (start of its text) | times | median ms |',
      '|---|---|---|',
      ...trace.statements.map((statement) => `| \`${statement.label.replaceAll('|', '/')}\` | ${statement.count} | ${ms(statement.median)} |`),
      '',
      '### Steady open-loop load over the same history',
      '',
      `One request every 10 ms (3.3 ms), on schedule whatever the responses do, over at most 10 keep-alive connections, ${DURATION_S} s a row; latency from sending to the end of the response.`,
      '',
      '| load | client p50 ms | client p99 ms | service p50 ms | service p99 ms | generator lateness p99 ms | storage probe p99 ms | load average | budget |',
      '|---|---|---|---|---|---|---|---|---|',
      ...steadyRows,
      '',
      `Storage probe (8 KB write and fdatasync every 50 ms beside PostgreSQL's data):${storage}`,
    ];
    console.log(lines.join('\n'));
    await writeSection('single-record', lines.join('\n'));
  } finally {
    agent.destroy();
    echoAgent.destroy();
    await client.end();
    await db.destroy();
    await echo.stop();
    await server.stop();
  }
}

/** The batch's rows and minimal logs by COPY in one transaction into `schema`'s tables: milliseconds to the commit's answer. */
async function copyFloor(client: pg.Client, schema: string, recordLines: string, logLines: string): Promise<number> {
  const started = performance.now();
  await client.query('begin');
  await copyIn(client as never, `copy ${schema}.financial_transactions (${Object.keys(FINANCIAL_ROW_COLUMNS).join(', ')}) from stdin`, [recordLines]);
  await copyIn(client as never, `copy ${schema}.execution_logs (id, target, record_id, score, decision, matched_rules, data_context, duration_us, actor) from stdin`, [logLines]);
  await client.query('commit');
  return performance.now() - started;
}

/**
 * What each index beyond the scoring path's own adds to a COPY of 1000 rows: for every such index of
 * the service's financial_transactions and execution_logs, the table with only the scoring path's
 * indexes (and the stored history, for the records) and the same table with that index too, COPY
 * into each alternately, `reps` times, in one transaction each; the median difference.
 */
export async function indexShares(db: Knex, client: pg.Client, recordLines: string, logLines: string, reps = 7): Promise<Array<{ table: string; index: string; base: number; added: number }>> {
  const minimal: Record<string, string[]> = {
    financial_transactions: ['financial_transactions_pkey', 'financial_transactions_transaction_ref_unique', 'financial_transactions_customer_window'],
    execution_logs: ['execution_logs_pkey'],
  };
  const columns: Record<string, string> = {
    financial_transactions: Object.keys(FINANCIAL_ROW_COLUMNS).join(', '),
    execution_logs: 'id, target, record_id, score, decision, matched_rules, data_context, duration_us, actor',
  };
  const shares: Array<{ table: string; index: string; base: number; added: number }> = [];
  for (const table of ['financial_transactions', 'execution_logs']) {
    const lines = table === 'execution_logs' ? logLines : recordLines;
    const indexes = (await db.raw('select indexname, indexdef from pg_indexes where schemaname = ? and tablename = ? order by indexname', ['public', table])).rows as Array<{ indexname: string; indexdef: string }>;
    for (const { indexname, indexdef } of indexes.filter((index) => !minimal[table]!.includes(index.indexname))) {
      await db.raw('drop schema if exists warden_idx cascade; create schema warden_idx');
      for (const name of ['base', 'cand']) {
        await db.raw(`create table warden_idx.${name} (like public.${table} including defaults); alter table warden_idx.${name} add primary key (id)`);
        if (table === 'financial_transactions') {
          await db.raw(`create unique index on warden_idx.${name} (transaction_ref); create index on warden_idx.${name} ${WINDOW_INDEX};
            insert into warden_idx.${name} select * from public.financial_transactions`);
        }
      }
      await db.raw(indexdef.replace(/^CREATE (UNIQUE )?INDEX \S+ ON public\.\S+/, (_, unique: string | undefined) => `CREATE ${unique ?? ''}INDEX ON warden_idx.cand`));
      await db.raw('vacuum analyze warden_idx.base, warden_idx.cand');
      const times: Record<string, number[]> = { base: [], cand: [] };
      for (let rep = 0; rep < reps; rep++) {
        for (const name of rep % 2 ? ['cand', 'base'] : ['base', 'cand']) {
          const started = performance.now();
          await client.query('begin');
          await copyIn(client as never, `copy warden_idx.${name} (${columns[table]}) from stdin`, [lines]);
          await client.query('commit');
          times[name]!.push(performance.now() - started);
          await client.query(table === 'financial_transactions' ? `delete from warden_idx.${name} where transaction_ref like 'batch%'` : `delete from warden_idx.${name}`);
          await client.query(`vacuum warden_idx.${name}`);
        }
      }
      shares.push({ table, index: indexname, base: median(times.base!), added: median(times.cand!) - median(times.base!) });
      console.log(`${indexname}: +${ms(shares.at(-1)!.added)} ms on ${ms(shares.at(-1)!.base)}`);
    }
  }
  await db.raw('drop schema if exists warden_idx cascade');
  return shares;
}

interface BatchRun {
  service: number[];
  echo: number[];
  copyMinimal: number[];
  copyFull: number[];
  firstRound: number[];
  staged: number[];
  load: string[];
}

/** records/s of 1000-record batches from `clients` clients at once, `batches` each. */
async function throughput(server: Server, db: Knex, clients: number, batches: number, tag: string): Promise<number> {
  const refs: string[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async (_, client) => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      for (let index = 0; index < batches; index++) {
        const records = financialRecords(1000, CUSTOMERS, `${tag}-${client}-${index}`, 900 + client * 100 + index, 20);
        refs.push(...records.map((record) => record.transaction_ref as string));
        const response = await post(agent, server.port, UPSERT, JSON.stringify(records), server.token);
        if (response.status !== 200) throw new Error(`batch answered ${response.status}`);
      }
      agent.destroy();
    }),
  );
  const elapsed = performance.now() - started;
  await cleanUp(db, 'financial_transactions', 'transaction_ref', refs);
  return (clients * batches * 1000 * 1000) / elapsed;
}

/** `npm run bench ingest-floor`. */
export async function benchIngestFloor(): Promise<void> {
  const database = await benchDatabaseUrl();
  let server = await startServer({ ...SERVER_ENV, WARDEN_LIGHT_WORKERS: '1' }, database);
  const echo = await startEcho();
  const db = createKnex(database.url, 4);
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const echoAgent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  try {
    await createFloorTables(db);
    const customerIds = await customerIdsOf(db);
    const encode = rowEncoder(FINANCIAL_ROW_COLUMNS);
    const run: BatchRun = { service: [], echo: [], copyMinimal: [], copyFull: [], firstRound: [], staged: [], load: [] };
    for (let index = 0; index < BATCH_WARMUP + BATCH_RUNS; index++) {
      const records = financialRecords(1000, CUSTOMERS, `batch${index}`, 300 + index, 20);
      const body = JSON.stringify(records);
      const service = await post(agent, server.port, UPSERT, body, server.token);
      const parsed = JSON.parse(service.text) as { data: { results: Array<{ action: string; log_id: string }> } };
      if (service.status !== 200 || parsed.data.results.some((item) => item.action !== 'created')) throw new Error(`batch failed: ${service.status}`);
      const echoed = await post(echoAgent, echo.port, '/', body);
      // The floors' rows as the service writes them (fresh ids), encoded before the clock starts: the floor is the write alone.
      const rows = financialRows(records, customerIds).map((row) => ({ ...row, id: timeOrderedId(), log_id: timeOrderedId() }));
      const logs = await db('execution_logs').whereIn('id', parsed.data.results.map((item) => item.log_id)).select('id', 'matched_rules');
      const codes = new Map(logs.map((log) => [log.id as string, (log.matched_rules as Array<{ code: string }>).map((rule) => rule.code)]));
      const matched = parsed.data.results.map((item) => codes.get(item.log_id) ?? []);
      const recordLines = rows.map(encode).join('');
      const logLines = rows.map((row, position) => `${row.log_id}\tfinancial\t${row.id}\t0\tACCEPT\t${JSON.stringify(matched[position])}\t{}\t0\tfloor\n`).join('');
      const copyMinimal = await copyFloor(client, 'warden_floor', recordLines, logLines);
      const copyFull = await copyFloor(client, 'warden_full', recordLines, logLines);
      const times = await firstRoundFloor(db, 'financial', 'financial_transactions', 'transaction_ref', FINANCIAL_ROW_COLUMNS, financialRows(records, customerIds), matched);
      await cleanUp(db, 'financial_transactions', 'transaction_ref', records.map((record) => record.transaction_ref as string));
      await db.raw(`delete from warden_floor.execution_logs; delete from warden_full.execution_logs;
        delete from warden_floor.financial_transactions where transaction_ref like 'batch%'; delete from warden_full.financial_transactions where transaction_ref like 'batch%'`);
      await db.raw(`vacuum warden_floor.financial_transactions, warden_full.financial_transactions, warden_floor.execution_logs, warden_full.execution_logs`);
      if (index < BATCH_WARMUP) continue;
      run.service.push(service.ms);
      run.echo.push(echoed.ms);
      run.copyMinimal.push(copyMinimal);
      run.copyFull.push(copyFull);
      run.firstRound.push(times.full);
      run.staged.push(times.staged);
      if ((index - BATCH_WARMUP) % 5 === 4) run.load.push(load());
      console.log(`batch ${index}: service ${ms(service.ms)}, echo ${ms(echoed.ms)}, COPY minimal ${ms(copyMinimal)}, COPY full ${ms(copyFull)}, first-round floor ${ms(times.full)}, own writer ${ms(times.staged)}`);
    }
    const m = (values: number[]) => median(values);
    const fastest = Math.min(m(run.copyMinimal), m(run.staged));
    const fastestName = m(run.copyMinimal) <= m(run.staged) ? 'COPY into minimal-index tables' : "the service's own writer";
    const ratioOf = (floorMs: number) => (m(run.service) / (floorMs + m(run.echo))).toFixed(2);
    const recordIndexes = await indexNames(db, 'public', 'financial_transactions');
    const logIndexes = await indexNames(db, 'public', 'execution_logs');

    // The phases of a batch inside the server (no HTTP), after the timed runs: 5 traced batches.
    type Traced = { phases: Record<string, number>; cpu: Record<string, number>; total: number; statements: Array<{ label: string; count: number; median: number }> };
    const traced = await server.ask<Traced>('trace', { count: 7, batch: 1000 });
    const tracedLoad = load();

    // records/s with 1 and 2 light workers, one client and two clients at once.
    const rates: string[] = [];
    for (const workers of [1, 2]) {
      // A fresh server on freshly seeded tables for each, so both see the same history.
      await server.stop(true);
      server = await startServer({ ...SERVER_ENV, WARDEN_LIGHT_WORKERS: String(workers) }, database);
      // A few batches to warm the new process.
      await throughput(server, db, 1, 5, `warm${workers}`);
      const oneClient = await throughput(server, db, 1, 10, `w${workers}c1`);
      const twoClients = await throughput(server, db, 2, 8, `w${workers}c2`);
      rates.push(`| ${workers} | ${Math.round(oneClient).toLocaleString('en')} | ${Math.round(twoClients).toLocaleString('en')} | ${load()} |`);
      console.log(rates.at(-1));
    }

    // Each back-office index's share of the write, on the rows of one more batch.
    const shareRecords = financialRecords(1000, CUSTOMERS, 'batchshare', 77, 20);
    const shareRows = financialRows(shareRecords, customerIds).map((row) => ({ ...row, id: timeOrderedId(), log_id: timeOrderedId() }));
    const shares = await indexShares(
      db,
      client,
      shareRows.map(encode).join(''),
      shareRows.map((row) => `${row.log_id}\tfinancial\t${row.id}\t0\tACCEPT\t["BENCH_01","BENCH_02"]\t{}\t0\tfloor\n`).join(''),
    );
    const sharesLoad = load();

    const lines = [
      '## The 1000-record batch against the fastest floor (issue 39)',
      '',
      `Machine: ${machineLine()}. ${process.env.DATABASE_URL ? 'PostgreSQL from DATABASE_URL' : 'Embedded PostgreSQL'}, synchronous_commit on. The service in its own process over HTTP ` +
        `(${CUSTOMERS} customers, ${HISTORY} stored financial transactions each in the 30-day window, the 30 benchmark rules; every record of these batches raises an alert), ` +
        `one 1000-record request at a time; medians of ${BATCH_RUNS} runs after ${BATCH_WARMUP} warm-up runs, each batch followed by its floors and what all wrote deleted and vacuumed. ` +
        `Load average (1, 5, 15 min) every 5 runs: ${run.load.join('; ')}. Command: \`npm run bench ingest-floor\`.`,
      '',
      '**The floors**, measured after each batch in the same run: (a) the same 1000 record rows (fresh ids) and one minimal execution-log row each by COPY, one transaction, ' +
        'into tables shaped as the service\'s, holding the same history, with only the indexes the scoring path reads (records: primary key, unique transaction_ref, the history window; ' +
        "logs: primary key), the rows encoded before the clock starts; (b) the same through the service's own writer (records/sql.ts, rows known new by COPY) into the full tables; " +
        '(c) the first round\'s floor: one json_to_recordset upsert of the records and one insert of the minimal logs into the full tables. Each plus a bare node:http echo of the same body ' +
        '(bench/echo-server.ts, its own process).',
      '',
      '| batch of 1000 (30 rules, over HTTP) | service median ms | floor ms | echo ms | ratio service / (floor + echo) | budget |',
      '|---|---|---|---|---|---|',
      `| against the fastest floor (${fastestName}) | ${ms(m(run.service))} | ${ms(fastest)} | ${ms(m(run.echo))} | **${ratioOf(fastest)}** | at most 2x (aim 1.5x) |`,
      `| against COPY into minimal-index tables | ${ms(m(run.service))} | ${ms(m(run.copyMinimal))} | ${ms(m(run.echo))} | ${ratioOf(m(run.copyMinimal))} | |`,
      `| against the service's own writer (full tables) | ${ms(m(run.service))} | ${ms(m(run.staged))} | ${ms(m(run.echo))} | ${ratioOf(m(run.staged))} | |`,
      `| against the first round's floor (json_to_recordset, full tables) | ${ms(m(run.service))} | ${ms(m(run.firstRound))} | ${ms(m(run.echo))} | ${ratioOf(m(run.firstRound))} | |`,
      '',
      `**The indexes' share.** The same COPY into tables with every index the service's tables have: ${ms(m(run.copyFull))} ms against ${ms(m(run.copyMinimal))} ms with the scoring path's alone ` +
        `(+${ms(m(run.copyFull) - m(run.copyMinimal))} ms, ${Math.round((100 * (m(run.copyFull) - m(run.copyMinimal))) / m(run.copyFull))} % of the full-index write). ` +
        `financial_transactions has ${recordIndexes.length} indexes (${recordIndexes.join(', ')}), execution_logs ${logIndexes.length} (${logIndexes.join(', ')}).`,
      '',
      `Each index beyond the scoring path's, alone: COPY of 1000 rows (minimal logs for execution_logs) in one transaction into the minimal-index table, and into the same table with that index added, alternately, 7 times each (load ${sharesLoad}):`,
      '',
      '| table | index | COPY without it, ms | added by it, ms |',
      '|---|---|---|---|',
      ...shares.map((share) => `| ${share.table} | ${share.index} | ${ms(share.base)} | ${ms(share.added)} |`),
      '',
      '### Where a batch\'s time goes',
      '',
      `7 batches of 1000 scored inside the server without HTTP after the timed runs (their rows stay, so the history is 35 records a customer longer; load ${tracedLoad}): median ${ms(traced.total)} ms a batch.`,
      '',
      '| phase | median ms | CPU ms of the server |',
      '|---|---|---|',
      ...Object.keys(traced.phases).map((name) => `| ${name} | ${ms(traced.phases[name]!)} | ${ms(traced.cpu[name]!)} |`),
      '',
      '### records/s with 1 and 2 light workers',
      '',
      'The same batches from one client (one request at a time, 10 batches) and from two clients at once (8 batches each), after 5 warm-up batches, the server restarted on freshly seeded tables with WARDEN_LIGHT_WORKERS set. The financial batch runs its validation, aggregates and rules on the request thread; the light pool screens customers only, so the worker count is not expected to move these figures (any difference is noise).',
      '',
      '| light workers | records/s, one client | records/s, two clients | load average |',
      '|---|---|---|---|',
      ...rates,
    ];
    console.log(lines.join('\n'));
    await writeSection('ingest-floor', lines.join('\n'));
  } finally {
    agent.destroy();
    echoAgent.destroy();
    await client.end();
    await db.destroy();
    await echo.stop();
    await server.stop();
  }
}
