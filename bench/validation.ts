/**
 * `npm run bench validation`: the validation of one 1000-record batch (the upsert hot path,
 * issue 17 budget), by itself: validateRecord over 1000 financial records and 1000 customers,
 * repeated, median and p90 of the per-batch time. No database; the records are the same shape
 * bench/ingest.ts sends.
 */
import { customerFields } from '../src/modules/customer/schemas.ts';
import { validateRecord, type FieldTable } from '../src/modules/records/fields.ts';
import { financialFields } from '../src/modules/transaction/schemas.ts';
import { financialRecords } from './fixture-data.ts';
import { random } from '../models/random.ts';
import { machineLine, writeSection } from './results.ts';

const BATCH = 1000;
const ROUNDS = 60;
const WARM_UP = 15;

function customerRecords(count: number, seed: number): Record<string, unknown>[] {
  const next = random(seed);
  return Array.from({ length: count }, (_, index) => ({
    customer_ref: `c-${index}`,
    customer_type: 1,
    first_name: ' Anna ',
    last_name: 'Schmidt',
    gender: 'Female',
    birth_date: '1984-03-05',
    nationality: next() < 0.5 ? 'DE' : 'NLD',
    email: `anna.${index}@example.org`,
    phone: '+49 30 1234567',
    ip_address: `198.51.${Math.floor(next() * 255)}.${Math.floor(next() * 255)}`,
    registration_date: '2024-01-02T03:04:05+02:00',
    source: 'web',
    extra: { campaign: 'spring', score: next() },
  }));
}

function time(table: FieldTable, records: Record<string, unknown>[]): number[] {
  const samples: number[] = [];
  for (let round = 0; round < WARM_UP + ROUNDS; round++) {
    const started = process.hrtime.bigint();
    let accepted = 0;
    for (const record of records) if (validateRecord(table, record).ok) accepted++;
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    if (accepted !== records.length) throw new Error(`only ${accepted} of ${records.length} records validated`);
    if (round >= WARM_UP) samples.push(ms);
  }
  return samples.sort((a, b) => a - b);
}

const quantile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

export async function benchValidation(): Promise<void> {
  const rows = [
    ['financial', time(financialFields, financialRecords(BATCH, 200, 'v', 7, 24))],
    ['customer', time(customerFields, customerRecords(BATCH, 11))],
  ] as const;
  const lines = rows.map(([name, samples]) => `| ${name} | ${quantile(samples, 0.5).toFixed(2)} | ${quantile(samples, 0.9).toFixed(2)} |`);
  const markdown = [
    '## Record validation (one 1000-record batch)',
    '',
    machineLine(),
    '',
    `validateRecord over ${BATCH} records, ${ROUNDS} rounds after ${WARM_UP} warm-up rounds, in one process (\`npm run bench validation\`).`,
    '',
    '| records | median ms | p90 ms |',
    '|---|---|---|',
    ...lines,
  ].join('\n');
  console.log(markdown);
  if (process.env.BENCH_WRITE !== '0') await writeSection('validation', markdown);
}
