/**
 * The extra-fields limit (README: storable values): a record may carry at most 1,000 fields
 * outside its type's declared ones. The 1,001st skips the record with its reason, however many
 * declared fields it carries or leaves out, for customers and financial transactions alike.
 */
import test from 'ava';
import { STORABLE_LIMITS } from '../../src/validation/storable.ts';
import { validateRecord } from '../../src/modules/records/fields.ts';
import { customerFields as CUSTOMER_FIELDS } from '../../src/modules/customer/schemas.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo } from '../helpers/fixtures.ts';

const CUSTOMERS = '/api/customer/upsert/';
const FINANCIAL = '/api/transaction/financial/upsert/';
const LIMIT = STORABLE_LIMITS.maxExtraKeys;

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
});
test.after.always(async () => {
  await app?.close();
});

function withExtras(record: Record<string, unknown>, count: number): Record<string, unknown> {
  const copy = { ...record };
  for (let index = 0; index < count; index++) copy[`x${index}`] = index;
  return copy;
}

test('the limit is 1,000 extra fields', (t) => {
  t.is(LIMIT, 1000);
});

test('customers: 1,000 extra fields are stored, 1,001 skip the record with its reason; declared fields do not count', async (t) => {
  const sparse = { customer_ref: 'xf-sparse' };
  const full = { customer_ref: 'xf-full', first_name: 'Ann', last_name: 'Lee', email: 'ann@example.com', phone: '+49 30 1234', country: 'DE' };
  const response = await app.request('POST', CUSTOMERS, {
    token,
    json: [withExtras(sparse, LIMIT), withExtras({ ...sparse, customer_ref: 'xf-sparse-over' }, LIMIT + 1), withExtras(full, LIMIT), withExtras({ ...full, customer_ref: 'xf-full-over' }, LIMIT + 1), withExtras({ customer_ref: 'xf-far-over' }, LIMIT + 30)],
  });
  t.is(response.status, 200, response.text);
  const results = response.body.data.results as { action: string; error?: string }[];
  t.deepEqual(results.map((result) => result.action), ['created', 'skipped', 'created', 'skipped', 'skipped'], JSON.stringify(results));
  t.regex(results[1]!.error!, /1001 extra fields; at most 1000/);
  t.regex(results[3]!.error!, /1001 extra fields; at most 1000/);
  t.regex(results[4]!.error!, /1030 extra fields; at most 1000/);
  t.deepEqual((await app.database.knex('customers').whereLike('customer_ref', 'xf-%').whereNot('customer_ref', 'xf-payer').orderBy('customer_ref').pluck('customer_ref')), ['xf-full', 'xf-sparse']);
});

test('financial transactions: 1,000 extra fields are stored, 1,001 skip the record with its reason', async (t) => {
  const payer = await app.request('POST', CUSTOMERS, { token, json: [{ customer_ref: 'xf-payer' }] });
  t.is(payer.status, 200, payer.text);
  const base = { customer_ref: 'xf-payer', event_slug: 'deposit', amount: '10.00', currency: 'EUR', io_type: 0, event_date: hoursAgo(1) };
  const response = await app.request('POST', FINANCIAL, {
    token,
    json: [withExtras({ ...base, transaction_ref: 'xf-at' }, LIMIT), withExtras({ ...base, transaction_ref: 'xf-over' }, LIMIT + 1)],
  });
  t.is(response.status, 200, response.text);
  const results = response.body.data.results as { action: string; error?: string }[];
  t.deepEqual(results.map((result) => result.action), ['created', 'skipped'], JSON.stringify(results));
  t.regex(results[1]!.error!, /1001 extra fields; at most 1000/);
  t.deepEqual(await app.database.knex('financial_transactions').whereLike('transaction_ref', 'xf-%').pluck('transaction_ref'), ['xf-at']);
});

test('the count is the table-level check itself: 1,001 extras with every declared field present or absent', (t) => {
  const declared = Object.fromEntries(CUSTOMER_FIELDS.map((spec) => [spec.name, null]));
  for (const record of [{ customer_ref: 'a' }, { ...declared, customer_ref: 'a' }]) {
    t.true(validateRecord(CUSTOMER_FIELDS, withExtras(record, LIMIT)).ok);
    const over = validateRecord(CUSTOMER_FIELDS, withExtras(record, LIMIT + 1));
    t.false(over.ok);
    if (!over.ok) t.regex(over.error, /1001 extra fields/);
  }
});
