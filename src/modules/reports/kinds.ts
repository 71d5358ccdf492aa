import type { Knex } from 'knex';

/** A report kind: its parameters (with defaults and limits) and the one query that produces its rows. */
export interface ReportKind {
  label: string;
  parameters: Record<string, ParameterSpec>;
  /** Columns in output order; the query returns objects keyed by them. */
  columns: string[];
  query(db: Knex | Knex.Transaction, parameters: Record<string, number | string | null>, maxRows: number): Knex.QueryBuilder | Knex.Raw;
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

export const REPORT_KINDS: Record<string, ReportKind> = {
  transactions_above: {
    label: 'Transactions above a threshold',
    parameters: { threshold: { type: 'number', default: 10000, min: 0, help: 'smallest amount listed' }, days: DAYS },
    columns: ['transaction_ref', 'customer_ref', 'amount', 'currency', 'event_date', 'decision', 'score'],
    query: (db, p, maxRows) =>
      db('financial_transactions')
        .where('amount', '>=', String(p.threshold))
        .andWhere('event_date', '>=', since(p))
        .orderBy('event_date', 'desc')
        .limit(maxRows)
        .select('transaction_ref', 'customer_ref', 'amount', 'currency', 'event_date', 'decision', 'score'),
  },
  customers_by_risk: {
    label: 'Customers by risk',
    parameters: {
      min_score: { type: 'number', default: 50, min: 0, max: 100, help: 'lowest risk score listed' },
      decision: { type: 'text', default: null, choices: DECISIONS, help: 'only customers with this decision (empty: all)' },
    },
    columns: ['customer_ref', 'name', 'score', 'decision', 'sanction_score', 'country', 'updated_at'],
    query: (db, p, maxRows) => {
      const query = db('customers')
        .where('score', '>=', String(p.min_score))
        .orderBy([{ column: 'score', order: 'desc' }, { column: 'customer_ref' }])
        .limit(maxRows)
        .select(
          'customer_ref',
          db.raw("coalesce(nullif(concat_ws(' ', first_name, last_name), ''), company_name, '') as name"),
          'score',
          'decision',
          'sanction_score',
          'country',
          'updated_at',
        );
      if (p.decision) query.where('decision', p.decision);
      return query;
    },
  },
  decisions_by_officer: {
    label: 'Decisions by officer',
    parameters: { days: DAYS },
    columns: ['officer', 'decision', 'decisions'],
    query: (db, p, maxRows) =>
      db('compliance_decisions as d')
        .leftJoin('staff_users as u', 'u.id', 'd.actor_id')
        .where('d.created_at', '>=', since(p))
        .groupByRaw('1, 2')
        .orderBy([{ column: 'officer' }, { column: 'decision' }])
        .limit(maxRows)
        .select(db.raw("coalesce(u.username, d.actor) as officer"), 'd.decision', db.raw('count(*)::int as decisions')),
  },
  alerts_by_rule: {
    label: 'Alerts by rule',
    parameters: { days: DAYS },
    columns: ['rule_code', 'alerts', 'open', 'customers'],
    query: (db, p, maxRows) =>
      db.raw(
        `select rule_code, count(*)::int as alerts, count(*) filter (where status = 'open')::int as open, count(distinct customer_id)::int as customers
         from alerts, unnest(case when cardinality(rule_codes) = 0 then array[kind] else rule_codes end) as rule_code
         where created_at >= ? group by rule_code order by alerts desc, rule_code limit ?`,
        [since(p), maxRows],
      ),
  },
  sanctions_hits: {
    label: 'Sanctions hits',
    parameters: { min_score: { type: 'number', default: 85, min: 0, max: 100, help: 'lowest sanctions score listed' } },
    columns: ['customer_ref', 'name', 'sanction_score', 'matches', 'decision', 'updated_at'],
    query: (db, p, maxRows) =>
      db('customers')
        .where('sanction_score', '>=', String(p.min_score))
        .orderBy([{ column: 'sanction_score', order: 'desc' }, { column: 'customer_ref' }])
        .limit(maxRows)
        .select(
          'customer_ref',
          db.raw("coalesce(nullif(concat_ws(' ', first_name, last_name), ''), company_name, '') as name"),
          'sanction_score',
          db.raw('jsonb_array_length(sanction_matches) as matches'),
          'decision',
          'updated_at',
        ),
  },
  verification_outcomes: {
    label: 'Verification outcomes',
    parameters: { days: DAYS },
    columns: ['flow_code', 'status', 'sessions'],
    query: (db, p, maxRows) =>
      db('verification_sessions')
        .where('created_at', '>=', since(p))
        .groupBy('flow_code', 'status')
        .orderBy([{ column: 'flow_code' }, { column: 'status' }])
        .limit(maxRows)
        .select('flow_code', 'status', db.raw('count(*)::int as sessions')),
  },
};

/**
 * Checks a report's parameters against its kind: unknown names, wrong types and values out of
 * range are field errors; missing ones take their defaults. Returns the complete parameters.
 */
export function resolveParameters(kind: string, given: unknown): { values: Record<string, number | string | null>; errors: string[] } {
  const spec = REPORT_KINDS[kind];
  if (!spec) return { values: {}, errors: [`Unknown report kind ${kind}.`] };
  const input = (given && typeof given === 'object' && !Array.isArray(given) ? given : {}) as Record<string, unknown>;
  const errors: string[] = [];
  const values: Record<string, number | string | null> = {};
  for (const name of Object.keys(input)) if (!(name in spec.parameters)) errors.push(`${name} is not a parameter of this kind (${Object.keys(spec.parameters).join(', ')}).`);
  for (const [name, parameter] of Object.entries(spec.parameters)) {
    const value = input[name];
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
