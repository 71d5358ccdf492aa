import { z } from 'zod';
import { BadRequestError } from '../http/errors.ts';
import { checkRequest, type RequestIssue } from './check.ts';
import { describeProblem, isStorableText, type FieldProblem } from './storable.ts';

/**
 * Forms of the mobile API and the back office: a zod schema checked through the one request check
 * (./check.ts), its failures worded the way a Django form words them, field by field with
 * Django's codes. The spec's answer: 400 "Validation failed." with data.errors.
 */

/** One field error as data.errors carries it (Django's form error shape and codes). */
export interface FieldError {
  message: string;
  code: string;
}
export type FieldErrors = Record<string, FieldError[]>;

/** Errors that concern the form as a whole, or a field that cannot be named. */
export const NON_FIELD = '__all__';

export const REQUIRED: FieldError = { message: 'This field is required.', code: 'required' };

export function invalidChoice(value: unknown): FieldError {
  // Objects as JSON: one from a JSON body may carry its own `toString` that is no function, which String() throws on.
  const text = typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value);
  return { message: `Select a valid choice. ${text.slice(0, 100)} is not one of the available choices.`, code: 'invalid_choice' };
}

export function validationFailed(errors: FieldErrors): BadRequestError {
  return new BadRequestError('Validation failed.', 'validation_failed', { errors });
}

/** Text that must be one of a set (checked with the set, not an enum of hundreds in the schema). */
export function choiceOf(values: ReadonlySet<string>, maxLength: number) {
  return z
    .string()
    .max(maxLength)
    .refine((value) => values.has(value), { params: { code: 'invalid_choice' } });
}

/**
 * Text that must hold something besides spaces: trimmed, then "required" when nothing is left (as a
 * Django CharField strips before its required check), then at most `maxLength` characters.
 */
export function requiredText(maxLength: number) {
  return z
    .string()
    .trim()
    .refine((value) => value !== '', { message: REQUIRED.message, params: { code: REQUIRED.code } })
    .max(maxLength);
}

/**
 * Checks a form body and throws the 400 with every field's error; returns the schema's output
 * otherwise. See checkForm.
 */
export function validateForm<S extends z.ZodType>(schema: S, body: Record<string, unknown>): z.output<S> {
  const checked = checkForm(schema, body);
  if (checked.ok) return checked.data;
  throw validationFailed(checked.errors);
}

/**
 * Checks a form body. As in a Django form, blank text and null count as not sent (so a required
 * field sent empty is "required"), keys outside the schema are ignored, and each field reports its
 * first error. Answers the errors rather than throwing them, for callers whose failures travel as
 * their own type (the back office's ValidationFailed).
 */
export function checkForm<S extends z.ZodType>(schema: S, body: Record<string, unknown>): { ok: true; data: z.output<S> } | { ok: false; errors: FieldErrors } {
  const sent = Object.fromEntries(Object.entries(body).filter(([, value]) => value !== '' && value !== null));
  const checked = checkRequest(schema, sent);
  if (checked.ok) return { ok: true, data: checked.data };
  const errors: FieldErrors = {};
  if ('unstorable' in checked) {
    for (const problem of checked.unstorable) {
      // A key that is itself unstorable cannot name its field in the answer either.
      const field = problem.field === '' || !isStorableText(problem.field) ? NON_FIELD : problem.field;
      errors[field] ??= [unstorableError(problem, sent)];
    }
  } else {
    for (const issue of checked.issues) errors[issue.field || NON_FIELD] ??= [fieldError(issue)];
  }
  return { ok: false, errors };
}

function unstorableError(problem: FieldProblem, body: Record<string, unknown>): FieldError {
  const own = problem.path === problem.field && typeof body[problem.field] === 'string';
  return { message: own ? `The text ${problem.problem}.` : describeProblem(problem), code: 'invalid' };
}

const EXPECTED: Readonly<Record<string, string>> = { string: 'Expected text.', boolean: 'Expected true or false.', number: 'Enter a number.', int: 'Enter a whole number.' };

/** A zod issue in Django's words. */
function fieldError({ issue, value, missing }: RequestIssue): FieldError {
  if (missing) return REQUIRED;
  switch (issue.code) {
    case 'invalid_type':
      return { message: EXPECTED[issue.expected] ?? `Expected ${issue.expected}.`, code: 'invalid' };
    case 'invalid_value':
      return invalidChoice(value);
    case 'too_big':
      if (issue.origin === 'string') {
        return { message: `Ensure this value has at most ${issue.maximum} characters (it has ${String(value).length}).`, code: 'max_length' };
      }
      return { message: `Ensure this value is less than or equal to ${issue.maximum}.`, code: 'max_value' };
    case 'too_small':
      if (issue.origin === 'string') {
        return { message: `Ensure this value has at least ${issue.minimum} characters (it has ${String(value).length}).`, code: 'min_length' };
      }
      return { message: `Ensure this value is greater than or equal to ${issue.minimum}.`, code: 'min_value' };
    case 'custom': {
      const code = typeof issue.params?.code === 'string' ? issue.params.code : 'invalid';
      return code === 'invalid_choice' ? invalidChoice(value) : { message: issue.message, code };
    }
    default:
      return { message: issue.message, code: 'invalid' };
  }
}
