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
 * Sets `key` on `target` as its own data property, as a spread or JSON.parse does: an assignment
 * to a key named "__proto__" would set the object's prototype instead (and a request's extra of
 * that name would then lend its fields to every lookup on the object).
 */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/**
 * A copy of the object's own properties, as `{ ...values }` makes it. Not a spread: in the hot
 * path V8's copy of a spread object that came from JSON (a stored customer's `raw`, a request's
 * extras) kept each request's objects reachable for the young-generation collector until the next
 * full collection, 4 KB a record (README design notes, "A request's garbage dies young").
 */
export function ownCopy(values: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(values)) setOwn(copy, key, values[key]);
  return copy;
}

/**
 * A copy of the object's own properties without null and undefined values. Rules read a missing
 * variable as null, so dropping them changes no outcome, and it keeps the pool messages and the
 * stored decision contexts to the values that exist.
 */
export function withoutNulls(values: Record<string, unknown>): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const key of Object.keys(values)) {
    const value = values[key];
    if (value !== null && value !== undefined) setOwn(kept, key, value);
  }
  return kept;
}
