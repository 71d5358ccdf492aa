import test, { type ExecutionContext } from 'ava';
import type { Knex } from 'knex';
import { bindAdminSite, permissionCodenames } from '../../src/app/registrations.ts';
import { columnSortable, filterSpecs, listStatements, type ListParameters } from '../../src/modules/backoffice/query.ts';
import type { BoundModel } from '../../src/modules/backoffice/registry.ts';
import type { AdminSite } from '../../src/modules/backoffice/site.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

/**
 * Issue 37: every ordering, filter and search a large list offers holds the list budget over a
 * million rows, which takes an index that serves it. For each large model this test enumerates
 * what its registration offers (so a column newly offered is checked without touching this file),
 * builds the statements the real query layer runs for it (listStatements, which listRows runs), and
 * EXPLAINs them:
 * - each sortable column, both directions, unfiltered: the page statement (ORDER BY column, pk
 *   LIMIT 200) must read an index in that order: no Seq Scan of a large table and no full Sort
 *   (an Incremental Sort on the pk over an index of the column is fine);
 * - each filter parameter (one representative value: the rarest choice, a bound that keeps ~2%)
 *   and a search term: the page statement, the exact count and the one-statement page and total
 *   (which of them runs depends on how many rows match) must each read no large table in full.
 *
 * How the tables are made to look large: they are filled with 50,000 rows each, with the value
 * mixes of a real book (a few rare decisions, a twentieth of customers companies, ...) and rows as
 * wide as stored ones (the record as sent, the decision context: a table of narrow rows is a few
 * pages, and reading it whole looks cheaper than 200 lookups by key), then VACUUM ANALYZE, and the
 * planner is left to choose. `enable_seqscan = off` would not give an honest
 * answer: with no fitting index PostgreSQL then walks the primary key (or any index) from end to
 * end, a full scan by another name that the check would pass. With real statistics the planner
 * picks a full scan exactly where no index serves the statement; the costs of a scan and of an
 * index range grow alike with the table, so a plan that reads an index range here does at a
 * million rows too (bench/backoffice.ts times them there). The last test drops one index inside a
 * rolled-back transaction and shows the check then fails.
 */

const ROWS = 50_000;
const LARGE_TABLES = ['financial_transactions', 'non_financial_events', 'execution_logs', 'alerts', 'customers', 'admin_log_entries'];
const LARGE_MODELS = [
  ['transaction', 'financialevent'],
  ['transaction', 'nonfinancialevent'],
  ['engine', 'executionlog'],
  ['engine', 'alert'],
  ['customer', 'customer'],
  ['admin', 'logentry'],
] as const;

let database: TestDatabase;
let db: Knex;
let site: AdminSite;
let principal: Principal;

test.before(async () => {
  database = await createTestDatabase();
  db = database.knex;
  const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };
  const user = await createUser(db, { username: 'planner', password: null, is_superuser: true }, operator);
  principal = (await loadPrincipal(db, user.id))!;
  await seed(db, user.id);
  await db.raw(`vacuum analyze ${[...LARGE_TABLES, 'cases'].join(', ')}`);
  site = await bindAdminSite(db);
});

test.after.always(async () => {
  await database?.drop();
});

async function seed(db: Knex, officer: string): Promise<void> {
  // The record as sent (raw, data_context, change) is some hundreds of bytes in service.
  const payload = `jsonb_build_object('payload', repeat(md5(i::text), 20))`;
  const decision = (i: string) => `case when ${i} % 50 = 0 then 'REJECT' when ${i} % 7 = 0 then 'REVIEW' else 'ACCEPT' end`;
  await db('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await db.raw(`
    insert into customers (id, customer_ref, customer_type, first_name, last_name, company_name, email, nationality, raw, score, decision,
      sanction_score, created_by, updated_by, created_at)
    select gen_random_uuid(), 'c-' || i, case when i % 20 = 0 then 2 else 1 end, 'First' || i, 'Last' || i,
      case when i % 20 = 0 then 'Company ' || i end, 'person' || i || '@example.com', 'DE', ${payload}, i % 100, ${decision('i')},
      case when i % 4 = 0 then i % 100 end, 'test', 'test', now() - (i || ' minutes')::interval
    from generate_series(0, ${ROWS - 1}) as i`);
  const customers = `(select id, customer_ref, row_number() over (order by customer_ref) - 1 as n from customers)`;
  await db.raw(`
    insert into financial_transactions (id, transaction_ref, customer_id, customer_ref, event_slug, amount, currency, io_type,
      event_date, raw, score, decision, rule_check, created_by, updated_by)
    select gen_random_uuid(), 'tx-' || i, c.id, c.customer_ref, 'payment', (i * 37 % 100000) / 10.0 + 1, 'EUR', i % 2,
      now() - (i || ' minutes')::interval, ${payload}, case when i % 10 <> 0 then i % 100 end, ${decision('i')}, true, 'test', 'test'
    from generate_series(0, ${ROWS - 1}) as i join ${customers} c on c.n = i % 2000`);
  await db.raw(`
    insert into non_financial_events (id, transaction_ref, customer_id, customer_ref, event_slug, event_date, raw, score, decision,
      rule_check, created_by, updated_by)
    select gen_random_uuid(), case when i % 5 <> 0 then 'nf-' || i end, c.id, c.customer_ref, 'payment', now() - (i || ' minutes')::interval,
      ${payload}, case when i % 10 <> 0 then i % 100 end, ${decision('i')}, true, 'test', 'test'
    from generate_series(0, ${ROWS - 1}) as i join ${customers} c on c.n = i % 2000`);
  await db.raw(`
    insert into execution_logs (id, target, record_id, record_ref, score, decision, matched_rules, data_context, duration_us, actor, created_at)
    select gen_random_uuid(), case when i % 20 = 0 then 'customer' when i % 9 = 0 then 'non_financial' else 'financial' end,
      gen_random_uuid(), 'tx-' || i, i % 100, ${decision('i')}, '[]', ${payload}::json, i % 5000, 'engine', now() - (i || ' minutes')::interval
    from generate_series(0, ${ROWS - 1}) as i`);
  // Cases: one per customer of the first 5,000, ten alerts each; the officer holds 20 of them (an
  // officer's workload is a small share of all cases ever opened).
  await db.raw(`
    insert into cases (customer_id, status, assignee_id, priority)
    select c.id, case when c.n % 3 = 0 then 'closed' else 'open' end, case when c.n % 250 = 0 then ?::uuid end, c.n % 100
    from ${customers} c where c.n < 5000`, [officer]);
  await db.raw(`
    insert into alerts (case_id, customer_id, target, record_id, record_ref, kind, score, decision, status, created_at)
    select k.id, k.customer_id, 'financial', gen_random_uuid(), 'tx-' || i, case when i % 25 = 0 then 'sanctions' else 'rules' end,
      i % 100, ${decision('i')}, case when i % 10 = 0 then 'open' else 'closed' end, now() - (i || ' minutes')::interval
    from generate_series(0, ${ROWS - 1}) as i join (select id, customer_id, row_number() over (order by number) - 1 as n from cases) k on k.n = i % 5000`);
  await db.raw(`
    insert into admin_log_entries (action_time, actor, action_flag, content_type, object_id, object_repr, change)
    select now() - (i || ' minutes')::interval, 'user' || (i % 50), case when i % 40 = 0 then 3 when i % 3 = 0 then 1 else 2 end,
      (array['customer.customer', 'engine.watchlist', 'engine.alert', 'engine.rule', 'auth.user'])[1 + i % 5], i::text, 'Object ' || i, ${payload}
    from generate_series(0, ${ROWS - 1}) as i`);
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

async function explain(executor: Knex | Knex.Transaction, statement: Knex.QueryBuilder): Promise<PlanNode> {
  const { sql, bindings } = statement.toSQL();
  return (await executor.raw(`explain (format json) ${sql}`, bindings)).rows[0]['QUERY PLAN'][0].Plan as PlanNode;
}

/** What is wrong with a plan: a full scan of a large table and, for an ordering, a sort of every row. */
function problems(plan: PlanNode, ordered: boolean): string[] {
  return nodes(plan).flatMap((node) => {
    if (node['Node Type'] === 'Seq Scan' && LARGE_TABLES.includes(node['Relation Name']!)) return [`Seq Scan on ${node['Relation Name']}`];
    if (ordered && node['Node Type'] === 'Sort') return ['a Sort of every row (no index serves the order)'];
    return [];
  });
}

function parameters(overrides: Partial<ListParameters>): ListParameters {
  return { page: 1, pageSize: 200, search: '', order: [], filters: {}, ...overrides };
}

/** Each offered filter parameter with one representative value: the rarest choice, a bound keeping about 2%. */
async function representativeFilters(model: BoundModel): Promise<Record<string, string>[]> {
  const cases: Record<string, string>[] = [];
  for (const spec of filterSpecs(model, {})) {
    if (spec.class === 'RangeFilter') {
      const [gte, lte] = spec.parameters as [string, string];
      const { rows } = await db.raw(`select percentile_disc(0.98) within group (order by ??) as high, percentile_disc(0.02) within group (order by ??) as low from ??`, [
        spec.field,
        spec.field,
        model.table,
      ]);
      const text = (value: unknown) => (value instanceof Date ? value.toISOString() : String(value));
      cases.push({ [gte]: text(rows[0].high) }, { [lte]: text(rows[0].low) });
    } else if (spec.class === 'AssigneeFilter') {
      cases.push({ [spec.parameters[0]!]: 'me' });
    } else {
      const offered = spec.choices.filter((choice) => Object.keys(choice.params).length).map((choice) => Object.values(choice.params)[0]!);
      const counts = await db(model.table).select(db.raw('??::text as value', [spec.field])).count('* as count').groupBy(spec.field);
      const present = offered
        .map((value) => ({ value, count: Number(counts.find((row) => row.value === value || (value === '1' && row.value === 'true'))?.count ?? 0) }))
        .filter((choice) => choice.count > 0)
        .sort((a, b) => a.count - b.count);
      cases.push({ [spec.parameters[0]!]: (present[0] ?? { value: offered[0]! }).value });
    }
  }
  return cases;
}

/** A term the search matches a few rows with: the start of one row's value of the first search field. */
async function searchTerm(model: BoundModel): Promise<string | null> {
  const field = model.searchFields?.[0]?.replace(/^[=^]/, '');
  if (!field) return null;
  const row = await db(model.table).whereNotNull(field).orderBy(field).offset(Math.floor(ROWS / 3)).first(field);
  return String(row[field]);
}

async function checkModel(t: ExecutionContext, appLabel: string, modelName: string): Promise<void> {
  const model = site.get(appLabel, modelName)!;
  t.truthy(model, `${appLabel}.${modelName} is registered`);
  const failures: string[] = [];
  const check = async (label: string, statement: Knex.QueryBuilder, ordered: boolean) => {
    const found = problems(await explain(db, statement), ordered);
    if (!found.length) return;
    failures.push(`${model.key} ${label}: ${[...new Set(found)].join(', ')}`);
    const { sql, bindings } = statement.toSQL();
    const text = (await db.raw(`explain ${sql}`, bindings)).rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n');
    t.log(`${model.key} ${label}:\n${sql}\n${text}`);
  };

  let sorts = 0;
  for (const [index, column] of model.columns.entries()) {
    if (!columnSortable(model, column)) continue;
    for (const sign of [1, -1]) {
      sorts++;
      const { page } = listStatements(site, db, model, principal, parameters({ order: [sign * (index + 1)] }));
      await check(`o=${sign * (index + 1)} (${column.name} ${sign > 0 ? 'asc' : 'desc'})`, page, true);
    }
  }
  // The default ordering, as the first page opens.
  await check('default ordering', listStatements(site, db, model, principal, parameters({})).page, true);

  const filtered = await representativeFilters(model);
  const term = await searchTerm(model);
  for (const [label, overrides] of [
    ...filtered.map((filters) => [new URLSearchParams(filters).toString(), { filters }] as const),
    ...(term === null ? [] : [[`q=${term}`, { search: term }] as const]),
  ]) {
    const statements = listStatements(site, db, model, principal, parameters(overrides));
    await check(`${label}: page`, statements.page, false);
    await check(`${label}: count`, statements.count, false);
    await check(`${label}: page and total in one statement`, statements.onePass, false);
  }
  t.log(`${model.key}: ${sorts} orderings, ${filtered.length} filter values${term === null ? '' : ', a search'} planned`);
  t.deepEqual(failures, [], failures.join('\n'));
}

for (const [appLabel, modelName] of LARGE_MODELS) {
  test(`${appLabel}.${modelName}: every offered ordering, filter and search is served by an index`, (t) => checkModel(t, appLabel, modelName));
}

test('the check fails where an offered ordering has no index (one dropped in a rolled-back transaction)', async (t) => {
  const model = site.get('transaction', 'financialevent')!;
  const amount = model.columns.findIndex((column) => column.name === 'amount') + 1;
  const { page } = listStatements(site, db, model, principal, parameters({ order: [-amount] }));
  t.deepEqual(problems(await explain(db, page), true), []);
  await db
    .transaction(async (trx) => {
      await trx.raw('drop index financial_transactions_amount_id');
      const found = problems(await explain(trx, page), true);
      t.true(found.includes('Seq Scan on financial_transactions'), `without its index, o=-${amount} plans ${found.join(', ') || 'no problem'}`);
      throw new Error('rollback');
    })
    .catch((error: Error) => {
      if (error.message !== 'rollback') throw error;
    });
});
