import type { Knex } from 'knex';
import { invalidChoice } from '../../validation/form.ts';
import { isStorableText, storableProblem, textProblem } from '../../validation/storable.ts';
import type { AdminSite } from './site.ts';
import type { BoundModel, FieldErrors, ResolvedField, Row } from './registry.ts';

/**
 * The registration's form: which fields a user may send, and how each value is checked and
 * converted before anything is written. The web admin's forms, the mobile data API and the MCP
 * writing tools all clean input here.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATETIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:?\d{2})?$/;
const TIME = /^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$/;
const MAX_TEXT = 100_000;

export interface CleanResult {
  /** Cleaned values of the fields that were sent (or all form fields for a full form). */
  cleaned: Row;
  errors: FieldErrors;
  /** Keys sent that are not in the form: ignored and reported. */
  warnings: string[];
}

/** The fields a user may write (not read-only) on this model. */
export function writableFields(model: BoundModel): ResolvedField[] {
  return model.formFields.filter((field) => !field.readonly && !field.declaration.hidden && field.type !== 'file' && field.type !== 'image');
}

function error(errors: FieldErrors, field: string, message: string, code: string): void {
  (errors[field] ??= []).push({ message, code });
}

function empty(value: unknown): boolean {
  return value === undefined || value === null || value === '';
}

/**
 * Cleans a submitted form. `partial` (PATCH) checks only the keys sent; otherwise (add, PUT) every
 * writable field is part of the form and required ones must be present.
 */
export async function cleanForm(site: AdminSite, db: Knex | Knex.Transaction, model: BoundModel, input: unknown, partial: boolean): Promise<CleanResult> {
  const errors: FieldErrors = {};
  const cleaned: Row = {};
  if (!input || typeof input !== 'object' || Array.isArray(input)) {
    return { cleaned, errors: { __all__: [{ message: 'The body must be a JSON object of form fields.', code: 'invalid' }] }, warnings: [] };
  }
  const data = input as Record<string, unknown>;
  const fields = writableFields(model);
  const known = new Set(model.formFields.map((field) => field.name));
  const warnings = Object.keys(data).filter((key) => !known.has(key) || !fields.some((field) => field.name === key));
  for (const field of fields) {
    const sent = Object.hasOwn(data, field.name);
    if (partial && !sent) continue;
    const value = data[field.name];
    // A NOT NULL column with a default is optional in the form, but never nullable.
    const notNull = model.columnTypes.get(field.name)?.nullable === false;
    if (empty(value) && field.type !== 'boolean' && !(field.type === 'm2m' && Array.isArray(value))) {
      const textual = field.type === 'string' || field.type === 'text';
      if (field.required) error(errors, field.name, 'This field is required.', 'required');
      else if (notNull && !textual) {
        // Left out, the stored value (or the column default) stays; sent empty, it is refused.
        if (value !== undefined) error(errors, field.name, 'This field cannot be empty.', 'null');
      } else cleaned[field.name] = textual ? (value === null && !notNull ? null : '') : null;
      continue;
    }
    const result = cleanValue(field, value);
    const arrayColumn = model.columnTypes.get(field.name)?.udtName.startsWith('_');
    if ('error' in result) error(errors, field.name, result.error, result.code);
    // A value that cleans to null (the JSON text null, a null boolean) is empty too.
    else if (result.value === null && notNull) error(errors, field.name, 'This field cannot be empty.', 'null');
    else if (arrayColumn && !(Array.isArray(result.value) && result.value.every((item) => typeof item === 'string' && item.length <= 1000))) {
      error(errors, field.name, 'Enter a JSON list of text values.', 'invalid_list');
    }
    else cleaned[field.name] = result.value;
  }
  await checkRelations(site, db, model, cleaned, errors);
  return { cleaned, errors, warnings };
}

type Cleaned = { value: unknown } | { error: string; code: string };

function cleanValue(field: ResolvedField, value: unknown): Cleaned {
  switch (field.type) {
    case 'string':
    case 'text': {
      if (typeof value !== 'string') return { error: 'Enter a text value.', code: 'invalid' };
      const problem = textProblem(value);
      if (problem) return { error: `This text ${problem}.`, code: 'invalid' };
      const limit = field.maxLength ?? MAX_TEXT;
      if (value.length > limit) return { error: `Ensure this value has at most ${limit} characters (it has ${value.length}).`, code: 'max_length' };
      return { value: field.type === 'string' ? value.trim() : value };
    }
    case 'integer': {
      const number = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
      if (typeof number !== 'number' || !Number.isInteger(number)) return { error: 'Enter a whole number.', code: 'invalid' };
      if (Math.abs(number) > 2_147_483_647) return { error: 'Ensure this value is within ±2147483647.', code: 'max_value' };
      return { value: number };
    }
    case 'float':
    case 'decimal': {
      const text = typeof value === 'number' ? String(value) : typeof value === 'string' ? value.trim() : '';
      if (!/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text) || !Number.isFinite(Number(text))) return { error: 'Enter a number.', code: 'invalid' };
      if (Math.abs(Number(text)) >= 1e12) return { error: 'Ensure this number is smaller than 10^12.', code: 'max_value' };
      return { value: field.type === 'float' ? Number(text) : text };
    }
    case 'boolean':
      if (value === true || value === false) return { value };
      if (value === undefined || value === null || value === '') return { value: false };
      if (value === 'true' || value === 'on' || value === '1') return { value: true };
      if (value === 'false' || value === '0') return { value: false };
      return { error: 'Enter true or false.', code: 'invalid' };
    case 'nullboolean':
      if (value === true || value === false || value === null) return { value };
      if (value === 'true' || value === '1') return { value: true };
      if (value === 'false' || value === '0') return { value: false };
      return { error: 'Enter true, false or null.', code: 'invalid' };
    case 'date': {
      const match = typeof value === 'string' ? DATE.exec(value) : null;
      if (!match) return { error: 'Enter a valid date (YYYY-MM-DD).', code: 'invalid' };
      const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
      const date = new Date(Date.UTC(year, month - 1, day));
      if (year < 1 || date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return { error: 'Enter a valid date (YYYY-MM-DD).', code: 'invalid' };
      return { value };
    }
    case 'datetime': {
      if (typeof value !== 'string' || !DATETIME.test(value)) return { error: 'Enter a valid date and time (ISO 8601).', code: 'invalid' };
      // A time without an offset is UTC, as every time the API shows is.
      const withZone = /(Z|[+-]\d{2}:?\d{2})$/.test(value) ? value : `${value}Z`;
      const time = Date.parse(withZone.replace(' ', 'T'));
      if (Number.isNaN(time)) return { error: 'Enter a valid date and time (ISO 8601).', code: 'invalid' };
      const year = new Date(time).getUTCFullYear();
      if (year < 1 || year > 9999) return { error: 'The date must fall within the years 0001-9999.', code: 'invalid' };
      return { value: new Date(time).toISOString() };
    }
    case 'time':
      if (typeof value !== 'string' || !TIME.test(value)) return { error: 'Enter a valid time (HH:MM[:SS]).', code: 'invalid' };
      return { value };
    case 'choice': {
      const choice = typeof value === 'number' ? String(value) : value;
      if (typeof choice !== 'string' || !field.choices!.some((option) => option.value === choice)) {
        const { message, code } = invalidChoice(value);
        return { error: message, code };
      }
      return { value: choice };
    }
    case 'uuid':
      if (typeof value !== 'string' || !UUID.test(value)) return { error: 'Enter a valid UUID.', code: 'invalid' };
      return { value: value.toLowerCase() };
    case 'fk':
      if ((typeof value !== 'string' && typeof value !== 'number') || String(value).length > 200 || !isStorableText(String(value))) {
        return { error: 'Select a valid choice.', code: 'invalid_choice' };
      }
      return { value: String(value) };
    case 'm2m':
      if (!Array.isArray(value) || value.length > 1000 || !value.every((item) => (typeof item === 'string' || typeof item === 'number') && String(item).length <= 200)) {
        return { error: 'Enter a list of values.', code: 'invalid_list' };
      }
      if (field.choices) {
        const allowed = new Set(field.choices.map((choice) => choice.value));
        const unknown = value.map(String).find((item) => !allowed.has(item));
        if (unknown !== undefined) return { error: `Select a valid choice. ${unknown.slice(0, 100)} is not one of the available choices.`, code: 'invalid_choice' };
      }
      return { value: [...new Set(value.map(String))] };
    case 'json':
      if (typeof value === 'string') {
        try {
          value = JSON.parse(value);
        } catch {
          return { error: 'Enter valid JSON.', code: 'invalid' };
        }
      }
      const problem = storableProblem(value);
      if (problem) return { error: `This JSON ${problem.path ? `at ${problem.path} ` : ''}${problem.problem}.`, code: 'invalid' };
      return { value };
    default:
      return { error: 'Upload unsupported.', code: 'upload_unsupported' };
  }
}

/** fk and m2m values must name existing records of the related model: one query per relation field. */
async function checkRelations(site: AdminSite, db: Knex | Knex.Transaction, model: BoundModel, cleaned: Row, errors: FieldErrors): Promise<void> {
  for (const field of model.formFields) {
    if ((field.type !== 'fk' && field.type !== 'm2m') || !field.related || cleaned[field.name] === undefined || cleaned[field.name] === null || errors[field.name]) continue;
    const target = site.models.get(field.related!)!;
    const values = field.type === 'fk' ? [cleaned[field.name] as string] : (cleaned[field.name] as string[]);
    if (!values.length) continue;
    const udt = target.columnTypes.get(target.pk)!.udtName;
    const wellFormed = values.filter((value) => (udt === 'uuid' ? UUID.test(value) : udt.startsWith('int') ? /^\d{1,9}$/.test(value) : true));
    const found = wellFormed.length ? ((await db(target.table).whereIn(target.pk, wellFormed).pluck(target.pk)) as unknown[]).map(String) : [];
    const missing = values.filter((value) => !found.includes(value));
    if (missing.length) {
      error(errors, field.name, `Select a valid choice. ${missing[0]!.slice(0, 100)} is not one of the available choices.`, 'invalid_choice');
    } else if (field.type === 'fk' && udt.startsWith('int')) {
      cleaned[field.name] = Number(values[0]);
    } else if (field.type === 'm2m' && udt.startsWith('int')) {
      cleaned[field.name] = values.map(Number);
    }
  }
}
