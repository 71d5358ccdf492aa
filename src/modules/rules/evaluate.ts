import { CompiledRuleSet, compileRuleSet, describeRuleError, type CompiledRule } from './compiler.ts';
import { AGGREGATE_ORDERS, NEWEST_AGGREGATE_ORDER, type Decision, type EvaluationInput, type RuleDefinition } from './definitions.ts';

export interface Thresholds {
  /** A score from this value on gives REVIEW. */
  review: number;
  /** A score from this value on gives REJECT. */
  reject: number;
}

export interface MatchedRule {
  code: string;
  version: number;
  score: number;
  decision: Decision | null;
}

export interface EvaluationResult {
  /** Sum of the matching rules' contributions, clamped to 0..100, with at most 2 decimals. */
  score: number;
  decision: Decision;
  matched: Array<Readonly<MatchedRule>>;
  /** code -> version of every rule that ran for the record, matched or not. */
  rule_versions: Readonly<Record<string, number>>;
  /** Rules that threw; they count as not matched. */
  errors: Array<{ code: string; message: string }>;
  /** Time spent on this record's rules, in whole microseconds. */
  duration_us: number;
}

/**
 * One frozen MatchedRule per compiled rule, shared by every record the rule matches: the execution
 * log writer serialises each once per batch instead of once per match (with 30 rules that was
 * most of a log's matched_rules cost). Frozen, since many results share it.
 */
const matchedEntries = new WeakMap<CompiledRule, Readonly<MatchedRule>>();

function matchedEntry(rule: CompiledRule): Readonly<MatchedRule> {
  let entry = matchedEntries.get(rule);
  if (!entry) matchedEntries.set(rule, (entry = Object.freeze({ code: rule.code, version: rule.version, score: rule.score, decision: rule.decision })));
  return entry;
}

const FORCED_RANK: Readonly<Record<Decision, number>> = { ACCEPT: 1, REVIEW: 2, REJECT: 3 };

/**
 * Runs the rules of each input's target (and event) over it. A forced decision of a matching rule
 * wins, REJECT over REVIEW over ACCEPT; otherwise the clamped score against the thresholds decides.
 * A rule that throws is reported in `errors` and never fails the batch.
 */
export function evaluateRecords(
  rules: CompiledRuleSet | readonly RuleDefinition[],
  inputs: readonly EvaluationInput[],
  thresholds: Thresholds,
): EvaluationResult[] {
  const ruleSet = rules instanceof CompiledRuleSet ? rules : compileRuleSet(rules);
  const results = new Array<EvaluationResult>(inputs.length);
  for (let i = 0; i < inputs.length; i++) {
    const input = inputs[i]!;
    const started = performance.now();
    const { rules: applicable, ruleVersions } = ruleSet.applicable(input.target, input.event?.slug ?? null);
    let hundredths = 0;
    let forced: Decision | null = null;
    const matched: Array<Readonly<MatchedRule>> = [];
    const errors: Array<{ code: string; message: string }> = [];
    for (const rule of applicable) {
      let hit: boolean;
      try {
        hit = rule.matches(input);
      } catch (error) {
        errors.push({ code: rule.code, message: describeRuleError(error) });
        continue;
      }
      if (!hit) continue;
      hundredths += rule.scoreHundredths;
      matched.push(matchedEntry(rule));
      if (rule.decision !== null && (forced === null || FORCED_RANK[rule.decision] > FORCED_RANK[forced])) {
        forced = rule.decision;
      }
    }
    const score = Math.min(10_000, Math.max(0, hundredths)) / 100;
    const decision = forced ?? (score >= thresholds.reject ? 'REJECT' : score >= thresholds.review ? 'REVIEW' : 'ACCEPT');
    results[i] = {
      score,
      decision,
      matched,
      rule_versions: ruleVersions,
      errors,
      duration_us: Math.round((performance.now() - started) * 1000),
    };
  }
  return results;
}

export type FlatValue = string | number | boolean | null;
export type FlatValues = Record<string, FlatValue>;

/** The data_context of an execution log: what the rules saw, as four flat key/value sets. */
export interface DecisionContext {
  transaction: FlatValues;
  customer: FlatValues;
  aggregates: FlatValues;
  event: FlatValues;
}

/**
 * For a customer record the record is the customer, so `transaction` is empty rather than a copy.
 */
export function buildDecisionContext(input: EvaluationInput): DecisionContext {
  return {
    transaction: input.target === 'customer' ? {} : flatten(input.record),
    customer: input.customer ? flatten(input.customer) : {},
    aggregates: flatten(input.aggregates),
    event: input.event ? flatten(input.event) : {},
  };
}

/**
 * The JSON text of buildDecisionContext(input), with the flattened customer and event written
 * once per object: the records of one customer in a batch share their customer object, so its
 * flattening and serialisation are paid once, not per record.
 */
export class DecisionContextWriter {
  private readonly parts = new WeakMap<object, string>();

  json(input: EvaluationInput): string {
    const transaction = input.target === 'customer' ? '{}' : flatJson(input.record);
    return `{"transaction":${transaction},"customer":${this.shared(input.customer)},"aggregates":${aggregatesJson(input.aggregates)},"event":${this.shared(input.event)}}`;
  }

  private shared(source: object | null): string {
    if (!source) return '{}';
    let json = this.parts.get(source);
    if (json === undefined) this.parts.set(source, (json = flatJson(source)));
    return json;
  }
}

/**
 * The aggregates' JSON as their values in the newest order (AGGREGATE_ORDERS), instead of an object
 * that repeats every aggregate's name in every execution log (about half of a financial log's
 * context). The compact form when the aggregates are the newest order's names in its order,
 * numbers or null; otherwise as flatJson writes them.
 */
function aggregatesJson(aggregates: Record<string, unknown>): string {
  const order = AGGREGATE_ORDERS[NEWEST_AGGREGATE_ORDER]!;
  let position = 0;
  let values = '';
  for (const key in aggregates) {
    const value = aggregates[key];
    if (key !== order[position] || (value !== null && typeof value !== 'number')) return flatJson(aggregates);
    // As JSON.stringify writes a number (a non-finite one as null, as flatten keeps it).
    values += `${position === 0 ? '' : ','}${value === null || !Number.isFinite(value) ? 'null' : String(value)}`;
    position++;
  }
  return position === order.length ? `{"order":${NEWEST_AGGREGATE_ORDER},"values":[${values}]}` : flatJson(aggregates);
}

/** A stored context's aggregates section as the rules saw it: the compact form (see AGGREGATE_ORDERS) expanded, an object as it is. */
export function storedAggregates(section: unknown): FlatValues | null {
  if (section === null || typeof section !== 'object' || Array.isArray(section)) return null;
  const { order, values } = section as { order?: unknown; values?: unknown };
  const names = typeof order === 'number' ? AGGREGATE_ORDERS[order] : undefined;
  if (!names || !Array.isArray(values) || values.length !== names.length || Object.keys(section).length !== 2) return section as FlatValues;
  const aggregates: FlatValues = {};
  names.forEach((name, position) => (aggregates[name] = values[position] as FlatValue));
  return aggregates;
}

/**
 * JSON.stringify(flatten(source)), without building the flat copy when `source` is flat already
 * (the aggregates always are): for strings, numbers, booleans and null JSON.stringify writes what
 * flatten keeps (a non-finite number as null, undefined left out), in the same key order.
 */
function flatJson(source: object): string {
  for (const key in source) {
    const value = (source as Record<string, unknown>)[key];
    // flatten assigns keys, and assigning "__proto__" drops it: left to flatten, to keep its output exactly.
    if ((value !== null && typeof value === 'object') || typeof value === 'bigint' || key === '__proto__') return JSON.stringify(flatten(source));
  }
  return JSON.stringify(source);
}

/**
 * Nested objects and arrays become dotted keys (`geo.lat`, `sanction_topic.0`); an empty object or
 * array keeps its key with null. An explicit stack, because records carry free-form metadata whose
 * nesting depth the merchant chooses.
 */
function flatten(source: object): FlatValues {
  const flat: FlatValues = {};
  const pending: Array<[string, unknown]> = Object.entries(source).reverse();
  while (pending.length > 0) {
    const [key, raw] = pending.pop()!;
    const value = toPlain(raw);
    if (value === undefined) continue;
    if (value === null || typeof value !== 'object') {
      flat[key] = value;
      continue;
    }
    const children = Object.entries(value);
    if (children.length === 0) {
      flat[key] = null;
      continue;
    }
    for (let i = children.length - 1; i >= 0; i--) {
      const [childKey, child] = children[i]!;
      pending.push([`${key}.${childKey}`, child]);
    }
  }
  return flat;
}

/** Dates and decimals (anything with toJSON) are stored as they would serialize. */
function toPlain(value: unknown): FlatValue | object | undefined {
  const plain =
    value !== null && typeof value === 'object' && typeof (value as { toJSON?: unknown }).toJSON === 'function'
      ? (value as { toJSON: () => unknown }).toJSON()
      : value;
  if (plain === undefined || typeof plain === 'function' || typeof plain === 'symbol') return undefined;
  if (typeof plain === 'bigint') return plain.toString();
  if (typeof plain === 'number') return Number.isFinite(plain) ? plain : null;
  return plain as FlatValue | object;
}
