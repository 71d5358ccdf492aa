import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { countRows } from '../helpers/fixtures.ts';

const ENDPOINTS = ['/api/customer/upsert/', '/api/transaction/financial/upsert/', '/api/transaction/non-financial/upsert/'];

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
});
test.after.always(async () => {
  await app?.close();
});

for (const path of ENDPOINTS) {
  test(`${path}: request-level errors of the spec, nothing stored`, async (t) => {
    const json = { 'content-type': 'application/json' };
    const invalid = await app.request('POST', path, { token, body: '[{"customer_ref": ', headers: json });
    t.is(invalid.status, 400);
    t.is(invalid.body.message, 'Request body is not valid JSON.');

    for (const body of ['"text"', '12', 'null', 'true']) {
      const scalar = await app.request('POST', path, { token, body, headers: json });
      t.is(scalar.status, 400, body);
      t.regex(scalar.body.message, /A JSON object/);
    }

    const empty = await app.request('POST', path, { token, json: [] });
    t.is(empty.status, 400);
    t.is(empty.body.message, 'Payload contains no records.');

    const notObject = await app.request('POST', path, { token, json: [{ customer_ref: 'a' }, 'b', { customer_ref: 'c' }] });
    t.is(notObject.status, 400);
    t.is(notObject.body.message, 'Record at index 1 is not a JSON object (received string).');
    const nested = await app.request('POST', path, { token, json: [[{ customer_ref: 'a' }]] });
    t.is(nested.body.message, 'Record at index 0 is not a JSON object (received array).');

    const tooMany = await app.request('POST', path, { token, json: Array.from({ length: 1001 }, (_, index) => ({ customer_ref: `r-${index}` })) });
    t.is(tooMany.status, 413);
    t.regex(tooMany.body.message, /1001 records; at most 1000/);

    const unauthenticated = await app.request('POST', path, { json: { customer_ref: 'a' } });
    t.is(unauthenticated.status, 401);
    const wrongType = await app.request('POST', path, { token, body: 'customer_ref=a', headers: { 'content-type': 'text/plain' } });
    t.is(wrongType.status, 415);

    t.is(await countRows(app.database.knex, 'customers'), 0);
    t.is(await countRows(app.database.knex, 'execution_logs'), 0);
  });
}

test('the body limit admits 1000 customers with every field at its maximum size', async (t) => {
  const long = (length: number) => 'x'.repeat(length);
  const records = Array.from({ length: 1000 }, (_, index) => ({
    customer_ref: `${String(index).padStart(4, '0')}${long(44)}`,
    customer_type: 2,
    first_name: long(100),
    last_name: long(100),
    gender: 'unknown',
    birth_date: '1980-01-01',
    identity_number: long(100),
    passport_number: long(100),
    passport_issuing_country: 'DEU',
    nationality: 'DEU',
    email: `${long(60)}@${long(60)}.${long(60)}.${long(60)}.com`,
    phone: long(100),
    country: long(100),
    occupation: long(100),
    ip_address: '2001:0db8:0000:0000:0000:ff00:0042:8329',
    status: long(24),
    registration_date: '2026-01-01T00:00:00.000Z',
    email_verified_at: '2026-01-01T00:00:00.000Z',
    phone_verified_at: '2026-01-01T00:00:00.000Z',
    migration: true,
    company_name: long(255),
    legal_form: long(50),
    tax_number: long(100),
    tax_office: long(100),
    sector: long(150),
    incorporation_date: '2000-01-01',
    country_of_origin: 'DEU',
    registry_number: long(100),
    lei_code: long(20),
    stock_ticker_symbol: long(20),
    website: long(255),
  }));
  const response = await app.request('POST', '/api/customer/upsert/', { token, json: records });
  t.is(response.status, 200, response.text.slice(0, 300));
  t.is(response.body.data.results.length, 1000);
  t.true(response.body.data.results.every((result: { action: string }) => result.action === 'created'));
});
