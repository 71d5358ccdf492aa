import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { loadRuleSet , countRows } from '../helpers/fixtures.ts';

const CUSTOMERS = '/api/customer/upsert/';
const root = path.resolve(import.meta.dirname, '../..');
const fixtures = path.join(root, 'test/fixtures/sanctions');

let app: TestApp;
let token: string;

test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  // The shipped example rules, through the CLI as an operator would load them.
  const env = { ...process.env, DATABASE_URL: app.database.url };
  await promisify(execFile)(process.execPath, ['bin/warden.js', 'rules', 'load', 'rules/examples/aml-fraud.json'], { cwd: root, env });
  await promisify(execFile)(
    process.execPath,
    ['bin/warden.js', 'sanctions', 'import', '--format', 'ofac', path.join(fixtures, 'sdn.csv'), path.join(fixtures, 'alt.csv')],
    { cwd: root, env },
  );
});
test.after.always(async () => {
  await app?.close();
});

test('a clean individual: created with every result field, screened, scored by the customer rules', async (t) => {
  const response = await app.request('POST', CUSTOMERS, {
    token,
    json: { customer_ref: 'c-clean', first_name: 'Maria', last_name: 'Lindqvist', email: 'maria.lindqvist@example.org', ip_address: '8.8.8.8', birth_date: '1988-04-02', nationality: 'SWE' },
  });
  t.is(response.status, 200);
  t.is(response.body.message, 'Processed 1 customer record(s).');
  const [result] = response.body.data.results;
  t.deepEqual(Object.keys(result).sort(), [
    'action', 'customer_ref', 'decision', 'email_risk_score', 'id', 'ip_address_score', 'sanction_score', 'sanction_topic', 'score', 'warnings',
  ]);
  t.is(result.action, 'created');
  t.true(result.sanction_score < 60, JSON.stringify(result));
  t.is(result.decision, 'ACCEPT', JSON.stringify(result));
  t.deepEqual(result.sanction_topic, []);
  t.is(typeof result.ip_address_score, 'number');
  t.is(typeof result.email_risk_score, 'number');
  const stored = await app.database.knex('customers').where({ id: result.id }).first();
  t.truthy(stored.log_id);
  const log = await app.database.knex('execution_logs').where({ id: stored.log_id }).first();
  t.is(log.target, 'customer');
  t.is(log.record_id, result.id);
});

test('normalizations: gender case, country codes, trimmed text, invalid email kept and flagged, extras stored raw', async (t) => {
  const response = await app.request('POST', CUSTOMERS, {
    token,
    json: { customer_ref: ' c-norm ', gender: 'Female', nationality: 'deu', passport_issuing_country: 'FR', email: 'not-an-email', loyalty_tier: 'gold' },
  });
  const [result] = response.body.data.results;
  t.is(result.action, 'created');
  t.is(result.customer_ref, 'c-norm');
  const warnings = result.warnings.join('\n');
  t.regex(warnings, /customer_ref: surrounding whitespace trimmed/);
  t.regex(warnings, /gender: normalized to female/);
  t.regex(warnings, /nationality: converted to upper case \(deu -> DEU\)/);
  t.regex(warnings, /passport_issuing_country: alpha-2 code converted to alpha-3 \(FR -> FRA\)/);
  t.regex(warnings, /email: invalid format; kept and flagged/);
  t.notRegex(warnings, /loyalty_tier/);
  const stored = await app.database.knex('customers').where({ id: result.id }).first();
  t.is(stored.email, 'not-an-email');
  t.is(stored.gender, 'female');
  t.is(stored.raw.loyalty_tier, 'gold');
  t.true(JSON.parse(JSON.stringify(stored.email_reasons)).includes('invalid_format'));
  t.true(result.email_risk_score >= 70);
});

test('a listed name scores high on sanctions and the sanctions rule forces REJECT', async (t) => {
  // test/fixtures/sanctions/sdn.csv lists "KARAVELLO, Dmitri Anatolyevich", DOB 14 Mar 1971, nationality Russia.
  const response = await app.request('POST', CUSTOMERS, {
    token,
    json: { customer_ref: 'c-listed', first_name: 'Dmitri', last_name: 'Karavello', birth_date: '1971-03-14', nationality: 'RUS' },
  });
  const [result] = response.body.data.results;
  t.true(result.sanction_score >= 85, JSON.stringify(result));
  t.true(result.sanction_topic.length > 0);
  t.is(result.decision, 'REJECT');
  const stored = await app.database.knex('customers').where({ id: result.id }).first();
  t.true(stored.sanction_matches.length > 0);
  t.truthy(stored.sanction_matches[0].features);
});

test('a large batch is screened by every worker, each result landing on its own record', async (t) => {
  // Slices of the batch go to whichever worker takes them first: positions must map back exactly.
  const listed = { first_name: 'Dmitri', last_name: 'Karavello', birth_date: '1971-03-14', nationality: 'RUS' };
  const clean = { first_name: 'Maria', last_name: 'Lindqvist', birth_date: '1988-04-02', nationality: 'SWE' };
  const batch = Array.from({ length: 150 }, (_, index) => ({
    customer_ref: `c-slices-${index}`,
    ...(index % 3 === 1 ? clean : listed),
    // Every third a migration record: not screened, so the screened positions are not the batch's.
    ...(index % 3 === 2 ? { migration: true } : {}),
  }));
  const response = await app.request('POST', CUSTOMERS, { token, json: batch });
  t.is(response.status, 200);
  const results = response.body.data.results as Array<{ customer_ref: string; sanction_score: number | null; sanction_topic: string[] }>;
  const single = async (ref: string, body: object) =>
    (await app.request('POST', CUSTOMERS, { token, json: { customer_ref: ref, ...body } })).body.data.results[0] as { sanction_score: number };
  const listedScore = (await single('c-slices-listed', listed)).sanction_score;
  const cleanScore = (await single('c-slices-clean', clean)).sanction_score;
  t.true(listedScore >= 85 && cleanScore < 60);
  results.forEach((result, index) => {
    t.is(result.customer_ref, `c-slices-${index}`);
    t.is(result.sanction_score, index % 3 === 0 ? listedScore : index % 3 === 1 ? cleanScore : null, `record ${index}`);
  });
});

test('a batch large enough to be written while it is screened answers as the same customers sent in small batches', async (t) => {
  // Above 250 records a customer batch starts its write at once and copies each customer as soon
  // as it is screened (records/batch.ts scoreWhileWriting); below, it screens all, then writes.
  const listed = { first_name: 'Dmitri', last_name: 'Karavello', birth_date: '1971-03-14', nationality: 'RUS' };
  const clean = { first_name: 'Maria', last_name: 'Lindqvist', birth_date: '1988-04-02', nationality: 'SWE' };
  const customer = (index: number, prefix: string) => ({
    // Refs out of key order (the write sorts them), a third listed, every fifth a migration record.
    customer_ref: `${prefix}-${(index * 7919) % 400}`,
    ...(index % 3 === 0 ? listed : clean),
    email: `user${index}@example.com`,
    ...(index % 5 === 4 ? { migration: true } : {}),
  });
  const batch = Array.from({ length: 400 }, (_, index) => customer(index, 'c-large'));
  // One repeated ref (its later record is stored) and one customer stored before the batch.
  batch.push({ ...batch[10]!, first_name: 'Maria', last_name: 'Lindqvist' });
  t.is((await app.request('POST', CUSTOMERS, { token, json: batch[20] })).status, 200);
  const large = await app.request('POST', CUSTOMERS, { token, json: batch });
  t.is(large.status, 200);
  const small: unknown[] = [];
  for (let start = 0; start < batch.length; start += 100) {
    const part = await app.request('POST', CUSTOMERS, { token, json: batch.slice(start, start + 100).map((record) => ({ ...record, customer_ref: `small-${record.customer_ref}` })) });
    small.push(...part.body.data.results);
  }
  const comparable = (result: Record<string, unknown>) => {
    const { id, customer_ref, action, ...rest } = result;
    return rest;
  };
  const results = large.body.data.results as Array<Record<string, unknown>>;
  t.is(results.length, batch.length);
  results.forEach((result, index) => {
    t.is(result.customer_ref, batch[index]!.customer_ref);
    // The small batches' first occurrence of the repeated ref is not repeated in its own request.
    if (index !== 10) t.deepEqual(comparable(result), comparable(small[index] as Record<string, unknown>), `record ${index}`);
  });
  t.is(results[20]!.action, 'updated');
  t.is(results[10]!.action, 'created');
  t.is(results[400]!.action, 'updated');
  t.deepEqual(results[10]!.warnings, ['customer_ref: repeated later in this batch; the later record was stored.']);
  // What is stored is what was answered, with a log per customer naming it.
  const stored = await app.database.knex('customers').whereIn('customer_ref', batch.map((record) => record.customer_ref)).select('id', 'customer_ref', 'sanction_score', 'decision', 'log_id');
  t.is(stored.length, 400);
  const answered = new Map(results.map((result) => [result.customer_ref, result]));
  for (const row of stored) {
    const result = answered.get(row.customer_ref)!;
    t.is(row.id, result.id);
    t.is(row.decision, result.decision);
    t.is(row.sanction_score === null ? null : Number(row.sanction_score), result.sanction_score as number | null);
  }
  const logs = await app.database.knex('execution_logs').whereIn('id', stored.map((row) => row.log_id)).select('record_id');
  t.is(logs.length, 400);
  t.true(logs.every((log) => stored.some((row) => row.id === log.record_id)));
});

test('a large batch of migration records only (nothing to screen) is written as the others are', async (t) => {
  const batch = Array.from({ length: 300 }, (_, index) => ({ customer_ref: `c-migrated-${index}`, first_name: 'Dmitri', last_name: 'Karavello', migration: true }));
  const response = await app.request('POST', CUSTOMERS, { token, json: batch });
  t.is(response.status, 200);
  const results = response.body.data.results as Array<{ customer_ref: string; action: string; sanction_score: number | null }>;
  t.deepEqual(results.map((result) => result.customer_ref), batch.map((record) => record.customer_ref));
  t.true(results.every((result) => result.action === 'created' && result.sanction_score === null));
  t.is(Number((await app.database.knex.raw("select count(*) as n from customers where customer_ref like 'c-migrated-%'")).rows[0].n), 300);
});

test('a failure while a large batch is written as it is screened stores nothing of it; a retry then succeeds', async (t) => {
  await app.database.knex.raw(`
    create function fail_on_customer_boom() returns trigger language plpgsql as $$
    begin if new.customer_ref = 'c-boom-299' then raise exception 'injected fault'; end if; return new; end $$;
    create trigger fail_on_customer_boom before insert on customers for each row execute function fail_on_customer_boom();`);
  const batch = Array.from({ length: 300 }, (_, index) => ({ customer_ref: `c-boom-${index}`, first_name: 'Dmitri', last_name: 'Karavello' }));
  // Only this batch's rows: the file's other tests run meanwhile.
  const count = async (sql: string) => Number((await app.database.knex.raw(sql)).rows[0].n);
  const counts = async () => ({
    customers: await count("select count(*) as n from customers where customer_ref like 'c-boom-%'"),
    logs: await count("select count(*) as n from execution_logs where record_ref like 'c-boom-%'"),
    alerts: await count("select count(*) as n from alerts where record_ref like 'c-boom-%'"),
    cases: await count("select count(*) as n from cases k join customers c on c.id = k.customer_id where c.customer_ref like 'c-boom-%'"),
  });
  const failed = await app.request('POST', CUSTOMERS, { token, json: batch });
  t.is(failed.status, 500);
  t.deepEqual(await counts(), { customers: 0, logs: 0, alerts: 0, cases: 0 });
  await app.database.knex.raw('drop trigger fail_on_customer_boom on customers; drop function fail_on_customer_boom()');
  const retried = await app.request('POST', CUSTOMERS, { token, json: batch });
  t.is(retried.status, 200);
  // A sanctions score at the review threshold (50 by default) or a REVIEW or REJECT raises one alert (cases/alerts.ts alertKind).
  const raised = (retried.body.data.results as Array<{ sanction_score: number; decision: string }>).filter((result) => result.sanction_score >= 50 || result.decision !== 'ACCEPT').length;
  t.true(raised > 0);
  t.deepEqual(await counts(), { customers: 300, logs: 300, alerts: raised, cases: raised });
});

test('migration records skip screening and say so; resending updates', async (t) => {
  const record = { customer_ref: 'c-migrated', first_name: 'Old', last_name: 'Record', email: 'x@mailinator.com', ip_address: '10.0.0.1', migration: true };
  const first = (await app.request('POST', CUSTOMERS, { token, json: record })).body.data.results[0];
  t.is(first.action, 'created');
  t.is(first.sanction_score, null);
  t.is(first.ip_address_score, null);
  t.is(first.email_risk_score, null);
  t.regex(first.warnings.join(' '), /migration: sanctions, IP and email screening skipped/);
  const second = (await app.request('POST', CUSTOMERS, { token, json: { ...record, first_name: 'Older' } })).body.data.results[0];
  t.is(second.action, 'updated');
  t.is(second.id, first.id);
  t.is(await countRows(app.database.knex, 'customers', { customer_ref: 'c-migrated' }), 1);
});

test('record-level skips for customers', async (t) => {
  const response = await app.request('POST', CUSTOMERS, {
    token,
    json: [
      { first_name: 'No ref' },
      { customer_ref: 'x'.repeat(49) },
      { customer_ref: 'c-bad-type', customer_type: 3 },
      { customer_ref: 'c-bad-gender', gender: 'robot' },
      { customer_ref: 'c-bad-date', birth_date: '1990-02-30' },
      { customer_ref: 'c-bad-ip', ip_address: 'localhost' },
      { customer_ref: 'c-bad-country', nationality: 'XXX' },
      { customer_ref: 'c-ok' },
    ],
  });
  const results = response.body.data.results;
  t.is(results[0].error, 'Missing required field(s): customer_ref.');
  t.is(results[0].customer_ref, null);
  t.regex(results[1].error, /customer_ref: longer than 48/);
  t.regex(results[2].error, /customer_type/);
  t.regex(results[3].error, /gender/);
  t.regex(results[4].error, /birth_date/);
  t.regex(results[5].error, /ip_address/);
  t.regex(results[6].error, /nationality/);
  for (const skipped of results.slice(0, 7)) {
    t.is(skipped.action, 'skipped');
    t.is(skipped.id, null);
    t.is(skipped.score, 100);
    t.is(skipped.decision, 'REJECT');
  }
  t.is(results[7].action, 'created');
});

test('a rule loaded later changes the next batch (version bump reaches the workers)', async (t) => {
  // Its own app: replacing the rule set must not disturb the other tests of this file.
  const app = await startTestApp();
  t.teardown(() => app.close());
  const token = await app.merchantToken();
  await loadRuleSet(app.context, [
    { code: 'ALWAYS_REVIEW', name: 'Review everyone', target: 'customer', expression: { '==': [1, 1] }, score: 10, decision: 'REVIEW' },
  ]);
  const result = (await app.request('POST', CUSTOMERS, { token, json: { customer_ref: 'c-after-rules' } })).body.data.results[0];
  t.is(result.decision, 'REVIEW');
  await loadRuleSet(app.context, [
    { code: 'ALWAYS_REVIEW', name: 'Review everyone', target: 'customer', expression: { '==': [1, 2] }, score: 10, decision: 'REVIEW' },
  ]);
  const rule = await app.database.knex('rules').where({ code: 'ALWAYS_REVIEW' }).first();
  t.is(rule.version, 2);
  // The cache drops on NOTIFY, which arrives a moment after the commit.
  let decision = 'REVIEW';
  for (let attempt = 0; attempt < 50 && decision === 'REVIEW'; attempt++) {
    decision = (await app.request('POST', CUSTOMERS, { token, json: { customer_ref: 'c-after-rules' } })).body.data.results[0].decision;
  }
  t.is(decision, 'ACCEPT');
});
