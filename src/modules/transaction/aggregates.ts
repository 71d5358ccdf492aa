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
const DISTINCT = [
  ['devices', 'device_id'],
  ['ips', 'ip_address'],
  ['countries', 'country'],
] as const;

function historySelectList(): string {
  const columns: string[] = [];
  for (const [window] of WINDOWS) {
    const interval = window.replace('h', ' hours').replace('d', ' days');
    for (const [prefix, ioType] of DIRECTIONS) {
      const filter = `t.event_date >= b.event_date - interval '${interval}'${ioType === null ? '' : ` and t.io_type = ${ioType}`}`;
      columns.push(`count(t.id) filter (where ${filter}) as count_${prefix}${window}`);
      columns.push(`coalesce(sum(t.amount) filter (where ${filter}), 0)::float8 as sum_${prefix}${window}`);
    }
  }
  for (const [name, column] of DISTINCT) {
    columns.push(`array_remove(array_agg(distinct t.${column}) filter (where t.event_date >= b.event_date - interval '24 hours'), null) as ${name}_24h`);
    columns.push(`array_remove(array_agg(distinct t.${column}), null) as ${name}_30d`);
  }
  return columns.join(',\n  ');
}

const HISTORY_SQL = `
with b as (select * from unnest(?::int[], ?::uuid[], ?::timestamptz[]) as b(ord, customer_id, event_date))
select b.ord,
  ${historySelectList()}
from b
left join financial_transactions t
  on t.customer_id = b.customer_id
 and t.event_date < b.event_date
 and t.event_date >= b.event_date - interval '30 days'
 and t.transaction_ref not in (select unnest(?::text[]))
group by b.ord`;

const FIRST_TRANSACTION_SQL = `
select c.id as customer_id, f.event_date
from unnest(?::uuid[]) as c(id)
cross join lateral (
  select event_date from financial_transactions t
  where t.customer_id = c.id and t.transaction_ref not in (select unnest(?::text[]))
  order by event_date limit 1
) f`;

type HistoryRow = Record<string, number | string[]> & { ord: number };

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
  const historyByIndex = new Map<number, HistoryRow>((history.rows as HistoryRow[]).map((row) => [row.ord, row]));
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
    const row = historyByIndex.get(item.index)!;
    const aggregates: Aggregates = {};
    for (const [window] of WINDOWS) {
      for (const [prefix] of DIRECTIONS) {
        aggregates[`count_${prefix}${window}`] = Number(row[`count_${prefix}${window}`]);
        aggregates[`sum_${prefix}${window}`] = Number(row[`sum_${prefix}${window}`]);
      }
    }
    const sets: Record<string, Set<string>> = {};
    for (const [name] of DISTINCT) {
      sets[`${name}_24h`] = new Set(row[`${name}_24h`] as string[]);
      sets[`${name}_30d`] = new Set(row[`${name}_30d`] as string[]);
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
      for (const [name] of DISTINCT) {
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
