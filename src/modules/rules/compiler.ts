import { LogicEngine } from 'json-logic-engine';
import {
  ALLOWED_OPERATORS,
  expressionIssues,
  type Decision,
  type EvaluationInput,
  type RuleDefinition,
  type RuleTarget,
} from './definitions.ts';

/**
 * The engine knows only the whitelisted operators, so an expression that slipped past
 * validation (a row edited in the database by hand, say) still cannot reach the engine's extras.
 */
function createEngine(): LogicEngine {
  const engine = new LogicEngine();
  for (const name of Object.keys(engine.methods)) {
    if (!ALLOWED_OPERATORS.has(name)) delete engine.methods[name];
  }
  const deterministic = { deterministic: true };
  engine.addMethod('lower', ([value]: unknown[]) => (typeof value === 'string' ? value.toLowerCase() : null), deterministic);
  engine.addMethod('upper', ([value]: unknown[]) => (typeof value === 'string' ? value.toUpperCase() : null), deterministic);
  engine.addMethod(
    'starts_with',
    ([value, prefix]: unknown[]) => typeof value === 'string' && typeof prefix === 'string' && value.startsWith(prefix),
    deterministic,
  );
  engine.addMethod(
    'ends_with',
    ([value, suffix]: unknown[]) => typeof value === 'string' && typeof suffix === 'string' && value.endsWith(suffix),
    deterministic,
  );
  engine.addMethod('abs', ([value]: unknown[]) => {
    if (value === null || value === undefined) return null;
    const number = typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
    if (Number.isNaN(number)) throw new Error(`abs of a non-number (${typeof value})`);
    return Math.abs(number);
  }, deterministic);
  for (const name of ALLOWED_OPERATORS) {
    if (!(name in engine.methods)) throw new Error(`json-logic-engine lacks the whitelisted operator ${name}`);
  }
  return engine;
}

const engine = createEngine();

export interface CompiledRule {
  code: string;
  version: number;
  target: RuleTarget;
  /** null: every event of the target. */
  eventSlugs: ReadonlySet<string> | null;
  score: number;
  /** The contribution in hundredths, so sums are exact integers. */
  scoreHundredths: number;
  decision: Decision | null;
  /** JsonLogic truthiness of the expression; throws what the expression throws. */
  matches: (input: EvaluationInput) => boolean;
  /** Set when the expression could not be compiled; `matches` then throws it. */
  compileError: string | null;
}

interface CachedExpression {
  expressionText: string;
  matches: (input: EvaluationInput) => boolean;
  compileError: string | null;
}

/**
 * Keyed by `${code}@${version}`: the loader bumps the version on every change, so a worker
 * compiles each rule version once. The expression text is kept to recompile if a version was
 * reused for a different expression, so a stale entry can never score a record.
 */
const expressionCache = new Map<string, CachedExpression>();
/** Old versions are never asked for again; the bound keeps a long-lived worker from growing without end. */
const MAX_CACHED_EXPRESSIONS = 10_000;

function compileExpression(code: string, version: number, expression: unknown): CachedExpression {
  const key = `${code}@${version}`;
  const expressionText = JSON.stringify(expression) ?? 'undefined';
  const cached = expressionCache.get(key);
  if (cached && cached.expressionText === expressionText) return cached;

  let entry: CachedExpression;
  const issues = expressionIssues(expression);
  if (issues.length > 0) {
    const first = issues[0]!;
    entry = failedExpression(expressionText, `invalid expression at ${first.path.join('.') || '(root)'}: ${first.message}`);
  } else {
    try {
      const built = engine.build(expression) as (data: EvaluationInput) => unknown;
      entry = { expressionText, matches: (input) => Boolean(engine.truthy(built(input))), compileError: null };
    } catch (error) {
      entry = failedExpression(expressionText, `cannot compile: ${describeRuleError(error)}`);
    }
  }
  if (!cached && expressionCache.size >= MAX_CACHED_EXPRESSIONS) {
    const oldest = expressionCache.keys().next();
    if (!oldest.done) expressionCache.delete(oldest.value);
  }
  expressionCache.set(key, entry);
  return entry;
}

function failedExpression(expressionText: string, compileError: string): CachedExpression {
  return {
    expressionText,
    compileError,
    matches: () => {
      throw new Error(compileError);
    },
  };
}

export function compileRule(rule: RuleDefinition): CompiledRule {
  const compiled = compileExpression(rule.code, rule.version, rule.expression);
  return {
    code: rule.code,
    version: rule.version,
    target: rule.target,
    eventSlugs: rule.event_slugs.length > 0 ? new Set(rule.event_slugs) : null,
    score: rule.score,
    scoreHundredths: Math.round(rule.score * 100),
    decision: rule.decision,
    matches: compiled.matches,
    compileError: compiled.compileError,
  };
}

export interface ApplicableRules {
  rules: readonly CompiledRule[];
  /** code -> version of every rule that ran, shared by all records of the same target and event. */
  ruleVersions: Readonly<Record<string, number>>;
}

/** The active rules of one rule set, compiled, with the rules that apply to each target and event memoized. */
export class CompiledRuleSet {
  readonly rules: readonly CompiledRule[];
  private readonly applicableByKey = new Map<string, ApplicableRules>();

  constructor(rules: readonly RuleDefinition[]) {
    this.rules = rules
      .filter((rule) => rule.active)
      .map(compileRule)
      .sort((a, b) => (a.code < b.code ? -1 : a.code > b.code ? 1 : 0));
  }

  /** Rules of `target` whose event slugs are empty or include `eventSlug`. */
  applicable(target: RuleTarget, eventSlug: string | null): ApplicableRules {
    const key = `${target}\u0000${eventSlug ?? ''}`;
    let found = this.applicableByKey.get(key);
    if (!found) {
      const rules = this.rules.filter(
        (rule) => rule.target === target && (rule.eventSlugs === null || (eventSlug !== null && rule.eventSlugs.has(eventSlug))),
      );
      found = { rules, ruleVersions: Object.freeze(Object.fromEntries(rules.map((rule) => [rule.code, rule.version]))) };
      this.applicableByKey.set(key, found);
    }
    return found;
  }
}

export function compileRuleSet(rules: readonly RuleDefinition[]): CompiledRuleSet {
  return new CompiledRuleSet(rules);
}

/** json-logic-engine throws NaN and plain objects as well as Errors. */
export function describeRuleError(error: unknown): string {
  if (typeof error === 'number' && Number.isNaN(error)) return 'NaN: an operand is not a number';
  if (error instanceof Error) return error.message;
  if (error && typeof error === 'object' && 'type' in error) {
    const { type, key } = error as { type: unknown; key?: unknown };
    return key === undefined ? String(type) : `${String(type)}: ${String(key)}`;
  }
  return String(error);
}
