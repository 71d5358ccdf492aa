/**
 * Large batches write their records by COPY (records/sql.ts): straight into the table when the
 * batch's reads found none of them stored, else into a staging table and upserted from there;
 * small ones by one json_to_recordset statement. Every way must store the same values: the same
 * records sent in a small batch and in a large one come out identical, column by column, for
 * every column type (text with tabs, backslashes and quotes, numerics, dates, times, booleans,
 * jsonb, text[]), and so do they when the large batch is sent again (staged and upserted).
 */
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { announce, CHANNELS } from '../../src/db/notifications.ts';
import { COPY_FROM_LOGS, upsertRowsWithLogs } from '../../src/modules/records/sql.ts';
import { replaceSource } from '../../src/modules/screening/sanctions/store.ts';
import { upsertCustomers } from '../../src/modules/customer/service.ts';
import { BatchTrace } from '../../src/modules/records/trace.ts';
import { FINANCIAL, upsertTransactions } from '../../src/modules/transaction/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo } from '../helpers/fixtures.ts';

const LARGE = COPY_FROM_LOGS + 8;
const ACTOR = { type: 'system', id: 'test' } as const;
const SMALL = 8;
// One clock for both batches: the records must be the same, times included.
const eventDates = Array.from({ length: 64 }, (_, index) => hoursAgo(0.5 + index / 100));
const registrationDates = Array.from({ length: 64 }, (_, index) => hoursAgo(24 + index));
const awkward = 'tab\there\nnew line \\ back\\slash \\N "quoted" {braces}, é ✓';

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  // A listed name, so that screened customers carry topics (text[]) and matches (jsonb).
  await app.database.knex.transaction(async (trx) => {
    await replaceSource(trx, 'ofac', [
      { source: 'ofac', source_id: '1', schema: 'person', name: 'Dmitri "Tab\tBack\\slash" Karavello', aliases: [], birth_dates: ['1971-03-14'], nationalities: ['RUS'], topics: ['sanction', 'pep "quoted"', 'back\\slash'], programs: [] },
    ]);
    await announce(trx, CHANNELS.sanctions, 'test');
  });
});
test.after.always(async () => {
  await app?.close();
});

/** Minimal execution logs for probe rows (each row's log_id and ref), for writes straight through upsertRowsWithLogs. */
function minimalLogs(rows: Array<Record<string, unknown>>, actor: string) {
  return {
    count: rows.length,
    build: (start: number, end: number) =>
      rows.slice(start, end).map((row) => ({
        id: row.log_id as string, target: 'financial' as const, recordRef: row.ref as string, score: 0, decision: 'ACCEPT',
        matchedRules: '[]', ruleVersionSet: null, ruleErrors: '[]', dataContext: '{}', durationUs: 1, actor,
      })),
  };
}

/** Every stored column but the ones that differ by construction (ids, refs, times, the raw copy of the ref). */
async function storedValues(table: string, refColumn: string, refs: string[]): Promise<Array<Record<string, unknown>>> {
  const rows = await app.database.knex(table).whereIn(refColumn, refs);
  const byRef = new Map(rows.map((row) => [row[refColumn] as string, row]));
  return refs.map((ref) => {
    const { id, log_id, created_at, updated_at, [refColumn]: _ref, raw, ...rest } = byRef.get(ref)!;
    const { [refColumn]: _rawRef, ...rawRest } = raw as Record<string, unknown>;
    return { ...rest, raw: rawRest };
  });
}

function financial(ref: string, index: number): Record<string, unknown> {
  return {
    customer_ref: index % 2 ? 'st-1' : 'st-2',
    event_slug: 'deposit',
    amount: ['7000.00', 0.1, '9999999999.99', 12.345][index % 4],
    currency: 'EUR',
    transaction_ref: ref,
    io_type: index % 2,
    event_date: eventDates[index],
    payment_method: index % 3 ? 'card' : null,
    fee_amount: index % 2 ? '1.5' : undefined,
    event_description: awkward,
    device_id: `dev\t${index}`,
    ip_address: index % 2 ? '2001:db8::1' : '198.51.100.7',
    channel: index % 5,
    geo: { country: 'de', lat: 52.5 + index, nested: { list: [1, '\r', null, { deep: awkward }] } },
    metadata: index % 2 ? { note: awkward, '\\key': true, big: 1e21, small: -0.000001 } : null,
    extra_field: awkward,
  };
}

function customer(ref: string, index: number): Record<string, unknown> {
  return {
    customer_ref: ref,
    first_name: index % 3 ? 'Dmitri' : awkward.slice(0, 90),
    last_name: index % 3 ? 'Karavello' : 'O\'Brien "the" \\ second',
    birth_date: index % 2 ? '1971-03-14' : null,
    nationality: 'RUS',
    email: index % 2 ? `user${index}@example.com` : 'not an email\t',
    ip_address: '203.0.113.9',
    registration_date: registrationDates[index],
    migration: index % 7 === 0,
    extra: { awkward, list: [awkward, 1] },
  };
}

test.serial('financial records: a large batch (COPY, new and again staged) stores what a small one (json_to_recordset) stores', async (t) => {
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'st-1' }, { customer_ref: 'st-2' }] });
  const smallRefs = Array.from({ length: SMALL }, (_, index) => `small-${index}`);
  const largeRefs = Array.from({ length: LARGE }, (_, index) => `large-${index}${index === 3 ? '\t\\x' : ''}`);
  const small = await app.request('POST', '/api/transaction/financial/upsert/', { token, json: smallRefs.map((ref, index) => financial(ref, index)) });
  const large = await app.request('POST', '/api/transaction/financial/upsert/', { token, json: largeRefs.map((ref, index) => financial(ref, index)) });
  t.is(small.status, 200);
  t.is(large.status, 200);
  t.true(large.body.data.results.every((result: { action: string }) => result.action === 'created'));
  const smallRows = await storedValues('financial_transactions', 'transaction_ref', smallRefs);
  const largeRows = await storedValues('financial_transactions', 'transaction_ref', largeRefs.slice(0, SMALL));
  // The scores differ (the large batch's later records see more velocity); everything else is the record.
  const withoutScores = (rows: Array<Record<string, unknown>>) => rows.map(({ score, decision, ...rest }) => rest);
  t.deepEqual(withoutScores(largeRows), withoutScores(smallRows));
  t.is(largeRows[1]!.event_description, awkward);
  t.is((largeRows[1]!.metadata as Record<string, unknown>)['\\key'], true);
  t.is((await app.database.knex('financial_transactions').where({ transaction_ref: 'large-3\t\\x' }).first())?.device_id, 'dev\t3');
  // Sent again, the batch is staged and upserted over itself: the same values.
  const again = await app.request('POST', '/api/transaction/financial/upsert/', { token, json: largeRefs.map((ref, index) => financial(ref, index)) });
  t.true(again.body.data.results.every((result: { action: string }) => result.action === 'updated'));
  t.deepEqual(withoutScores(await storedValues('financial_transactions', 'transaction_ref', largeRefs.slice(0, SMALL))), withoutScores(smallRows));
});

test.serial('customers: a large batch (COPY, new and again staged) stores what a small one stores, text[] topics and jsonb matches included', async (t) => {
  const smallRefs = Array.from({ length: SMALL }, (_, index) => `cs-small-${index}`);
  const largeRefs = Array.from({ length: LARGE }, (_, index) => `cs-large-${index}`);
  const small = await app.request('POST', '/api/customer/upsert/', { token, json: smallRefs.map((ref, index) => customer(ref, index)) });
  const large = await app.request('POST', '/api/customer/upsert/', { token, json: largeRefs.map((ref, index) => customer(ref, index)) });
  t.is(small.status, 200);
  t.is(large.status, 200);
  const smallRows = await storedValues('customers', 'customer_ref', smallRefs);
  const largeRows = await storedValues('customers', 'customer_ref', largeRefs.slice(0, SMALL));
  t.deepEqual(largeRows, smallRows);
  t.deepEqual(largeRows[1]!.sanction_topic, ['sanction', 'pep "quoted"', 'back\\slash']);
  t.true((largeRows[1]!.sanction_matches as unknown[]).length > 0);
  t.is(largeRows[0]!.first_name, awkward.slice(0, 90));
  const again = await app.request('POST', '/api/customer/upsert/', { token, json: largeRefs.map((ref, index) => customer(ref, index)) });
  t.true(again.body.data.results.every((result: { action: string }) => result.action === 'updated'));
  t.deepEqual(await storedValues('customers', 'customer_ref', largeRefs.slice(0, SMALL)), smallRows);
});

test.serial('a large batch\'s logs name the stored records: guessed from the batch\'s reads, corrected where the guess was wrong', async (t) => {
  // moved-0 is stored under customer st-2; the batch sends it for st-1, whose read does not see it,
  // so its log is written under a new id first and corrected once the upsert answers.
  const first = await app.request('POST', '/api/transaction/financial/upsert/', { token, json: [{ ...financial('moved-0', 0), customer_ref: 'st-2' }] });
  const storedId = first.body.data.results[0].id as string;
  const refs = Array.from({ length: LARGE }, (_, index) => `moved-${index}`);
  const batch = await app.request('POST', '/api/transaction/financial/upsert/', { token, json: refs.map((ref, index) => ({ ...financial(ref, index), customer_ref: 'st-1' })) });
  t.is(batch.status, 200);
  const results = batch.body.data.results as Array<{ id: string; log_id: string; action: string }>;
  t.is(results[0]!.id, storedId);
  t.is(results[0]!.action, 'updated');
  const logs = await app.database.knex('execution_logs').whereIn('id', results.map((result) => result.log_id)).select('id', 'record_id');
  const recordOf = new Map(logs.map((log) => [log.id as string, log.record_id as string]));
  for (const result of results) t.is(recordOf.get(result.log_id), result.id);
  // The same through the service with a trace: a ref stored under a customer the batch does not
  // read is guessed wrong, and corrected by its own statement.
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'st-3' }] });
  const elsewhere = await upsertTransactions(app.context, FINANCIAL, [{ ...financial('elsewhere-0', 0), customer_ref: 'st-3' }], ACTOR);
  const traced = new BatchTrace();
  const corrected = await upsertTransactions(app.context, FINANCIAL, refs.map((ref, index) => financial(index === 0 ? 'elsewhere-0' : `${ref}-again`, index)), ACTOR, Date.now(), traced);
  // The read found none of them stored, so the batch was copied straight in until PostgreSQL refused elsewhere-0.
  t.true('write: BEGIN, new rows refused (one was stored), so staged and upserted, logs built meanwhile' in traced.phases);
  t.true('write: logs of records stored meanwhile corrected' in traced.phases);
  t.is(corrected[0]!.action, 'updated');
  t.true(corrected.slice(1).every((result) => result.action === 'created'));
  t.is(Number((await app.database.knex('financial_transactions').where({ transaction_ref: 'elsewhere-0' }).count('* as n').first())!.n), 1);
  t.is(corrected[0]!.id, elsewhere[0]!.id);
  t.is((await app.database.knex('execution_logs').where({ id: corrected[0]!.log_id }).first())?.record_id, elsewhere[0]!.id);

  // Customers re-sent in a large batch keep their ids, and their logs name them; the batch's read
  // guessed every id right, so nothing needed correcting.
  const customerRefs = Array.from({ length: LARGE }, (_, index) => `cs-large-${index}`);
  const before = await app.database.knex('customers').whereIn('customer_ref', customerRefs).select('customer_ref', 'id');
  const customerTrace = new BatchTrace();
  const resent = await upsertCustomers(app.context, customerRefs.map((ref, index) => customer(ref, index)), ACTOR, customerTrace);
  t.false('write: logs of records stored meanwhile corrected' in customerTrace.phases);
  t.true('write: BEGIN, rows staged and upserted, logs built meanwhile' in customerTrace.phases);
  t.true(resent.every((result) => result.action === 'updated'));
  const idOf = new Map(before.map((row) => [row.customer_ref as string, row.id as string]));
  for (const result of resent) t.is(idOf.get(result.customer_ref!), result.id as string | undefined);
  const customerLogs = await app.database.knex('customers as c').join('execution_logs as l', 'l.id', 'c.log_id').whereIn('c.customer_ref', customerRefs).select('c.id', 'l.record_id');
  t.is(customerLogs.length, LARGE);
  t.true(customerLogs.every((row) => row.id === row.record_id));
});

test.serial('two large writes of one table in one transaction each upsert their own rows (the staging table is emptied between them)', async (t) => {
  const knex = app.database.knex;
  await knex.raw(`create table staged_probe (id uuid primary key, ref text unique, log_id uuid, value text, created_by text, updated_by text, updated_at timestamptz)`);
  try {
    const columns = { id: 'uuid', ref: 'text', log_id: 'uuid', value: 'text', created_by: 'text', updated_by: 'text' };
    const rowsOf = (prefix: string) => Array.from({ length: LARGE }, (_, index) => ({ id: randomUUID(), ref: `${prefix}-${index}`, log_id: randomUUID(), value: prefix, created_by: 't', updated_by: 't' }));
    const logsOf = (rows: Array<Record<string, unknown>>) => minimalLogs(rows, 'probe');
    const first = rowsOf('first');
    const second = rowsOf('second');
    await knex.transaction(async (trx) => {
      await upsertRowsWithLogs(trx, 'staged_probe', 'ref', columns, first, logsOf(first));
      // Without emptying the staging table, the second write would upsert the first rows again, undoing this.
      await trx('staged_probe').where({ value: 'first' }).update({ value: 'changed' });
      const stored = await upsertRowsWithLogs(trx, 'staged_probe', 'ref', columns, second, logsOf(second));
      t.is(stored.length, LARGE);
      t.true(stored.every((row, index) => row.id === second[index]!.id && row.inserted));
    });
    t.is(Number((await knex('staged_probe').count('* as n').first())!.n), 2 * LARGE);
    t.is(Number((await knex('staged_probe').where({ value: 'changed' }).count('* as n').first())!.n), LARGE);
    t.is(Number((await knex('execution_logs').where({ actor: 'probe' }).count('* as n').first())!.n), 2 * LARGE);
  } finally {
    await knex.raw('drop table staged_probe');
    await knex('execution_logs').where({ actor: 'probe' }).delete();
  }
});

test.serial('rows taken for new that were stored are upserted after all: the refused COPY is undone to its savepoint, the caller\'s earlier writes kept', async (t) => {
  const knex = app.database.knex;
  await knex.raw(`create table new_probe (id uuid primary key, ref text unique, log_id uuid, value text, created_by text, updated_by text, updated_at timestamptz)`);
  try {
    const columns = { id: 'uuid', ref: 'text', log_id: 'uuid', value: 'text', created_by: 'text', updated_by: 'text' };
    const rowsOf = (from: number, value: string) =>
      Array.from({ length: LARGE }, (_, index) => ({ id: randomUUID(), ref: `p-${from + index}`, log_id: randomUUID(), value, created_by: 't', updated_by: 't' }));
    const logsOf = (rows: Array<Record<string, unknown>>) => minimalLogs(rows, 'new-probe');
    const first = rowsOf(0, 'first');
    const firstTrace = new BatchTrace();
    const created = await upsertRowsWithLogs(knex, 'new_probe', 'ref', columns, first, logsOf(first), firstTrace, { allNew: true });
    t.true('write: BEGIN, new rows copied into the table, logs built meanwhile' in firstTrace.phases);
    t.true(created.every((row, index) => row.inserted && row.id === first[index]!.id));

    // Half of these are stored already (p-20 onwards), though the caller takes them all for new.
    const second = rowsOf(LARGE / 2, 'second');
    const trace = new BatchTrace();
    const stored = await knex.transaction(async (trx) => {
      await trx('new_probe').insert({ id: randomUUID(), ref: 'before', value: 'kept' });
      return upsertRowsWithLogs(trx, 'new_probe', 'ref', columns, second, logsOf(second), trace, { allNew: true });
    });
    t.true('write: BEGIN, new rows refused (one was stored), so staged and upserted, logs built meanwhile' in trace.phases);
    const firstIds = new Map(first.map((row) => [row.ref, row.id]));
    second.forEach((row, index) => {
      const storedBefore = firstIds.get(row.ref);
      t.is(stored[index]!.inserted, storedBefore === undefined);
      t.is(stored[index]!.id, storedBefore ?? row.id);
    });
    t.is((await knex('new_probe').where({ ref: 'before' }).first())?.value, 'kept');
    t.is(Number((await knex('new_probe').count('* as n').first())!.n), LARGE + LARGE / 2 + 1);
    t.is(Number((await knex('new_probe').where({ value: 'second' }).count('* as n').first())!.n), LARGE);
    // Every log names the record stored under its ref, the corrected ones included.
    const logs = await knex('execution_logs as l').join('new_probe as p', 'p.ref', 'l.record_ref').where({ 'l.actor': 'new-probe' }).select('l.record_id', 'p.id');
    t.is(logs.length, 2 * LARGE);
    t.true(logs.every((log) => log.record_id === log.id));
  } finally {
    await knex.raw('drop table new_probe');
    await knex('execution_logs').where({ actor: 'new-probe' }).delete();
  }
});

test.serial('two large batches sending the same new refs at once both succeed: each ref stored once, created by one and updated by the other', async (t) => {
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'st-1' }, { customer_ref: 'st-2' }] });
  const refs = Array.from({ length: LARGE }, (_, index) => `race-${index}`);
  const [a, b] = await Promise.all(
    [0, 1].map((batch) => upsertTransactions(app.context, FINANCIAL, refs.map((ref, index) => ({ ...financial(ref, index), amount: String(100 + batch) })), ACTOR)),
  );
  refs.forEach((_, index) => {
    t.deepEqual([a![index]!.action, b![index]!.action].sort(), ['created', 'updated']);
    t.is(a![index]!.id, b![index]!.id);
  });
  t.is(Number((await app.database.knex('financial_transactions').whereIn('transaction_ref', refs).count('* as n').first())!.n), LARGE);
  const logs = await app.database.knex('execution_logs').whereIn('id', [...a!, ...b!].map((result) => result.log_id!)).select('record_id');
  t.is(logs.length, 2 * LARGE);
  const ids = new Set(a!.map((result) => result.id));
  t.true(logs.every((log) => ids.has(log.record_id as string)));
});

test.serial('two large customer batches sending the same new refs at once both succeed: the one whose COPY meets rows of the other goes back to its savepoint and upserts, alerts and cases included', async (t) => {
  // Over 250 records: written as screened (records/batch.ts scoreWhileWriting); half of them listed, so alerts are raised.
  const refs = Array.from({ length: 300 }, (_, index) => `race-c-${index}`);
  const batch = refs.map((ref, index) => ({ customer_ref: ref, first_name: index % 2 ? 'Dmitri' : 'Anna', last_name: index % 2 ? 'Karavello' : 'Lindqvist', birth_date: '1971-03-14', nationality: 'RUS' }));
  const [a, b] = await Promise.all([0, 1].map(() => upsertCustomers(app.context, batch, ACTOR)));
  refs.forEach((_, index) => {
    t.deepEqual([a![index]!.action, b![index]!.action].sort(), ['created', 'updated']);
    t.is(a![index]!.id, b![index]!.id);
  });
  const knex = app.database.knex;
  const stored = await knex('customers').whereIn('customer_ref', refs).select('id');
  t.is(stored.length, refs.length);
  const ids = new Set(stored.map((row) => row.id as string));
  // Two logs per record, naming the stored record.
  const logs = await knex('execution_logs').whereIn('record_ref', refs).select('record_id');
  t.is(logs.length, 2 * refs.length);
  t.true(logs.every((log) => ids.has(log.record_id as string)));
  // Each listed customer: one case, extended by the second batch, with both alerts.
  const alerted = a!.filter((result) => result.sanction_score !== null && result.sanction_score >= 50).length;
  t.true(alerted >= refs.length / 2);
  const alerts = await knex('alerts').whereIn('record_ref', refs).select('customer_id', 'case_id');
  t.is(alerts.length, 2 * alerted);
  const cases = await knex('cases').whereIn('customer_id', [...ids]).select('id', 'alert_count');
  t.is(cases.length, alerted);
  t.true(cases.every((open) => open.alert_count === 2));
  t.true(alerts.every((alert) => cases.some((open) => open.id === alert.case_id)));
});

test.serial('a large write whose COPY PostgreSQL refuses mid-stream reports PostgreSQL\'s error, writes nothing and leaves the connection usable', async (t) => {
  const knex = app.database.knex;
  await knex.raw(`create table staged_fail (id uuid primary key, ref text unique, log_id uuid, value text, created_by text, updated_by text, updated_at timestamptz)`);
  try {
    const columns = { id: 'uuid', ref: 'text', log_id: 'uuid', value: 'text', created_by: 'text', updated_by: 'text' };
    const rows = Array.from({ length: 600 }, (_, index) => ({ id: index === 400 ? 'not-a-uuid' : randomUUID(), ref: `f-${index}`, log_id: randomUUID(), value: 'v', created_by: 't', updated_by: 't' }));
    const logs = minimalLogs(rows, 'fail-probe');
    for (const allNew of [false, true]) {
      const error = await t.throwsAsync(upsertRowsWithLogs(knex, 'staged_fail', 'ref', columns, rows, logs, undefined, { allNew }));
      t.is((error as { code?: string }).code, '22P02', String(error));
      t.is(Number((await knex('staged_fail').count('* as n').first())!.n), 0);
    }
    t.is(Number((await knex('execution_logs').where({ actor: 'fail-probe' }).count('* as n').first())!.n), 0);

    // A value the encoder cannot write (its text throws): the COPY is abandoned, not left hanging.
    const throwing = rows.map((row, index) => ({ ...row, id: randomUUID(), value: index === 400 ? { toString: () => { throw new Error('unwritable'); } } : 'v' }));
    for (const allNew of [false, true]) {
      const thrown = await t.throwsAsync(Promise.race([
        upsertRowsWithLogs(knex, 'staged_fail', 'ref', columns, throwing, logs, undefined, { allNew }),
        new Promise((_, reject) => setTimeout(() => reject(new Error('hung')), 10_000)),
      ]));
      t.is(thrown?.message, 'unwritable');
      t.is(Number((await knex('staged_fail').count('* as n').first())!.n), 0);
    }
    // Every pooled connection still answers.
    await Promise.all(Array.from({ length: 4 }, () => knex.raw('select 1')));
    const written = await upsertRowsWithLogs(knex, 'staged_fail', 'ref', columns, rows.map((row) => ({ ...row, id: randomUUID() })), logs);
    t.is(written.length, rows.length);
  } finally {
    await knex.raw('drop table staged_fail');
    await knex('execution_logs').where({ actor: 'fail-probe' }).delete();
  }
});
