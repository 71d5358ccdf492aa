/** `warden demo` on an empty test database, as an operator runs it: the data set, its secrets, the refusal to run twice. */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { authenticate as authenticateMerchant } from '../../src/modules/merchant/service.ts';
import { authenticate as authenticateStaff } from '../../src/modules/staff/service.ts';

const root = path.resolve(import.meta.dirname, '../..');
let database: TestDatabase;

test.before(async () => {
  database = await createTestDatabase();
});
test.after.always(async () => {
  await database?.drop();
});

// Tests read fields freely from the printed JSON.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function warden(...args: string[]): Promise<{ code: number; json: any }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: database.url, LOG_LEVEL: 'silent' },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { code: 0, json: JSON.parse(stdout) };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!) };
  }
}

const count = async (table: string, where: (query: ReturnType<TestDatabase['knex']>) => unknown = () => {}) => {
  const query = database.knex(table);
  where(query);
  return Number((await query.count({ n: '*' }).first())!.n);
};

test.serial('bad options are a usage error and write nothing', async (t) => {
  const bad = await warden('demo', '--customers', '0');
  t.is(bad.code, 2);
  t.regex(bad.json.error, /--customers must be a whole number/);
  t.is(await count('merchant_credentials'), 0);
});

test.serial('demo fills an empty database: credential, customers, scored history, alerts, cases in every status, sessions, staff', async (t) => {
  const run = await warden('demo', '--customers', '40', '--days', '5', '--seed', '3');
  t.is(run.code, 0, JSON.stringify(run.json));
  const summary = run.json;

  // The credential works for a token: the token endpoint's own check, from the allowed address.
  t.truthy(summary.credential.api_secret);
  const credential = await authenticateMerchant(database.knex, summary.credential.api_key, summary.credential.api_secret, '127.0.0.1');
  t.is(credential.api_key, summary.credential.api_key);
  await t.throwsAsync(authenticateMerchant(database.knex, summary.credential.api_key, `${summary.credential.api_secret}x`, '127.0.0.1'));

  // Customers, transactions and alerts as printed, all stored through the batch functions (scored, logged).
  t.is(summary.counts.customers, 40);
  t.is(await count('customers', (q) => q.where('customer_ref', 'like', 'demo-3-%')), 40);
  t.is(await count('financial_transactions'), summary.counts.financial_transactions);
  t.true(summary.counts.financial_transactions > 40);
  t.is(await count('non_financial_events'), summary.counts.non_financial_events);
  t.is(summary.counts.unscored_records, 0);
  t.is(await count('financial_transactions', (q) => q.where({ rule_check: false })), 0);
  t.is(await count('financial_transactions', (q) => q.whereNull('log_id')), 0);
  t.is(await count('alerts'), summary.counts.alerts);
  t.true(summary.counts.alerts >= 8);
  const codes = new Set((await database.knex('alerts').select(database.knex.raw('unnest(rule_codes) as code'))).map((row: { code: string }) => row.code));
  for (const code of ['SANCTIONS_HIT_CUSTOMER', 'PEP_CUSTOMER', 'SANCTIONS_HIT_TRANSACTION', 'STRUCTURING_SPLIT_24H']) t.true(codes.has(code), code);

  // The invented lists were imported and some customers match them.
  t.deepEqual(summary.sanctions.ofac, { imported: 12, file: 'demo/sdn.csv' });
  t.is(summary.sanctions.opensanctions.imported, 8);
  t.true(summary.counts.screening_hits >= 4);
  t.is(await count('screening_hits'), summary.counts.screening_hits);
  t.true(summary.counts.customers_refused_at_onboarding >= 2);

  // Cases in every status, some assigned, changes recorded with their rationale, closures decided.
  for (const status of ['open', 'in_review', 'escalated', 'closed']) {
    t.true(summary.counts.cases[status] >= 1, status);
    t.is(await count('cases', (q) => q.where({ status })), summary.counts.cases[status]);
  }
  t.true(summary.counts.cases_assigned >= 3);
  t.is(await count('case_history', (q) => q.where({ actor: 'analyst' }).whereRaw("trim(rationale) = ''").whereRaw("jsonb_exists(changes, 'status')")), 0);
  t.true((await count('case_history')) >= 3);
  t.true((await count('compliance_decisions')) >= 1);
  t.true(summary.counts.case_changes.closed_with_clear_decision);
  t.is(await count('cases', (q) => q.where({ status: 'closed' }).whereNull('closed_at')), 0);

  // KYC sessions in several states, through the service.
  for (const status of ['open', 'completed', 'reported', 'failed']) t.true(summary.counts.kyc_sessions[status] >= 1, status);
  t.is(await count('verification_sessions'), Object.values(summary.counts.kyc_sessions as Record<string, number>).reduce((a, b) => a + b, 0));

  // Staff: the printed passwords sign in, the groups carry permissions, decisions need a checker.
  for (const username of ['analyst', 'checker']) {
    const password = summary.users[username].password;
    t.truthy(password);
    t.truthy(await authenticateStaff(database.knex, username, password), username);
    t.is(await authenticateStaff(database.knex, username, `${password}-wrong`), null);
  }
  t.deepEqual(summary.groups_created, ['Analysts', 'Checkers']);
  t.true((await count('staff_group_permissions')) > 10);
  const policy = await database.knex('approval_policies').where({ content_type: 'transaction.financialevent', operation: 'decision' }).first();
  t.truthy(policy);
  t.true(policy.active);
  t.regex(summary.admin_url, /\/admin\/$/);
});

test.serial('a second run is refused without --force; with --force it adds a second data set and leaves users and lists alone', async (t) => {
  const credentials = await count('merchant_credentials');
  const refused = await warden('demo', '--customers', '10', '--days', '2');
  t.is(refused.code, 1);
  t.regex(refused.json.error, /already holds 40 customer/);
  t.regex(refused.json.error, /--force/);
  t.is(await count('merchant_credentials'), credentials);
  t.is(await count('customers'), 40);

  const forced = await warden('demo', '--customers', '12', '--days', '2', '--seed', '4', '--force');
  t.is(forced.code, 0, JSON.stringify(forced.json));
  t.is(await count('customers'), 52);
  t.is(await count('merchant_credentials'), credentials + 1);
  t.is(forced.json.users.analyst.password, null);
  t.regex(forced.json.users.analyst.note, /already existed/);
  t.deepEqual(forced.json.groups_created, []);
  t.is(forced.json.sanctions.ofac.kept, 12);
  // With the decision policy of the first run in force, closures go without a clear decision.
  t.false(forced.json.counts.case_changes.closed_with_clear_decision);
  t.true(forced.json.counts.cases.closed >= 1);
});
