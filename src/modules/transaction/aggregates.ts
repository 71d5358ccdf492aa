import type { Knex } from 'knex';

/** A record whose aggregates are wanted, and what it adds to the aggregates of later records. */
export interface AggregateItem {
  /** Position in the batch: breaks event_date ties. */
  index: number;
  customerId: string;
  eventDate: number;
  /** Only financial records contribute to later records' aggregates. */
  contribution: { amount: number; ioType: number; deviceId: string | null; ip: string | null; country: string | null } | null;
  /** Whether this record is scored (rule_check); others only contribute. */
  wanted: boolean;
}

export type Aggregates = Record<string, number | null>;

const HOUR = 3_600_000;
const WINDOWS = [
  ['1h', HOUR],
  ['24h', 24 * HOUR],
  ['7d', 7 * 24 * HOUR],
  ['30d', 30 * 24 * HOUR],
] as const;
const DIRECTIONS = [
  ['', null],
  ['credit_', 0],
  ['debit_', 1],
] as const;
const DISTINCT = ['devices', 'ips', 'countries'] as const;

/**
 * Per record, one index range scan over the customer's previous 30 days, grouped into age
 * buckets (1h, 24h, 7d, 30d) and io_type: two aggregates per group instead of a filtered
 * aggregate per window, and a LATERAL join so the plan stays an index scan per record however
 * large the table grows. Devices, IPs and countries come back as plain arrays, de-duplicated in JS.
 */
const HISTORY_SQL = `
with b as (select * from unnest(?::int[], ?::uuid[], ?::timestamptz[]) as b(ord, customer_id, event_date)),
refs as materialized (select unnest(?::text[]) as ref)
select b.ord, x.bucket, x.io_type, x.n, x.amount, x.devices, x.ips, x.countries
from b cross join lateral (
  select case when t.event_date >= b.event_date - interval '1 hour' then 0
              when t.event_date >= b.event_date - interval '24 hours' then 1
              when t.event_date >= b.event_date - interval '7 days' then 2 else 3 end as bucket,
    t.io_type, count(*)::int as n, sum(t.amount)::float8 as amount,
    array_agg(t.device_id) as devices, array_agg(t.ip_address) as ips, array_agg(t.country) as countries
  from financial_transactions t
  where t.customer_id = b.customer_id and t.event_date < b.event_date and t.event_date >= b.event_date - interval '30 days'
    and t.transaction_ref not in (select ref from refs)
  group by 1, 2
) x`;

const FIRST_TRANSACTION_SQL = `
select c.id as customer_id, f.event_date
from unnest(?::uuid[]) as c(id)
cross join lateral (
  select event_date from financial_transactions t
  where t.customer_id = c.id and t.transaction_ref not in (select unnest(?::text[]))
  order by event_date limit 1
) f`;

interface HistoryRow {
  ord: number;
  /** 0: within 1h, 1: within 24h, 2: within 7d, 3: within 30d. */
  bucket: number;
  io_type: number;
  n: number;
  amount: number;
  devices: Array<string | null>;
  ips: Array<string | null>;
  countries: Array<string | null>;
}

/**
 * Velocity aggregates (names in src/modules/rules/definitions.ts AGGREGATE_NAMES) for every
 * wanted item, over the customer's financial transactions strictly before it in event_date
 * order: stored history from two set-based queries for the whole batch, plus the batch's own
 * earlier records. Stored versions of records the batch re-sends (`batchRefs`) are left out,
 * because the batch's version replaces them.
 */
export async function computeAggregates(db: Knex, items: AggregateItem[], batchRefs: string[]): Promise<Map<number, Aggregates>> {
  const wanted = items.filter((item) => item.wanted);
  const result = new Map<number, Aggregates>();
  if (wanted.length === 0) return result;

  const customerIds = [...new Set(wanted.map((item) => item.customerId))];
  const [history, firsts] = await Promise.all([
    db.raw(HISTORY_SQL, [
      wanted.map((item) => item.index),
      wanted.map((item) => item.customerId),
      wanted.map((item) => new Date(item.eventDate).toISOString()),
      batchRefs,
    ]),
    db.raw(FIRST_TRANSACTION_SQL, [customerIds, batchRefs]),
  ]);
  const historyByIndex = new Map<number, HistoryRow[]>();
  for (const row of history.rows as HistoryRow[]) historyByIndex.set(row.ord, [...(historyByIndex.get(row.ord) ?? []), row]);
  const firstStored = new Map<string, number>(
    (firsts.rows as Array<{ customer_id: string; event_date: Date }>).map((row) => [row.customer_id, row.event_date.getTime()]),
  );

  const batchByCustomer = new Map<string, AggregateItem[]>();
  for (const item of items) {
    if (!item.contribution) continue;
    const list = batchByCustomer.get(item.customerId) ?? [];
    list.push(item);
    batchByCustomer.set(item.customerId, list);
  }
  const before = (a: AggregateItem, b: AggregateItem) => a.eventDate < b.eventDate || (a.eventDate === b.eventDate && a.index < b.index);

  for (const item of wanted) {
    const aggregates: Aggregates = {};
    for (const [window] of WINDOWS) {
      for (const [prefix] of DIRECTIONS) {
        aggregates[`count_${prefix}${window}`] = 0;
        aggregates[`sum_${prefix}${window}`] = 0;
      }
    }
    const sets: Record<string, Set<string>> = {};
    for (const name of DISTINCT) {
      sets[`${name}_24h`] = new Set();
      sets[`${name}_30d`] = new Set();
    }
    for (const row of historyByIndex.get(item.index) ?? []) {
      // A bucket counts towards its own window and every longer one.
      WINDOWS.forEach(([window], windowIndex) => {
        if (row.bucket > windowIndex) return;
        for (const [prefix, ioType] of DIRECTIONS) {
          if (ioType !== null && ioType !== row.io_type) continue;
          aggregates[`count_${prefix}${window}`]! += row.n;
          aggregates[`sum_${prefix}${window}`]! += row.amount;
        }
      });
      const values = { devices: row.devices, ips: row.ips, countries: row.countries };
      for (const name of DISTINCT) {
        for (const value of values[name]) {
          if (value === null) continue;
          sets[`${name}_30d`]!.add(value);
          if (row.bucket <= 1) sets[`${name}_24h`]!.add(value);
        }
      }
    }
    let first = firstStored.get(item.customerId) ?? null;

    for (const earlier of batchByCustomer.get(item.customerId) ?? []) {
      if (!before(earlier, item)) continue;
      const contribution = earlier.contribution!;
      first = first === null ? earlier.eventDate : Math.min(first, earlier.eventDate);
      const age = item.eventDate - earlier.eventDate;
      for (const [window, span] of WINDOWS) {
        if (age > span) continue;
        for (const [prefix, ioType] of DIRECTIONS) {
          if (ioType !== null && ioType !== contribution.ioType) continue;
          aggregates[`count_${prefix}${window}`]! += 1;
          aggregates[`sum_${prefix}${window}`]! += contribution.amount;
        }
      }
      if (age > WINDOWS[3][1]) continue;
      const values = { devices: contribution.deviceId, ips: contribution.ip, countries: contribution.country };
      for (const name of DISTINCT) {
        const value = values[name];
        if (value === null) continue;
        sets[`${name}_30d`]!.add(value);
        if (age <= WINDOWS[1][1]) sets[`${name}_24h`]!.add(value);
      }
    }
    for (const [key, set] of Object.entries(sets)) aggregates[`distinct_${key}`] = set.size;
    for (const [window] of WINDOWS) {
      for (const [prefix] of DIRECTIONS) aggregates[`sum_${prefix}${window}`] = Math.round(aggregates[`sum_${prefix}${window}`]! * 100) / 100;
    }
    aggregates.days_since_first_transaction = first === null ? null : Math.floor((item.eventDate - first) / (24 * HOUR));
    aggregates.avg_amount_30d = aggregates.count_30d ? Math.round((aggregates.sum_30d! / aggregates.count_30d) * 100) / 100 : null;
    result.set(item.index, aggregates);
  }
  return result;
}
