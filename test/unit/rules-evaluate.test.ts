import { readFileSync } from 'node:fs';
import test from 'ava';
import fc from 'fast-check';
import { compileRule, compileRuleSet } from '../../src/modules/rules/compiler.ts';
import { parseRuleFile, type EvaluationInput, type JsonValue, type RuleDefinition } from '../../src/modules/rules/definitions.ts';
import { buildDecisionContext, evaluateRecords, type EvaluationResult } from '../../src/modules/rules/evaluate.ts';

const THRESHOLDS = { review: 50, reject: 80 };

function rule(code: string, overrides: Partial<RuleDefinition> = {}): RuleDefinition {
  return {
    code,
    name: code,
    target: 'financial',
    event_slugs: [],
    expression: true,
    score: 10,
    decision: null,
    active: true,
    version: 1,
    ...overrides,
  };
}

function financial(record: Record<string, unknown> = {}, overrides: Partial<EvaluationInput> = {}): EvaluationInput {
  return {
    target: 'financial',
    record: { amount: 100, currency: 'EUR', io_type: 0, ...record },
    customer: { customer_ref: 'c-1', sanction_score: 0, sanction_topic: [], email_risk_score: 0, ip_address_score: 0 },
    event: { slug: 'card_payment', name: 'Card payment', type: 1 },
    aggregates: {},
    ...overrides,
  };
}

function evaluateOne(rules: RuleDefinition[], input: EvaluationInput = financial()): EvaluationResult {
  const [result] = evaluateRecords(rules, [input], THRESHOLDS);
  return result!;
}

const codes = (result: EvaluationResult) => result.matched.map((m) => m.code);

test('the score is the sum of the matching rules', (t) => {
  const result = evaluateOne([
    rule('BIG', { expression: { '>=': [{ var: 'record.amount' }, 50] }, score: 20 }),
    rule('DEBIT', { expression: { '==': [{ var: 'record.io_type' }, 1] }, score: 30 }),
    rule('EUR', { expression: { '==': [{ var: 'record.currency' }, 'EUR'] }, score: 15.5 }),
    rule('TRUSTED', { expression: { '==': [{ var: 'customer.customer_ref' }, 'c-1'] }, score: -5 }),
  ]);
  t.is(result.score, 30.5);
  t.deepEqual(codes(result), ['BIG', 'EUR', 'TRUSTED']);
  t.deepEqual(result.matched[0], { code: 'BIG', version: 1, score: 20, decision: null });
  t.is(result.decision, 'ACCEPT');
  t.deepEqual(result.errors, []);
  t.deepEqual(result.rule_versions, { BIG: 1, DEBIT: 1, EUR: 1, TRUSTED: 1 });
  t.true(Number.isInteger(result.duration_us) && result.duration_us >= 0);
});

test('decimal contributions add up exactly', (t) => {
  t.is(evaluateOne([rule('A', { score: 0.1 }), rule('B', { score: 0.2 })]).score, 0.3);
});

test('the score is clamped to 0..100', (t) => {
  t.is(evaluateOne([rule('A', { score: 70 }), rule('B', { score: 60 })]).score, 100);
  t.is(evaluateOne([rule('A', { score: -70 }), rule('B', { score: 20 })]).score, 0);
});

test('thresholds decide from their value on', (t) => {
  const at = (score: number) => evaluateOne([rule('A', { score })]).decision;
  t.is(at(49.99), 'ACCEPT');
  t.is(at(50), 'REVIEW');
  t.is(at(79.99), 'REVIEW');
  t.is(at(80), 'REJECT');
  const [custom] = evaluateRecords([rule('A', { score: 10 })], [financial()], { review: 5, reject: 10 });
  t.is(custom!.decision, 'REJECT');
});

test('a forced decision wins over the score, REJECT over REVIEW over ACCEPT', (t) => {
  t.is(evaluateOne([rule('WHITELIST', { score: 0, decision: 'ACCEPT' }), rule('HIGH', { score: 90 })]).decision, 'ACCEPT');
  t.is(evaluateOne([rule('PEP', { score: 1, decision: 'REVIEW' })]).decision, 'REVIEW');
  t.is(evaluateOne([rule('A', { decision: 'ACCEPT' }), rule('B', { decision: 'REVIEW' })]).decision, 'REVIEW');
  t.is(evaluateOne([rule('A', { decision: 'REJECT' }), rule('B', { decision: 'REVIEW' }), rule('C', { decision: 'ACCEPT' })]).decision, 'REJECT');
  t.is(evaluateOne([rule('C', { decision: 'ACCEPT' }), rule('B', { decision: 'REJECT' })]).decision, 'REJECT');
  const notMatching = evaluateOne([rule('SANCTIONS', { expression: false, decision: 'REJECT' }), rule('SMALL', { score: 5 })]);
  t.is(notMatching.decision, 'ACCEPT');
  t.deepEqual(codes(notMatching), ['SMALL']);
});

test('only rules of the input target and event run', (t) => {
  const rules = [
    rule('ANY_FINANCIAL'),
    rule('CARD_ONLY', { event_slugs: ['card_payment'] }),
    rule('WIRE_ONLY', { event_slugs: ['wire_out', 'wire_in'] }),
    rule('CUSTOMER_RULE', { target: 'customer' }),
    rule('LOGIN_RULE', { target: 'non_financial', event_slugs: ['login'] }),
    rule('INACTIVE', { active: false }),
  ];
  const wire = financial({}, { event: { slug: 'wire_out', name: 'Wire', type: 1 } });
  const customer: EvaluationInput = { target: 'customer', record: {}, customer: {}, event: null, aggregates: {} };
  const login: EvaluationInput = { ...financial(), target: 'non_financial', event: { slug: 'login', name: 'Login', type: 2 } };
  const [card, wired, onboarded, loggedIn] = evaluateRecords(rules, [financial(), wire, customer, login], THRESHOLDS);
  t.deepEqual(codes(card!), ['ANY_FINANCIAL', 'CARD_ONLY']);
  t.deepEqual(codes(wired!), ['ANY_FINANCIAL', 'WIRE_ONLY']);
  t.deepEqual(codes(onboarded!), ['CUSTOMER_RULE']);
  t.deepEqual(codes(loggedIn!), ['LOGIN_RULE']);
  t.deepEqual(card!.rule_versions, { ANY_FINANCIAL: 1, CARD_ONLY: 1 });
  t.deepEqual(Object.keys(onboarded!.rule_versions), ['CUSTOMER_RULE']);
});

test('a rule that throws counts as not matched, is reported, and does not stop the batch', (t) => {
  const rules = [
    rule('NOT_A_NUMBER', { expression: { '>': [{ var: 'record.amount' }, 'abc'] }, score: 50 }),
    rule('OBJECT_SUM', { expression: { '>': [{ '+': [{ var: 'record.meta' }, 1] }, 0] }, score: 50 }),
    rule('ABS_OF_TEXT', { expression: { '>': [{ abs: [{ var: 'record.currency' }] }, 0] }, score: 50 }),
    rule('FINE', { score: 5 }),
  ];
  const results = evaluateRecords(rules, [financial({ meta: { a: 1 } }), financial({ meta: { a: 2 } })], THRESHOLDS);
  t.is(results.length, 2);
  for (const result of results) {
    t.deepEqual(codes(result), ['FINE']);
    t.is(result.score, 5);
    t.deepEqual(result.errors.map((e) => e.code), ['ABS_OF_TEXT', 'NOT_A_NUMBER', 'OBJECT_SUM']);
    t.regex(result.errors.find((e) => e.code === 'NOT_A_NUMBER')!.message, /NaN/);
    t.regex(result.errors.find((e) => e.code === 'ABS_OF_TEXT')!.message, /abs of a non-number/);
    t.deepEqual(Object.keys(result.rule_versions), ['ABS_OF_TEXT', 'FINE', 'NOT_A_NUMBER', 'OBJECT_SUM']);
  }
});

test('a stored expression that is not valid is reported on each record instead of compiled', (t) => {
  const bad = rule('TAMPERED', { expression: { or: [{ try: [{ throw: 'x' }] }] } });
  t.regex(compileRule(bad).compileError!, /operator "try" is not allowed/);
  const result = evaluateOne([bad, rule('FINE', { score: 5 })]);
  t.deepEqual(codes(result), ['FINE']);
  t.is(result.errors.length, 1);
  t.like(result.errors[0], { code: 'TAMPERED' });
});

test('compiled rules are cached per code and version', (t) => {
  const first = compileRule(rule('CACHED', { version: 1, expression: { '>': [{ var: 'record.amount' }, 10] } }));
  const again = compileRule(rule('CACHED', { version: 1, expression: { '>': [{ var: 'record.amount' }, 10] }, score: 99 }));
  t.is(again.matches, first.matches);
  t.is(again.score, 99);
  const bumped = compileRule(rule('CACHED', { version: 2, expression: { '>': [{ var: 'record.amount' }, 1000] } }));
  t.not(bumped.matches, first.matches);
  t.true(first.matches(financial({ amount: 500 })));
  t.false(bumped.matches(financial({ amount: 500 })));
  t.is(compileRule(rule('CACHED', { version: 1, expression: { '>': [{ var: 'record.amount' }, 10] } })).matches, first.matches);
  const reusedVersion = compileRule(rule('CACHED', { version: 2, expression: { '<': [{ var: 'record.amount' }, 1000] } }));
  t.true(reusedVersion.matches(financial({ amount: 500 })), 'a version reused for another expression is recompiled');
});

test('a compiled rule set can be reused across batches', (t) => {
  const set = compileRuleSet([rule('B', { score: 20 }), rule('A', { score: 10 }), rule('OFF', { active: false })]);
  t.deepEqual(set.rules.map((r) => r.code), ['A', 'B']);
  const first = evaluateRecords(set, [financial()], THRESHOLDS);
  const second = evaluateRecords(set, [financial(), financial()], THRESHOLDS);
  t.is(first[0]!.score, 30);
  t.deepEqual(second.map((r) => r.score), [30, 30]);
  t.deepEqual(evaluateRecords(set, [], THRESHOLDS), []);
});

test('custom operators', (t) => {
  const matches = (expression: RuleDefinition['expression'], record: Record<string, unknown>) =>
    codes(evaluateOne([rule('X', { expression })], financial(record))).length === 1;
  t.true(matches({ starts_with: [{ var: 'record.iban' }, 'GB'] }, { iban: 'GB29NWBK' }));
  t.false(matches({ starts_with: [{ var: 'record.iban' }, 'GB'] }, {}));
  t.true(matches({ ends_with: [{ lower: [{ var: 'record.email' }] }, '@mailinator.com'] }, { email: 'X@Mailinator.COM' }));
  t.true(matches({ '==': [{ upper: [{ var: 'record.country' }] }, 'DEU'] }, { country: 'deu' }));
  t.true(matches({ '<=': [{ abs: [{ '-': [{ var: 'record.amount' }, 1000] }] }, 50] }, { amount: 960 }));
  t.false(matches({ '<=': [{ abs: [{ '-': [{ var: 'record.amount' }, 1000] }] }, 50] }, { amount: 900 }));
  t.true(matches({ some: [{ var: 'record.tags' }, { '==': [{ var: '' }, 'crypto'] }] }, { tags: ['fiat', 'crypto'] }));
  t.false(matches({ in: ['pep', { var: 'customer.sanction_topic' }] }, {}));
});

test('strings that look like code stay data when compiled', (t) => {
  const hostile = '"); globalThis.rulesPwned = true; ("';
  const expression: JsonValue = {
    and: [
      { '==': [{ var: 'record.note' }, hostile] },
      { '==': [{ var: `record.x"]); globalThis.rulesPwned = true; //` }, null] },
      { in: [{ var: 'record.note' }, [hostile, '`${globalThis.rulesPwned = true}`']] },
    ],
  };
  const result = evaluateOne([rule('HOSTILE', { expression })], financial({ note: hostile }));
  t.deepEqual(codes(result), ['HOSTILE']);
  t.is((globalThis as { rulesPwned?: boolean }).rulesPwned, undefined);
});

test('amounts given as numbers compare numerically with each other', (t) => {
  const expression = { '>': [{ var: 'record.amount' }, { var: 'aggregates.avg_amount_30d' }] };
  t.deepEqual(codes(evaluateOne([rule('X', { expression })], financial({ amount: 9999.99 }, { aggregates: { avg_amount_30d: 10000 } }))), []);
  t.deepEqual(codes(evaluateOne([rule('X', { expression })], financial({ amount: 10000.01 }, { aggregates: { avg_amount_30d: 10000 } }))), ['X']);
});

test('the score is always the clamped sum and the decision follows it', (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ score: fc.integer({ min: -10_000, max: 10_000 }), hit: fc.boolean() }), { maxLength: 30 }),
      (specs) => {
        const rules = specs.map((spec, i) => rule(`R${i}`, { score: spec.score / 100, expression: spec.hit }));
        const result = evaluateOne(rules);
        const sum = specs.filter((s) => s.hit).reduce((total, s) => total + s.score, 0);
        const expected = Math.min(10_000, Math.max(0, sum)) / 100;
        const decision = expected >= 80 ? 'REJECT' : expected >= 50 ? 'REVIEW' : 'ACCEPT';
        return result.score === expected && result.decision === decision && result.matched.length === specs.filter((s) => s.hit).length;
      },
    ),
  );
  t.pass();
});

test('the decision context has four flat sets', (t) => {
  const input = financial(
    { amount: 2500.5, geo: { city: 'Oslo', point: { lat: 59.9, lon: 10.7 } }, tags: ['a', 'b'], metadata: {}, note: undefined, at: new Date('2024-01-02T03:04:05Z') },
    {
      customer: { customer_ref: 'c-1', sanction_score: 12, sanction_topic: ['pep'], nationality: 'NOR' },
      aggregates: { count_24h: 3, days_since_first_transaction: null },
    },
  );
  t.deepEqual(buildDecisionContext(input), {
    transaction: {
      amount: 2500.5,
      currency: 'EUR',
      io_type: 0,
      'geo.city': 'Oslo',
      'geo.point.lat': 59.9,
      'geo.point.lon': 10.7,
      'tags.0': 'a',
      'tags.1': 'b',
      metadata: null,
      at: '2024-01-02T03:04:05.000Z',
    },
    customer: { customer_ref: 'c-1', sanction_score: 12, 'sanction_topic.0': 'pep', nationality: 'NOR' },
    aggregates: { count_24h: 3, days_since_first_transaction: null },
    event: { slug: 'card_payment', name: 'Card payment', type: 1 },
  });
});

test('a customer record has no transaction in its context, and deep nesting is handled', (t) => {
  let deep: Record<string, unknown> = { leaf: 1 };
  for (let i = 0; i < 20_000; i++) deep = { n: deep };
  const context = buildDecisionContext({
    target: 'customer',
    record: { customer_ref: 'c-9' },
    customer: { customer_ref: 'c-9', metadata: deep },
    event: null,
    aggregates: {},
  });
  t.deepEqual(context.transaction, {});
  t.deepEqual(context.event, {});
  t.deepEqual(context.aggregates, {});
  t.is(context.customer.customer_ref, 'c-9');
  const keys = Object.keys(context.customer);
  t.is(keys.length, 2);
  t.true(keys[1]!.startsWith('metadata.n.n.') && keys[1]!.endsWith('.leaf'));
  for (const value of Object.values(context.customer)) t.true(value === null || typeof value !== 'object');
});

const exampleRules: RuleDefinition[] = parseRuleFile(
  JSON.parse(readFileSync(new URL('../../rules/examples/aml-fraud.json', import.meta.url), 'utf8')),
).map((r) => ({ ...r, version: 1 }));

const quietHistory = {
  count_1h: 0, count_24h: 1, count_7d: 3, count_30d: 10,
  sum_1h: 0, sum_24h: 120, sum_7d: 400, sum_30d: 1500,
  count_credit_24h: 0, sum_credit_24h: 0, count_debit_7d: 3, sum_debit_7d: 400,
  distinct_devices_24h: 1, distinct_devices_30d: 1, distinct_ips_24h: 1, distinct_ips_30d: 2,
  distinct_countries_24h: 1, distinct_countries_30d: 1,
  days_since_first_transaction: 400, avg_amount_30d: 150,
};

function exampleInput(record: Record<string, unknown>, aggregates: Record<string, number | null> = {}, customer: Record<string, unknown> = {}): EvaluationInput {
  return financial(
    { io_type: 1, device_id: 'd-1', ip_address: '198.51.100.7', ...record },
    {
      customer: { customer_ref: 'c-1', nationality: 'DEU', country: 'DEU', sanction_score: 0, sanction_topic: [], email_risk_score: 10, ip_address_score: 5, ...customer },
      aggregates: { ...quietHistory, ...aggregates },
    },
  );
}

test('example rules: an ordinary payment passes untouched', (t) => {
  const result = evaluateOne(exampleRules, exampleInput({ amount: 123.45 }));
  t.deepEqual(result.matched, []);
  t.is(result.score, 0);
  t.is(result.decision, 'ACCEPT');
  t.deepEqual(result.errors, []);
  t.true(Object.keys(result.rule_versions).length >= 12);
});

test('example rules: a sanctioned customer is rejected whatever the amount', (t) => {
  const result = evaluateOne(exampleRules, exampleInput({ amount: 10 }, {}, { sanction_score: 92, sanction_topic: ['sanction'] }));
  t.deepEqual(codes(result), ['SANCTIONS_HIT_TRANSACTION']);
  t.is(result.decision, 'REJECT');
});

test('example rules: a PEP customer is not rejected for the match; a large transaction of theirs is reviewed', (t) => {
  const pep = { sanction_score: 96, sanction_topic: ['pep'] };
  t.like(evaluateOne(exampleRules, exampleInput({ amount: 10 }, {}, pep)), { decision: 'ACCEPT', score: 0 });
  const large = evaluateOne(exampleRules, exampleInput({ amount: 12000 }, {}, pep));
  t.true(codes(large).includes('PEP_LARGE_TRANSACTION'));
  t.false(codes(large).includes('SANCTIONS_HIT_TRANSACTION'));
  t.not(large.decision, 'REJECT');
});

test('example rules: structuring and new-customer patterns add up', (t) => {
  const single = evaluateOne(exampleRules, exampleInput({ amount: 9500 }));
  t.true(codes(single).includes('STRUCTURING_JUST_BELOW_10K'));
  t.true(codes(single).includes('AMOUNT_SPIKE'));
  t.false(codes(single).includes('STRUCTURING_SPLIT_24H'));

  const split = evaluateOne(exampleRules, exampleInput({ amount: 4000 }, { count_24h: 2, sum_24h: 7000 }));
  t.true(codes(split).includes('STRUCTURING_SPLIT_24H'));
  t.false(codes(split).includes('STRUCTURING_JUST_BELOW_10K'));

  const first = evaluateOne(exampleRules, exampleInput({ amount: 9800 }, { days_since_first_transaction: null, count_30d: 0, avg_amount_30d: null }));
  t.true(codes(first).includes('NEW_CUSTOMER_LARGE_AMOUNT'));
  t.false(codes(first).includes('DORMANT_REACTIVATION'));
  t.false(codes(first).includes('AMOUNT_SPIKE'));
  t.deepEqual(first.errors, []);
});

test('example rules: pass-through, dormant account, round amount and velocity', (t) => {
  const passThrough = evaluateOne(exampleRules, exampleInput({ amount: 7800 }, { sum_credit_24h: 8000, count_credit_24h: 1 }));
  t.true(codes(passThrough).includes('PASS_THROUGH_24H'));
  const credit = evaluateOne(exampleRules, exampleInput({ amount: 7800, io_type: 0 }, { sum_credit_24h: 8000 }));
  t.false(codes(credit).includes('PASS_THROUGH_24H'));

  const dormant = evaluateOne(exampleRules, exampleInput({ amount: 4000 }, { count_30d: 0, avg_amount_30d: null }));
  t.true(codes(dormant).includes('DORMANT_REACTIVATION'));

  t.true(codes(evaluateOne(exampleRules, exampleInput({ amount: 5000 }))).includes('ROUND_AMOUNT'));
  t.false(codes(evaluateOne(exampleRules, exampleInput({ amount: 5000.5 }))).includes('ROUND_AMOUNT'));

  const burst = evaluateOne(exampleRules, exampleInput({ amount: 50 }, { count_1h: 12, distinct_devices_24h: 5, distinct_countries_24h: 3 }));
  t.deepEqual(codes(burst), ['MANY_DEVICES', 'MANY_IPS_OR_COUNTRIES', 'RAPID_VELOCITY']);
  t.is(burst.score, 80);
  t.is(burst.decision, 'REJECT');
});

test('example rules: customer onboarding screens sanctions, PEPs, countries, e-mail and IP', (t) => {
  const onboarding = (customer: Record<string, unknown>): EvaluationResult =>
    evaluateOne(exampleRules, {
      target: 'customer',
      record: customer,
      customer: { customer_ref: 'c-2', nationality: 'FRA', country: 'FRA', sanction_score: 0, sanction_topic: [], email_risk_score: 0, ip_address_score: 0, ...customer },
      event: null,
      aggregates: {},
    });
  t.is(onboarding({}).decision, 'ACCEPT');
  t.deepEqual(codes(onboarding({})), []);
  t.like(onboarding({ sanction_score: 85 }), { decision: 'REJECT', score: 100 });
  t.like(onboarding({ sanction_score: 70 }), { decision: 'REVIEW' });
  // A PEP is reviewed, never refused for the match alone, however close; a sanctions match beside it still refuses.
  t.like(onboarding({ sanction_score: 90, sanction_topic: ['pep'] }), { decision: 'REVIEW', score: 30 });
  t.deepEqual(codes(onboarding({ sanction_score: 90, sanction_topic: ['pep'] })), ['PEP_CUSTOMER']);
  t.like(onboarding({ sanction_score: 90, sanction_topic: ['pep', 'sanction'] }), { decision: 'REJECT' });
  t.like(onboarding({ sanction_score: 90, sanction_topic: ['sanction'] }), { decision: 'REJECT', score: 100 });
  t.like(onboarding({ sanction_score: 40, sanction_topic: ['pep'] }), { decision: 'REVIEW', score: 30 });
  t.deepEqual(codes(onboarding({ country: 'irn' })), ['HIGH_RISK_JURISDICTION_CUSTOMER']);
  const risky = onboarding({ nationality: 'PRK', email_risk_score: 90, ip_address_score: 95 });
  t.like(risky, { score: 80, decision: 'REJECT' });
});

test('example rules: the account-takeover rule runs only for credential-change events', (t) => {
  const event = (slug: string): EvaluationInput => ({
    ...exampleInput({}, { distinct_devices_24h: 4 }),
    target: 'non_financial',
    record: { device_id: 'd-7' },
    event: { slug, name: slug, type: 2 },
  });
  const [changed, login] = evaluateRecords(exampleRules, [event('password_change'), event('login')], THRESHOLDS);
  t.deepEqual(codes(changed!), ['ACCOUNT_TAKEOVER_SIGNALS']);
  t.is(changed!.decision, 'REVIEW');
  t.deepEqual(codes(login!), []);
  t.deepEqual(login!.rule_versions, {});
});
