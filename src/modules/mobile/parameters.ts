import type { OpenAPIRegistry, ResponseConfig } from '@asteasolutions/zod-to-openapi';
import type { Context } from 'koa';
import { BadRequestError } from '../../http/errors.ts';
import { errorResponses, type z } from '../../http/openapi.ts';
import { refusedOnReadOnlyDevice } from './guard.ts';

/**
 * Query parameters of the schema and data endpoints: each given at most once, none unknown, so a
 * typo in a filter name is a 400 naming it instead of a silently unfiltered list.
 */

const MAX_PARAMETER_LENGTH = 1000;

export function invalidParameter(parameter: string, message: string): BadRequestError {
  return new BadRequestError(message, 'invalid_parameter', { parameter: parameter.slice(0, 100) });
}

/** Refuses any query parameter outside `allowed` (400 naming the first unknown one). */
export function acceptOnly(ctx: Context, allowed: readonly string[] | ReadonlySet<string>): void {
  const known = allowed instanceof Set ? allowed : new Set(allowed);
  for (const name of Object.keys(ctx.query)) {
    if (!known.has(name)) throw invalidParameter(name, `Unknown parameter: ${name.slice(0, 100)}.`);
  }
}

/** One parameter's value, or undefined; given twice or over-long is a 400. */
export function singleParameter(ctx: Context, name: string, maxLength = MAX_PARAMETER_LENGTH): string | undefined {
  const value = ctx.query[name];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) throw invalidParameter(name, `${name} may be given only once.`);
  if (value.length > maxLength) throw invalidParameter(name, `${name} is longer than ${maxLength} characters.`);
  if (value.includes('\u0000') || !value.isWellFormed()) throw invalidParameter(name, `${name} contains a NUL character or broken Unicode.`);
  return value;
}

/** A positive whole number parameter (p, page_size), within `max`. */
export function positiveInteger(ctx: Context, name: string, fallback: number, max: number): number {
  const value = singleParameter(ctx, name, 20);
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value) || Number(value) < 1 || Number(value) > max) throw invalidParameter(name, `${name} must be a whole number from 1 to ${max}.`);
  return Number(value);
}

/** What the device guard (requireDevice) answers on a mobile endpoint, for its entry in the OpenAPI document. */
export function deviceGuardErrors(method: string, path: string): Record<number, string> {
  const errors: Record<number, string> = { 401: 'Token missing, invalid or expired; device revoked; account inactive' };
  if (refusedOnReadOnlyDevice(method, path)) errors[403] = 'A device paired with a review ticket is read-only (read_only_device)';
  return errors;
}

type Documented = [
  method: 'get' | 'post' | 'patch' | 'put' | 'delete',
  relative: string,
  summary: string,
  body: z.ZodType | null,
  answers: Record<number, ResponseConfig>,
  errors: Record<number, string>,
];

/** Bearer endpoints of the mobile API in the OpenAPI document: their answers, and the errors every one of them can give. */
export function documentRoutes(docs: OpenAPIRegistry, path: (relative: string) => string, routes: Documented[]): void {
  for (const [method, relative, summary, body, answers, errors] of routes) {
    docs.registerPath({
      method,
      path: path(relative),
      summary,
      tags: ['mobile'],
      security: [{ bearer: [] }],
      ...(body ? { request: { body: { content: { 'application/json': { schema: body } } } } } : {}),
      responses: {
        ...answers,
        ...errorResponses(deviceGuardErrors(method, path(relative)), { 405: 'Method not supported' }, errors),
      },
    });
  }
}
