import { fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import autocannon from 'autocannon';
import { benchDatabaseUrl } from './bench-database.ts';
import os from 'node:os';
import { machineLine, writeSection } from './results.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 15);
const SOAK_S = Number(process.env.BENCH_SOAK_S ?? 1800);
const CONNECTIONS = 10;

export interface Server {
  child: ChildProcess;
  port: number;
  token: string;
  ask<T>(type: string, extra?: Record<string, unknown>): Promise<T>;
  /** Stops the child, and the database with it unless `keepDatabase`. */
  stop(keepDatabase?: boolean): Promise<void>;
}

/** The service in a child process on a fresh benchmark database (bench/upsert-load-server.ts). */
export async function startServer(env: Record<string, string> = {}, database?: { url: string; stop(): Promise<void> }): Promise<Server> {
  database ??= await benchDatabaseUrl();
  const child = fork(path.resolve(import.meta.dirname, 'upsert-load-server.ts'), {
    execArgv: ['--import', 'tsx', ...(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [])],
    env: { ...process.env, ...env, BENCH_DATABASE_URL: database.url },
  });
  const { port, token } = await new Promise<{ port: number; token: string }>((resolve, reject) => {
    child.once('message', (message) => resolve(message as { port: number; token: string }));
    child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
  });
  return {
    child,
    port,
    token,
    ask: <T>(type: string, extra: Record<string, unknown> = {}) =>
      new Promise<T>((resolve) => {
        const listener = (message: { type: string }) => {
          if (message.type !== type) return;
          child.off('message', listener);
          resolve(message as T);
        };
        child.on('message', listener);
        child.send({ type, ...extra });
      }),
    async stop(keepDatabase = false) {
      child.kill('SIGINT');
      await new Promise((resolve) => child.once('exit', resolve));
      if (!keepDatabase) await database!.stop();
    },
  };
}

/** One financial record, with a new transaction_ref each time, over the first `customers` benchmark customers (2000). */
export function recordSource(customers = 2000): () => string {
  let sequence = 0;
  const prefix = `load-${Date.now()}`;
  return () => {
    const body = JSON.stringify({
      customer_ref: `c-${sequence % customers}`,
      event_slug: sequence % 2 ? 'deposit' : 'withdrawal',
      amount: ((sequence % 5000) + 1).toFixed(2),
      currency: 'EUR',
      transaction_ref: `${prefix}-${sequence}`,
      io_type: sequence % 2,
      event_date: new Date().toISOString(),
      device_id: `dev-${sequence % 300}`,
      ip_address: '198.51.100.7',
    });
    sequence++;
    return body;
  };
}

/** As many single-record requests as `connections` keep-alive connections carry, back to back (autocannon). */
function saturate(server: Server, duration: number, connections = CONNECTIONS) {
  const next = recordSource();
  return autocannon({
    url: `http://127.0.0.1:${server.port}/api/transaction/financial/upsert/`,
    method: 'POST',
    connections,
    duration,
    headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
    requests: [{ setupRequest: (request) => ({ ...request, body: next() }) }],
  });
}

export interface SteadyResult {
  sent: number;
  failed: number;
  /** Why requests failed: the HTTP status or the socket error's code, with how many. */
  failures: Record<string, number>;
  /** Milliseconds from sending each request to the end of its response. */
  latencies: number[];
  /** How late each request left against its schedule (the load generator shares the cores). */
  lateness: number[];
}

/**
 * An open-loop load: one request every 1000/rate ms, on schedule whatever the responses do, over
 * at most `connections` keep-alive connections (a request waits for a free one, and that wait
 * counts in its latency). autocannon's rate option is not this: it sends each connection's quota
 * for the second back to back at the start of the second, a burst at saturation speed.
 */
export async function steady(server: Server, rate: number, seconds: number, connections = CONNECTIONS, next = recordSource()): Promise<SteadyResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const result: SteadyResult = { sent: 0, failed: 0, failures: {}, latencies: [], lateness: [] };
  const fail = (reason: string) => {
    result.failed++;
    result.failures[reason] = (result.failures[reason] ?? 0) + 1;
  };
  const post = (body: string) =>
    new Promise<void>((resolve) => {
      const sentAt = performance.now();
      const request = http.request(
        { host: '127.0.0.1', port: server.port, path: '/api/transaction/financial/upsert/', method: 'POST', agent, headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (response) => {
          response.resume();
          response.on('end', () => {
            if (response.statusCode === 200) result.latencies.push(performance.now() - sentAt);
            else fail(`HTTP ${response.statusCode}`);
            resolve();
          });
        },
      );
      request.on('error', (error: NodeJS.ErrnoException) => {
        fail(error.code ?? error.message);
        resolve();
      });
      request.end(body);
    });
  const pending: Array<Promise<void>> = [];
  const interval = 1000 / rate;
  const started = performance.now();
  for (let index = 0; index < rate * seconds; index++) {
    const due = started + index * interval;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    result.lateness.push(performance.now() - due);
    result.sent++;
    pending.push(post(next()));
  }
  await Promise.all(pending);
  agent.destroy();
  return result;
}

/** Milliseconds between two storage probes (see probeStorage). */
const PROBE_INTERVAL_MS = 50;

/**
 * Times a write of 8 KB and its fdatasync every PROBE_INTERVAL_MS in the system's temporary
 * directory (where the embedded PostgreSQL keeps its data; a DATABASE_URL server keeps its own
 * elsewhere), until `stop` is called; returns the times. Every commit waits for such a flush of the WAL, so a slow flush here at the same moment
 * is a slow commit there: the probe tells the storage's stalls from the service's own.
 */
export function probeStorage(): { stop(): Promise<number[]> } {
  const times: number[] = [];
  let running = true;
  const done = (async () => {
    const file = path.join(os.tmpdir(), `warden-probe-${process.pid}`);
    const handle = await fs.open(file, 'w');
    const block = Buffer.alloc(8192, 1);
    try {
      for (let index = 0; running; index++) {
        const started = performance.now();
        await handle.write(block, 0, block.length, (index % 64) * block.length);
        await handle.datasync();
        times.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
      }
    } finally {
      await handle.close();
      await fs.rm(file, { force: true });
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return times;
    },
  };
}

export function percentile(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** Single-record financial upserts: steady 100 and 300 requests/s, saturation, and one request at a time. */
export async function benchUpsertLoad(): Promise<void> {
  const server = await startServer();
  try {
    await saturate(server, 5);
    await server.ask('service-times');
    const ms = (value: number) => value.toFixed(1);
    const rows: string[] = [];
    let lateness = '';
    let storage = '';
    for (const [label, rate, budget] of [
      ['steady 100 requests/s', 100, 'p99 10 ms'],
      ['steady 300 requests/s', 300, 'p99 25 ms'],
    ] as const) {
      const probe = probeStorage();
      const result = await steady(server, rate, DURATION_S);
      const flushes = await probe.stop();
      if (result.failed > 0) throw new Error(`${result.failed} of ${result.sent} requests failed: ${JSON.stringify(result.failures)}`);
      const { times } = await server.ask<{ times: number[] }>('service-times');
      rows.push(
        `| ${label} | ${rate} | ${ms(percentile(result.latencies, 0.5))} | ${ms(percentile(result.latencies, 0.99))} | ${ms(percentile(times, 0.5))} | ${ms(percentile(times, 0.99))} | ${budget} |`,
      );
      lateness += ` ${rate} requests/s: ${ms(percentile(result.lateness, 0.99))} ms p99, ${ms(Math.max(...result.lateness))} ms at most.`;
      storage +=
        ` ${rate} requests/s: median ${ms(percentile(flushes, 0.5))} ms, p99 ${ms(percentile(flushes, 0.99))} ms, longest ${ms(Math.max(...flushes))} ms,` +
        ` ${flushes.filter((time) => time > 10).length} of ${flushes.length} over 10 ms.`;
    }
    for (const [label, connections] of [
      ['saturated (as fast as 10 connections go)', CONNECTIONS],
      ['one connection, one request at a time', 1],
    ] as const) {
      const result = await saturate(server, DURATION_S, connections);
      if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} non-2xx responses, ${result.errors} errors`);
      const { times } = await server.ask<{ times: number[] }>('service-times');
      rows.push(`| ${label} | ${Math.round(result.requests.average)} | ${result.latency.p50} | ${result.latency.p99} | ${ms(percentile(times, 0.5))} | ${ms(percentile(times, 0.99))} | |`);
    }
    const lines = [
      '## Single-record financial upserts under sustained load (HTTP)',
      '',
      `Machine: ${machineLine()}, load average ${os.loadavg()[0]!.toFixed(1)} at the end (other work shares the cores). The service in a child process ` +
        `(30 active financial rules, 2000 customers), the load from this process over ${CONNECTIONS} keep-alive connections unless said, ${DURATION_S} s per row, ` +
        'one record per request with a new transaction_ref. Steady rows are an open-loop load: one request every 10 ms (3.3 ms), sent on schedule ' +
        'whatever the responses do, latency from sending to the end of the response; the saturated and one-connection rows are autocannon ' +
        '(whole milliseconds), whose own rate option is not steady (it sends each connection\'s quota for the second back to back). ' +
        'Service time is measured inside the server from the request event to the response\'s finish: the one-connection row is the time per ' +
        'record without queueing, the other rows add the queueing in the event loop. Command: `npm run bench upsert-load`.',
      '',
      '| load | requests/s | client p50 ms | client p99 ms | service p50 ms | service p99 ms | budget |',
      '|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `The load generator shares the cores: how late its requests left against their schedule:${lateness}`,
      '',
      `The storage during the steady rows: a write of 8 KB and its fdatasync every ${PROBE_INTERVAL_MS} ms ` +
        `${process.env.DATABASE_URL ? "in this machine's temporary directory (PostgreSQL from DATABASE_URL keeps its data elsewhere)" : "beside PostgreSQL's data"} (every commit waits ` +
        `for such a flush of the WAL; a slow one holds the commits waiting then, and a request's latency with them):${storage}`,
    ];
    console.log(lines.join('\n'));
    await writeSection('upsert-load', lines.join('\n'));
  } finally {
    await server.stop();
  }
}

/** 100 single-record requests/s for BENCH_SOAK_S (30 minutes by default): the service's memory at the start and the end. */
export async function benchSoak(): Promise<void> {
  const server = await startServer();
  try {
    await steady(server, 100, 10);
    type Memory = { memory: NodeJS.MemoryUsage };
    const samples: Array<{ at: number; memory: NodeJS.MemoryUsage }> = [{ at: 0, memory: (await server.ask<Memory>('memory')).memory }];
    const started = Date.now();
    const sampler = setInterval(async () => {
      const sample = { at: (Date.now() - started) / 1000, memory: (await server.ask<Memory>('memory')).memory };
      samples.push(sample);
      console.log(`soak ${Math.round(sample.at)} s: RSS ${(sample.memory.rss / 2 ** 20).toFixed(0)} MB, heap used ${(sample.memory.heapUsed / 2 ** 20).toFixed(0)} MB`);
    }, 60_000);
    const result = await steady(server, 100, SOAK_S);
    clearInterval(sampler);
    samples.push({ at: (Date.now() - started) / 1000, memory: (await server.ask<Memory>('memory')).memory });
    await server.ask('service-times');
    const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(0);
    const first = samples[0]!.memory;
    const last = samples.at(-1)!.memory;
    const lines = [
      '## Memory under 30 minutes of steady load',
      '',
      `Machine: ${machineLine()}, load average ${os.loadavg()[0]!.toFixed(1)} at the end (other work shares the cores). ${Math.round(SOAK_S / 60)} minutes at 100 single-record financial requests/s (${result.sent.toLocaleString('en')} requests, ` +
        `${result.failed} failed${result.failed ? ` (${Object.entries(result.failures).map(([reason, count]) => `${reason}: ${count}`).join(', ')})` : ''}, client p99 ${percentile(result.latencies, 0.99).toFixed(1)} ms) after a 10 s warm-up; the service's memory sampled every minute. Command: \`npm run bench soak\`.`,
      '',
      `RSS ${mb(first.rss)} MB at the start, ${mb(last.rss)} MB at the end (highest ${mb(Math.max(...samples.map((sample) => sample.memory.rss)))} MB); ` +
        `heap used ${mb(first.heapUsed)} MB at the start, ${mb(last.heapUsed)} MB at the end.`,
      '',
      '| minute | RSS MB | heap used MB |',
      '|---|---|---|',
      ...samples.filter((_, index) => index % 5 === 0 || index === samples.length - 1).map((sample) => `| ${Math.round(sample.at / 60)} | ${mb(sample.memory.rss)} | ${mb(sample.memory.heapUsed)} |`),
    ];
    console.log(lines.join('\n'));
    await writeSection('soak', lines.join('\n'));
  } finally {
    await server.stop();
  }
}
