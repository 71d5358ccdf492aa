import { z } from 'zod';

export const RULE_TARGETS = ['customer', 'financial', 'non_financial'] as const;
export type RuleTarget = (typeof RULE_TARGETS)[number];

export const DECISIONS = ['ACCEPT', 'REVIEW', 'REJECT'] as const;
export type Decision = (typeof DECISIONS)[number];

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

/** A rule as the rule file states it; the loader owns `version`. */
export interface RuleInput {
  code: string;
  name: string;
  description?: string;
  target: RuleTarget;
  /** Empty: every event of the target. */
  event_slugs: string[];
  expression: JsonValue;
  /** Contribution to the record's score when the rule matches; at most 2 decimals. */
  score: number;
  /** Decision forced when the rule matches. */
  decision: Decision | null;
  active: boolean;
}

export interface RuleDefinition extends RuleInput {
  /** Bumped by the loader whenever expression, score or decision change; keys the compile cache. */
  version: number;
}

const WINDOWS = ['1h', '24h', '7d', '30d'] as const;

/**
 * The orders in which a stored decision context may list the aggregates' values
 * (`{"order":1,"values":[...]}`, see rules/evaluate.ts aggregatesJson). An order never changes once
 * logs use it: a new aggregate means a new order (its predecessor's names, then the new ones),
 * which becomes the newest, and logs stored in the old one still read by it.
 */
export const AGGREGATE_ORDERS: Readonly<Record<number, readonly string[]>> = Object.freeze({
  1: Object.freeze([
    ...WINDOWS.flatMap((window) => [
      `count_${window}`,
      `sum_${window}`,
      `count_credit_${window}`,
      `sum_credit_${window}`,
      `count_debit_${window}`,
      `sum_debit_${window}`,
    ]),
    'distinct_devices_24h',
    'distinct_devices_30d',
    'distinct_ips_24h',
    'distinct_ips_30d',
    'distinct_countries_24h',
    'distinct_countries_30d',
    'days_since_first_transaction',
    'avg_amount_30d',
  ]),
});
export const NEWEST_AGGREGATE_ORDER = 1;

/**
 * Every aggregate the batch query computes over the customer's earlier financial transactions,
 * in the newest order. A rule naming anything else is refused at load time, so a typo cannot
 * silently read null.
 */
export const AGGREGATE_NAMES: readonly string[] = AGGREGATE_ORDERS[NEWEST_AGGREGATE_ORDER]!;

const KNOWN_AGGREGATES: ReadonlySet<string> = new Set(AGGREGATE_NAMES);
const EVENT_FIELDS: ReadonlySet<string> = new Set(['slug', 'name', 'type']);

export interface EvaluationEvent {
  slug: string;
  name: string;
  /** 0 Onboarding, 1 Financial, 2 Non-financial. */
  type: number;
}

/**
 * What the rules of one record see; expressions read it through `var` paths under record.,
 * customer., event. and aggregates.
 *
 * Numeric fields must be JS numbers, not the decimal strings used elsewhere: JsonLogic compares two
 * strings as text ("9999.99" >= "10000" is true), and min/max refuse strings. So `record.amount`
 * and `record.fee_amount` are `Number(decimalString)` (exact enough for comparisons, since amounts
 * have at most 12 significant digits), `record.io_type` and `record.channel` are numbers, sums and
 * averages in `aggregates` are numbers, and screening scores in `customer` are numbers. Dates stay
 * ISO 8601 strings. Raw extras are merged into `record` (or `customer`) as sent, model fields winning
 * on a name clash.
 */
export interface EvaluationInput {
  /** Selects the rules: only rules of this target run. */
  target: RuleTarget;
  /** The record's normalized fields plus its raw extras, flat. For a customer record, the customer's fields. */
  record: Record<string, unknown>;
  /** The record's customer with its screening scores (sanction_score, sanction_topic, ...); for a customer record, itself. */
  customer: Record<string, unknown> | null;
  /** The record's event; null for a customer record sent without one. */
  event: EvaluationEvent | null;
  /**
   * Every name of AGGREGATE_NAMES, over the customer's financial transactions strictly before this
   * record in event_date order (the record itself is not counted; the example rules rely on it);
   * `{}` for customer records.
   */
  aggregates: Record<string, number | null>;
}

/** JsonLogic operators a rule may use; anything else (and the engine's own extras) is refused. */
export const ALLOWED_OPERATORS: ReadonlySet<string> = new Set([
  '==', '===', '!=', '!==', '>', '>=', '<', '<=', '!', '!!',
  'and', 'or', 'if', 'in', 'var', 'missing', 'missing_some',
  '+', '-', '*', '/', '%', 'min', 'max', 'abs',
  'cat', 'substr', 'length', 'lower', 'upper', 'starts_with', 'ends_with',
  'merge', 'some', 'all', 'none',
]);

const ARITY: Readonly<Record<string, readonly [number, number]>> = {
  '==': [2, 2], '===': [2, 2], '!=': [2, 2], '!==': [2, 2],
  '>': [2, 3], '>=': [2, 3], '<': [2, 3], '<=': [2, 3],
  '!': [1, 1], '!!': [1, 1], and: [1, Infinity], or: [1, Infinity], if: [1, Infinity],
  in: [2, 2], '+': [1, Infinity], '*': [1, Infinity], '-': [1, 2], '/': [2, 2], '%': [2, 2],
  min: [1, Infinity], max: [1, Infinity], abs: [1, 1], substr: [2, 3], length: [1, 1],
  lower: [1, 1], upper: [1, 1], starts_with: [2, 2], ends_with: [2, 2],
};

const MAX_EXPRESSION_DEPTH = 32;
const FORBIDDEN_SEGMENTS: ReadonlySet<string> = new Set(['__proto__', 'prototype', 'constructor']);

export interface ExpressionIssue {
  path: Array<string | number>;
  message: string;
}

/** Every reason an expression is not acceptable; empty when it may be compiled. */
export function expressionIssues(expression: unknown): ExpressionIssue[] {
  const issues: ExpressionIssue[] = [];
  walk(expression, [], false, 0, issues);
  return issues;
}

/**
 * `insideIterator` marks the body of some/all/none, where `var` names a field of the current array
 * element rather than a root of the evaluation input.
 */
function walk(
  node: unknown,
  path: Array<string | number>,
  insideIterator: boolean,
  depth: number,
  issues: ExpressionIssue[],
): void {
  if (depth > MAX_EXPRESSION_DEPTH) {
    issues.push({ path, message: `is nested deeper than ${MAX_EXPRESSION_DEPTH} levels` });
    return;
  }
  if (node === null || typeof node === 'string' || typeof node === 'boolean') return;
  if (typeof node === 'number') {
    if (!Number.isFinite(node)) issues.push({ path, message: 'is not a finite number' });
    return;
  }
  if (Array.isArray(node)) {
    node.forEach((item, index) => walk(item, [...path, index], insideIterator, depth + 1, issues));
    return;
  }
  if (typeof node !== 'object') {
    issues.push({ path, message: node === undefined ? 'is missing' : `is not a JSON value (${typeof node})` });
    return;
  }
  const keys = Object.keys(node);
  if (keys.length !== 1) {
    issues.push({ path, message: `an operation is an object with exactly one key, the operator; found ${keys.length} keys` });
    return;
  }
  const operator = keys[0]!;
  const args = (node as Record<string, unknown>)[operator];
  const here = [...path, operator];
  if (!ALLOWED_OPERATORS.has(operator)) {
    issues.push({ path, message: `operator "${operator}" is not allowed; allowed: ${[...ALLOWED_OPERATORS].join(' ')}` });
    return;
  }
  switch (operator) {
    case 'var':
      checkVar(args, here, insideIterator, issues);
      return;
    case 'missing':
      checkPathList(args, here, insideIterator, issues);
      return;
    case 'missing_some': {
      if (!Array.isArray(args) || args.length !== 2 || typeof args[0] !== 'number') {
        issues.push({ path: here, message: 'takes [minimum count, [variable, ...]]' });
        return;
      }
      checkPathList(args[1], [...here, 1], insideIterator, issues);
      return;
    }
    case 'some':
    case 'all':
    case 'none': {
      if (!Array.isArray(args) || args.length !== 2) {
        issues.push({ path: here, message: 'takes [array, condition applied to each element]' });
        return;
      }
      walk(args[0], [...here, 0], insideIterator, depth + 1, issues);
      walk(args[1], [...here, 1], true, depth + 1, issues);
      return;
    }
  }
  const arity = ARITY[operator];
  const count = Array.isArray(args) ? args.length : 1;
  if (arity && (count < arity[0] || count > arity[1])) {
    const expected = arity[0] === arity[1] ? `${arity[0]}` : arity[1] === Infinity ? `at least ${arity[0]}` : `${arity[0]} to ${arity[1]}`;
    issues.push({ path: here, message: `takes ${expected} argument(s), got ${count}` });
  }
  walk(args, here, insideIterator, depth + 1, issues);
}

function checkVar(args: unknown, path: Array<string | number>, insideIterator: boolean, issues: ExpressionIssue[]): void {
  const name = Array.isArray(args) ? args[0] : args;
  if (Array.isArray(args)) {
    if (args.length < 1 || args.length > 2) {
      issues.push({ path, message: 'takes a variable name or [variable name, default]' });
      return;
    }
    const fallback = args[1];
    if (fallback !== undefined && fallback !== null && typeof fallback === 'object') {
      issues.push({ path: [...path, 1], message: 'the default must be a string, number, boolean or null' });
    }
  }
  checkVariable(name, Array.isArray(args) ? [...path, 0] : path, insideIterator, issues);
}

function checkPathList(args: unknown, path: Array<string | number>, insideIterator: boolean, issues: ExpressionIssue[]): void {
  if (typeof args === 'string') {
    checkVariable(args, path, insideIterator, issues);
    return;
  }
  if (!Array.isArray(args)) {
    issues.push({ path, message: 'takes a list of variable names' });
    return;
  }
  args.forEach((name, index) => checkVariable(name, [...path, index], insideIterator, issues));
}

function checkVariable(name: unknown, path: Array<string | number>, insideIterator: boolean, issues: ExpressionIssue[]): void {
  if (typeof name !== 'string') {
    issues.push({ path, message: 'a variable name must be a literal string' });
    return;
  }
  const problem = variableProblem(name, insideIterator);
  if (problem) issues.push({ path, message: `variable "${name}" ${problem}` });
}

function variableProblem(name: string, insideIterator: boolean): string | null {
  if (insideIterator && name === '') return null;
  const segments = name.split('.');
  if (segments.some((segment) => segment === '' || segment.includes('\\'))) {
    return 'is not a plain dotted path (empty segment, "../" or escape)';
  }
  if (segments.some((segment) => FORBIDDEN_SEGMENTS.has(segment))) return 'names a forbidden property';
  if (insideIterator) return null;
  const [root, field, ...rest] = segments;
  switch (root) {
    case 'record':
    case 'customer':
      return null;
    case 'event':
      if (field === undefined || (EVENT_FIELDS.has(field) && rest.length === 0)) return null;
      return 'is not an event field; use event.slug, event.name or event.type';
    case 'aggregates':
      if (field !== undefined && KNOWN_AGGREGATES.has(field) && rest.length === 0) return null;
      return `is not a known aggregate; known: ${AGGREGATE_NAMES.join(', ')}`;
    default:
      return 'must start with record., customer., event. or aggregates.';
  }
}

/** A contribution with more than 2 decimals would make the summed score drift in binary floating point. */
function hasAtMostTwoDecimals(value: number): boolean {
  return Math.abs(value * 100 - Math.round(value * 100)) < 1e-9;
}

export const ruleInputSchema = z
  .object({
    code: z.string().regex(/^[A-Z0-9_]{2,64}$/, 'must be 2 to 64 characters of A-Z, 0-9 and _'),
    name: z.string().trim().min(1).max(200),
    description: z.string().trim().max(2000).optional(),
    target: z.enum(RULE_TARGETS),
    event_slugs: z.array(z.string().trim().min(1).max(64)).default([]),
    expression: z.custom<JsonValue>().superRefine((expression, ctx) => {
      for (const issue of expressionIssues(expression)) {
        ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
      }
    }),
    score: z
      .number()
      .min(-100)
      .max(100)
      .refine(hasAtMostTwoDecimals, 'must have at most 2 decimals'),
    decision: z.enum(DECISIONS).nullable().default(null),
    active: z.boolean().default(true),
  })
  .strict();

export const ruleFileSchema = z.object({ rules: z.array(ruleInputSchema).min(1) }).strict();

export interface RuleFileIssue {
  /** Position of the rule in the file's rules array; null for a problem with the file itself. */
  index: number | null;
  code: string | null;
  /** Dotted path inside the rule, e.g. `expression.and.1.>=`. */
  field: string;
  message: string;
}

export class RuleFileError extends Error {
  constructor(readonly issues: RuleFileIssue[]) {
    super(`Invalid rule file:\n${issues.map(describeIssue).join('\n')}`);
  }
}

function describeIssue(issue: RuleFileIssue): string {
  if (issue.index === null) return `  ${issue.field || '(file)'}: ${issue.message}`;
  const rule = issue.code ? `rules[${issue.index}] (${issue.code})` : `rules[${issue.index}]`;
  return `  ${rule}${issue.field ? `.${issue.field}` : ''}: ${issue.message}`;
}

/** Parses a rule file (`{ "rules": [...] }`) and applies defaults; throws RuleFileError naming each bad rule and field. */
export function parseRuleFile(json: unknown): RuleInput[] {
  const parsed = ruleFileSchema.safeParse(json);
  if (!parsed.success) {
    throw new RuleFileError(parsed.error.issues.map((issue) => toRuleFileIssue(json, issue.path, issue.message)));
  }
  const rules = parsed.data.rules;
  const firstIndexOfCode = new Map<string, number>();
  const duplicates: RuleFileIssue[] = [];
  rules.forEach((rule, index) => {
    const first = firstIndexOfCode.get(rule.code);
    if (first === undefined) firstIndexOfCode.set(rule.code, index);
    else duplicates.push({ index, code: rule.code, field: 'code', message: `duplicates the code of rules[${first}]` });
  });
  if (duplicates.length > 0) throw new RuleFileError(duplicates);
  return rules;
}

function toRuleFileIssue(json: unknown, path: ReadonlyArray<PropertyKey>, message: string): RuleFileIssue {
  const [top, index, ...rest] = path;
  if (top !== 'rules' || typeof index !== 'number') {
    return { index: null, code: null, field: path.map(String).join('.'), message };
  }
  return { index, code: codeAt(json, index), field: rest.map(String).join('.'), message };
}

function codeAt(json: unknown, index: number): string | null {
  const rules = (json as { rules?: unknown } | null)?.rules;
  if (!Array.isArray(rules)) return null;
  const code = (rules[index] as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : null;
}
