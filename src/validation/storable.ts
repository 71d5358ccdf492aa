/**
 * The storable-value guard: what PostgreSQL (text, jsonb, timestamptz) and the service's own JSON
 * handling can take, checked before a value reaches either. Every request body, every upserted
 * record and every back-office form goes through it, so that input PostgreSQL would refuse is a
 * clear 400 (or a skipped record) instead of a 500 from the database, and input that would stall
 * or overflow the process (deep nesting, hundreds of thousands of keys) is refused before any
 * work is done on it.
 */

declare global {
  interface String {
    /** ES2024, in Node since 20; the project's lib is ES2023. */
    isWellFormed(): boolean;
    toWellFormed(): string;
  }
}

export const STORABLE_LIMITS = Object.freeze({
  /** Nesting of objects and arrays; jsonb and recursive JSON handling stay far from their limits. */
  maxDepth: 64,
  /** Keys a record may carry beyond its declared fields (stored as extra data). */
  maxExtraKeys: 1000,
  /** PostgreSQL's timestamptz and date take more, but ISO 8601 text and JavaScript dates do not. */
  minYear: 1,
  maxYear: 9999,
});

/** Why a string cannot be stored, or null: PostgreSQL text refuses NUL, UTF-8 cannot encode a lone surrogate. */
export function textProblem(text: string): string | null {
  if (text.includes('\u0000')) return 'contains a NUL character (\\u0000)';
  if (!text.isWellFormed()) return 'contains a lone UTF-16 surrogate (broken Unicode)';
  return null;
}

export function isStorableText(text: string): boolean {
  return !text.includes('\u0000') && text.isWellFormed();
}

/**
 * The text with NUL and lone surrogates replaced by U+FFFD: for text the service writes on its
 * own account that quotes input (a message naming an unknown action), never for input it stores.
 */
export function storableCopy(text: string): string {
  return text.replaceAll('\u0000', '\ufffd').toWellFormed();
}

export interface StorableProblem {
  /** Where in the value, as a dotted path ('' for the value itself). */
  path: string;
  problem: string;
}

function join(path: string, key: string | number): string {
  return path === '' ? String(key) : `${path}.${key}`;
}

/**
 * The first thing in a JSON value that cannot be stored: a string or key with NUL or a lone
 * surrogate, nesting deeper than `maxDepth`, or a number that is not finite. Walks at most
 * `maxDepth` levels, so a hostile 10,000-deep value costs no more than a 64-deep one.
 */
export function storableProblem(value: unknown, maxDepth: number = STORABLE_LIMITS.maxDepth, path = ''): StorableProblem | null {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem ? { path, problem } : null;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? null : { path, problem: 'is not a finite number' };
  if (value === null || typeof value !== 'object') return null;
  if (maxDepth <= 0) return { path, problem: `nests deeper than ${STORABLE_LIMITS.maxDepth} levels` };
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const found = storableProblem(value[index], maxDepth - 1, join(path, index));
      if (found) return found;
    }
    return null;
  }
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    const keyProblem = textProblem(key);
    if (keyProblem) return { path: join(path, quoteKey(key)), problem: `has a key that ${keyProblem}` };
    const found = storableProblem((value as Record<string, unknown>)[key], maxDepth - 1, join(path, key));
    if (found) return found;
  }
  return null;
}

/** A problem of one top-level field of a body ('' for the body itself), so an answer can name every field at once. */
export interface FieldProblem extends StorableProblem {
  field: string;
}

/** The first problem of each top-level field of an object (or of a value that is no object): one walk, no field left out. */
export function storableProblems(body: unknown): FieldProblem[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    const found = storableProblem(body);
    return found ? [{ ...found, field: '' }] : [];
  }
  const problems: FieldProblem[] = [];
  for (const key of Object.keys(body)) {
    // Wrapped, so the key itself is checked and the depth is counted from the body, as storableProblem does.
    const found = storableProblem({ [key]: (body as Record<string, unknown>)[key] });
    if (found) problems.push({ ...found, field: key });
  }
  return problems;
}

/** A key shown in a message: control characters and lone surrogates escaped, long keys cut. */
function quoteKey(key: string): string {
  const shown = JSON.stringify(key.length > 40 ? `${key.slice(0, 40)}...` : key);
  return shown.replace(/[\ud800-\udfff]/g, (unit) => `\\u${unit.charCodeAt(0).toString(16)}`);
}

/** `path: problem`, the form error messages take. */
export function describeProblem(found: StorableProblem): string {
  const path = found.path.length > 60 ? `${found.path.slice(0, 60)}...` : found.path;
  return path === '' ? `The value ${found.problem}.` : `${path}: ${found.problem}.`;
}

/** A point in time PostgreSQL, ISO 8601 and JavaScript all write with a four-digit year (after any offset is applied). */
export function isStorableInstant(instant: Date): boolean {
  const time = instant.getTime();
  if (Number.isNaN(time)) return false;
  const year = instant.getUTCFullYear();
  return year >= STORABLE_LIMITS.minYear && year <= STORABLE_LIMITS.maxYear;
}
