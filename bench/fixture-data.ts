import fs from 'node:fs/promises';
import path from 'node:path';
import type { Knex } from 'knex';
import type { RuleInput } from '../src/modules/rules/definitions.ts';
import { parseRuleFile } from '../src/modules/rules/definitions.ts';
import { random } from '../models/random.ts';


/**
 * `count` active financial rules (30 by default) and the example file's customer and
 * non-financial rules: the example file's financial rules (16), or the first `count` of them,
 * plus generated ones over amounts and every aggregate family, so the benchmark pays for a
 * realistic rule set.
 */
export async function benchmarkRules(count = 30): Promise<RuleInput[]> {
  const file = JSON.parse(await fs.readFile(path.resolve(import.meta.dirname, '../rules/examples/aml-fraud.json'), 'utf8'));
  const financial = file.rules.filter((rule: { target: string }) => rule.target === 'financial');
  const others = file.rules.filter((rule: { target: string }) => rule.target !== 'financial');
  const windows = ['1h', '24h', '7d', '30d'];
  const extra = Array.from({ length: Math.max(0, count - financial.length) }, (_, index) => {
    const window = windows[index % 4]!;
    const expression =
      index % 3 === 0
        ? { '>': [{ var: `aggregates.count_debit_${window}` }, 5 + index] }
        : index % 3 === 1
          ? { and: [{ '>': [{ var: 'record.amount' }, 1000 * (index + 1)] }, { '>': [{ var: `aggregates.sum_credit_${window}` }, 500 * index] }] }
          : { '>=': [{ var: 'aggregates.distinct_ips_30d' }, 3 + index] };
    return { code: `BENCH_${String(index).padStart(2, '0')}`, name: `Benchmark rule ${index}`, target: 'financial', expression, score: 5 };
  });
  return parseRuleFile({ rules: [...others, ...financial.slice(0, count), ...extra] });
}

/** Customers c-0..c-(n-1), inserted directly. */
export async function seedCustomers(db: Knex, count: number): Promise<string[]> {
  const rows = Array.from({ length: count }, (_, index) => ({
    id: crypto.randomUUID(),
    customer_ref: `c-${index}`,
    raw: {},
    score: 0,
    decision: 'ACCEPT',
    sanction_score: 0,
    ip_address_score: 0,
    email_risk_score: 0,
    country: 'DEU',
    created_by: 'system:bench',
    updated_by: 'system:bench',
  }));
  for (let start = 0; start < rows.length; start += 1000) await db('customers').insert(rows.slice(start, start + 1000));
  return rows.map((row) => row.id);
}

/** Financial records of the given customers over the last `hours`, in the API's shape. */
export function financialRecords(count: number, customers: number, prefix: string, seed: number, hours: number): Record<string, unknown>[] {
  const next = random(seed);
  return Array.from({ length: count }, (_, index) => ({
    customer_ref: `c-${Math.floor(next() * customers)}`,
    event_slug: next() < 0.5 ? 'deposit' : 'withdrawal',
    amount: (Math.floor(next() * 2_000_000) / 100).toFixed(2),
    currency: 'EUR',
    transaction_ref: `${prefix}-${index}`,
    io_type: next() < 0.5 ? 0 : 1,
    event_date: new Date(Date.now() - next() * hours * 3_600_000).toISOString(),
    payment_method: 'card',
    device_id: `dev-${Math.floor(next() * 5000)}`,
    ip_address: `198.51.${Math.floor(next() * 255)}.${Math.floor(next() * 255)}`,
    channel: 1,
    geo: { country: ['DE', 'FR', 'NL', 'TR'][Math.floor(next() * 4)] },
    user_agent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64)',
  }));
}

/**
 * Rows of stored history per customer, straight into the table: `count` within the 30-day window,
 * or 31 to 731 days old. (The age is subtracted in parentheses: without them the older rows ran
 * from 31 days ago to 669 days ahead, and the 4 % of them in the last 31 days fell into the window,
 * so the 1,000-per-customer scenario read 18,000 window rows instead of 10,000.)
 */
export async function seedHistory(db: Knex, perCustomer: number, older: boolean): Promise<void> {
  const age = older ? `interval '31 days' + random() * interval '700 days'` : `random() * interval '30 days'`;
  await db.raw(
    `insert into financial_transactions (id, transaction_ref, customer_id, customer_ref, event_slug, amount, currency, io_type, event_date,
       payment_method, device_id, ip_address, channel, geo, user_agent, country, raw, status, rule_check, created_by, updated_by)
     select gen_random_uuid(), 'hist-' || ? || '-' || c.customer_ref || '-' || g, c.id, c.customer_ref,
       case when g % 2 = 0 then 'deposit' else 'withdrawal' end, round((random() * 20000)::numeric, 2), 'EUR', g % 2, now() - (${age}),
       'card', 'dev-' || floor(random() * 5000), '198.51.' || floor(random() * 255) || '.' || floor(random() * 255), 1,
       jsonb_build_object('country', (array['DE','FR','NL','TR'])[1 + floor(random() * 4)::int]), 'Mozilla/5.0', 'DE', '{}'::jsonb,
       'initiated', true, 'system:bench', 'system:bench'
     from customers c cross join generate_series(1, ?) g`,
    [older ? 'old' : 'win', perCustomer],
  );
  await db.raw('vacuum analyze financial_transactions');
}
