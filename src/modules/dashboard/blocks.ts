import { Decimal } from 'decimal.js';
import type { Knex } from 'knex';
import type { Principal } from '../staff/principal.ts';
import { z } from '../../http/openapi.ts';
import { formatTimestamp } from '../../timestamps.ts';

const DAY_MS = 86_400_000;
export const TREND_DAYS = 7;
export const CHART_DAYS = 30;
export const SERIES_DAYS = 14;
export const TOP_CUSTOMERS = 10;

/** The UTC day (YYYY-MM-DD) `offset` days before `now`'s. */
function day(now: Date, offset: number): string {
  return new Date(now.getTime() - offset * DAY_MS).toISOString().slice(0, 10);
}

function startOfDay(now: Date, offset: number): Date {
  return new Date(`${day(now, offset)}T00:00:00Z`);
}

/** `days` UTC days ending today, oldest first. */
export function lastDays(now: Date, days: number): string[] {
  return Array.from({ length: days }, (_, index) => day(now, days - 1 - index));
}

/**
 * A dashboard card: `value` is the state now (open alerts...), `trend` the new items per UTC day
 * over the last 7 days (oldest first, today last), `change` today's new items minus yesterday's.
 */
export interface CardSpec {
  key: string;
  label: string;
  /** app_label.model whose view permission shows the card; the card opens that list. */
  model: string;
  /** The list filters the card stands for (the app opens data/<model>/ with them). */
  filters: Record<string, string>;
  table: string;
  /** SQL condition of the state counted as value. */
  state: string;
  /** The column whose day counts the trend. */
  since: string;
  /** SQL condition on the rows counted by the trend (default: all). */
  trendWhere?: string;
}

export const CARDS: CardSpec[] = [
  { key: 'open_alerts', label: 'Open alerts', model: 'engine.alert', filters: { status__exact: 'open' }, table: 'alerts', state: "status = 'open'", since: 'created_at' },
  { key: 'open_cases', label: 'Open cases', model: 'engine.watchlist', filters: { status__exact: 'open' }, table: 'cases', state: "status <> 'closed'", since: 'opened_at' },
  {
    key: 'decisions_today',
    label: 'Decisions today',
    model: 'engine.compliancedecision',
    filters: {},
    table: 'compliance_decisions',
    state: "created_at >= date_trunc('day', now() at time zone 'UTC') at time zone 'UTC'",
    since: 'created_at',
  },
  { key: 'pending_approvals', label: 'Pending approvals', model: 'approval.approvalrequest', filters: { status__exact: 'pending' }, table: 'approval_requests', state: "status = 'pending'", since: 'created_at' },
  {
    key: 'high_risk_customers',
    label: 'High-risk customers',
    model: 'customer.customer',
    filters: { decision__exact: 'REJECT' },
    table: 'customers',
    state: "decision = 'REJECT'",
    since: 'created_at',
    trendWhere: "decision = 'REJECT'",
  },
  {
    key: 'sessions_waiting',
    label: 'Verification sessions waiting',
    model: 'document.documentverificationsession',
    filters: { status__exact: 'open' },
    table: 'verification_sessions',
    state: "status = 'open'",
    since: 'created_at',
  },
];

/** One card: its value and 7 daily counts in one statement. */
// The blocks' shapes, for the OpenAPI document; the functions below build them.
const TARGET = z.object({ model: z.string(), pk: z.string() });
export const CARD = z.object({
  key: z.string(),
  label: z.string(),
  value: z.number().int(),
  change: z.number().int(),
  change_percent: z.number().nullable(),
  trend: z.array(z.number().int()),
  target: z.object({ model: z.string(), filters: z.record(z.string(), z.string()) }),
});
export const DECISIONS_BY_DAY = z.object({
  days: z.array(z.string()),
  series: z.array(z.object({ decision: z.string(), values: z.array(z.number().int()) })),
  totals: z.record(z.string(), z.number().int()),
});
export const HIGH_VOLUME = z.object({
  days: z.number().int(),
  results: z.array(
    z.object({
      customer_ref: z.string().nullable(),
      name: z.string(),
      decision: z.string().nullable(),
      currency: z.string(),
      amount: z.string(),
      transactions: z.number().int(),
      target: TARGET.nullable(),
    }),
  ),
});
export const LOBBY = z.object({
  waiting: z.number().int(),
  queue: z.array(
    z.object({
      session_id: z.string(),
      customer_ref: z.string(),
      status: z.string(),
      offered_to_you: z.boolean(),
      enqueued_at: z.string(),
      waited_seconds: z.number().int(),
      target: TARGET,
    }),
  ),
  agents: z.object({ available: z.number().int(), in_call: z.number().int() }),
  you: z
    .object({
      status: z.string(),
      in_call: z.boolean(),
      call: z.object({ session_id: z.string(), customer_ref: z.string() }).nullable().openapi({ description: 'Your call in progress: taking it again resumes it (a new agent token; the end user\'s page reconnects)' }),
    })
    .nullable(),
});
const HOURS = z.number();
export const AGENT_SUMMARY = z.union([
  z.object({ agent: z.literal(false) }),
  z.object({
    agent: z.literal(true),
    today: z.object({ calls: z.number().int(), on_screen_hours: HOURS, waiting: z.number().int() }),
    recent: z.array(
      z.object({
        session_id: z.string(),
        customer_ref: z.string(),
        status: z.string(),
        taken_at: z.string(),
        ended_at: z.string().nullable(),
        duration_seconds: z.number().int(),
      }),
    ),
    kpis: z.object({ calls: z.number().int(), average_call_seconds: z.number().int().nullable(), on_screen_hours: HOURS, days: z.number().int() }),
    series: z.array(z.object({ day: z.string(), calls: z.number().int(), on_screen_hours: HOURS })),
    shifts: z.array(z.object({ start: z.string(), end: z.string().nullable() })),
    availability: z.string(),
    availability_label: z.string(),
    in_call: z.boolean(),
  }),
]);

/**
 * The cards, each its value and 7 daily counts, all in one statement: one round trip and one
 * connection whatever the number of cards (a page that read them side by side took a pool
 * connection per card, and the dashboard page's other reads queued behind them).
 */
export async function cards(db: Knex, specs: readonly CardSpec[], now: Date): Promise<z.infer<typeof CARD>[]> {
  if (!specs.length) return [];
  const from = startOfDay(now, TREND_DAYS - 1);
  const columns = specs.map(
    (spec, index) =>
      `(select count(*) from ${spec.table} where ${spec.state})::int as v${index},
       coalesce((select json_object_agg(d, n) from (
         select to_char(${spec.since} at time zone 'UTC', 'YYYY-MM-DD') as d, count(*)::int as n
         from ${spec.table} where ${spec.since} >= ? ${spec.trendWhere ? `and ${spec.trendWhere}` : ''} group by 1) t), '{}') as d${index}`,
  );
  const result = (await db.raw(`select ${columns.join(',\n')}`, specs.map(() => from))) as { rows: Record<string, unknown>[] };
  const row = result.rows[0]!;
  return specs.map((spec, index) => {
    const days = row[`d${index}`] as Record<string, number>;
    const trend = lastDays(now, TREND_DAYS).map((name) => days[name] ?? 0);
    const today = trend[TREND_DAYS - 1]!;
    const yesterday = trend[TREND_DAYS - 2]!;
    return {
      key: spec.key,
      label: spec.label,
      value: row[`v${index}`] as number,
      change: today - yesterday,
      change_percent: yesterday ? Math.round(((today - yesterday) / yesterday) * 1000) / 10 : null,
      trend,
      target: { model: spec.model, filters: spec.filters },
    };
  });
}

const DECISIONS = ['ACCEPT', 'REVIEW', 'REJECT'] as const;
/** Closed days are read again this often in the background: late events with an old event_date show up within it. */
export const CLOSED_DAYS_REFRESH_MS = 5 * 60_000;

interface ClosedDays {
  /** The UTC day the figures were computed for (they cover the 29 days before it). */
  today: string;
  computedAt: number;
  decisions: Map<string, number>;
  volumes: Map<string, { customerId: string; currency: string; amount: Decimal; transactions: number }>;
  refreshing?: Promise<void>;
}

/**
 * The 30-day blocks split their month: the 29 closed UTC days are computed once per day and
 * process (one scan of about 29 days of events) and refreshed every CLOSED_DAYS_REFRESH_MS in the
 * background; only today's events are read per request. Keyed by database, so tests and several
 * apps in one process never share figures.
 */
const closedDays = new WeakMap<object, ClosedDays>();

async function computeClosedDays(db: Knex, now: Date): Promise<ClosedDays> {
  const from = startOfDay(now, CHART_DAYS - 1);
  const to = startOfDay(now, 0);
  const [decisions, volumes] = await Promise.all([
    db.raw(
      `select to_char(day, 'YYYY-MM-DD') as d, decision, n from (
         select date_trunc('day', event_date at time zone 'UTC') as day, coalesce(decision, 'NONE') as decision, count(*)::int as n
         from financial_transactions where event_date >= ? and event_date < ? group by 1, 2) t`,
      [from, to],
    ) as Promise<{ rows: { d: string; decision: string; n: number }[] }>,
    db.raw(
      `select customer_id, currency, sum(amount)::text as amount, count(*)::int as transactions
       from financial_transactions where event_date >= ? and event_date < ? group by 1, 2`,
      [from, to],
    ) as Promise<{ rows: { customer_id: string; currency: string; amount: string; transactions: number }[] }>,
  ]);
  return {
    today: day(now, 0),
    computedAt: Date.now(),
    decisions: new Map(decisions.rows.map((row) => [`${row.d}|${row.decision}`, row.n])),
    volumes: new Map(
      volumes.rows.map((row) => [`${row.customer_id}|${row.currency}`, { customerId: row.customer_id, currency: row.currency, amount: new Decimal(row.amount), transactions: row.transactions }]),
    ),
  };
}

async function closedDaysOf(db: Knex, now: Date): Promise<ClosedDays> {
  const key = db.client.config as object;
  const cached = closedDays.get(key);
  if (!cached || cached.today !== day(now, 0)) {
    const fresh = await computeClosedDays(db, now);
    closedDays.set(key, fresh);
    return fresh;
  }
  if (Date.now() - cached.computedAt > CLOSED_DAYS_REFRESH_MS && !cached.refreshing) {
    cached.refreshing = computeClosedDays(db, now)
      .then((fresh) => {
        if (closedDays.get(key) === cached) closedDays.set(key, fresh);
      })
      .catch(() => {
        cached.refreshing = undefined;
      });
  }
  return cached;
}

/** Financial events per UTC day over 30 days (today last), by decision (events without one counted as NONE). */
export async function decisionsByDay(db: Knex, now: Date): Promise<z.infer<typeof DECISIONS_BY_DAY>> {
  const days = lastDays(now, CHART_DAYS);
  const [closed, todayRows] = await Promise.all([
    closedDaysOf(db, now),
    db.raw(
      `select coalesce(decision, 'NONE') as decision, count(*)::int as n from financial_transactions where event_date >= ? and event_date < ? group by 1`,
      [startOfDay(now, 0), startOfDay(now, -1)],
    ) as Promise<{ rows: { decision: string; n: number }[] }>,
  ]);
  const counts = new Map(closed.decisions);
  for (const row of todayRows.rows) counts.set(`${days[CHART_DAYS - 1]}|${row.decision}`, row.n);
  const decisions = [...DECISIONS, ...([...counts.keys()].some((key) => key.endsWith('|NONE')) ? ['NONE'] : [])];
  const series = decisions.map((decision) => ({ decision, values: days.map((name) => counts.get(`${name}|${decision}`) ?? 0) }));
  return {
    days,
    series,
    totals: Object.fromEntries(series.map((entry) => [entry.decision, entry.values.reduce((sum, value) => sum + value, 0)])),
  };
}

/**
 * The customers with the largest amount over the 30 UTC days ending today, per currency (amounts
 * are never added across currencies). `nameCustomers`: whether the viewer may view customers;
 * without it the rows carry the amounts only, never who the customer is.
 */
export async function highVolumeCustomers(db: Knex, now: Date, nameCustomers: boolean): Promise<z.infer<typeof HIGH_VOLUME>> {
  const [closed, todayRows] = await Promise.all([
    closedDaysOf(db, now),
    db.raw(
      `select customer_id, currency, sum(amount)::text as amount, count(*)::int as transactions
       from financial_transactions where event_date >= ? and event_date < ? group by 1, 2`,
      [startOfDay(now, 0), startOfDay(now, -1)],
    ) as Promise<{ rows: { customer_id: string; currency: string; amount: string; transactions: number }[] }>,
  ]);
  const totals = new Map(closed.volumes);
  for (const row of todayRows.rows) {
    const key = `${row.customer_id}|${row.currency}`;
    const before = totals.get(key);
    totals.set(key, {
      customerId: row.customer_id,
      currency: row.currency,
      amount: (before?.amount ?? new Decimal(0)).plus(row.amount),
      transactions: (before?.transactions ?? 0) + row.transactions,
    });
  }
  const top = [...totals.values()].sort((a, b) => b.amount.comparedTo(a.amount)).slice(0, TOP_CUSTOMERS);
  type Named = { id: string; customer_ref: string; decision: string; name: string };
  const customers: Named[] = nameCustomers
    ? await db('customers')
        .whereIn('id', top.map((entry) => entry.customerId))
        .select('id', 'customer_ref', 'decision', db.raw("coalesce(nullif(concat_ws(' ', first_name, last_name), ''), company_name, '') as name"))
    : [];
  const byId = new Map(customers.map((customer) => [customer.id, customer]));
  return {
    days: CHART_DAYS,
    results: top.map((entry) => ({
      customer_ref: byId.get(entry.customerId)?.customer_ref ?? null,
      name: byId.get(entry.customerId)?.name ?? '',
      decision: byId.get(entry.customerId)?.decision ?? null,
      currency: entry.currency,
      amount: entry.amount.toFixed(2),
      transactions: entry.transactions,
      target: nameCustomers ? { model: 'customer.customer', pk: entry.customerId } : null,
    })),
  };
}

/** The video-call queue as the agent lobby shows it: waiting and offered sessions, oldest first, and who is free. */
export async function lobby(db: Knex, principal: Principal, now: Date): Promise<z.infer<typeof LOBBY>> {
  const [queue, agents, you] = await Promise.all([
    db('video_call_queue').whereIn('status', ['waiting', 'offered']).orderBy([{ column: 'enqueued_at' }, { column: 'id' }]).limit(200).select('session_id', 'customer_ref', 'status', 'offered_to', 'enqueued_at') as Promise<
      { session_id: string; customer_ref: string; status: string; offered_to: string | null; enqueued_at: Date }[]
    >,
    db('staff_video_agents').select(db.raw("count(*) filter (where status = 'AVAILABLE' and not in_call)::int as available"), db.raw('count(*) filter (where in_call)::int as in_call')).first() as Promise<{
      available: number;
      in_call: number;
    }>,
    // read afresh: a take or end in this request has just changed it
    db('staff_video_agents as a')
      .leftJoin('video_call_queue as q', (join) => join.on('q.agent_id', 'a.user_id').andOnVal('q.status', 'in_call'))
      .where('a.user_id', principal.user.id)
      .first('a.status', 'a.in_call', 'q.session_id', 'q.customer_ref') as Promise<{ status: string; in_call: boolean; session_id: string | null; customer_ref: string | null } | undefined>,
  ]);
  return {
    waiting: queue.length,
    queue: queue.map((row) => ({
      session_id: row.session_id,
      customer_ref: row.customer_ref,
      status: row.status,
      offered_to_you: row.offered_to === principal.user.id,
      enqueued_at: formatTimestamp(row.enqueued_at),
      waited_seconds: Math.max(0, Math.round((now.getTime() - row.enqueued_at.getTime()) / 1000)),
      target: { model: 'document.documentverificationsession', pk: row.session_id },
    })),
    agents,
    you: you ? { status: you.status, in_call: you.in_call, call: you.session_id ? { session_id: you.session_id, customer_ref: you.customer_ref! } : null } : null,
  };
}

const AVAILABILITY_LABELS: Record<string, string> = { AVAILABLE: 'Available', AWAY: 'Away' };

/**
 * The agent's own summary: today's calls, the recent ones, KPIs over 14 days, a 14-day series,
 * today's shifts (AVAILABLE periods, from the availability switch's audit rows), and the current
 * availability. Reads only: no last-seen stamp is written for it.
 */
export async function agentSummary(db: Knex, principal: Principal, now: Date) {
  const agent = principal.agent;
  if (!agent) return { agent: false as const };
  const userId = principal.user.id;
  const from = startOfDay(now, SERIES_DAYS - 1);
  const todayStart = startOfDay(now, 0);
  const [calls, switches] = await Promise.all([
    db('video_call_queue')
      .where({ agent_id: userId })
      .andWhere('taken_at', '>=', from)
      .orderBy('taken_at', 'desc')
      .select('session_id', 'customer_ref', 'status', 'taken_at', 'ended_at') as Promise<
      { session_id: string; customer_ref: string; status: string; taken_at: Date; ended_at: Date | null }[]
    >,
    db('audit_log')
      .where({ entity: 'staff_user', entity_id: userId, action: 'video_agent.availability' })
      .andWhere('at', '>=', todayStart)
      .orderBy('at')
      .select('at as created_at', 'details') as Promise<{ created_at: Date; details: { status?: string } }[]>,
  ]);
  const seconds = (call: { taken_at: Date; ended_at: Date | null }) => Math.max(0, ((call.ended_at ?? now).getTime() - call.taken_at.getTime()) / 1000);
  const series = lastDays(now, SERIES_DAYS).map((name) => {
    const ofDay = calls.filter((call) => call.taken_at.toISOString().slice(0, 10) === name);
    return { day: name, calls: ofDay.length, on_screen_hours: Math.round((ofDay.reduce((sum, call) => sum + seconds(call), 0) / 3600) * 100) / 100 };
  });
  const today = calls.filter((call) => call.taken_at >= todayStart);
  const finished = calls.filter((call) => call.ended_at);
  const shifts: { start: string; end: string | null }[] = [];
  // The status held at the start of today is the one before the first switch today (or the current one if none).
  let open: Date | null = (switches.length ? switches[0]!.details.status !== 'AVAILABLE' : agent.status === 'AVAILABLE') ? todayStart : null;
  for (const change of switches) {
    if (change.details.status === 'AVAILABLE' && !open) open = change.created_at;
    if (change.details.status !== 'AVAILABLE' && open) {
      shifts.push({ start: formatTimestamp(open), end: formatTimestamp(change.created_at) });
      open = null;
    }
  }
  if (open) shifts.push({ start: formatTimestamp(open), end: null });
  return {
    agent: true as const,
    today: {
      calls: today.length,
      on_screen_hours: Math.round((today.reduce((sum, call) => sum + seconds(call), 0) / 3600) * 100) / 100,
      waiting: Number(((await db('video_call_queue').whereIn('status', ['waiting', 'offered']).count({ n: '*' }).first()) as { n: string }).n),
    },
    recent: calls.slice(0, 10).map((call) => ({
      session_id: call.session_id,
      customer_ref: call.customer_ref,
      status: call.status,
      taken_at: formatTimestamp(call.taken_at),
      ended_at: formatTimestamp(call.ended_at),
      duration_seconds: Math.round(seconds(call)),
    })),
    kpis: {
      calls: calls.length,
      average_call_seconds: finished.length ? Math.round(finished.reduce((sum, call) => sum + seconds(call), 0) / finished.length) : null,
      on_screen_hours: Math.round((calls.reduce((sum, call) => sum + seconds(call), 0) / 3600) * 100) / 100,
      days: SERIES_DAYS,
    },
    series,
    shifts,
    availability: agent.status,
    availability_label: AVAILABILITY_LABELS[agent.status] ?? agent.status,
    in_call: agent.in_call,
  };
}
