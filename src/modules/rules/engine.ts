import type { AppContext } from '../../context.ts';
import { chunk } from '../../pools.ts';
import { evaluateTask, type EvaluateOutput } from '../../../workers/light.ts';
import type { EvaluationInput } from './definitions.ts';

/**
 * Below this many records a batch is scored on the calling thread: a pool round trip (about
 * 0.7-1.7 ms measured) costs more than evaluating a few records with 30 rules (about 0.25 ms).
 */
const INLINE_EVALUATION_LIMIT = 16;

export type Evaluation = EvaluateOutput[number];

/**
 * Scores records with the active rules in the light pool: one task per chunk, never one per
 * record (small batches inline, see INLINE_EVALUATION_LIMIT). Workers cache compiled rules by code and version, so sending the definitions along is
 * cheap and a changed rule is picked up by the next batch.
 */
export async function evaluateInPool(app: AppContext, inputs: EvaluationInput[]): Promise<Evaluation[]> {
  if (inputs.length === 0) return [];
  const rules = await app.rules.active();
  const task = { type: 'evaluate', rules, inputs, thresholds: app.config.thresholds } as const;
  if (inputs.length < INLINE_EVALUATION_LIMIT) return evaluateTask(task);
  const chunks = chunk(inputs, app.config.lightWorkers);
  const outputs = await Promise.all(
    chunks.map((part) => app.pools.light.run({ type: 'evaluate', rules, inputs: part, thresholds: app.config.thresholds }) as Promise<EvaluateOutput>),
  );
  return outputs.flat();
}

/**
 * The execution-log row of one evaluated record. Its id is made here and stored on the record as
 * log_id; the record's own id is joined in when both are written (upsertRowsWithLogs).
 */
export function executionLogRow(
  id: string,
  target: EvaluationInput['target'],
  recordRef: string | null,
  evaluation: Evaluation,
  actor: string,
): Record<string, unknown> {
  return {
    id,
    target,
    record_ref: recordRef,
    score: evaluation.score,
    decision: evaluation.decision,
    matched_rules: evaluation.matched,
    rule_versions: evaluation.rule_versions,
    rule_errors: evaluation.errors,
    data_context: evaluation.context,
    duration_us: evaluation.duration_us,
    actor,
  };
}

export const EXECUTION_LOG_COLUMNS = {
  id: 'uuid',
  target: 'text',
  record_id: 'uuid',
  record_ref: 'text',
  score: 'numeric',
  decision: 'text',
  matched_rules: 'jsonb',
  rule_versions: 'jsonb',
  rule_errors: 'jsonb',
  data_context: 'jsonb',
  duration_us: 'integer',
  actor: 'text',
};
