/**
 * CSV export of a changelist over 1,000,000 stored financial events (issue 37): the whole list,
 * and a filtered one (a third REVIEW), through GET /admin/transaction/financialevent/export.csv
 * with a session cookie, on a database of its own (seeded as bench/backoffice.ts seeds its own).
 * Measured: wall time to the last byte, bytes and rows, throughput, and the process's peak RSS and
 * heap (sampled every 20 ms; the client reading the body runs in the same process and keeps only
 * counts), against the heap and RSS before the export.
 */
import http from 'node:http';
import os from 'node:os';
import { createKnex } from '../src/db/knex.ts';
import { permissionCodenames } from '../src/app/registrations.ts';
import { startSession, SESSION_COOKIE } from '../src/modules/backoffice/web/session.ts';
import { createUser } from '../src/modules/staff/service.ts';
import { seedCustomersAndEvents, serveBench, withOwnDatabase } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

const EVENTS = Number(process.env.BENCH_EXPORT_EVENTS ?? 1_000_000);
const CUSTOMERS = 2000;
const MB = 1024 * 1024;

async function seed(db: ReturnType<typeof createKnex>): Promise<void> {
  await seedCustomersAndEvents(db, CUSTOMERS, EVENTS);
  await db.raw('vacuum analyze');
}

interface Measured {
  seconds: number;
  bytes: number;
  rows: number;
  baseRss: number;
  peakRss: number;
  baseHeap: number;
  peakHeap: number;
}

async function measure(address: string, headers: Record<string, string>): Promise<Measured> {
  const baseRss = process.memoryUsage().rss;
  const baseHeap = process.memoryUsage().heapUsed;
  let peakRss = baseRss;
  let peakHeap = baseHeap;
  const sampler = setInterval(() => {
    const usage = process.memoryUsage();
    peakRss = Math.max(peakRss, usage.rss);
    peakHeap = Math.max(peakHeap, usage.heapUsed);
  }, 20);
  const started = performance.now();
  let bytes = 0;
  let rows = -1;
  try {
    const response = await fetch(address, { headers });
    if (response.status !== 200) throw new Error(`export answered ${response.status}: ${(await response.text()).slice(0, 300)}`);
    const reader = response.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.length;
      for (const byte of value) if (byte === 10) rows++;
    }
  } finally {
    clearInterval(sampler);
  }
  return { seconds: (performance.now() - started) / 1000, bytes, rows, baseRss, peakRss, baseHeap, peakHeap };
}

export async function benchExport(): Promise<void> {
  await withOwnDatabase('export', async (db, url) => {
    const lines: string[] = [];
    const seeding = performance.now();
    await seed(db);
    console.log(`seeded ${EVENTS} events in ${((performance.now() - seeding) / 1000).toFixed(1)} s`);
    const operator = { actor: { type: 'operator' as const, id: 'bench' }, known: new Set(permissionCodenames()) };
    const user = await createUser(db, { username: 'officer', password: 'a sturdy bench passphrase', permissions: ['transaction.view_financialevent'] }, operator);
    const service = await serveBench(db, url);
    const base = service.base;
    try {
      const { cookieValue } = await startSession(db, user.id);
      const cookie = { cookie: `${SESSION_COOKIE}=${cookieValue}` };
      lines.push(
        `Machine: ${machineLine()}. ${EVENTS.toLocaleString('en')} financial events over ${CUSTOMERS} customers; one export at a time, the client in the same process keeping only counts.`,
        '',
        '| export | rows | bytes | time | rows/s | peak RSS (before) | peak heap used (before) |',
        '|---|---|---|---|---|---|---|',
      );
      for (const [label, query] of [
        ['whole list, default ordering (newest first)', ''],
        ['decision REVIEW, ordered by amount descending', '?decision__exact=REVIEW&o=-4'],
      ] as const) {
        const result = await measure(`${base}/admin/transaction/financialevent/export.csv${query}`, cookie);
        lines.push(
          `| ${label} | ${result.rows.toLocaleString('en')} | ${(result.bytes / MB).toFixed(1)} MiB | ${result.seconds.toFixed(1)} s | ${Math.round(result.rows / result.seconds).toLocaleString('en')} | ${(result.peakRss / MB).toFixed(0)} MiB (${(result.baseRss / MB).toFixed(0)}) | ${(result.peakHeap / MB).toFixed(0)} MiB (${(result.baseHeap / MB).toFixed(0)}) |`,
        );
        console.log(lines.at(-1));
      }
      lines[0] += ` Load average ${os.loadavg()[0]!.toFixed(1)} after the exports (other work shares the cores).`;
      lines.push(
        '',
        'The export reads the list query through a server-side cursor, 1,000 rows a FETCH, and writes each batch only once the response has taken the previous one: memory stays flat whatever the row count. Peak heap used includes garbage not yet collected.',
      );
    } finally {
      await service.close();
    }
    const report = lines.join('\n');
    console.log(report);
    await writeSection('export', `## Changelist CSV export over 1,000,000 events (\`npm run bench export\`)\n\n${report}`);
  });
}
