/**
 * Piscina entry of the light pool: thin dispatch to pure code in src/. Compiled rules are cached
 * per worker by code and version (src/modules/rules/compiler.ts), the sanctions index by list
 * version (src/modules/screening/sanctions/shared-index.ts).
 */
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

export default function run(task: LightTask): EvaluateOutput | ScreeningResult[] {
  switch (task.type) {
    case 'screen': {
      const index = indexFor(task.index);
      return task.queries.map((query) => index.screen(query));
    }
    case 'evaluate': {
      const results = evaluateRecords(task.rules, task.inputs, task.thresholds);
      return results.map((result, index) => ({ ...result, context: buildDecisionContext(task.inputs[index]!) }));
    }
  }
}
