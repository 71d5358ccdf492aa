import test from 'ava';
import type { EvaluationInput } from '../../src/modules/rules/definitions.ts';
import { decisionContextOf } from '../../src/modules/cases/context.ts';
import { buildDecisionContext, DecisionContextWriter } from '../../src/modules/rules/evaluate.ts';

const customer = { customer_ref: 'c-1', sanction_topic: ['pep', 'crime'], registered: new Date('2024-05-06T07:08:09Z'), nested: { a: { b: null } }, empty: {} };
const event = { slug: 'deposit', name: 'Deposit', type: 1 };

const inputs: EvaluationInput[] = [
  { target: 'financial', record: { amount: 10.5, note: 'tab\there "q" \\', geo: { lat: 1 }, skip: undefined, infinite: Infinity }, customer, event, aggregates: { count_1h: 2, avg_amount_30d: null } },
  { target: 'financial', record: { amount: 1, tags: [] }, customer, event, aggregates: { count_1h: 0 } },
  { target: 'non_financial', record: { device_id: 'd' }, customer: null, event: null, aggregates: {} },
  { target: 'customer', record: { customer_ref: 'c-2' }, customer: { customer_ref: 'c-2', score: 3 }, event: null, aggregates: {} },
];

test('the context text is JSON.stringify of buildDecisionContext, shared customers and events included', (t) => {
  const writer = new DecisionContextWriter();
  for (const input of inputs) t.is(writer.json(input), JSON.stringify(buildDecisionContext(input)));
  // The same customer object again is served from the writer's cache, still equal.
  t.is(writer.json(inputs[0]!), JSON.stringify(buildDecisionContext(inputs[0]!)));
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
