import type { Knex } from 'knex';
import { queryPrepared } from '../../db/knex.ts';
import { Slices } from '../../turns.ts';

/**
 * Batches with more wanted items than this compute their aggregates in time slices (turns.ts
 * Slices): with a long stored history each record reads hundreds of entries, and a 1000-record
 * batch in one stretch held the thread for 20-50 ms on a slow core (the budget for a stall is 50 ms).
 */
const SLICED_FROM = 250;

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
const DAY = 24 * HOUR;
const WINDOW_SPANS = [HOUR, DAY, 7 * DAY, 30 * DAY] as const;
const LONGEST = WINDOW_SPANS[3];
const STORED = Number.MAX_SAFE_INTEGER;

/**
 * The customers of a batch with their stored history, in one statement: for each customer (by
 * ref) its row, its financial transactions with event_date in [lo, hi) as ONE json value of six
 * columns, [at[], amount[], io_type[], device_id[], ip_address[], country[]] (parsing 10,000 rows
 * through the driver cost more than the query itself, and 10,000 small arrays more than 1,200
 * columns), its first stored transaction, and apart, with their refs,
 * its stored transactions whose refs the batch may re-send (`refs`): those count only if the
 * batch does not replace them, which is known once the batch is validated. The index
 * (customer_id, event_date) carries every column read, so the cost follows the window, not the
 * customer's whole history. `at` is milliseconds as an exact numeric, read as the nearest double.
 * The window's range is a row comparison and the first transaction is ordered by customer and
 * date: only that index can serve them, so statistics taken while the table held few customers
 * cannot make the dashboards' event_date index look as cheap and send the plan through every
 * customer's window (test/api/history-read.test.ts). Beside the row comparisons the customer is
 * bounded by `>=` and `<=`, not `=`: a btree scan must start from an equality key where there is one,
 * and with `t.customer_id = c.id` PostgreSQL started at the customer's first index entry and stepped
 * over all its older history (a batch's read 34 ms instead of 20 at 1,000 stored per customer, 950
 * of them older than the window); the row comparison, the first `>=` key, is the start instead.
 * Without any indexable bound on customer_id, the planner saw the window as a third of the table, and
 * a generic plan made while the table was new scanned all of it on every request.
 *
 * `one`: the same statement for one customer and at most one ref (a single-record request), with
 * plain parameters instead of arrays. PostgreSQL plans the array form afresh on every execution
 * (its generic plan, costed for ten keys, loses to a custom plan), which was 0.5-0.7 ms of
 * planning against 0.2 ms of execution for one customer; the plain form's generic plan is the
 * same index lookups and is kept after the fifth execution.
 */
const CUSTOMERS_WITH_HISTORY_SQL = (by: CustomerKey, columns: string, one: boolean) => `
with want as (${one ? `select $1::${by === 'id' ? 'uuid' : 'text'} as key, $2::timestamptz as lo, $3::timestamptz as hi` : `select * from unnest($1::${by === 'id' ? 'uuid' : 'text'}[], $2::timestamptz[], $3::timestamptz[]) as w(key, lo, hi)`}),
refs as materialized (${one ? 'select $4::text as ref where $4::text is not null' : 'select unnest($4::text[]) as ref'}),
resent as (
  select t.customer_id, json_agg(json_build_array(t.transaction_ref, extract(epoch from t.event_date) * 1000, t.amount, t.io_type, t.device_id, t.ip_address, t.country, t.id)) as entries
  from financial_transactions t where t.transaction_ref in (select ref from refs) group by t.customer_id
)
select ${columns},
  (select json_build_array(json_agg(extract(epoch from t.event_date) * 1000), json_agg(t.amount), json_agg(t.io_type), json_agg(t.device_id),
     json_agg(t.ip_address), json_agg(t.country))
   from financial_transactions t
   where (t.customer_id, t.event_date) >= (c.id, w.lo) and (t.customer_id, t.event_date) < (c.id, w.hi)
     and t.customer_id >= c.id and t.customer_id <= c.id
     and t.transaction_ref not in (select ref from refs)
   having count(*) > 0) as history_window,
  case when w.lo is not null then (select extract(epoch from f.event_date) * 1000 from financial_transactions f
   where f.customer_id = c.id and f.transaction_ref not in (select ref from refs)
   order by f.customer_id, f.event_date limit 1) end as history_first,
  r.entries as history_resent
from want w join customers c on c."${by}" = w.key left join resent r on r.customer_id = c.id`;

type HistoryEntry = [at: number, amount: number, ioType: number, device: string | null, ip: string | null, country: string | null];
/** History entries by column: every array as long as `at`. */
type HistoryColumns = [at: number[], amount: number[], ioType: number[], device: Array<string | null>, ip: Array<string | null>, country: Array<string | null>];

/** A customer's stored history as read by readCustomers. */
export interface CustomerHistory {
  /** The event_date range read, in milliseconds: [lo, hi). */
  lo: number;
  hi: number;
  /** Stored transactions in the range, but for those with a ref of `refs`; null for none. */
  window: HistoryColumns | null;
  /** The earliest stored transaction, but for those with a ref of `refs`. */
  first: number | null;
  /** Stored transactions (any date) with a ref of `refs`, as [ref, ...entry, id]. */
  resent: Array<[string, ...HistoryEntry, string]>;
}

/** The prepared statement of each shape of CUSTOMERS_WITH_HISTORY_SQL (by key and columns). */
const statementNames = new Map<string, string>();

/** How readCustomers names a customer. */
export type CustomerKey = 'customer_ref' | 'id';

/** What readCustomers asks for one customer: its row, and its history over [lo, hi) (none when lo is null). */
export interface CustomerRead {
  key: string;
  lo: number | null;
  hi: number | null;
}

/** The statement readCustomers runs (CUSTOMERS_WITH_HISTORY_SQL): a named prepared statement per text, and its values. */
export function customersStatement(by: CustomerKey, reads: CustomerRead[], refs: string[], columns: readonly string[]): { name: string; text: string; values: unknown[] } {
  const iso = (at: number | null) => (at === null ? null : new Date(at).toISOString());
  const one = reads.length === 1 && refs.length <= 1;
  const text = CUSTOMERS_WITH_HISTORY_SQL(by, columns.map((column) => `c."${column}"`).join(', '), one);
  let name = statementNames.get(text);
  if (!name) statementNames.set(text, (name = `warden_customers_${statementNames.size}`));
  const values = one
    ? [reads[0]!.key, iso(reads[0]!.lo), iso(reads[0]!.hi), refs[0] ?? null]
    : [reads.map((read) => read.key), reads.map((read) => iso(read.lo)), reads.map((read) => iso(read.hi)), refs];
  return { name, text, values };
}

/**
 * The customers asked for (those that exist), each with its history when a range was asked. `refs`
 * are the refs the batch may re-send (see CUSTOMERS_WITH_HISTORY_SQL). `columns` must include `by`.
 */
export async function readCustomers(
  db: Knex,
  by: CustomerKey,
  reads: CustomerRead[],
  refs: string[],
  columns: readonly string[],
): Promise<Array<{ customer: Record<string, unknown>; history: CustomerHistory | null }>> {
  if (reads.length === 0) return [];
  const statement = customersStatement(by, reads, refs, columns);
  const rows = await queryPrepared<Record<string, unknown>>(db, statement.name, statement.text, statement.values);
  const ranges = new Map(reads.map((read) => [read.key, read]));
  return rows.map((row) => {
    const { history_window: window, history_first: first, history_resent: resent, ...customer } = row;
    const range = ranges.get(customer[by] as string)!;
    const history: CustomerHistory | null =
      range.lo === null
        ? null
        : { lo: range.lo, hi: range.hi!, window: window as HistoryColumns | null, first: first === null ? null : Number(first), resent: (resent ?? []) as CustomerHistory['resent'] };
    return { customer, history };
  });
}

/** The instants a record can carry (years 0001-9999, as validation allows), in milliseconds. */
const FIRST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
const LAST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/**
 * Stored history sure to cover what a record dated `at` needs, for a date as sent: validation may
 * read a date without a zone differently from Date.parse (UTC against local time: less than a day
 * apart). Kept within the instants a record can carry; null for a date that does not parse.
 */
export function historyAround(at: number): { lo: number; hi: number } | null {
  if (Number.isNaN(at)) return null;
  return { lo: Math.min(LAST_INSTANT, Math.max(FIRST_INSTANT, at - LONGEST - DAY)), hi: Math.max(FIRST_INSTANT, Math.min(LAST_INSTANT, at + DAY)) };
}

/** The range of stored history the wanted items of each customer need: from 30 days before the earliest to the latest. */
export function historyRanges(items: AggregateItem[]): Map<string, { lo: number; hi: number }> {
  const ranges = new Map<string, { lo: number; hi: number }>();
  for (const item of items) {
    if (!item.wanted) continue;
    const range = ranges.get(item.customerId);
    if (!range) ranges.set(item.customerId, { lo: item.eventDate - LONGEST, hi: item.eventDate });
    else {
      range.lo = Math.min(range.lo, item.eventDate - LONGEST);
      range.hi = Math.max(range.hi, item.eventDate);
    }
  }
  return ranges;
}

/** One transaction of a customer's timeline: stored history or an earlier record of the batch. */
interface Entry {
  at: number;
  /** Batch position for batch records (ties in event_date); STORED for stored rows, which count only when strictly earlier. */
  index: number;
  cents: number;
  /** 0 credit, 1 debit, other values neither. */
  ioType: number;
  /** Interned device, ip and country (see Interned); -1 for none. */
  device: number;
  ip: number;
  country: number;
}

/** Decimal text or number to integer cents, exactly (amounts have at most 2 decimals). */
function toCents(amount: string | number): number {
  return Math.round(Number(amount) * 100);
}

const before = (a: { at: number; index: number }, b: { at: number; index: number }) => a.at < b.at || (a.at === b.at && a.index < b.index);

/**
 * Distinct values as small integers, so that the distinct values of a window are tallies in an
 * array (how many of the window's entries carry each) instead of a Set per record.
 */
class Interned {
  private readonly ids = new Map<string, number>();

  id(value: string | null): number {
    if (value === null) return -1;
    let id = this.ids.get(value);
    if (id === undefined) this.ids.set(value, (id = this.ids.size));
    return id;
  }

  /** Tally slots for one distinct count, one per interned value. */
  counts(): Int32Array {
    return new Int32Array(this.ids.size);
  }
}

/**
 * The aggregates of every wanted item (see aggregatesOf), its customers' history read for exactly
 * what the items need.
 */
export async function computeAggregates(db: Knex, items: AggregateItem[], batchRefs: string[]): Promise<Map<number, Aggregates>> {
  const reads = [...historyRanges(items)].map(([key, range]) => ({ key, ...range }));
  const histories = new Map((await readCustomers(db, 'id', reads, batchRefs, ['id'])).map(({ customer, history }) => [customer.id as string, history!]));
  return aggregatesOf(items, new Set(batchRefs), histories);
}

/**
 * Velocity aggregates (names in src/modules/rules/definitions.ts AGGREGATE_NAMES) for every
 * wanted item, over the customer's financial transactions strictly before it in event_date
 * order: its stored history (`histories`, by customer id, covering historyRanges(items)), plus
 * the batch's own earlier records. Stored versions of records the batch re-sends (`batchRefs`)
 * are left out, because the batch's version replaces them. Sums are kept in integer cents, so
 * they are exact.
 */
export async function aggregatesOf(items: AggregateItem[], batchRefs: ReadonlySet<string>, histories: ReadonlyMap<string, CustomerHistory>): Promise<Map<number, Aggregates>> {
  const wanted = items.filter((item) => item.wanted);
  const result = new Map<number, Aggregates>();
  if (wanted.length === 0) return result;

  const devices = new Interned();
  const ips = new Interned();
  const countries = new Interned();
  const timelines = new Map<string, Entry[]>();
  const firstStored = new Map<string, number>();
  const slices = wanted.length > SLICED_FROM ? new Slices() : null;
  const stored = (timeline: Entry[], at: number, amount: number, ioType: number, device: string | null, ip: string | null, country: string | null) =>
    timeline.push({ at, index: STORED, cents: toCents(amount), ioType, device: devices.id(device), ip: ips.id(ip), country: countries.id(country) });
  for (const customerId of historyRanges(items).keys()) {
    if (slices?.due()) await slices.next();
    const history = histories.get(customerId)!;
    const timeline: Entry[] = [];
    if (history.window) {
      const [at, amount, ioType, device, ip, country] = history.window;
      for (let row = 0; row < at.length; row++) stored(timeline, at[row]!, amount[row]!, ioType[row]!, device[row]!, ip[row]!, country[row]!);
    }
    let first = history.first;
    // A re-sent entry may lie outside the window read: lowerBound and `before` leave such entries out.
    for (const [ref, at, amount, ioType, device, ip, country] of history.resent) {
      if (batchRefs.has(ref)) continue;
      stored(timeline, at, amount, ioType, device, ip, country);
      if (first === null || at < first) first = at;
    }
    if (first !== null) firstStored.set(customerId, first);
    timelines.set(customerId, timeline);
  }
  // The earliest batch record of each customer: the only one that can be its first transaction.
  const batchFirst = new Map<string, { at: number; index: number }>();
  for (const item of items) {
    if (!item.contribution) continue;
    const { amount, ioType, deviceId, ip, country } = item.contribution;
    let timeline = timelines.get(item.customerId);
    if (!timeline) timelines.set(item.customerId, (timeline = []));
    const entry = { at: item.eventDate, index: item.index, cents: toCents(amount), ioType, device: devices.id(deviceId), ip: ips.id(ip), country: countries.id(country) };
    timeline.push(entry);
    const earliest = batchFirst.get(item.customerId);
    if (!earliest || before(entry, earliest)) batchFirst.set(item.customerId, entry);
  }
  for (const timeline of timelines.values()) timeline.sort((a, b) => a.at - b.at || (a.index < b.index ? -1 : a.index > b.index ? 1 : 0));

  // Each customer's wanted items in timeline order, so every window's bounds only move forward:
  // a window is kept as running sums, an entry added as the window's end passes it and taken away
  // as its start does, so a customer costs its entries plus its items, not their product (a
  // 1000-record batch over 100 stored per customer visited 100,000 entries, four windows each).
  const byCustomer = new Map<string, AggregateItem[]>();
  for (const item of wanted) {
    const own = byCustomer.get(item.customerId);
    if (own) own.push(item);
    else byCustomer.set(item.customerId, [item]);
  }
  // Per window (1h, 24h, 7d, 30d): its start (a timeline position), then count and cents for all,
  // credit and debit. Window sums are integer cents of entries inside the window only, so they are
  // exact, and equal to summing the window's entries one by one.
  const starts = new Int32Array(4);
  const counts = new Float64Array(12);
  const cents = new Float64Array(12);
  // How many entries of the 24-hour and 30-day windows carry each interned device, ip and country.
  const held = [devices.counts(), devices.counts(), ips.counts(), ips.counts(), countries.counts(), countries.counts()] as const;
  const distinct = new Int32Array(6);
  const NO_TIMELINE: Entry[] = [];
  const hold = (entry: Entry, long: number, sign: 1 | -1) => {
    // long: 0 for the 24-hour window's tallies, 1 for the 30-day window's.
    if (entry.device >= 0) distinct[long]! += tally(held[long]!, entry.device, sign);
    if (entry.ip >= 0) distinct[2 + long]! += tally(held[2 + long]!, entry.ip, sign);
    if (entry.country >= 0) distinct[4 + long]! += tally(held[4 + long]!, entry.country, sign);
  };
  const move = (window: number, entry: Entry, sign: 1 | -1) => {
    counts[window * 3]! += sign;
    cents[window * 3]! += sign * entry.cents;
    const direction = entry.ioType === 0 ? 1 : entry.ioType === 1 ? 2 : -1;
    if (direction > 0) {
      counts[window * 3 + direction]! += sign;
      cents[window * 3 + direction]! += sign * entry.cents;
    }
    if (window === 1) hold(entry, 0, sign);
    else if (window === 3) hold(entry, 1, sign);
  };
  for (const [customerId, own] of byCustomer) {
    if (own.length > 1) own.sort((a, b) => a.eventDate - b.eventDate || a.index - b.index);
    const timeline = timelines.get(customerId) ?? NO_TIMELINE;
    starts.fill(0);
    counts.fill(0);
    cents.fill(0);
    // The window's end: the first entry not before the current item.
    let end = 0;
    for (const item of own) {
      if (slices?.due()) await slices.next();
      const self = { at: item.eventDate, index: item.index };
      // Entries leave a window as its start passes them (only entries it holds: start <= end)...
      for (let window = 0; window < 4; window++) {
        const from = item.eventDate - WINDOW_SPANS[window]!;
        let start = starts[window]!;
        for (; start < end && timeline[start]!.at < from; start++) move(window, timeline[start]!, -1);
        starts[window] = start;
      }
      // ...and come in as the end passes them, unless already older than a window's start.
      for (; end < timeline.length && before(timeline[end]!, self); end++) {
        const entry = timeline[end]!;
        for (let window = 0; window < 4; window++) {
          if (starts[window] === end && entry.at < item.eventDate - WINDOW_SPANS[window]!) starts[window] = end + 1;
          else move(window, entry, 1);
        }
      }
      let first = firstStored.get(item.customerId) ?? null;
      const earliest = batchFirst.get(item.customerId);
      if (earliest && before(earliest, self)) first = first === null ? earliest.at : Math.min(first, earliest.at);
      // One literal with every name, in AGGREGATE_NAMES order: a fixed shape, cheap to build and to serialise.
      result.set(item.index, {
        count_1h: counts[0]!, sum_1h: cents[0]! / 100, count_credit_1h: counts[1]!, sum_credit_1h: cents[1]! / 100, count_debit_1h: counts[2]!, sum_debit_1h: cents[2]! / 100,
        count_24h: counts[3]!, sum_24h: cents[3]! / 100, count_credit_24h: counts[4]!, sum_credit_24h: cents[4]! / 100, count_debit_24h: counts[5]!, sum_debit_24h: cents[5]! / 100,
        count_7d: counts[6]!, sum_7d: cents[6]! / 100, count_credit_7d: counts[7]!, sum_credit_7d: cents[7]! / 100, count_debit_7d: counts[8]!, sum_debit_7d: cents[8]! / 100,
        count_30d: counts[9]!, sum_30d: cents[9]! / 100, count_credit_30d: counts[10]!, sum_credit_30d: cents[10]! / 100, count_debit_30d: counts[11]!, sum_debit_30d: cents[11]! / 100,
        distinct_devices_24h: distinct[0]!,
        distinct_devices_30d: distinct[1]!,
        distinct_ips_24h: distinct[2]!,
        distinct_ips_30d: distinct[3]!,
        distinct_countries_24h: distinct[4]!,
        distinct_countries_30d: distinct[5]!,
        days_since_first_transaction: first === null ? null : Math.floor((item.eventDate - first) / DAY),
        // sum_30d / count_30d rounded to cents, computed from sum_30d as before so stored contexts stay comparable.
        avg_amount_30d: counts[9] ? Math.round((cents[9]! / 100 / counts[9]!) * 100) / 100 : null,
      });
    }
    // The tallies start empty for the next customer.
    for (let start = starts[1]!; start < end; start++) hold(timeline[start]!, 0, -1);
    for (let start = starts[3]!; start < end; start++) hold(timeline[start]!, 1, -1);
  }
  // Results in the items' order, as before (the map is read by index, but keep its order stable).
  const ordered = new Map<number, Aggregates>();
  for (const item of wanted) ordered.set(item.index, result.get(item.index)!);
  return ordered;
}

/** Adds `sign` to a value's tally: +1 when the value enters the window's distinct set, -1 when it leaves it, else 0. */
function tally(counts: Int32Array, id: number, sign: 1 | -1): number {
  const before = counts[id]!;
  counts[id] = before + sign;
  return sign > 0 ? (before === 0 ? 1 : 0) : before === 1 ? -1 : 0;
}
