/**
 * The ingestion hot path, server side (no HTTP): a financial batch of 1000 records with 30 rules
 * including velocity aggregates, against the bare insert of the same rows in the same run; a
 * customer batch of 1000 with screening over a 100,000-entry generated list; and screening time
 * per name over that list.
 */
import { randomUUID } from 'node:crypto';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createLogger } from '../src/logger.ts';
import { upsertCustomers } from '../src/modules/customer/service.ts';
import { defineEvent } from '../src/modules/events/service.ts';
import { loadRules } from '../src/modules/rules/store.ts';
import { SanctionsIndex } from '../src/modules/screening/sanctions/matcher.ts';
import { replaceSource } from '../src/modules/screening/sanctions/store.ts';
import { FINANCIAL, upsertTransactions } from '../src/modules/transaction/service.ts';
import { buildContext } from '../src/server.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { benchmarkRules, financialRecords, seedCustomers } from './fixture-data.ts';
import { random } from './random.ts';
import { generateSanctionEntries } from './generate-sanctions.ts';
import { machineLine, writeSection } from './results.ts';

const RUNS = Number(process.env.BENCH_RUNS ?? 30);
const CUSTOMERS = 2000;
const HISTORY = 50_000;
const LIST_SIZE = 100_000;
const system = { type: 'system', id: 'bench' } as const;

function stats(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { median: at(0.5), p95: at(0.95), min: sorted[0]!, mean: samples.reduce((a, b) => a + b, 0) / samples.length };
}
const ms = (value: number) => value.toFixed(1);

export async function benchIngest(): Promise<void> {
  const database = await benchDatabaseUrl();
  const knex = createKnex(database.url, 10);
  try {
    await knex.raw('drop schema if exists public cascade; create schema public');
    await migrateToLatest(knex);
    const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: database.url });
    const app = await buildContext(config, knex, createLogger('silent'));
    try {
      await defineEvent(knex, { slug: 'deposit', name: 'Deposit', type: 1, active: true }, system);
      await defineEvent(knex, { slug: 'withdrawal', name: 'Withdrawal', type: 1, active: true }, system);
      const rules = await benchmarkRules();
      await loadRules(knex, rules, system);
      const activeFinancial = rules.filter((rule) => rule.target === 'financial' && rule.active).length;
      await seedCustomers(knex, CUSTOMERS);
      // History for the aggregates: 50,000 transactions over the last 30 days.
      for (let part = 0; part < HISTORY / 1000; part++) {
        await upsertTransactions(app, FINANCIAL, financialRecords(1000, CUSTOMERS, `h${part}`, 1000 + part, 30 * 24), system, 0);
      }
      await knex.raw('analyze');

      const batchTimes: number[] = [];
      const bareTimes: number[] = [];
      for (let run = 0; run < RUNS + 3; run++) {
        const records = financialRecords(1000, CUSTOMERS, `b${run}`, run, 20);
        const started = performance.now();
        const results = await upsertTransactions(app, FINANCIAL, records, system);
        const elapsed = performance.now() - started;
        if (results.some((result) => result.action !== 'created' || !result.rule_check)) throw new Error('benchmark batch was not fully scored');

        // The bare insert: the same 1000 rows, one multi-row INSERT, no validation, rules or logs.
        const customerIds = new Map((await knex('customers').select('id', 'customer_ref')).map((row) => [row.customer_ref, row.id]));
        const bareRows = records.map((record) => ({
          ...record,
          id: randomUUID(),
          transaction_ref: `bare-${record.transaction_ref}`,
          customer_id: customerIds.get(record.customer_ref as string),
          raw: JSON.stringify(record),
          rule_check: true,
          created_by: 'system:bench',
          updated_by: 'system:bench',
        }));
        const bareStarted = performance.now();
        await knex.transaction((trx) => trx('financial_transactions').insert(bareRows));
        const bareElapsed = performance.now() - bareStarted;
        if (run >= 3) {
          batchTimes.push(elapsed);
          bareTimes.push(bareElapsed);
        }
      }
      const batch = stats(batchTimes);
      const bare = stats(bareTimes);

      // Sanctions: a 100,000-entry generated list, a customer batch, and per-name screening.
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
      const screening = stats(perName);

      const customerTimes: number[] = [];
      for (let run = 0; run < Math.max(5, Math.floor(RUNS / 3)) + 1; run++) {
        const customers = Array.from({ length: 1000 }, (_, i) => ({
          customer_ref: `s${run}-${i}`,
          first_name: names[(run * 1000 + i) % names.length]!.split(' ')[0],
          last_name: names[(run * 1000 + i) % names.length]!.split(' ').slice(1).join(' '),
          email: `user${i}@example.com`,
          ip_address: `203.0.113.${i % 255}`,
          birth_date: '1980-05-05',
          nationality: 'DEU',
        }));
        const started = performance.now();
        await upsertCustomers(app, customers, system);
        if (run > 0) customerTimes.push(performance.now() - started);
      }
      const customer = stats(customerTimes);

      const lines = [
        '## Ingestion hot path (server side, no HTTP)',
        '',
        `Machine: ${machineLine()}. ${database.url.includes('54') || !process.env.DATABASE_URL ? 'Embedded PostgreSQL 18' : 'PostgreSQL from DATABASE_URL'} on the same machine. ` +
          `${config.lightWorkers} light workers. History: ${HISTORY.toLocaleString('en')} financial transactions of ${CUSTOMERS} customers over 30 days. ` +
          `Command: \`npm run bench ingest\`.`,
        '',
        `| measurement | median | p95 | budget |`,
        `|---|---|---|---|`,
        `| financial batch of 1000, ${activeFinancial} rules incl. aggregates (${RUNS} runs) | ${ms(batch.median)} ms | ${ms(batch.p95)} ms | 60 ms median |`,
        `| bare insert of the same 1000 rows | ${ms(bare.median)} ms | ${ms(bare.p95)} ms | |`,
        `| ratio batch / bare insert (medians) | ${(batch.median / bare.median).toFixed(2)} | | at most 2 |`,
        `| customer batch of 1000 with screening over ${LIST_SIZE.toLocaleString('en')} entries (${customerTimes.length} runs) | ${ms(customer.median)} ms | ${ms(customer.p95)} ms | |`,
        `| screening one name over ${LIST_SIZE.toLocaleString('en')} entries (${perName.length} names, one thread) | ${screening.median.toFixed(3)} ms | ${screening.p95.toFixed(3)} ms | 1 ms |`,
        '',
        `Financial throughput at the median: ${Math.round(1000 / (batch.median / 1000)).toLocaleString('en')} records/s. ` +
          `Sanctions index build: ${ms(buildMs)} ms for ${LIST_SIZE.toLocaleString('en')} entries (once per list version, shared with the workers).`,
      ];
      console.log(lines.join('\n'));
      await writeSection('ingest', lines.join('\n'));
    } finally {
      await app.close();
    }
  } finally {
    await knex.destroy();
    await database.stop();
  }
}
