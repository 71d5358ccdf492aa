/**
 * The scoring hot path (issue 17): large batches COPY their execution logs in one transaction
 * with the records, and the per-customer window query gives exactly the aggregates of a plain
 * scan over every stored and earlier batch transaction.
 */
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { COPY_FROM_LOGS } from '../../src/modules/records/sql.ts';
import { COPY_FROM_ALERTS } from '../../src/modules/cases/alerts.ts';
import { buildDecisionContext } from '../../src/modules/rules/evaluate.ts';
import { storedDecisionContext } from '../../src/modules/rules/decision-context.ts';
import { computeAggregates, type AggregateItem } from '../../src/modules/transaction/aggregates.ts';
import { random } from '../../models/random.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { countRows, defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';

const FINANCIAL = '/api/transaction/financial/upsert/';
const LARGE = COPY_FROM_LOGS + 8;

let app: TestApp;
let token: string;
test.before(async () => {
  app = await startTestApp();
  token = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [
    { code: 'LARGE_AMOUNT', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 40 },
    { code: 'VELOCITY_1H', name: 'Velocity', target: 'financial', expression: { '>=': [{ var: 'aggregates.count_1h' }, 3] }, score: 30 },
  ]);
  await app.request('POST', '/api/customer/upsert/', { token, json: [{ customer_ref: 'h-1', loyalty: 'gold' }, { customer_ref: 'h-2' }, { customer_ref: 'h-3' }] });
});
test.after.always(async () => {
  await app?.close();
});

const record = (ref: string, extra: Record<string, unknown> = {}) => ({
  customer_ref: 'h-1',
  event_slug: 'deposit',
  amount: '7000.00',
  currency: 'EUR',
  transaction_ref: ref,
  io_type: 0,
  event_date: hoursAgo(0.5),
  ...extra,
});

test.serial('a large batch stores every log by COPY, with refs and extras holding tabs, newlines and backslashes intact', async (t) => {
  const awkward = 'tab\there\nnew line \\ back\\slash \\N "quoted" é ✓';
  const batch = Array.from({ length: LARGE }, (_, index) => record(`copy-${index}${index === 3 ? '\t\\x\ny' : ''}`, { note: awkward, nested: { path: 'a\\b', list: [1, '\r'] } }));
  const response = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(response.status, 200);
  const results = response.body.data.results as Array<{ id: string; log_id: string; transaction_ref: string; score: number }>;
  t.is(results.length, LARGE);
  const logs = await app.database.knex('execution_logs').whereIn('id', results.map((result) => result.log_id));
  t.is(logs.length, LARGE);
  const byId = new Map(logs.map((log) => [log.id, log]));
  const sets = new Map((await app.database.knex('rule_version_sets').select('id', 'versions')).map((set) => [set.id, set.versions]));
  for (const result of results) {
    const log = byId.get(result.log_id)!;
    t.is(log.record_id, result.id);
    t.is(log.record_ref, result.transaction_ref);
    t.is(Number(log.score), result.score);
    t.is(log.data_context.transaction.note, awkward);
    t.is(log.data_context.transaction['nested.path'], 'a\\b');
    t.is(log.data_context.transaction['nested.list.1'], '\r');
    t.is(log.data_context.customer.loyalty, 'gold');
    t.deepEqual(sets.get(log.rule_version_set), { LARGE_AMOUNT: 1, VELOCITY_1H: 1 });
  }
  t.is(results[3]!.transaction_ref, 'copy-3\t\\x\ny');
  // Later records of the batch see the earlier ones: 3 within the hour from the fourth on.
  t.true(results.slice(3).every((result) => result.score === 70));
  t.deepEqual(results.slice(0, 3).map((result) => result.score), [40, 40, 40]);
});

test.serial('the decision context of a large batch is the one buildDecisionContext describes', async (t) => {
  const batch = Array.from({ length: LARGE }, (_, index) => record(`ctx-${index}`, { customer_ref: index % 2 ? 'h-3' : 'h-2', geo: { country: 'de' } }));
  const response = await app.request('POST', FINANCIAL, { token, json: batch });
  const results = response.body.data.results as Array<{ log_id: string }>;
  const log = await app.database.knex('execution_logs').where({ id: results[LARGE - 1]!.log_id }).first();
  const stored = await app.database.knex('financial_transactions').where({ transaction_ref: `ctx-${LARGE - 1}` }).first();
  const customer = await app.database.knex('customers').where({ customer_ref: 'h-3' }).first();
  const context = storedDecisionContext(log.data_context);
  const expected = buildDecisionContext({
    target: 'financial',
    record: context.transaction,
    customer: context.customer,
    event: { slug: 'deposit', name: 'deposit', type: 1 },
    aggregates: context.aggregates as Record<string, number | null>,
  });
  t.deepEqual(context, expected);
  t.is(context.transaction.amount, 7000);
  t.is(context.transaction.transaction_ref, stored.transaction_ref);
  t.is(context.customer.customer_ref, customer.customer_ref);
  t.is(context.aggregates.count_1h, (LARGE - 1 - 1) / 2);
});

test.serial('a large batch COPYs its alerts: one per REVIEW or REJECT record, refs intact, each in its customer\'s open case', async (t) => {
  const batch = Array.from({ length: LARGE }, (_, index) => record(`alerted-${index}${index === 5 ? '\t\\x\ny' : ''}`, { customer_ref: index % 2 ? 'h-2' : 'h-3' }));
  const response = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(response.status, 200);
  const results = response.body.data.results as Array<{ id: string; log_id: string; transaction_ref: string; decision: string; score: number }>;
  const alerted = results.filter((result) => result.decision !== 'ACCEPT');
  t.true(alerted.length > COPY_FROM_ALERTS, 'enough alerts for the COPY path');
  const alerts = await app.database.knex('alerts as a').join('customers as c', 'c.id', 'a.customer_id').whereIn('a.record_id', results.map((result) => result.id)).select('a.*', 'c.customer_ref');
  t.is(alerts.length, alerted.length);
  const byRecord = new Map(alerts.map((alert) => [alert.record_id as string, alert]));
  for (const result of alerted) {
    const alert = byRecord.get(result.id)!;
    t.is(alert.record_ref, result.transaction_ref);
    t.is(alert.log_id, result.log_id);
    t.is(Number(alert.score), result.score);
    t.is(alert.decision, result.decision);
    t.is(alert.kind, 'rules');
    t.is(alert.status, 'open');
    t.deepEqual([...alert.rule_codes].sort(), result.score === 70 ? ['LARGE_AMOUNT', 'VELOCITY_1H'] : ['LARGE_AMOUNT']);
  }
  t.is(byRecord.get(results[5]!.id)?.record_ref, 'alerted-5\t\\x\ny');
  for (const customerRef of ['h-2', 'h-3']) {
    const open = await app.database.knex('cases as k').join('customers as c', 'c.id', 'k.customer_id').where({ 'c.customer_ref': customerRef }).whereNot('k.status', 'closed').select('k.*');
    t.is(open.length, 1);
    const own = alerts.filter((alert) => alert.customer_ref === customerRef);
    t.true(own.every((alert) => alert.case_id === open[0]!.id));
    t.is(Number(open[0]!.priority), Math.max(...own.map((alert) => Number(alert.score))));
    // Counted per customer before the cases' upsert: the case counts every alert it holds.
    t.is(open[0]!.alert_count, Number((await app.database.knex('alerts').where({ case_id: open[0]!.id }).count('* as n').first())!.n));
  }
  // A second large batch extends the same open cases: they keep their ids (the id a new case would take is not used).
  const openBefore = await app.database.knex('cases').whereNot('status', 'closed').select('id', 'customer_id', 'alert_count');
  const again = await app.request('POST', FINANCIAL, { token, json: Array.from({ length: LARGE }, (_, index) => record(`alerted-again-${index}`, { customer_ref: index % 2 ? 'h-2' : 'h-3' })) });
  const raised = (again.body.data.results as Array<{ decision: string }>).filter((result) => result.decision !== 'ACCEPT').length;
  t.true(raised > COPY_FROM_ALERTS);
  const openAfter = await app.database.knex('cases').whereNot('status', 'closed').select('id', 'customer_id', 'alert_count');
  t.deepEqual(openAfter.map((row) => row.id).sort(), openBefore.map((row) => row.id).sort());
  t.is(openAfter.reduce((sum, row) => sum + row.alert_count, 0), openBefore.reduce((sum, row) => sum + row.alert_count, 0) + raised);
});

test.serial("a large customer batch opens new customers' cases by COPY and extends the open cases of stored ones", async (t) => {
  await loadRuleSet(app.context, [{ code: 'WATCHED', name: 'Watched segment', target: 'customer', expression: { '==': [{ var: 'record.segment' }, 'watch'] }, score: 80 }], false);
  const customer = (ref: string) => ({ customer_ref: ref, segment: 'watch' });
  // Five customers stored first, each with an open case (a small batch: one statement).
  const stored = Array.from({ length: 5 }, (_, index) => `watch-stored-${index}`);
  t.is((await app.request('POST', '/api/customer/upsert/', { token, json: stored.map(customer) })).status, 200);
  const casesBefore = new Map(
    (await app.database.knex('cases as k').join('customers as c', 'c.id', 'k.customer_id').whereIn('c.customer_ref', stored).select('k.id', 'c.customer_ref')).map((row) => [row.customer_ref, row.id]),
  );
  t.is(casesBefore.size, 5);

  const fresh = Array.from({ length: LARGE }, (_, index) => `watch-new-${index}`);
  const response = await app.request('POST', '/api/customer/upsert/', { token, json: [...stored, ...fresh].map(customer) });
  t.is(response.status, 200);
  const results = response.body.data.results as Array<{ id: string; customer_ref: string; action: string; decision: string }>;
  t.true(results.every((result) => result.decision !== 'ACCEPT'));
  t.true(results.length > COPY_FROM_ALERTS, 'enough alerts for the COPY path');
  const open = await app.database.knex('cases as k').join('customers as c', 'c.id', 'k.customer_id').whereIn('c.id', results.map((result) => result.id)).whereNot('k.status', 'closed').select('k.*', 'c.customer_ref');
  t.is(open.length, results.length, 'one open case per customer');
  const caseOf = new Map(open.map((row) => [row.customer_ref as string, row]));
  for (const ref of stored) {
    t.is(caseOf.get(ref)!.id, casesBefore.get(ref), 'a stored customer keeps its open case');
    t.is(caseOf.get(ref)!.alert_count, 2);
  }
  for (const ref of fresh) {
    t.is(caseOf.get(ref)!.alert_count, 1);
    t.is(Number(caseOf.get(ref)!.priority), 80);
    t.is(caseOf.get(ref)!.status, 'open');
  }
  const alerts = await app.database.knex('alerts').whereIn('record_id', results.map((result) => result.id)).select('record_id', 'case_id', 'customer_id');
  // The stored customers' alerts of both batches, every new customer's one.
  t.is(alerts.length, results.length + stored.length);
  const refOf = new Map(results.map((result) => [result.id, result.customer_ref]));
  t.true(alerts.every((alert) => alert.case_id === caseOf.get(refOf.get(alert.record_id)!)!.id && alert.customer_id === alert.record_id));
  await loadRuleSet(app.context, [{ code: 'WATCHED', name: 'Watched segment', target: 'customer', expression: { '==': [{ var: 'record.segment' }, 'watch'] }, score: 80, active: false }], false);
});

test.serial('a failure while a large batch COPYs its logs stores nothing of it; a retry then succeeds', async (t) => {
  await app.database.knex.raw(`
    create function fail_on_copy_boom() returns trigger language plpgsql as $$
    begin if new.record_ref = 'copy-boom' then raise exception 'injected fault'; end if; return new; end $$;
    create trigger fail_on_copy_boom before insert on execution_logs for each row execute function fail_on_copy_boom();`);
  const batch = Array.from({ length: LARGE }, (_, index) => record(index === LARGE - 2 ? 'copy-boom' : `boom-batch-${index}`));
  const before = await countRows(app.database.knex, 'financial_transactions');
  const failed = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(failed.status, 500);
  t.is(await countRows(app.database.knex, 'financial_transactions'), before);
  t.is(await countRows(app.database.knex, 'execution_logs', { record_ref: 'boom-batch-0' }), 0);
  await app.database.knex.raw('drop trigger fail_on_copy_boom on execution_logs; drop function fail_on_copy_boom()');
  const retried = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(retried.status, 200);
  t.is(await countRows(app.database.knex, 'financial_transactions'), before + LARGE);
  t.is(await countRows(app.database.knex, 'execution_logs', { record_ref: 'copy-boom' }), 1);
});

test.serial("a failure while a large batch raises its alerts (after its records, before its logs) stores nothing of it; a retry then succeeds", async (t) => {
  await app.database.knex.raw(`
    create function fail_on_alert_boom() returns trigger language plpgsql as $$
    begin if new.record_ref = 'alert-boom' then raise exception 'injected fault'; end if; return new; end $$;
    create trigger fail_on_alert_boom before insert on alerts for each row execute function fail_on_alert_boom();`);
  const batch = Array.from({ length: LARGE }, (_, index) => record(index === 7 ? 'alert-boom' : `alert-boom-batch-${index}`, { customer_ref: 'h-2' }));
  const counts = async () => ({
    records: await countRows(app.database.knex, 'financial_transactions'),
    logs: await countRows(app.database.knex, 'execution_logs'),
    alerts: await countRows(app.database.knex, 'alerts'),
    alertCount: Number((await app.database.knex('cases').sum('alert_count as n').first())!.n),
  });
  const before = await counts();
  const failed = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(failed.status, 500);
  t.deepEqual(await counts(), before);
  await app.database.knex.raw('drop trigger fail_on_alert_boom on alerts; drop function fail_on_alert_boom()');
  const retried = await app.request('POST', FINANCIAL, { token, json: batch });
  t.is(retried.status, 200);
  const raised = (retried.body.data.results as Array<{ decision: string }>).filter((result) => result.decision !== 'ACCEPT').length;
  t.true(raised > COPY_FROM_ALERTS);
  const after = await counts();
  t.deepEqual(after, { records: before.records + LARGE, logs: before.logs + LARGE, alerts: before.alerts + raised, alertCount: before.alertCount + raised });
});

test.serial('a large batch re-sent updates its records and logs them again under the same ids', async (t) => {
  const batch = Array.from({ length: LARGE }, (_, index) => record(`again-${index}`));
  const first = await app.request('POST', FINANCIAL, { token, json: batch });
  const second = await app.request('POST', FINANCIAL, { token, json: batch });
  const ids = (response: typeof first) => response.body.data.results.map((result: { id: string }) => result.id);
  t.deepEqual(ids(second), ids(first));
  t.true(second.body.data.results.every((result: { action: string }) => result.action === 'updated'));
  const logs = await app.database.knex('execution_logs').whereIn('id', second.body.data.results.map((result: { log_id: string }) => result.log_id));
  t.deepEqual(logs.map((log) => log.record_id).sort(), [...ids(first)].sort());
});

/** The aggregates by definition: every earlier transaction of the customer, one by one. */
function naiveAggregates(history: Array<{ at: number; index: number; cents: number; io: number; device: string | null; ip: string | null; country: string | null }>, item: { at: number; index: number }, first: number | null) {
  const windows: Array<[string, number]> = [['1h', 3_600_000], ['24h', 86_400_000], ['7d', 7 * 86_400_000], ['30d', 30 * 86_400_000]];
  const earlier = history.filter((entry) => entry.at < item.at || (entry.at === item.at && entry.index < item.index));
  const result: Record<string, number | null> = {};
  for (const [name, span] of windows) {
    const inside = earlier.filter((entry) => item.at - entry.at <= span);
    for (const [prefix, io] of [['', null], ['credit_', 0], ['debit_', 1]] as const) {
      const matching = inside.filter((entry) => io === null || entry.io === io);
      result[`count_${prefix}${name}`] = matching.length;
      result[`sum_${prefix}${name}`] = matching.reduce((sum, entry) => sum + entry.cents, 0) / 100;
    }
  }
  const within = (span: number) => earlier.filter((entry) => item.at - entry.at <= span);
  const distinct = (span: number, key: 'device' | 'ip' | 'country') => new Set(within(span).map((entry) => entry[key]).filter((value) => value !== null)).size;
  result.distinct_devices_24h = distinct(86_400_000, 'device');
  result.distinct_devices_30d = distinct(30 * 86_400_000, 'device');
  result.distinct_ips_24h = distinct(86_400_000, 'ip');
  result.distinct_ips_30d = distinct(30 * 86_400_000, 'ip');
  result.distinct_countries_24h = distinct(86_400_000, 'country');
  result.distinct_countries_30d = distinct(30 * 86_400_000, 'country');
  const firsts = [first, ...earlier.filter((entry) => entry.index !== Number.MAX_SAFE_INTEGER).map((entry) => entry.at)].filter((value): value is number => value !== null);
  const firstAt = firsts.length ? Math.min(...firsts) : null;
  result.days_since_first_transaction = firstAt === null ? null : Math.floor((item.at - firstAt) / 86_400_000);
  const count = result.count_30d!;
  result.avg_amount_30d = count ? Math.round(((result.sum_30d as number) / count) * 100) / 100 : null;
  return result;
}

test.serial('window aggregates equal a plain scan of every earlier transaction (random histories, ties, re-sent refs, old rows)', async (t) => {
  const knex = app.database.knex;
  const next = random(17);
  const customers = await knex('customers').whereIn('customer_ref', ['h-1', 'h-2']).select('id');
  const customerIds = customers.map((row) => row.id as string);
  await knex('execution_logs').delete();
  await knex('financial_transactions').whereIn('customer_id', customerIds).delete();
  const now = Date.now();
  const base = now - 2 * 3_600_000;
  const stored: Array<{ id: string; ref: string; customerId: string; at: number; cents: number; io: number; device: string | null; ip: string | null; country: string | null }> = [];
  for (let index = 0; index < 300; index++) {
    // Ages up to 40 days, many on the same few instants so ties with the batch happen.
    const at = next() < 0.3 ? base - Math.floor(next() * 5) * 600_000 : now - Math.floor(next() * 40 * 86_400_000);
    stored.push({
      id: randomUUID(),
      ref: `agg-${index}`,
      customerId: customerIds[index % 2]!,
      at,
      cents: 1 + Math.floor(next() * 1_000_000),
      io: next() < 0.5 ? 0 : 1,
      device: next() < 0.2 ? null : `d${Math.floor(next() * 6)}`,
      ip: next() < 0.2 ? null : `10.0.0.${Math.floor(next() * 6)}`,
      country: next() < 0.3 ? null : ['DE', 'FR', 'TR'][Math.floor(next() * 3)]!,
    });
  }
  await knex('financial_transactions').insert(
    stored.map((row) => ({
      id: row.id, transaction_ref: row.ref, customer_id: row.customerId, customer_ref: 'x', event_slug: 'deposit', amount: (row.cents / 100).toFixed(2),
      currency: 'EUR', io_type: row.io, event_date: new Date(row.at).toISOString(), device_id: row.device, ip_address: row.ip, country: row.country,
      raw: {}, rule_check: true, created_by: 'test', updated_by: 'test',
    })),
  );
  // The batch: 600 items, some re-sending stored refs (their stored versions must not count), some
  // not scored; more than aggregatesOf computes between two turns of the event loop (250).
  const resent = new Set(['agg-1', 'agg-2', 'agg-10', 'agg-11']);
  const items: AggregateItem[] = Array.from({ length: 600 }, (_, index) => ({
    index,
    customerId: customerIds[index % 2]!,
    eventDate: next() < 0.4 ? base - Math.floor(next() * 5) * 600_000 : now - Math.floor(next() * 3 * 86_400_000),
    wanted: next() < 0.8,
    contribution: { amount: (1 + Math.floor(next() * 100_000)) / 100, ioType: next() < 0.5 ? 0 : 1, deviceId: `d${Math.floor(next() * 8)}`, ip: null, country: next() < 0.5 ? 'NL' : null },
  }));
  const computed = await computeAggregates(knex, items, [...resent]);
  let compared = 0;
  for (const item of items.filter((candidate) => candidate.wanted)) {
    const storedHistory = stored
      .filter((row) => row.customerId === item.customerId && !resent.has(row.ref))
      .map((row) => ({ at: row.at, index: Number.MAX_SAFE_INTEGER, cents: row.cents, io: row.io, device: row.device, ip: row.ip, country: row.country }));
    const batchHistory = items
      .filter((other) => other.customerId === item.customerId)
      .map((other) => ({ at: other.eventDate, index: other.index, cents: Math.round(other.contribution!.amount * 100), io: other.contribution!.ioType, device: other.contribution!.deviceId, ip: other.contribution!.ip, country: other.contribution!.country }));
    // The first transaction: the earliest stored one (whenever it is), or an earlier batch record.
    const firstStored = storedHistory.length ? Math.min(...storedHistory.map((entry) => entry.at)) : null;
    const expected = naiveAggregates([...storedHistory.filter((entry) => entry.at < item.eventDate), ...batchHistory], { at: item.eventDate, index: item.index }, firstStored);
    t.deepEqual(computed.get(item.index), expected, `item ${item.index}`);
    compared++;
  }
  t.true(compared > 400);

  // One record: with and without a stored version of its ref.
  for (const resentRef of [null, 'agg-3']) {
    const customerId = stored.find((row) => row.ref === 'agg-3')!.customerId;
    const item: AggregateItem = { index: 0, customerId, eventDate: now - 3_600_000, wanted: true, contribution: { amount: 12.5, ioType: 0, deviceId: 'd1', ip: null, country: 'DE' } };
    const single = await computeAggregates(knex, [item], resentRef ? [resentRef] : []);
    const storedHistory = stored
      .filter((row) => row.customerId === customerId && row.ref !== resentRef)
      .map((row) => ({ at: row.at, index: Number.MAX_SAFE_INTEGER, cents: row.cents, io: row.io, device: row.device, ip: row.ip, country: row.country }));
    const firstStored = Math.min(...storedHistory.map((entry) => entry.at));
    t.deepEqual(single.get(0), naiveAggregates(storedHistory.filter((entry) => entry.at < item.eventDate), { at: item.eventDate, index: 0 }, firstStored), `one record, re-sent ${resentRef}`);
  }
});

test.serial('dates without a zone, which the service reads as UTC and Date.parse as local time, give the aggregates of their UTC form', async (t) => {
  const instants = [0.1, 0.4, 0.9, 3, 20].map(hoursAgo);
  const send = async (form: (iso: string) => string) => {
    const response = await app.request('POST', FINANCIAL, { token, json: instants.map((at, index) => record(`tz-${index}`, { customer_ref: 'h-3', amount: `${100 + index}.00`, event_date: form(at) })) });
    t.is(response.status, 200);
    const logIds = response.body.data.results.map((result: { log_id: string }) => result.log_id);
    const logs = await app.database.knex('execution_logs').whereIn('id', logIds);
    const contexts = logIds.map((id: string) => storedDecisionContext(logs.find((log) => log.id === id).data_context).aggregates);
    await app.database.knex('execution_logs').whereIn('id', logIds).delete();
    await app.database.knex('financial_transactions').where('transaction_ref', 'like', 'tz-%').delete();
    return contexts;
  };
  const utc = await send((iso) => iso);
  const zone = process.env.TZ;
  // 14 hours ahead of UTC: the records' history is read (before validation) around other instants than they carry.
  process.env.TZ = 'Pacific/Kiritimati';
  try {
    t.is(Date.parse('2026-01-01T00:00:00') - Date.parse('2026-01-01T00:00:00Z'), -14 * 3_600_000);
    t.deepEqual(await send((iso) => iso.slice(0, -1)), utc);
  } finally {
    if (zone === undefined) delete process.env.TZ;
    else process.env.TZ = zone;
  }
  t.true(utc[0].count_24h >= 4);
});

test.serial('a record skipped by validation does not hide its stored version from the aggregates of the others', async (t) => {
  const stored = await app.request('POST', FINANCIAL, { token, json: record('keep-1', { customer_ref: 'h-3', amount: '10.00', event_date: hoursAgo(0.2) }) });
  t.is(stored.body.data.results[0].action, 'created');
  const at = hoursAgo(0.1);
  const [customer] = await app.database.knex('customers').where({ customer_ref: 'h-3' }).select('id');
  const expected = (await computeAggregates(app.database.knex, [{ index: 1, customerId: customer.id, eventDate: Date.parse(at), contribution: null, wanted: true }], [])).get(1)!;
  t.true(expected.count_1h! >= 1);
  const response = await app.request('POST', FINANCIAL, {
    token,
    json: [record('keep-1', { customer_ref: 'h-3', amount: '-5' }), record('after-keep', { customer_ref: 'h-3', amount: '20.00', event_date: at })],
  });
  const [skipped, scored] = response.body.data.results;
  t.is(skipped.action, 'skipped');
  const log = await app.database.knex('execution_logs').where({ id: scored.log_id }).first();
  t.deepEqual(storedDecisionContext(log.data_context).aggregates, expected);
});
