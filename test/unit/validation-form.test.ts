import test from 'ava';
import { z } from 'zod';
import { HttpError } from '../../src/http/errors.ts';
import { validateBody } from '../../src/validation/request.ts';
import { choiceOf, validateForm } from '../../src/validation/form.ts';

const FORM = z.object({
  name: z.string().max(5),
  colour: z.enum(['red', 'blue']).optional(),
  zone: choiceOf(new Set(['UTC', 'Europe/Paris']), 20).optional(),
  on: z.boolean().optional(),
});

function errorsOf(body: Record<string, unknown>): unknown {
  try {
    validateForm(FORM, body);
  } catch (error) {
    if (!(error instanceof HttpError)) throw error;
    return { status: error.status, message: error.message, errors: error.data?.errors };
  }
  return null;
}

test('a valid form gives the schema output; keys outside it are ignored', (t) => {
  t.deepEqual(validateForm(FORM, { name: 'Ada', colour: 'red', extra: { anything: 1 } }), { name: 'Ada', colour: 'red' });
});

test('blank text and null count as not sent: required fields say so, optional ones are left out', (t) => {
  t.deepEqual(errorsOf({ name: '', colour: null }), { status: 400, message: 'Validation failed.', errors: { name: [{ message: 'This field is required.', code: 'required' }] } });
  t.deepEqual(validateForm(FORM, { name: 'Ada', zone: '' }), { name: 'Ada' });
});

test("each field's first error in Django's words and codes", (t) => {
  t.deepEqual(errorsOf({ name: 'Adalbert', colour: 'green', zone: 'Mars/Base', on: 'yes' }), {
    status: 400,
    message: 'Validation failed.',
    errors: {
      name: [{ message: 'Ensure this value has at most 5 characters (it has 8).', code: 'max_length' }],
      colour: [{ message: 'Select a valid choice. green is not one of the available choices.', code: 'invalid_choice' }],
      zone: [{ message: 'Select a valid choice. Mars/Base is not one of the available choices.', code: 'invalid_choice' }],
      on: [{ message: 'Expected true or false.', code: 'invalid' }],
    },
  });
  t.deepEqual(errorsOf({ name: 12 }), { status: 400, message: 'Validation failed.', errors: { name: [{ message: 'Expected text.', code: 'invalid' }] } });
});

test('a wrong choice that is an object with its own toString (no function) is named as JSON, not a TypeError (found by the staff fuzz run)', (t) => {
  t.deepEqual(errorsOf({ name: 'Ada', colour: { toString: 1 } }), {
    status: 400,
    message: 'Validation failed.',
    errors: { colour: [{ message: 'Select a valid choice. {"toString":1} is not one of the available choices.', code: 'invalid_choice' }] },
  });
});

test('values PostgreSQL cannot store are refused per field before the schema runs, ignored keys included', (t) => {
  t.deepEqual(errorsOf({ name: 'a\u0000b', other: { deep: '\ud800' }, 'bad\u0000key': 1 }), {
    status: 400,
    message: 'Validation failed.',
    errors: {
      name: [{ message: 'The text contains a NUL character (\\u0000).', code: 'invalid' }],
      other: [{ message: 'other.deep: contains a lone UTF-16 surrogate (broken Unicode).', code: 'invalid' }],
      __all__: [{ message: '"bad\\u0000key": has a key that contains a NUL character (\\u0000).', code: 'invalid' }],
    },
  });
});

test('the integration wording tells a missing field from a wrongly typed one', (t) => {
  const schema = z.object({ api_key: z.string(), api_secret: z.string() });
  const missing = t.throws(() => validateBody(schema, { api_key: 'k' }), { instanceOf: HttpError });
  t.is(missing.message, 'Missing required field(s): api_secret.');
  t.is(missing.reason, 'fields_missing');
  const wrong = t.throws(() => validateBody(schema, { api_key: 5, api_secret: 's' }), { instanceOf: HttpError });
  t.regex(wrong.message, /^Invalid field\(s\): api_key: /);
  t.is(wrong.reason, 'fields_invalid');
});
