/**
 * Property-based: thousands of random and malformed records to each upsert endpoint. Never a
 * 500; every record of an accepted request is accounted for in order; a rejected request stores
 * nothing.
 */
import fc from 'fast-check';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo , countRows } from '../helpers/fixtures.ts';

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1], ['login', 2], ['off', 1, false]]);
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'p-1' }, { customer_ref: 'p-2' }] });
});
test.after.always(async () => {
  await app?.close();
});

const anyValue = fc.oneof(
  fc.string(),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string(), { maxKeys: 3 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
);

/** A value that is sometimes right for the field and often not. */
function field(good: fc.Arbitrary<unknown>) {
  return fc.option(fc.oneof({ weight: 3, arbitrary: good }, { weight: 1, arbitrary: anyValue }), { nil: undefined, freq: 5 });
}

const customer = fc.record(
  {
    customer_ref: field(fc.stringMatching(/^[a-z0-9-]{1,50}$/)),
    customer_type: field(fc.constantFrom(1, 2, '1', 3)),
    first_name: field(fc.string({ maxLength: 110 })),
    gender: field(fc.constantFrom('male', 'FEMALE', 'other', 'x')),
    birth_date: field(fc.constantFrom('1990-01-01', '1990-02-30', '01/02/1990')),
    nationality: field(fc.constantFrom('DEU', 'de', 'xx', 'ZZZ')),
    email: field(fc.emailAddress()),
    ip_address: field(fc.oneof(fc.ipV4(), fc.ipV6(), fc.string())),
    migration: field(fc.boolean()),
    extra: field(anyValue),
  },
  { requiredKeys: [] },
);

const financial = fc.record(
  {
    customer_ref: field(fc.constantFrom('p-1', 'p-2', 'missing')),
    event_slug: field(fc.constantFrom('deposit', 'login', 'off', 'nope')),
    amount: field(fc.oneof(fc.double({ min: -10, max: 1e11, noNaN: true }), fc.constantFrom('10.005', '-1', '1e3'))),
    currency: field(fc.constantFrom('EUR', 'usd', 'EURO', 'XYZ')),
    transaction_ref: field(fc.stringMatching(/^[a-z0-9]{1,70}$/)),
    io_type: field(fc.constantFrom(0, 1, '1', 2)),
    event_date: field(fc.oneof(fc.constant(hoursAgo(1)), fc.constant(hoursAgo(48)), fc.date().map((date) => (Number.isNaN(date.getTime()) ? 'bad' : date.toISOString())))),
    fee_amount: field(fc.double({ min: -5, max: 100, noNaN: true })),
    channel: field(fc.integer({ min: -1, max: 6 })),
    geo: field(fc.dictionary(fc.string({ maxLength: 5 }), fc.string(), { maxKeys: 2 })),
  },
  { requiredKeys: [] },
);

const nonFinancial = fc.record(
  {
    customer_ref: field(fc.constantFrom('p-1', 'p-2', 'missing')),
    event_slug: field(fc.constantFrom('deposit', 'login', 'nope')),
    event_date: field(fc.constant(hoursAgo(2))),
    transaction_ref: field(fc.stringMatching(/^[a-z0-9]{1,70}$/)),
    amount: field(anyValue),
  },
  { requiredKeys: [] },
);

const cases = [
  ['/api/customer/upsert/', customer, 'customers'],
  ['/api/transaction/financial/upsert/', financial, 'financial_transactions'],
  ['/api/transaction/non-financial/upsert/', nonFinancial, 'non_financial_events'],
] as const;

for (const [path, record, table] of cases) {
  test.serial(`${path}: random records never give a 500 and are all accounted for`, async (t) => {
    let records = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 60 }), async (batch) => {
        records += batch.length;
        const response = await app.request('POST', path, { token, json: batch });
        if (response.status !== 200) throw new Error(`status ${response.status}: ${response.text}`);
        const results = response.body.data.results as Array<{ action: string; id: string | null; error?: string }>;
        if (results.length !== batch.length) throw new Error('a record is missing from the results');
        for (const result of results) {
          if (!['created', 'updated', 'skipped'].includes(result.action)) throw new Error(`action ${result.action}`);
          if ((result.action === 'skipped') !== (result.id === null)) throw new Error('id and action disagree');
          if (result.action === 'skipped' && !result.error) throw new Error('a skipped record without an error');
        }
      }),
      { numRuns: 200 },
    );
    t.true(records > 1000, `${records} records sent`);
  });

  test.serial(`${path}: a request with a malformed element stores nothing`, async (t) => {
    await fc.assert(
      fc.asyncProperty(fc.array(record, { minLength: 1, maxLength: 10 }), fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.array(fc.integer())), fc.nat(), async (batch, bad, at) => {
        const before = await countRows(app.database.knex, table);
        const body = [...batch];
        body.splice(at % (batch.length + 1), 0, bad as never);
        const response = await app.request('POST', path, { token, json: body });
        if (response.status !== 400) throw new Error(`status ${response.status}`);
        if ((await countRows(app.database.knex, table)) !== before) throw new Error('rows were written');
      }),
      { numRuns: 40 },
    );
    t.pass();
  });
}
