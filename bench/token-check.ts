import { fork } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { benchDatabaseUrl } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 10);
const CONNECTIONS = 20;

interface Ports {
  barePort: number;
  wardenPort: number;
  token: string;
}

function load(url: string, headers: Record<string, string> = {}) {
  return autocannon({ url, headers, connections: CONNECTIONS, duration: DURATION_S, pipelining: 1 });
}

/** Token check requests per second against a bare Koa hello-world in the same run. */
export async function benchTokenCheck(): Promise<void> {
  const database = await benchDatabaseUrl();
  const servers = fork(path.resolve(import.meta.dirname, 'token-check-servers.ts'), {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, BENCH_DATABASE_URL: database.url },
  });
  try {
    const ports = await new Promise<Ports>((resolve, reject) => {
      servers.once('message', (message) => resolve(message as Ports));
      servers.once('exit', (code) => reject(new Error(`bench servers exited with ${code}`)));
    });
    const base = `http://127.0.0.1:${ports.wardenPort}/api/merchant/auth/check/`;
    await load(base, { authorization: `Bearer ${ports.token}` }); // warm-up: JIT, pool connections
    const bare = await load(`http://127.0.0.1:${ports.barePort}/`);
    const check = await load(base, { authorization: `Bearer ${ports.token}` });
    if (check.non2xx > 0) throw new Error(`token check answered ${check.non2xx} non-2xx responses`);
    const ratio = check.requests.average / bare.requests.average;
    const lines = [
      '## Token check (`GET /api/merchant/auth/check/`) versus a bare Koa hello-world',
      '',
      `Machine: ${machineLine()}. ${CONNECTIONS} connections, ${DURATION_S} s each, servers in one child process, autocannon in the parent.`,
      '',
      '| server | requests/s (mean) | p50 ms | p99 ms |',
      '|---|---|---|---|',
      `| bare Koa hello-world | ${Math.round(bare.requests.average)} | ${bare.latency.p50} | ${bare.latency.p99} |`,
      `| Warden token check | ${Math.round(check.requests.average)} | ${check.latency.p50} | ${check.latency.p99} |`,
      '',
      `Ratio (token check / bare): **${ratio.toFixed(2)}**. Each check runs the full middleware: request id, access log line, metrics, JWT verification (remembered by token text after the first), the credential from the NOTIFY-invalidated cache, the IP allow list.`,
    ];
    console.log(lines.join('\n'));
    await writeSection('token-check', lines.join('\n'));
  } finally {
    servers.kill();
    await database.stop();
  }
}
