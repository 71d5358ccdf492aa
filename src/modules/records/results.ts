/** Shared shapes of upsert results. */
export type Action = 'created' | 'updated' | 'skipped';

/** The spec's shown case for a skipped record: score 100.0 and REJECT. */
export const SKIPPED_SCORE = 100;
export const SKIPPED_DECISION = 'REJECT';

/** Numbers for the rule engine: JsonLogic compares decimal strings as text. */
export function numericOrNull(value: unknown): number | null {
  return value === null || value === undefined ? null : Number(value);
}

/**
 * The object without null and undefined values. Rules read a missing variable as null, so
 * dropping them changes no outcome, and it keeps the pool messages and the stored decision
 * contexts to the values that exist.
 */
export function withoutNulls(values: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const key in values) {
    const value = values[key];
    if (value !== null && value !== undefined) kept[key] = value;
  }
  return kept;
}
