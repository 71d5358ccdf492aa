import type { z } from 'zod';
import { storableProblems, type FieldProblem } from './storable.ts';

/**
 * The one way a request body or query is checked, whoever presents the errors: the storable-value
 * guard first (so no schema has to repeat it and nothing PostgreSQL would refuse reaches a handler),
 * then the endpoint's zod schema. The integration API (src/validation/request.ts) and the forms of the
 * mobile API (./form.ts) differ only in how they word a failure.
 */

export interface RequestIssue {
  issue: z.core.$ZodIssue;
  /** The first segment of the issue's path: the field it is about ('' for the body itself). */
  field: string;
  /** The value at the issue's path, as sent. */
  value: unknown;
  /** Nothing was sent at the path: a missing field, whatever the schema's issue code says. */
  missing: boolean;
}

export type Checked<T> = { ok: true; data: T } | { ok: false; unstorable: FieldProblem[] } | { ok: false; issues: RequestIssue[] };

export function checkRequest<S extends z.ZodType>(schema: S, body: unknown): Checked<z.output<S>> {
  const unstorable = storableProblems(body);
  if (unstorable.length) return { ok: false, unstorable };
  const result = schema.safeParse(body);
  if (result.success) return { ok: true, data: result.data };
  return {
    ok: false,
    issues: result.error.issues.map((issue) => {
      const value = valueAt(body, issue.path);
      return { issue, field: String(issue.path[0] ?? ''), value, missing: value === undefined };
    }),
  };
}

/** What the body holds at a path, own properties only (a "toString" key is data, never a method). */
function valueAt(body: unknown, path: readonly PropertyKey[]): unknown {
  let value = body;
  for (const key of path) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}
