import type { Knex } from 'knex';

/**
 * Reads one registered back-office model (app_label.model) for a report: its table under
 * `alias`, narrowed by the model's scope for the requester (reports/access.ts modelSource).
 */
export type ModelSource = (key: string, alias: string) => Knex.QueryBuilder;

/** A report kind: the models it reads, its parameters (with defaults and limits) and the one query that produces its rows. */
export interface ReportKind {
  label: string;
  /**
   * The registered back-office models (app_label.model) the query reads, each through `from`:
   * running the kind needs view on every one of them, and the reports and results of the kind
   * are shown only to those who may run it (reports/access.ts).
   */
  models: readonly string[];
  parameters: Record<string, ParameterSpec>;
  /** Columns in output order; the query returns objects keyed by them. */
  columns: string[];
  query(read: { from: ModelSource; db: Knex | Knex.Transaction }, parameters: Record<string, number | string | null>, maxRows: number): Knex.QueryBuilder;
}

interface ParameterSpec {
  type: 'number' | 'integer' | 'text';
  default: number | string | null;
  min?: number;
  max?: number;
  choices?: readonly string[];
  help: string;
}

const DAYS: ParameterSpec = { type: 'integer', default: 30, min: 1, max: 3660, help: 'the period: this many days back from the run' };
const DECISIONS = ['ACCEPT', 'REVIEW', 'REJECT'] as const;

function since(parameters: Record<string, number | string | null>, now = Date.now()): Date {
  return new Date(now - Number(parameters.days) * 86_400_000);
}

const KINDS: Record<string, ReportKind> = {
  transactions_above: {
    label: 'Transactions above a threshold',
    models: ['transaction.financialevent'],
    parameters: { threshold: { type: 'number', default: 10000, min: 0, help: 'smallest amount listed' }, days: DAYS },
    columns: ['transaction_ref', 'customer_ref', 'amount', 'currency', 'event_date', 'decision', 'score'],
    query: ({ from }, p, maxRows) =>
      from('transaction.financialevent', 't')
        .where('t.amount', '>=', String(p.threshold))
        .andWhere('t.event_date', '>=', since(p))
        .orderBy('t.event_date', 'desc')
        .limit(maxRows)
        .select('t.transaction_ref', 't.customer_ref', 't.amount', 't.currency', 't.event_date', 't.decision', 't.score'),
  },
  customers_by_risk: {
    label: 'Customers by risk',
    models: ['customer.customer'],
    parameters: {
      min_score: { type: 'number', default: 50, min: 0, max: 100, help: 'lowest risk score listed' },
      decision: { type: 'text', default: null, choices: DECISIONS, help: 'only customers with this decision (empty: all)' },
    },
    columns: ['customer_ref', 'name', 'score', 'decision', 'sanction_score', 'country', 'updated_at'],
    query: ({ from, db }, p, maxRows) => {
      const query = from('customer.customer', 'c')
        .where('c.score', '>=', String(p.min_score))
        .orderBy([{ column: 'c.score', order: 'desc' }, { column: 'c.customer_ref' }])
        .limit(maxRows)
        .select(
          'c.customer_ref',
          db.raw("coalesce(nullif(concat_ws(' ', c.first_name, c.last_name), ''), c.company_name, '') as name"),
          'c.score',
          'c.decision',
          'c.sanction_score',
          'c.country',
          'c.updated_at',
        );
      if (p.decision) query.where('c.decision', p.decision);
      return query;
    },
  },
  decisions_by_officer: {
    label: 'Decisions by officer',
    // The officer is the decision's own Officer field (actor_id, actor), shown wherever decisions are.
    models: ['engine.compliancedecision'],
    parameters: { days: DAYS },
    columns: ['officer', 'decision', 'decisions'],
    query: ({ from, db }, p, maxRows) =>
      from('engine.compliancedecision', 'd')
        .leftJoin('staff_users as u', 'u.id', 'd.actor_id')
        .where('d.created_at', '>=', since(p))
        .groupByRaw('1, 2')
        .orderBy([{ column: 'officer' }, { column: 'decision' }])
        .limit(maxRows)
        .select(db.raw('coalesce(u.username, d.actor) as officer'), 'd.decision', db.raw('count(*)::int as decisions')),
  },
  alerts_by_rule: {
    label: 'Alerts by rule',
    models: ['engine.alert'],
    parameters: { days: DAYS },
    columns: ['rule_code', 'alerts', 'open', 'customers'],
    query: ({ from, db }, p, maxRows) =>
      from('engine.alert', 'a')
        .joinRaw('cross join lateral unnest(case when cardinality(a.rule_codes) = 0 then array[a.kind] else a.rule_codes end) as r(rule_code)')
        .where('a.created_at', '>=', since(p))
        .groupBy('r.rule_code')
        .orderByRaw('2 desc, 1')
        .limit(maxRows)
        .select(
          'r.rule_code',
          db.raw('count(*)::int as alerts'),
          db.raw("count(*) filter (where a.status = 'open')::int as open"),
          db.raw('count(distinct a.customer_id)::int as customers'),
        ),
  },
  sanctions_hits: {
    label: 'Sanctions hits',
    models: ['customer.customer'],
    parameters: { min_score: { type: 'number', default: 85, min: 0, max: 100, help: 'lowest sanctions score listed' } },
    columns: ['customer_ref', 'name', 'sanction_score', 'matches', 'decision', 'updated_at'],
    query: ({ from, db }, p, maxRows) =>
      from('customer.customer', 'c')
        .where('c.sanction_score', '>=', String(p.min_score))
        .orderBy([{ column: 'c.sanction_score', order: 'desc' }, { column: 'c.customer_ref' }])
        .limit(maxRows)
        .select(
          'c.customer_ref',
          db.raw("coalesce(nullif(concat_ws(' ', c.first_name, c.last_name), ''), c.company_name, '') as name"),
          'c.sanction_score',
          db.raw('jsonb_array_length(c.sanction_matches) as matches'),
          'c.decision',
          'c.updated_at',
        ),
  },
  verification_outcomes: {
    label: 'Verification outcomes',
    models: ['document.documentverificationsession'],
    parameters: { days: DAYS },
    columns: ['flow_code', 'status', 'sessions'],
    query: ({ from, db }, p, maxRows) =>
      from('document.documentverificationsession', 's')
        .where('s.created_at', '>=', since(p))
        .groupBy('s.flow_code', 's.status')
        .orderBy([{ column: 's.flow_code' }, { column: 's.status' }])
        .limit(maxRows)
        .select('s.flow_code', 's.status', db.raw('count(*)::int as sessions')),
  },
};

/**
 * Every report kind by name. A Map, not an object: a kind named by a client ("__proto__",
 * "constructor", "toString") must not find Object.prototype's members.
 */
export const REPORT_KINDS: ReadonlyMap<string, ReportKind> = new Map(Object.entries(KINDS));

/** The kind of that name, or undefined (whatever the input: text from a client or a stored row). */
export function reportKind(name: unknown): ReportKind | undefined {
  return typeof name === 'string' ? REPORT_KINDS.get(name) : undefined;
}

/**
 * Checks a report's parameters against its kind: unknown names, wrong types and values out of
 * range are field errors; missing ones take their defaults. Returns the complete parameters.
 */
export function resolveParameters(kind: string, given: unknown): { values: Record<string, number | string | null>; errors: string[] } {
  const spec = reportKind(kind);
  if (!spec) return { values: {}, errors: [`Unknown report kind ${kind}.`] };
  const input = (given && typeof given === 'object' && !Array.isArray(given) ? given : {}) as Record<string, unknown>;
  const errors: string[] = [];
  const values: Record<string, number | string | null> = {};
  // Own members only: "__proto__", "constructor" or "toString" is a parameter of no kind.
  for (const name of Object.keys(input)) if (!Object.hasOwn(spec.parameters, name)) errors.push(`${name.slice(0, 100)} is not a parameter of this kind (${Object.keys(spec.parameters).join(', ')}).`);
  for (const [name, parameter] of Object.entries(spec.parameters)) {
    const value = Object.hasOwn(input, name) ? input[name] : undefined;
    if (value === undefined || value === null || value === '') {
      values[name] = parameter.default;
      continue;
    }
    if (parameter.type === 'text') {
      if (typeof value !== 'string' || (parameter.choices && !parameter.choices.includes(value))) {
        errors.push(`${name} must be ${parameter.choices ? `one of ${parameter.choices.join(', ')}` : 'text'}.`);
      } else values[name] = value;
      continue;
    }
    const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : Number.NaN;
    if (!Number.isFinite(number) || (parameter.type === 'integer' && !Number.isInteger(number))) {
      errors.push(`${name} must be ${parameter.type === 'integer' ? 'a whole number' : 'a number'}.`);
    } else if ((parameter.min !== undefined && number < parameter.min) || (parameter.max !== undefined && number > parameter.max)) {
      errors.push(`${name} must be between ${parameter.min ?? '-∞'} and ${parameter.max ?? '∞'}.`);
    } else values[name] = number;
  }
  return { values, errors };
}
