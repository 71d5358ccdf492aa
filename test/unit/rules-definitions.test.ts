import { readFileSync } from 'node:fs';
import test from 'ava';
import {
  AGGREGATE_NAMES,
  RuleFileError,
  expressionIssues,
  parseRuleFile,
  type RuleFileIssue,
} from '../../src/modules/rules/definitions.ts';
import { compileRule } from '../../src/modules/rules/compiler.ts';

const exampleFile = JSON.parse(readFileSync(new URL('../../rules/examples/aml-fraud.json', import.meta.url), 'utf8')) as unknown;

function rule(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    code: 'HIGH_AMOUNT',
    name: 'High amount',
    target: 'financial',
    expression: { '>=': [{ var: 'record.amount' }, 10000] },
    score: 40,
    ...overrides,
  };
}

function issuesOf(json: unknown): RuleFileIssue[] {
  try {
    parseRuleFile(json);
  } catch (error) {
    if (error instanceof RuleFileError) return error.issues;
    throw error;
  }
  throw new Error('the file was accepted');
}

test('a minimal rule gets its defaults', (t) => {
  const [parsed] = parseRuleFile({ rules: [rule()] });
  t.deepEqual(parsed, {
    code: 'HIGH_AMOUNT',
    name: 'High amount',
    target: 'financial',
    event_slugs: [],
    expression: { '>=': [{ var: 'record.amount' }, 10000] },
    score: 40,
    decision: null,
    active: true,
  });
});

test('explicit values are kept', (t) => {
  const [parsed] = parseRuleFile({
    rules: [rule({ event_slugs: ['card_payment'], decision: 'REJECT', active: false, score: -12.5, description: 'why' })],
  });
  t.deepEqual(parsed!.event_slugs, ['card_payment']);
  t.is(parsed!.decision, 'REJECT');
  t.false(parsed!.active);
  t.is(parsed!.score, -12.5);
  t.is(parsed!.description, 'why');
});

test('the example file parses, has at least 12 rules, and every rule compiles', (t) => {
  const rules = parseRuleFile(exampleFile);
  t.true(rules.length >= 12);
  const targets = new Set(rules.map((r) => r.target));
  t.deepEqual([...targets].sort(), ['customer', 'financial', 'non_financial']);
  for (const r of rules) {
    t.is(compileRule({ ...r, version: 1 }).compileError, null, r.code);
  }
});

test('an unknown operator is refused, naming the rule index, code and field', (t) => {
  const issues = issuesOf({ rules: [rule(), rule({ code: 'BAD_OP', expression: { and: [true, { regex: ['a', 'b'] }] } })] });
  t.is(issues.length, 1);
  t.like(issues[0], { index: 1, code: 'BAD_OP', field: 'expression.and.1' });
  t.regex(issues[0]!.message, /operator "regex" is not allowed/);
  const error = t.throws(() => parseRuleFile({ rules: [rule({ code: 'BAD_OP', expression: { regex: [] } })] }), { instanceOf: RuleFileError });
  t.regex(error!.message, /rules\[0\] \(BAD_OP\)\.expression: operator "regex"/);
});

test('engine extras outside the whitelist are refused', (t) => {
  for (const operator of ['try', 'throw', 'map', 'reduce', 'filter', 'preserve', 'val', 'get', 'eachKey', 'pipe', 'keys', '??', 'exists', 'method']) {
    const issues = expressionIssues({ [operator]: [1] });
    t.is(issues.length, 1, operator);
    t.regex(issues[0]!.message, /is not allowed/, operator);
  }
});

test('variables must live under record., customer., event. or aggregates.', (t) => {
  const issues = issuesOf({ rules: [rule({ expression: { '==': [{ var: 'merchant.secret' }, 1] } })] });
  t.like(issues[0], { index: 0, code: 'HIGH_AMOUNT', field: 'expression.==.0.var' });
  t.regex(issues[0]!.message, /"merchant\.secret" must start with record\., customer\., event\. or aggregates\./);
  t.deepEqual(expressionIssues({ var: 'record.raw_extra_field' }), []);
  t.deepEqual(expressionIssues({ var: 'customer.sanction_topic' }), []);
  t.deepEqual(expressionIssues({ var: ['event.slug', 'none'] }), []);
  t.is(expressionIssues({ var: '' }).length, 1);
  t.is(expressionIssues({ var: 'event.secret' }).length, 1);
});

test('aggregates must be ones the batch query computes', (t) => {
  for (const name of AGGREGATE_NAMES) t.deepEqual(expressionIssues({ var: `aggregates.${name}` }), [], name);
  t.true(AGGREGATE_NAMES.includes('sum_debit_30d'));
  t.true(AGGREGATE_NAMES.includes('count_credit_1h'));
  t.is(AGGREGATE_NAMES.length, 32);
  const issues = expressionIssues({ '>': [{ var: 'aggregates.sum_2h' }, 1] });
  t.is(issues.length, 1);
  t.regex(issues[0]!.message, /not a known aggregate/);
  t.is(expressionIssues({ var: 'aggregates' }).length, 1);
  t.is(expressionIssues({ var: 'aggregates.count_1h.x' }).length, 1);
});

test('variable names must be literal, plain paths', (t) => {
  t.regex(expressionIssues({ var: { cat: ['record.', 'amount'] } })[0]!.message, /literal string/);
  t.is(expressionIssues({ var: '../record.amount' }).length, 1);
  t.is(expressionIssues({ var: 'record..amount' }).length, 1);
  t.is(expressionIssues({ var: 'record.a\\.b' }).length, 1);
  t.regex(expressionIssues({ var: 'record.constructor' })[0]!.message, /forbidden/);
  t.regex(expressionIssues(JSON.parse('{"var":"record.__proto__"}'))[0]!.message, /forbidden/);
  t.is(expressionIssues({ var: ['record.amount', { var: 'record.x' }] }).length, 1);
  t.deepEqual(expressionIssues({ missing: ['record.amount', 'customer.nationality'] }), []);
  t.is(expressionIssues({ missing: ['record.amount', 'secret'] }).length, 1);
  t.deepEqual(expressionIssues({ missing_some: [1, ['record.device_id', 'record.ip_address']] }), []);
  t.is(expressionIssues({ missing_some: [1, ['nope']] }).length, 1);
});

test('inside some/all/none, var names the current element', (t) => {
  t.deepEqual(expressionIssues({ some: [{ var: 'customer.sanction_topic' }, { '==': [{ var: '' }, 'pep'] }] }), []);
  t.deepEqual(expressionIssues({ all: [{ var: 'record.items' }, { '>': [{ var: 'price' }, 0] }] }), []);
  t.is(expressionIssues({ some: [{ var: 'items' }, { var: '' }] }).length, 1, 'the array itself is in the outer scope');
  t.is(expressionIssues({ none: [{ var: 'record.items' }, { var: '../../record.amount' }] }).length, 1);
  t.is(expressionIssues({ some: [{ var: 'record.items' }] }).length, 1);
});

test('operations are objects with a single key and the right number of arguments', (t) => {
  t.regex(expressionIssues({ '==': [1, 1], '!=': [1, 2] })[0]!.message, /exactly one key/);
  t.regex(expressionIssues({ '==': [1] })[0]!.message, /takes 2 argument/);
  t.regex(expressionIssues({ '<': [1, 2, 3, 4] })[0]!.message, /takes 2 to 3 argument/);
  t.deepEqual(expressionIssues({ '<=': [1, { var: 'record.amount' }, 3] }), []);
  t.deepEqual(expressionIssues({ '!': { var: 'record.flag' } }), []);
  t.deepEqual(expressionIssues(true), []);
  t.regex(expressionIssues(undefined)[0]!.message, /missing/);
  let deep: unknown = true;
  for (let i = 0; i < 40; i++) deep = { '!': [deep] };
  t.regex(expressionIssues(deep)[0]!.message, /nested deeper/);
});

test('a bad code, decision, target or score is refused with its field', (t) => {
  const issues = issuesOf({
    rules: [
      rule({ code: 'lower_case' }),
      rule({ code: 'BAD_DECISION', decision: 'BLOCK' }),
      rule({ code: 'BAD_TARGET', target: 'merchant' }),
      rule({ code: 'BIG_SCORE', score: 150 }),
      rule({ code: 'FINE_SCORE', score: 1.234 }),
      rule({ code: 'X' }),
    ],
  });
  const byIndex = (index: number) => issues.filter((issue) => issue.index === index).map((issue) => issue.field);
  t.deepEqual(byIndex(0), ['code']);
  t.deepEqual(byIndex(1), ['decision']);
  t.deepEqual(byIndex(2), ['target']);
  t.deepEqual(byIndex(3), ['score']);
  t.deepEqual(byIndex(4), ['score']);
  t.deepEqual(byIndex(5), ['code']);
  t.is(issues.find((issue) => issue.index === 1)!.code, 'BAD_DECISION');
});

test('a missing expression, an unknown key and a version in the file are refused', (t) => {
  const withoutExpression = rule();
  delete withoutExpression.expression;
  t.like(issuesOf({ rules: [withoutExpression] })[0], { index: 0, field: 'expression' });
  t.regex(issuesOf({ rules: [rule({ decison: 'REJECT' })] })[0]!.message, /decison/);
  t.regex(issuesOf({ rules: [rule({ version: 3 })] })[0]!.message, /version/);
});

test('duplicate codes are refused, naming both positions', (t) => {
  const issues = issuesOf({ rules: [rule(), rule({ name: 'again' })] });
  t.deepEqual(issues, [{ index: 1, code: 'HIGH_AMOUNT', field: 'code', message: 'duplicates the code of rules[0]' }]);
});

test('a file that is not { rules: [...] } is refused', (t) => {
  for (const json of [null, [], 'rules', {}, { rules: [] }, { rules: {} }, { rules: [rule()], extra: 1 }]) {
    const issues = issuesOf(json);
    t.true(issues.length > 0);
    t.is(issues[0]!.index, null, JSON.stringify(json));
  }
  t.like(issuesOf({ rules: [42] })[0], { index: 0, code: null });
});
