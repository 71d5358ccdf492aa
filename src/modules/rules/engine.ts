import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Config } from '../../config.ts';
import type { RuleCache } from './store.ts';

/** What scoring needs of the service: the active rules and the decision thresholds (not the whole context: this is the hot path). */
export interface ScoringServices {
  rules: Pick<RuleCache, 'active'>;
  config: Pick<Config, 'thresholds'>;
}
import { compileRuleSet, type CompiledRuleSet } from './compiler.ts';
import type { EvaluationInput, RuleDefinition } from './definitions.ts';
import { evaluateRecords, type EvaluationResult } from './evaluate.ts';
import { ruleVersionSet } from './version-sets.ts';

export type Evaluation = EvaluationResult;

/**
 * The rule cache hands out the same array until the rules change (a NOTIFY drops it), so the
 * compiled set lives exactly as long as the rules it was compiled from: never a stale rule.
 */
const compiledSets = new WeakMap<readonly RuleDefinition[], CompiledRuleSet>();

/**
 * Records scored between two turns of the event loop. Thirty rules take about 6 ms per 1000
 * records, so a turn stays around a millisecond and a 1000-record batch never holds the thread
 * long enough to delay other requests (bench/RESULTS.md measures /healthz during a batch).
 */
const RECORDS_PER_TURN = 200;

/**
 * Scores records with the active rules on the calling thread. Measured (bench/RESULTS.md): the
 * rules themselves cost microseconds per record, while copying records to a worker and the
 * results back cost ten times the evaluation, so the pool would only add work.
 */
export async function scoreRecords(app: ScoringServices, inputs: EvaluationInput[]): Promise<Evaluation[]> {
  if (inputs.length === 0) return [];
  const score = await ruleScorer(app);
  if (inputs.length <= RECORDS_PER_TURN) return score(inputs);
  const results: Evaluation[] = [];
  for (let start = 0; start < inputs.length; start += RECORDS_PER_TURN) {
    if (start > 0) await nextTurn();
    results.push(...score(inputs.slice(start, start + RECORDS_PER_TURN)));
  }
  return results;
}

/** Scores records with the rules active now, compiled once per rule set: one batch scored in parts scores every part by the same rules. */
export async function ruleScorer(app: ScoringServices): Promise<(inputs: EvaluationInput[]) => Evaluation[]> {
  const rules = await app.rules.active();
  let compiled = compiledSets.get(rules);
  if (!compiled) {
    compiled = compileRuleSet(rules);
    compiledSets.set(rules, compiled);
  }
  const ruleSet = compiled;
  return (inputs) => evaluateRecords(ruleSet, inputs, app.config.thresholds);
}

/**
 * One execution-log row, its JSON columns already serialised. The record's id is not known until
 * the record is written (an update keeps the stored id), so the writer joins it in.
 */
export interface ExecutionLogEntry {
  id: string;
  target: EvaluationInput['target'];
  recordRef: string | null;
  score: number;
  decision: string;
  matchedRules: string;
  /** The id of the versions of the rules that ran (version-sets.ts); every scored record names one (the set of `{}` when no rule applied). */
  ruleVersionSet: string | null;
  ruleErrors: string;
  dataContext: string;
  durationUs: number;
  actor: string;
}

/**
 * Builds execution-log entries. What a batch shares is serialised once: the matched-rule entries
 * and (through the context writer) the flattened customer and event of every record that shares
 * them; the rule versions are named by their stored set (storeRuleVersionSets stores them first).
 */
export class ExecutionLogWriter {
  // Matched-rule entries are shared per rule (evaluate.ts matchedEntry): each serialised once.
  private readonly matchedJson = new WeakMap<object, string>();

  constructor(
    private readonly target: EvaluationInput['target'],
    private readonly actor: string,
    private readonly context: (input: EvaluationInput) => string,
  ) {}

  entry(id: string, recordRef: string | null, evaluation: Evaluation, input: EvaluationInput): ExecutionLogEntry {
    return {
      id,
      target: this.target,
      recordRef,
      score: evaluation.score,
      decision: evaluation.decision,
      matchedRules: this.matched(evaluation.matched),
      ruleVersionSet: ruleVersionSet(evaluation.rule_versions).id,
      ruleErrors: evaluation.errors.length === 0 ? '[]' : JSON.stringify(evaluation.errors),
      dataContext: this.context(input),
      durationUs: evaluation.duration_us,
      actor: this.actor,
    };
  }

  /** JSON.stringify(matched), from each entry's cached JSON. */
  private matched(matched: Evaluation['matched']): string {
    let json = '[';
    for (let index = 0; index < matched.length; index++) {
      const entry = matched[index]!;
      let text = this.matchedJson.get(entry);
      if (text === undefined) this.matchedJson.set(entry, (text = JSON.stringify(entry)));
      json += index === 0 ? text : `,${text}`;
    }
    return `${json}]`;
  }
}
