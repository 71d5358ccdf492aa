import { createHash, randomUUID } from 'node:crypto';
import test from 'ava';
import { down, up } from '../../migrations/20261127_0020_rule_version_sets.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';
const RULES = [
  { code: 'LARGE_AMOUNT', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 40 },
  { code: 'EUR', name: 'Euro', target: 'financial', expression: { '==': [{ var: 'record.currency' }, 'EUR'] }, score: 1 },
];

let app: TestApp;
let token: string;

test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, RULES);
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'cust-1' }] });
});
test.after.always(async () => {
  await app?.close();
});

const transactions = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, i) => ({
    customer_ref: 'cust-1', event_slug: 'deposit', amount: 100 + i, currency: 'EUR', transaction_ref: `${prefix}-${i}`, io_type: 0, event_date: hoursAgo(1),
  }));

async function setsOf(logIds: string[]): Promise<Array<Record<string, number>>> {
  const knex = app.database.knex;
  const rows = await knex('execution_logs as l').join('rule_version_sets as s', 's.id', 'l.rule_version_set').whereIn('l.id', logIds).select('s.versions');
  return rows.map((row) => row.versions);
}

test.serial('every log names the versions of the rules that ran, stored once per distinct map, small batch and large', async (t) => {
  const small = await app.request('POST', FINANCIAL, { token, json: transactions(3, 'small') });
  const large = await app.request('POST', FINANCIAL, { token, json: transactions(40, 'large') });
  t.is(small.status, 200);
  t.is(large.status, 200);
  const logIds = [...small.body.data.results, ...large.body.data.results].map((result: { log_id: string }) => result.log_id);
  const sets = await setsOf(logIds);
  t.is(sets.length, 43, 'every log joins its set');
  for (const versions of sets) t.deepEqual(versions, { EUR: 1, LARGE_AMOUNT: 1 });
  const named = await app.database.knex('execution_logs').whereIn('id', logIds).distinct('rule_version_set');
  t.is(named.length, 1, 'both batches name the one set');
  const setCount = async () => Number((await app.database.knex('rule_version_sets').count({ n: '*' }).first())!.n);
  const setsBefore = await setCount();

  // A rule change makes a new map, hence a new set; the earlier logs keep theirs.
  await loadRuleSet(app.context, [{ ...RULES[0], score: 45 }, RULES[1]]);
  const after = await app.request('POST', FINANCIAL, { token, json: transactions(2, 'after') });
  const [changed] = await setsOf([after.body.data.results[0].log_id]);
  t.is(changed!.LARGE_AMOUNT, 2);
  t.is(await setCount(), setsBefore + 1);
  t.is((await setsOf([logIds[0]!]))[0]!.LARGE_AMOUNT, 1);
});

test.serial('a set another process stored is taken as it is, and one left by a batch that rolled back is named by the next', async (t) => {
  const knex = app.database.knex;
  // Another node stored the set of the next rule selection first (its map as the service writes
  // it, codes in order): this one's insert does nothing.
  const next = { EUR: 1, LARGE_AMOUNT: 3 };
  await knex('rule_version_sets').insert({ id: createHash('md5').update(JSON.stringify(next)).digest('hex'), versions: JSON.stringify(next) });
  await loadRuleSet(app.context, [{ ...RULES[0], score: 50 }, RULES[1]]);
  const taken = await app.request('POST', FINANCIAL, { token, json: transactions(1, 'taken') });
  t.is(taken.status, 200);
  t.deepEqual((await setsOf([taken.body.data.results[0].log_id]))[0], next);
  t.is(Number((await knex('rule_version_sets').whereRaw("versions->>'LARGE_AMOUNT' = '3'").count({ n: '*' }).first())!.n), 1, 'the one set, not a second');

  // A batch that fails after its set was stored leaves only the set; the retry names it.
  await loadRuleSet(app.context, [{ ...RULES[0], score: 55 }, RULES[1]]);
  await knex.raw(`
    create function fail_on_boom() returns trigger language plpgsql as $$
    begin if new.record_ref = 'boom-0' then raise exception 'injected fault'; end if; return new; end $$;
    create trigger fail_on_boom before insert on execution_logs for each row execute function fail_on_boom();`);
  const sets = Number((await knex('rule_version_sets').count({ n: '*' }).first())!.n);
  const failed = await app.request('POST', FINANCIAL, { token, json: transactions(2, 'boom') });
  t.is(failed.status, 500);
  t.is(Number((await knex('rule_version_sets').count({ n: '*' }).first())!.n), sets + 1, 'the set stays');
  t.is(Number((await knex('financial_transactions').where('transaction_ref', 'like', 'boom-%').count({ n: '*' }).first())!.n), 0, 'the batch does not');
  await knex.raw('drop trigger fail_on_boom on execution_logs; drop function fail_on_boom()');
  const retried = await app.request('POST', FINANCIAL, { token, json: transactions(2, 'boom') });
  t.is(retried.status, 200);
  t.is((await setsOf([retried.body.data.results[0].log_id]))[0]!.LARGE_AMOUNT, 4);
});

test.serial('the migration moves stored maps into sets and back, keyed as the service keys them', async (t) => {
  const knex = app.database.knex;
  const logIds = (await knex('execution_logs').select('id', 'rule_version_set')).map((row) => row as { id: string; rule_version_set: string });
  const versionsOf = new Map((await knex('rule_version_sets').select('id', 'versions')).map((row) => [row.id, row.versions]));
  await down(knex);
  const restored = await knex('execution_logs').whereIn('id', logIds.map((row) => row.id)).select('id', 'rule_versions');
  t.is(restored.length, logIds.length);
  const setOfLog = new Map(logIds.map((row) => [row.id, row.rule_version_set]));
  for (const row of restored) t.deepEqual(row.rule_versions, versionsOf.get(setOfLog.get(row.id)));
  // A log written before the sets existed, with a map no set had.
  const [customer] = await knex('customers').select('id');
  const old = randomUUID();
  await knex('execution_logs').insert({
    id: old, target: 'financial', record_id: customer!.id, record_ref: 'old', score: 0, decision: 'ACCEPT', matched_rules: '[]',
    rule_versions: JSON.stringify({ OLD_RULE: 7 }), data_context: '{}', duration_us: 0, actor: 'test',
  });
  await up(knex);
  const [moved] = await setsOf([old]);
  t.deepEqual(moved, { OLD_RULE: 7 });
  // The ids the migration gave equal the service's: every earlier log still names a set.
  const after = await knex('execution_logs').whereIn('id', logIds.map((row) => row.id)).select('id', 'rule_version_set');
  t.deepEqual(new Map(after.map((row) => [row.id, row.rule_version_set])), new Map(logIds.map((row) => [row.id, row.rule_version_set])));
});
