import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { storedDecisionContext } from '../../src/modules/rules/decision-context.ts';
import { UNSCORED_WARNING } from '../../src/modules/transaction/service.ts';
import { defineEvents, hoursAgo, loadRuleSet , countRows } from '../helpers/fixtures.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';
const NON_FINANCIAL = '/api/transaction/non-financial/upsert/';

let app: TestApp;
let token: string;

test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [
    ['deposit', 1],
    ['withdrawal', 1],
    ['old-payment', 1, false],
    ['login', 2],
    ['signup', 0],
  ]);
  await loadRuleSet(app.context, [
    { code: 'LARGE_AMOUNT', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 40 },
    { code: 'VELOCITY_1H', name: 'Third transaction within an hour', target: 'financial', expression: { '>=': [{ var: 'aggregates.count_1h' }, 2] }, score: 30 },
    { code: 'DEBIT_SUM_24H', name: 'Debits over 24h', target: 'financial', expression: { '>': [{ var: 'aggregates.sum_debit_24h' }, 1000] }, score: 20 },
    { code: 'VIP_EXTRA', name: 'Extra field visible', target: 'financial', expression: { '==': [{ var: 'record.merchant_tier' }, 'gold'] }, score: 5 },
    { code: 'NEW_DEVICE_LOGIN', name: 'Login from a new device', target: 'non_financial', event_slugs: ['login'], expression: { '==': [{ var: 'record.device_id' }, 'stolen'] }, score: 90, decision: 'REJECT' },
  ]);
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'cust-1' }, { customer_ref: 'cust-2' }] });
});
test.after.always(async () => {
  await app?.close();
});

function financial(overrides: Record<string, unknown> = {}) {
  return {
    customer_ref: 'cust-1',
    event_slug: 'deposit',
    amount: '100.00',
    currency: 'EUR',
    transaction_ref: `tx-${Math.random().toString(36).slice(2)}`,
    io_type: 0,
    event_date: hoursAgo(0.1),
    ...overrides,
  };
}

test('a single financial object is created, scored, logged; resending it updates', async (t) => {
  const record = financial({ amount: 7500, merchant_tier: 'gold' });
  const first = await app.request('POST', FINANCIAL, { token, json: record });
  t.is(first.status, 200);
  t.is(first.body.status, true);
  t.is(first.body.message, 'Processed 1 financial record(s).');
  const [result] = first.body.data.results;
  t.deepEqual(Object.keys(result).sort(), ['action', 'decision', 'id', 'log_id', 'rule_check', 'score', 'transaction_ref', 'warnings']);
  t.is(result.action, 'created');
  t.is(result.rule_check, true);
  t.is(result.score, 45);
  t.is(result.decision, 'ACCEPT');
  t.deepEqual(result.warnings, []);

  const log = await app.database.knex('execution_logs').where({ id: result.log_id }).first();
  t.is(log.record_id, result.id);
  t.deepEqual(log.matched_rules.map((rule: { code: string }) => rule.code).sort(), ['LARGE_AMOUNT', 'VIP_EXTRA']);
  t.deepEqual(Object.keys(log.data_context).sort(), ['aggregates', 'customer', 'event', 'transaction']);
  t.is(log.data_context.transaction.merchant_tier, 'gold');
  t.is(log.data_context.event.slug, 'deposit');
  // The versions of the rules that ran, stored once for every log that names them.
  const versions = await app.database.knex('rule_version_sets').where({ id: log.rule_version_set }).first();
  t.is(versions.versions.LARGE_AMOUNT, 1);

  const stored = await app.database.knex('financial_transactions').where({ id: result.id }).first();
  t.is(stored.amount, '7500.00');
  t.is(stored.raw.merchant_tier, 'gold');

  const again = await app.request('POST', FINANCIAL, { token, json: { ...record, amount: 10 } });
  t.is(again.body.data.results[0].action, 'updated');
  t.is(again.body.data.results[0].id, result.id);
  t.is(await countRows(app.database.knex, 'financial_transactions', { transaction_ref: record.transaction_ref }), 1);
});

test('every skip reason of the spec, with the other records processed', async (t) => {
  const records = [
    { customer_ref: 'cust-1', event_slug: 'deposit', currency: 'EUR', transaction_ref: 'skip-1', io_type: 0, event_date: hoursAgo(1) },
    financial({ customer_ref: 'nobody' }),
    financial({ event_slug: 'unknown-event' }),
    financial({ event_slug: 'old-payment' }),
    financial({ event_slug: 'login' }),
    financial({ amount: -5 }),
    financial({ amount: '10000000000.00' }),
    financial({ currency: 'EURO' }),
    financial({ currency: 'XYZ' }),
    financial({ event_date: '2026-13-45T00:00:00Z' }),
    financial({ ip_address: '999.1.1.1' }),
    financial({ io_type: 3 }),
    financial({ transaction_ref: 'x'.repeat(65) }),
    financial(),
  ];
  const response = await app.request('POST', FINANCIAL, { token, json: records });
  t.is(response.status, 200);
  t.is(response.body.status, true);
  const results = response.body.data.results;
  t.is(results.length, records.length);
  const errors = results.slice(0, -1).map((result: { error: string }) => result.error);
  t.is(errors[0], 'Missing required field(s): amount.');
  t.regex(errors[1], /Customer nobody does not exist/);
  t.is(errors[2], 'Event unknown-event is not defined.');
  t.is(errors[3], 'Event old-payment is not active.');
  t.is(errors[4], 'Event login is of type 2 (Non-financial); this endpoint accepts type 1 (Financial).');
  t.regex(errors[5], /negative amounts are not accepted.*io_type/);
  t.regex(errors[6], /exceeds the maximum of 9999999999\.99/);
  t.regex(errors[7], /currency/);
  t.regex(errors[8], /ISO 4217/);
  t.regex(errors[9], /event_date/);
  t.regex(errors[10], /ip_address/);
  t.regex(errors[11], /io_type/);
  t.regex(errors[12], /transaction_ref: longer than 64/);
  for (const skipped of results.slice(0, -1)) {
    t.is(skipped.action, 'skipped');
    t.is(skipped.id, null);
    t.is(skipped.score, 100);
    t.is(skipped.decision, 'REJECT');
    t.is(skipped.log_id, null);
  }
  t.is(results.at(-1).action, 'created');
  t.is(results[0].transaction_ref, 'skip-1');
});

test('correctable deviations are normalized with warnings', async (t) => {
  const response = await app.request('POST', FINANCIAL, {
    token,
    json: financial({ currency: 'usd', amount: 10.005, payment_method: '  card  ', io_type: '1', event_date: '2026-11-22 09:00:00' }),
  });
  const [result] = response.body.data.results;
  t.is(result.action, 'created');
  t.true(result.warnings.includes('currency: converted to upper case (usd -> USD).'));
  t.true(result.warnings.includes('amount: rounded to 2 decimal places (10.005 -> 10.01).'));
  t.true(result.warnings.some((warning: string) => warning.startsWith('payment_method: surrounding whitespace')));
  t.true(result.warnings.some((warning: string) => warning.startsWith('event_date: no time zone')));
  const stored = await app.database.knex('financial_transactions').where({ id: result.id }).first();
  t.is(stored.currency, 'USD');
  t.is(stored.amount, '10.01');
  t.is(stored.payment_method, 'card');
  t.is(stored.io_type, 1);
});

test('records older than a day are stored without a rule run, and their result says so', async (t) => {
  const response = await app.request('POST', FINANCIAL, { token, json: [financial({ amount: 9000, event_date: hoursAgo(30) }), financial({ amount: 9000, event_date: hoursAgo(1) })] });
  const [result, fresh] = response.body.data.results;
  t.is(result.action, 'created');
  t.is(result.rule_check, false);
  t.is(result.log_id, null);
  t.is(result.score, null);
  t.is(result.decision, null);
  t.deepEqual(result.warnings, [UNSCORED_WARNING]);
  t.is(fresh.rule_check, true);
  t.false(fresh.warnings.includes(UNSCORED_WARNING), 'a record within the window is scored, with no such warning');
});

test('aggregates count stored history and the batch’s own earlier records in event_date order', async (t) => {
  await app.request('POST', '/api/customer/upsert/', { token, json: { customer_ref: 'velocity' } });
  const history = await app.request('POST', FINANCIAL, {
    token,
    json: financial({ customer_ref: 'velocity', transaction_ref: 'v-0', amount: 600, io_type: 1, event_date: hoursAgo(0.5) }),
  });
  t.is(history.body.data.results[0].score, 0);
  // Sent out of order: v-2 happened before v-1.
  const batch = await app.request('POST', FINANCIAL, {
    token,
    json: [
      financial({ customer_ref: 'velocity', transaction_ref: 'v-1', amount: 10, io_type: 1, event_date: hoursAgo(0.1) }),
      financial({ customer_ref: 'velocity', transaction_ref: 'v-2', amount: 500, io_type: 1, event_date: hoursAgo(0.2) }),
    ],
  });
  const [v1, v2] = batch.body.data.results;
  const logs = await app.database.knex('execution_logs').whereIn('id', [v1.log_id, v2.log_id]);
  const context = (id: string) => storedDecisionContext(logs.find((log: { id: string }) => log.id === id).data_context).aggregates;
  t.is(context(v2.log_id).count_1h, 1);
  t.is(context(v2.log_id).sum_debit_24h, 600);
  t.is(context(v1.log_id).count_1h, 2);
  t.is(context(v1.log_id).sum_debit_24h, 1100);
  t.is(context(v1.log_id).count_credit_24h, 0);
  t.is(context(v1.log_id).days_since_first_transaction, 0);
  t.is(v2.score, 0);
  t.is(v1.score, 50);

  // Re-sending v-1 must not count its own stored version.
  const resent = await app.request('POST', FINANCIAL, {
    token,
    json: financial({ customer_ref: 'velocity', transaction_ref: 'v-1', amount: 10, io_type: 1, event_date: hoursAgo(0.1) }),
  });
  const resentLog = await app.database.knex('execution_logs').where({ id: resent.body.data.results[0].log_id }).first();
  t.is(storedDecisionContext(resentLog.data_context).aggregates.count_1h, 2);
});

test('a ref repeated within one batch is stored once, the last occurrence winning', async (t) => {
  const response = await app.request('POST', FINANCIAL, {
    token,
    json: [financial({ transaction_ref: 'dup-1', amount: 1 }), financial({ transaction_ref: 'dup-1', amount: 2 })],
  });
  const [first, second] = response.body.data.results;
  t.is(first.action, 'created');
  t.is(second.action, 'updated');
  t.is(first.id, second.id);
  t.regex(first.warnings.join(' '), /repeated later in this batch/);
  const stored = await app.database.knex('financial_transactions').where({ transaction_ref: 'dup-1' });
  t.is(stored.length, 1);
  t.is(stored[0].amount, '2.00');
});

test('non-financial: optional ref with a warning, amount fields kept raw, forced decision, wrong type', async (t) => {
  const response = await app.request('POST', NON_FINANCIAL, {
    token,
    json: [
      { customer_ref: 'cust-2', event_slug: 'login', event_date: hoursAgo(0.1), device_id: 'stolen', amount: 50, currency: 'EUR', io_type: 1 },
      { customer_ref: 'cust-2', event_slug: 'signup', event_date: hoursAgo(0.1), transaction_ref: 'nf-1' },
      { customer_ref: 'cust-2', event_slug: 'deposit', event_date: hoursAgo(0.1) },
      { customer_ref: 'cust-2', event_slug: 'login' },
    ],
  });
  t.is(response.body.message, 'Processed 4 non-financial record(s).');
  const [login, signup, wrongType, missingDate] = response.body.data.results;
  t.is(login.action, 'created');
  t.is(login.transaction_ref, null);
  t.is(login.decision, 'REJECT');
  t.is(login.score, 90);
  t.regex(login.warnings.join(' '), /cannot be deduplicated/);
  const stored = await app.database.knex('non_financial_events').where({ id: login.id }).first();
  t.is(stored.raw.amount, 50);
  t.is(stored.raw.io_type, 1);
  t.is(signup.action, 'created');
  t.is(signup.decision, 'ACCEPT');
  t.is(wrongType.error, 'Event deposit is of type 1 (Financial); this endpoint accepts type 0 (Onboarding) or 2 (Non-financial).');
  t.is(missingDate.error, 'Missing required field(s): event_date.');

  const again = await app.request('POST', NON_FINANCIAL, {
    token,
    json: { customer_ref: 'cust-2', event_slug: 'login', event_date: hoursAgo(0.1), device_id: 'stolen' },
  });
  t.is(again.body.data.results[0].action, 'created', 'without a ref every record is new');
});
