import { fork } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { benchDatabaseUrl } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = 10;
const STEADY_RATE = 100;

/** Single-record financial upserts under sustained load, over HTTP, each with a new transaction_ref. */
export async function benchUpsertLoad(): Promise<void> {
  const database = await benchDatabaseUrl();
  const server = fork(path.resolve(import.meta.dirname, 'upsert-load-server.ts'), {
    execArgv: ['--import', 'tsx', ...(process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [])],
    env: { ...process.env, BENCH_DATABASE_URL: database.url },
  });
  try {
    const { port, token } = await new Promise<{ port: number; token: string }>((resolve, reject) => {
      server.once('message', (message) => resolve(message as { port: number; token: string }));
      server.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
    });
    let sequence = 0;
    const run = (duration: number, overallRate?: number, connections = CONNECTIONS) =>
      autocannon({
        ...(overallRate ? { overallRate } : {}),
        url: `http://127.0.0.1:${port}/api/transaction/financial/upsert/`,
        method: 'POST',
        connections,
        duration,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        requests: [
          {
            setupRequest: (request) => ({
              ...request,
              body: JSON.stringify({
                customer_ref: `c-${sequence % 2000}`,
                event_slug: sequence % 2 ? 'deposit' : 'withdrawal',
                amount: ((sequence % 5000) + 1).toFixed(2),
                currency: 'EUR',
                transaction_ref: `load-${sequence++}`,
                io_type: sequence % 2,
                event_date: new Date().toISOString(),
                device_id: `dev-${sequence % 300}`,
                ip_address: '198.51.100.7',
              }),
            }),
          },
        ],
      });
    await run(3);
    const saturated = await run(DURATION_S);
    const steady = await run(DURATION_S, STEADY_RATE);
    const sequential = await run(DURATION_S, undefined, 1);
    for (const result of [saturated, steady, sequential]) if (result.non2xx > 0) throw new Error(`${result.non2xx} non-2xx responses`);
    const lines = [
      '## Single-record financial upserts under sustained load (HTTP)',
      '',
      `Machine: ${machineLine()}. autocannon, ${CONNECTIONS} connections, ${DURATION_S} s, one record per request with a new ` +
        'transaction_ref, 30 active rules, server in a child process. Command: `npm run bench upsert-load`.',
      '',
      '| load | requests/s (mean) | p50 ms | p99 ms | budget |',
      '|---|---|---|---|---|',
      `| saturated (as fast as 10 connections go) | ${Math.round(saturated.requests.average)} | ${saturated.latency.p50} | ${saturated.latency.p99} | |`,
      `| steady ${STEADY_RATE} requests/s over ${CONNECTIONS} connections | ${Math.round(steady.requests.average)} | ${steady.latency.p50} | ${steady.latency.p99} | p99 10 ms |`,
      `| one connection, one request at a time | ${Math.round(sequential.requests.average)} | ${sequential.latency.p50} | ${sequential.latency.p99} | |`,
      '',
      'At saturation the latency is mostly queueing behind the 2 cores (load generator included); the one-connection row is the service time.',
    ];
    console.log(lines.join('\n'));
    await writeSection('upsert-load', lines.join('\n'));
  } finally {
    server.kill('SIGINT');
    await new Promise((resolve) => server.once('exit', resolve));
    await database.stop();
  }
}
