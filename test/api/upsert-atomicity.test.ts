/**
 * A batch is one transaction: an error mid-batch stores nothing of it, and concurrent batches
 * that share refs neither deadlock nor duplicate.
 */
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { countRows, defineEvents, hoursAgo } from '../helpers/fixtures.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'a-1' }, { customer_ref: 'a-2' }] });
});
test.after.always(async () => {
  await app?.close();
});

const record = (ref: string, customer = 'a-1', amount = '10.00') => ({
  customer_ref: customer,
  event_slug: 'deposit',
  amount,
  currency: 'EUR',
  transaction_ref: ref,
  io_type: 0,
  event_date: hoursAgo(0.5),
});

test.serial('a failure while writing the execution logs stores nothing of the batch; a retry then succeeds', async (t) => {
  // A database-side fault in the second statement of the batch's transaction.
  await app.database.knex.raw(`
    create function fail_on_boom() returns trigger language plpgsql as $$
    begin if new.record_ref = 'boom' then raise exception 'injected fault'; end if; return new; end $$;
    create trigger fail_on_boom before insert on execution_logs for each row execute function fail_on_boom();`);
  const before = await countRows(app.database.knex, 'financial_transactions');
  const batch = [record('ok-1'), record('boom'), record('ok-2')];
  const failed = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(failed.status, 500);
  t.is(failed.body.status, false);
  t.is(failed.body.message, 'Internal server error.');
  t.is(await countRows(app.database.knex, 'financial_transactions'), before, 'nothing of the failed batch is stored');
  t.is(await countRows(app.database.knex, 'execution_logs', { record_ref: 'ok-1' }), 0);

  await app.database.knex.raw('drop trigger fail_on_boom on execution_logs; drop function fail_on_boom()');
  const retried = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(retried.status, 200);
  t.deepEqual(retried.body.data.results.map((result: { action: string }) => result.action), ['created', 'created', 'created']);
  t.is(await countRows(app.database.knex, 'financial_transactions'), before + 3);
});

test.serial('concurrent batches sharing refs neither deadlock nor duplicate', async (t) => {
  const refs = Array.from({ length: 200 }, (_, index) => `shared-${index}`);
  // Opposite orders: without ordered locking these would deadlock.
  const forward = refs.map((ref, index) => record(ref, index % 2 ? 'a-1' : 'a-2'));
  const backward = [...forward].reverse();
  const responses = await Promise.all(
    Array.from({ length: 6 }, (_, index) => app.request('POST', FINANCIAL, { token, json: index % 2 ? forward : backward })),
  );
  for (const response of responses) t.is(response.status, 200, response.text.slice(0, 200));
  const [row] = await app.database.knex('financial_transactions').whereIn('transaction_ref', refs).count({ count: '*' });
  t.is(Number(row!.count), refs.length);
  const created = responses.flatMap((response) => response.body.data.results).filter((result: { action: string }) => result.action === 'created');
  t.is(created.length, refs.length, 'each ref is created exactly once across the concurrent batches');
});
