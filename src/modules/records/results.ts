/** Shared shapes of upsert results. */
export type Action = 'created' | 'updated' | 'skipped';

/** The spec's shown case for a skipped record: score 100.0 and REJECT. */
export const SKIPPED_SCORE = 100;
export const SKIPPED_DECISION = 'REJECT';

/** Numbers for the rule engine: JsonLogic compares decimal strings as text. */
export function numericOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}
