/**
 * Piscina entry of the light pool: thin dispatch to pure code in src/. Compiled rules are cached
 * per worker by code and version (src/modules/rules/compiler.ts), the sanctions index by list
 * version (src/modules/screening/sanctions/shared-index.ts).
 */
import { compileRuleSet, type CompiledRuleSet } from '../src/modules/rules/compiler.ts';
import { buildDecisionContext, evaluateRecords, type Thresholds } from '../src/modules/rules/evaluate.ts';
import type { EvaluationInput, RuleDefinition } from '../src/modules/rules/definitions.ts';
import type { ScreeningQuery, ScreeningResult } from '../src/modules/screening/sanctions/matcher.ts';
import { indexFor, type SharedSanctionsIndex } from '../src/modules/screening/sanctions/shared-index.ts';

export interface EvaluateTask {
  type: 'evaluate';
  rules: RuleDefinition[];
  inputs: EvaluationInput[];
  thresholds: Thresholds;
}

export interface ScreenTask {
  type: 'screen';
  index: SharedSanctionsIndex;
  queries: ScreeningQuery[];
}

export type LightTask = EvaluateTask | ScreenTask;

export type EvaluateOutput = Array<ReturnType<typeof evaluateRecords>[number] & { context: ReturnType<typeof buildDecisionContext> }>;

/**
 * On the main thread the rule cache hands out the same array until the rules change, so its
 * compiled set can be kept; a worker receives a fresh copy per task and relies on the
 * per-expression cache instead.
 */
const compiledSets = new WeakMap<RuleDefinition[], CompiledRuleSet>();

export function evaluateTask(task: EvaluateTask): EvaluateOutput {
  let compiled = compiledSets.get(task.rules);
  if (!compiled) {
    compiled = compileRuleSet(task.rules);
    compiledSets.set(task.rules, compiled);
  }
  const results = evaluateRecords(compiled, task.inputs, task.thresholds);
  return results.map((result, index) => ({ ...result, context: buildDecisionContext(task.inputs[index]!) }));
}

export default function run(task: LightTask): EvaluateOutput | ScreeningResult[] {
  switch (task.type) {
    case 'screen': {
      const index = indexFor(task.index);
      return task.queries.map((query) => index.screen(query));
    }
    case 'evaluate':
      return evaluateTask(task);
  }
}
