import type { z } from 'zod';
import { BadRequestError } from './errors.ts';

/**
 * Validates a parsed body against a zod schema and turns failures into one 400 whose message
 * names the fields: missing ones together ("Missing required field(s): api_key."), then others.
 */
export function validateBody<S extends z.ZodType>(schema: S, body: unknown): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const missing: string[] = [];
  const other: string[] = [];
  for (const issue of result.error.issues) {
    const field = issue.path.join('.');
    const isMissing = issue.code === 'invalid_type' && (issue as { input?: unknown }).input === undefined;
    if (isMissing) missing.push(field);
    else other.push(field ? `${field}: ${issue.message}` : issue.message);
  }
  const parts = [];
  if (missing.length) parts.push(`Missing required field(s): ${missing.join(', ')}.`);
  if (other.length) parts.push(`Invalid field(s): ${other.join('; ')}.`);
  throw new BadRequestError(parts.join(' '), missing.length ? 'fields_missing' : 'fields_invalid', {
    fields: [...missing, ...other.map((text) => text.split(':')[0])],
  });
}
