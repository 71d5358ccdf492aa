/**
 * Not a benchmark: profiles the service process (node --cpu-prof, written to BENCH_PROFILE) while
 * it takes 1000-record batches and single records over the single-record benchmark's data
 * (200 customers, 100 stored each, 30 rules). `BENCH_PROFILE=/tmp/prof node --import tsx bench/profile-scoring.ts [batch|single]`.
 */
import http from 'node:http';
import { financialRecords } from './fixture-data.ts';
import { recordSource, startServer } from './upsert-load.ts';

const what = process.argv[2] ?? 'batch';
const server = await startServer({ BENCH_CUSTOMERS: '200', BENCH_HISTORY: '100' });
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const post = (body: string) =>
  new Promise<number>((resolve, reject) => {
    const request = http.request(
      { host: '127.0.0.1', port: server.port, path: '/api/transaction/financial/upsert/', method: 'POST', agent, headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode!));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
const started = performance.now();
if (what === 'batch') {
  for (let index = 0; index < 40; index++) await post(JSON.stringify(financialRecords(1000, 200, `prof${index}`, index, 20)));
} else {
  const next = recordSource(200);
  for (let index = 0; index < 3000; index++) await post(next());
}
console.log(`${what}: ${(performance.now() - started).toFixed(0)} ms`);
agent.destroy();
await server.stop();
process.exit(0);
