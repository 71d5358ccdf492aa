import test from 'ava';
import type { EvaluationInput } from '../../src/modules/rules/definitions.ts';
import { decisionContextOf, storedDecisionContext } from '../../src/modules/rules/decision-context.ts';
import { AGGREGATE_NAMES, NEWEST_AGGREGATE_ORDER } from '../../src/modules/rules/definitions.ts';
import { buildDecisionContext, DecisionContextWriter } from '../../src/modules/rules/evaluate.ts';

const customer = { customer_ref: 'c-1', sanction_topic: ['pep', 'crime'], registered: new Date('2024-05-06T07:08:09Z'), nested: { a: { b: null } }, empty: {} };
const event = { slug: 'deposit', name: 'Deposit', type: 1 };

const inputs: EvaluationInput[] = [
  { target: 'financial', record: { amount: 10.5, note: 'tab\there "q" \\', geo: { lat: 1 }, skip: undefined, infinite: Infinity }, customer, event, aggregates: { count_1h: 2, avg_amount_30d: null } },
  { target: 'financial', record: { amount: 1, tags: [] }, customer, event, aggregates: { count_1h: 0 } },
  { target: 'non_financial', record: { device_id: 'd' }, customer: null, event: null, aggregates: {} },
  { target: 'customer', record: { customer_ref: 'c-2' }, customer: { customer_ref: 'c-2', score: 3 }, event: null, aggregates: {} },
];

/** Every aggregate, as the batch computes them: numbers, a null, a fraction. */
const fullAggregates = Object.fromEntries(AGGREGATE_NAMES.map((name, position) => [name, name === 'days_since_first_transaction' ? null : position + 0.25]));

test('the context text reads back as buildDecisionContext, shared customers and events included', (t) => {
  const writer = new DecisionContextWriter();
  const all = [...inputs, { ...inputs[0]!, aggregates: fullAggregates }];
  for (const input of all) t.deepEqual(storedDecisionContext(writer.json(input)), JSON.parse(JSON.stringify(buildDecisionContext(input))));
  // The same customer object again is served from the writer's cache, still equal.
  t.deepEqual(storedDecisionContext(writer.json(inputs[0]!)), JSON.parse(JSON.stringify(buildDecisionContext(inputs[0]!))));
  // Aggregates of any other shape are stored as they are.
  t.deepEqual(JSON.parse(writer.json(inputs[0]!)).aggregates, { count_1h: 2, avg_amount_30d: null });
});

test('a full set of aggregates is stored as its values in the newest order; order 1 keeps its meaning', (t) => {
  // A log of order 1 as stored: its values read under the names they were written for, whatever
  // orders come later.
  const order1 = storedDecisionContext({ aggregates: { order: 1, values: Array.from({ length: 32 }, (_, position) => position) } }).aggregates;
  t.like(order1, { count_1h: 0, sum_1h: 1, count_24h: 6, sum_debit_30d: 23, distinct_devices_24h: 24, days_since_first_transaction: 30, avg_amount_30d: 31 });
  t.is(Object.keys(order1).length, 32);
  const stored = JSON.parse(new DecisionContextWriter().json({ ...inputs[0]!, aggregates: fullAggregates }));
  t.deepEqual(stored.aggregates, { order: NEWEST_AGGREGATE_ORDER, values: AGGREGATE_NAMES.map((name) => fullAggregates[name]) });
  // Non-finite values as JSON writes them.
  const infinite = JSON.parse(new DecisionContextWriter().json({ ...inputs[0]!, aggregates: { ...fullAggregates, sum_1h: Infinity } }));
  t.is(infinite.aggregates.values[AGGREGATE_NAMES.indexOf('sum_1h')], null);
  // A log stored before the compact form, and one naming an order this version does not know, read as stored.
  t.deepEqual(decisionContextOf({ aggregates: { count_1h: 3 } }).aggregates, { count_1h: 3 });
  t.deepEqual(decisionContextOf({ aggregates: { order: 99, values: [1] } }).aggregates, { order: 99, values: [1] } as never);
});

test('the shared parts are cached per object, so a changed object is a new entry', (t) => {
  const writer = new DecisionContextWriter();
  const first = { ...inputs[0]!, customer: { customer_ref: 'c-9', score: 1 } };
  const second = { ...inputs[0]!, customer: { customer_ref: 'c-9', score: 2 } };
  t.deepEqual(JSON.parse(writer.json(first)).customer, { customer_ref: 'c-9', score: 1 });
  t.deepEqual(JSON.parse(writer.json(second)).customer, { customer_ref: 'c-9', score: 2 });
});

test('read back for the API, timestamps are UTC to the second; text that only looks like one (a month 13 in an extra field) stays as it is', (t) => {
  const stored = JSON.stringify({ transaction: { event_date: '2024-05-06T09:08:09.500+02:00', note: '2024-13-01T25:61:61Z' }, customer: null });
  t.deepEqual(decisionContextOf(stored), {
    transaction: { event_date: '2024-05-06T07:08:09', note: '2024-13-01T25:61:61Z' },
    customer: {},
    aggregates: {},
    event: {},
  });
});
