import type { z } from 'zod';
import { checkRequest } from './check.ts';
import { describeProblem } from './storable.ts';
import { BadRequestError } from '../http/errors.ts';

/**
 * Validates a parsed body (or query) against a zod schema and turns failures into one 400 whose
 * message names the fields: missing ones together ("Missing required field(s): api_key."), then
 * others. The storable-value guard runs first, so no schema has to repeat it and nothing that
 * PostgreSQL would refuse reaches a handler.
 */
export function validateBody<S extends z.ZodType>(schema: S, body: unknown, reasons: Readonly<Record<string, string>> = {}): z.output<S> {
  const checked = checkRequest(schema, body);
  if (checked.ok) return checked.data;
  if ('unstorable' in checked) {
    const [first] = checked.unstorable;
    throw new BadRequestError(describeProblem(first!), 'value_not_storable', { field: first!.path });
  }
  const missing: string[] = [];
  const other: string[] = [];
  for (const { issue, missing: isMissing } of checked.issues) {
    const field = issue.path.join('.');
    if (isMissing) missing.push(field);
    else other.push(field ? `${field}: ${issue.message}` : issue.message);
  }
  const parts = [];
  if (missing.length) parts.push(`Missing required field(s): ${missing.join(', ')}.`);
  if (other.length) parts.push(`Invalid field(s): ${other.join('; ')}.`);
  // An endpoint whose spec names a reason per field (end-kyc-session: status_invalid) gets the first one's.
  const firstField = checked.issues[0]?.field ?? '';
  const reason = Object.hasOwn(reasons, firstField) ? reasons[firstField]! : missing.length ? 'fields_missing' : 'fields_invalid';
  throw new BadRequestError(parts.join(' '), reason, {
    fields: [...missing, ...other.map((text) => text.split(':')[0])],
  });
}
