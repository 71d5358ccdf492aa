import { Decimal } from 'decimal.js';
import currencyCodes from 'currency-codes';
import countries from 'i18n-iso-countries';
import { isEmailAddress } from '../../validation/email.ts';
import { z } from '../../http/openapi.ts';
import { isIpAddress } from '../../net/ip-ranges.ts';
import { describeProblem, isStorableInstant, STORABLE_LIMITS, storableProblem } from '../../validation/storable.ts';

/**
 * Declarative field tables: one per record type (customer, financial, non-financial), written
 * from the spec's tables. Each table compiles to a zod schema, the validator kind of every other
 * request body, which checks each field (normalizing with warnings) and is the OpenAPI schema of
 * its upsert endpoint; the storage columns come from the same table.
 */
export type FieldType =
  | { kind: 'text'; max?: number }
  | { kind: 'choice'; values: readonly string[] }
  | { kind: 'number_choice'; values: readonly number[] }
  | { kind: 'date' }
  | { kind: 'datetime' }
  | { kind: 'amount'; max: string }
  | { kind: 'non_negative_decimal' }
  | { kind: 'currency' }
  | { kind: 'country_alpha3' }
  | { kind: 'email'; max: number }
  | { kind: 'ip' }
  | { kind: 'boolean' }
  | { kind: 'object' }
  | { kind: 'array' };

export interface FieldSpec {
  name: string;
  type: FieldType;
  required?: boolean;
  default?: unknown;
  description?: string;
}

export type FieldTable = readonly FieldSpec[];

export type ValidatedRecord =
  | { ok: true; values: Record<string, unknown>; extras: Record<string, unknown>; warnings: string[] }
  | { ok: false; error: string };

type FieldOutcome = { value: unknown; warning?: string } | { error: string };

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const ISO_DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/** ISO 4217 codes, looked up in a set (the package's own lookup scans its list). */
const CURRENCIES: ReadonlySet<string> = new Set(currencyCodes.codes());

const choiceSets = new WeakMap<readonly unknown[], ReadonlySet<unknown>>();

/** Enumerations are checked against a set built once per table entry, never with `in` on an object. */
function setOf<T>(values: readonly T[]): ReadonlySet<T> {
  let set = choiceSets.get(values);
  if (!set) choiceSets.set(values, (set = new Set(values)));
  return set as ReadonlySet<T>;
}

function isCalendarDate(year: number, month: number, day: number): boolean {
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0-99 as 1900-1999.
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function quote(value: unknown): string {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return `'${text.length > 40 ? `${text.slice(0, 40)}...` : text}'`;
}

function validateText(name: string, raw: unknown, max: number | undefined): FieldOutcome {
  let value: string;
  let warning: string | undefined;
  if (typeof raw === 'string') value = raw;
  else if (typeof raw === 'number' && Number.isFinite(raw)) {
    value = String(raw);
    warning = `${name}: number converted to text.`;
  } else return { error: `${name}: must be text, got ${describe(raw)}.` };
  const trimmed = value.trim();
  if (trimmed !== value) warning = `${name}: surrounding whitespace trimmed.`;
  if (max !== undefined && trimmed.length > max) return { error: `${name}: longer than ${max} characters.` };
  return { value: trimmed, warning };
}

const PLAIN_AMOUNT = /^0*(\d{1,12})(?:\.(\d{1,2}))?$/;

/**
 * An amount that needs no rounding and no range check beyond the table's maximum: unsigned, at
 * most 12 integer digits and 2 decimals, as the 2-decimal text Decimal would give; null for
 * anything else, which goes through Decimal. Most amounts are this plain, and Decimal was a
 * tenth of a batch's validation. Numbers of at most 14 significant digits compare exactly as
 * doubles, so the maximum check agrees with Decimal's.
 */
function plainAmount(raw: unknown): string | null {
  const text = typeof raw === 'string' ? raw.trim() : typeof raw === 'number' && Number.isFinite(raw) ? String(raw) : null;
  const match = text === null ? null : PLAIN_AMOUNT.exec(text);
  if (!match) return null;
  const decimals = match[2] ?? '';
  return `${match[1]}.${decimals.padEnd(2, '0')}`;
}

function validateField(spec: FieldSpec, raw: unknown): FieldOutcome {
  const { name, type } = spec;
  switch (type.kind) {
    case 'text':
      return validateText(name, raw, type.max);
    case 'email': {
      const text = validateText(name, raw, type.max);
      if ('error' in text) return text;
      const value = text.value as string;
      if (!isEmailAddress(value)) return { value, warning: `${name}: invalid format; kept and flagged.` };
      return text;
    }
    case 'choice': {
      if (typeof raw !== 'string') return { error: `${name}: must be one of ${type.values.join(', ')}.` };
      const value = raw.trim().toLowerCase();
      if (!setOf(type.values).has(value)) return { error: `${name}: ${quote(raw)} is not one of ${type.values.join(', ')}.` };
      return value === raw ? { value } : { value, warning: `${name}: normalized to ${value}.` };
    }
    case 'number_choice': {
      const numeric = typeof raw === 'string' && /^\s*-?\d+\s*$/.test(raw) ? Number(raw) : raw;
      if (typeof numeric !== 'number' || !setOf(type.values).has(numeric)) {
        return { error: `${name}: ${quote(raw)} is not one of ${type.values.join(', ')}.` };
      }
      return numeric === raw ? { value: numeric } : { value: numeric, warning: `${name}: text converted to number.` };
    }
    case 'date': {
      const match = typeof raw === 'string' ? ISO_DATE.exec(raw.trim()) : null;
      if (!match || !isCalendarDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
        return { error: `${name}: ${quote(raw)} is not a date in YYYY-MM-DD form.` };
      }
      if (Number(match[1]) < STORABLE_LIMITS.minYear) return { error: `${name}: ${quote(raw)} falls outside the years 0001-9999.` };
      return { value: match[0] };
    }
    case 'datetime': {
      const match = typeof raw === 'string' ? ISO_DATE_TIME.exec(raw.trim()) : null;
      if (!match || !isCalendarDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
        return { error: `${name}: ${quote(raw)} is not an ISO 8601 date-time.` };
      }
      const [, , , , hour = '00', minute = '00', second = '00', , zone] = match;
      if (Number(hour) > 23 || Number(minute) > 59 || Number(second) > 59) {
        return { error: `${name}: ${quote(raw)} is not an ISO 8601 date-time.` };
      }
      const text = (raw as string).trim().replace(' ', 'T');
      const instant = new Date(zone ? text : `${match[4] ? text : `${text}T00:00:00`}Z`);
      if (Number.isNaN(instant.getTime())) return { error: `${name}: ${quote(raw)} is not an ISO 8601 date-time.` };
      if (!isStorableInstant(instant)) return { error: `${name}: ${quote(raw)} falls outside the years 0001-9999 once its offset is applied.` };
      return { value: instant.toISOString(), warning: zone ? undefined : `${name}: no time zone given; read as UTC.` };
    }
    case 'amount':
    case 'non_negative_decimal': {
      const plain = plainAmount(raw);
      if (plain !== null) {
        if (type.kind === 'amount' && plain === '0.00') return { error: `${name}: must be greater than 0.` };
        if (type.kind === 'amount' && Number(plain) > Number(type.max)) return { error: `${name}: exceeds the maximum of ${type.max}.` };
        return { value: plain };
      }
      let amount: Decimal;
      try {
        if (typeof raw === 'number' ? !Number.isFinite(raw) : typeof raw !== 'string' || !/^\s*-?\d+(\.\d+)?\s*$/.test(raw)) {
          throw new Error();
        }
        amount = new Decimal(typeof raw === 'number' ? String(raw) : (raw as string).trim());
      } catch {
        return { error: `${name}: ${quote(raw)} is not a decimal number.` };
      }
      if (amount.isNegative() && !amount.isZero()) {
        return type.kind === 'amount'
          ? { error: `${name}: negative amounts are not accepted; send the absolute value and give the direction with io_type (0 credit, 1 debit).` }
          : { error: `${name}: must not be negative.` };
      }
      // Zero is checked after rounding: 0.001 would otherwise be stored as 0.00.
      const rounded = amount.toDecimalPlaces(2, Decimal.ROUND_HALF_UP);
      if (type.kind === 'amount' && rounded.isZero()) {
        return { error: amount.isZero() ? `${name}: must be greater than 0.` : `${name}: must be at least 0.01 (${amount.toString()} rounds to 0.00).` };
      }
      if (type.kind === 'amount' && rounded.greaterThan(type.max)) return { error: `${name}: exceeds the maximum of ${type.max}.` };
      if (rounded.greaterThan('999999999999.99')) return { error: `${name}: too large.` };
      const value = rounded.toFixed(2);
      if (!rounded.equals(amount)) return { value, warning: `${name}: rounded to 2 decimal places (${amount.toString()} -> ${value}).` };
      return { value };
    }
    case 'currency': {
      if (typeof raw !== 'string' || !/^[a-z]{3}$/i.test(raw.trim())) return { error: `${name}: ${quote(raw)} is not a 3-letter ISO 4217 currency code.` };
      const value = raw.trim().toUpperCase();
      if (!CURRENCIES.has(value)) return { error: `${name}: ${quote(raw)} is not an ISO 4217 currency code.` };
      return value === raw ? { value } : { value, warning: `${name}: converted to upper case (${raw} -> ${value}).` };
    }
    case 'country_alpha3': {
      if (typeof raw !== 'string' || !/^[a-z]{2,3}$/i.test(raw.trim())) {
        return { error: `${name}: ${quote(raw)} is not an ISO 3166-1 alpha-3 country code.` };
      }
      const upper = raw.trim().toUpperCase();
      if (upper.length === 2) {
        const alpha3 = countries.alpha2ToAlpha3(upper);
        if (!alpha3) return { error: `${name}: ${quote(raw)} is not an ISO 3166-1 alpha-3 country code.` };
        return { value: alpha3, warning: `${name}: alpha-2 code converted to alpha-3 (${raw} -> ${alpha3}).` };
      }
      if (!countries.isValid(upper)) return { error: `${name}: ${quote(raw)} is not an ISO 3166-1 alpha-3 country code.` };
      return upper === raw ? { value: upper } : { value: upper, warning: `${name}: converted to upper case (${raw} -> ${upper}).` };
    }
    case 'ip': {
      if (typeof raw !== 'string' || !isIpAddress(raw.trim())) return { error: `${name}: ${quote(raw)} is not an IPv4 or IPv6 address.` };
      return { value: raw.trim() };
    }
    case 'boolean':
      if (typeof raw !== 'boolean') return { error: `${name}: must be true or false, got ${describe(raw)}.` };
      return { value: raw };
    case 'object':
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { error: `${name}: must be an object, got ${describe(raw)}.` };
      return { value: raw };
    case 'array':
      if (!Array.isArray(raw)) return { error: `${name}: must be an array, got ${describe(raw)}.` };
      return { value: raw };
  }
}

/** The OpenAPI description of one field. */
function propertyOf(spec: FieldSpec): Record<string, unknown> {
  const type = spec.type;
  const property: Record<string, unknown> = {};
  switch (type.kind) {
    case 'text':
      Object.assign(property, { type: 'string' }, type.max ? { maxLength: type.max } : {});
      break;
    case 'email':
      Object.assign(property, { type: 'string', maxLength: type.max, format: 'email' });
      break;
    case 'choice':
      Object.assign(property, { type: 'string', enum: [...type.values] });
      break;
    case 'number_choice':
      Object.assign(property, { type: 'integer', enum: [...type.values] });
      break;
    case 'date':
      Object.assign(property, { type: 'string', format: 'date' });
      break;
    case 'datetime':
      Object.assign(property, { type: 'string', format: 'date-time', description: 'Years 0001-9999 once the offset is applied' });
      break;
    case 'amount':
      Object.assign(property, { type: ['number', 'string'], minimum: 0.01, maximum: Number(type.max), description: 'Rounded half up to 2 decimals; must stay at least 0.01' });
      break;
    case 'non_negative_decimal':
      Object.assign(property, { type: ['number', 'string'], minimum: 0 });
      break;
    case 'currency':
      Object.assign(property, { type: 'string', pattern: '^[A-Za-z]{3}$', description: 'ISO 4217' });
      break;
    case 'country_alpha3':
      Object.assign(property, { type: 'string', pattern: '^[A-Za-z]{2,3}$', description: 'ISO 3166-1 alpha-3 (alpha-2 is converted)' });
      break;
    case 'ip':
      Object.assign(property, { type: 'string', description: 'IPv4 or IPv6' });
      break;
    case 'boolean':
      Object.assign(property, { type: 'boolean' });
      break;
    case 'object':
      Object.assign(property, { type: 'object' });
      break;
    case 'array':
      Object.assign(property, { type: 'array' });
      break;
  }
  if (spec.default !== undefined) property.default = spec.default;
  if (spec.description) property.description = [property.description, spec.description].filter(Boolean).join('. ');
  return property;
}

export interface CompiledTable {
  /**
   * The record's zod schema, the validator kind of every other request body: its transform runs
   * the guard and the table's field checks and yields the ValidatedRecord; its OpenAPI form is
   * the record's schema in the upsert endpoint's document.
   */
  schema: z.ZodType<Extract<ValidatedRecord, { ok: true }>, Record<string, unknown>>;
  validate(input: Record<string, unknown>, shape?: RecordShape): ValidatedRecord;
}

/** What a record's values are copied from (see shapeOf). */
export type RecordShape = Readonly<Record<string, unknown>>;

/**
 * The object a valid record's values start as, copied in one allocation: every field of the
 * table in table order (null until checked, as check sets them all), then `more` as undefined
 * keys, room for the columns a batch adds to the values when it makes them its row (records/batch.ts
 * completeRow), which code reading the values skips like an absent key. Adding forty properties
 * one by one to {}, then the row's fifteen, grew the object's property store a few slots at a
 * time, copying it each time: 3.7 KB a record (scratch heap profile of a customer batch).
 */
export function shapeOf(table: FieldTable, more: readonly string[]): RecordShape {
  const shape: Record<string, unknown> = Object.fromEntries(table.map((spec) => [spec.name, null]));
  for (const name of more) if (!Object.hasOwn(shape, name)) shape[name] = undefined;
  return shape;
}

const compiledTables = new WeakMap<FieldTable, CompiledTable>();
const NOT_A_RECORD = 'A record must be a JSON object.';

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Compiles a field table once: the required fields and the known names are built once per table,
 * not once per record, since this runs for every record of a 1000-record batch. The fields are
 * checked in one zod transform per record rather than one zod schema per field: per-field zod
 * pipes cost about 10 ms more per 1000 records (bench/validation.ts), on the scoring hot path.
 */
export function compileFieldTable(table: FieldTable): CompiledTable {
  const cached = compiledTables.get(table);
  if (cached) return cached;
  const required = table.filter((spec) => spec.required && spec.default === undefined).map((spec) => spec.name);
  const known = new Set(table.map((spec) => spec.name));
  const fieldShape = shapeOf(table, []);

  function check(input: Record<string, unknown>, shape = fieldShape): ValidatedRecord {
    const missing = required.filter((name) => {
      const value = input[name];
      return value === undefined || value === null || (typeof value === 'string' && value.trim() === '');
    });
    if (missing.length) return { ok: false, error: `Missing required field(s): ${missing.join(', ')}.` };

    // Counted before anything walks the record: 400,000 keys must cost a count, not a stall.
    // A record with no more keys than the limit cannot be over it (the usual case: one
    // comparison); past it the extra fields are counted, so the 1,001st extra field is refused
    // however many of the table's own fields the record carries or leaves out.
    const keys = Object.keys(input);
    if (keys.length > STORABLE_LIMITS.maxExtraKeys) {
      let extra = 0;
      for (const key of keys) if (!known.has(key)) extra++;
      if (extra > STORABLE_LIMITS.maxExtraKeys) return { ok: false, error: `The record has ${extra} extra fields; at most ${STORABLE_LIMITS.maxExtraKeys} are stored.` };
    }
    const unstorable = storableProblem(input);
    if (unstorable) return { ok: false, error: describeProblem(unstorable) };

    const values: Record<string, unknown> = { ...shape };
    const warnings: string[] = [];
    for (const spec of table) {
      const raw = input[spec.name];
      if (raw === undefined || raw === null) {
        values[spec.name] = spec.default ?? null;
        continue;
      }
      const outcome = validateField(spec, raw);
      if ('error' in outcome) return { ok: false, error: outcome.error };
      values[spec.name] = outcome.value;
      if (outcome.warning) warnings.push(outcome.warning);
    }
    // fromEntries defines each key as its own property: a "__proto__" key stays data.
    const extras: Record<string, unknown> = keys.every((key) => known.has(key)) ? {} : Object.fromEntries(keys.filter((key) => !known.has(key)).map((key) => [key, input[key]]));
    return { ok: true, values, extras, warnings };
  }

  const schema = z
    .custom<Record<string, unknown>>(isRecord, { message: NOT_A_RECORD })
    .transform((input, ctx) => {
      const record = check(input);
      if (record.ok) return record;
      ctx.addIssue({ code: 'custom', message: record.error });
      return z.NEVER;
    })
    .openapi(fieldTableSchema(table));

  // What the schema does (its guard, then check), without zod's parse machinery around it: this
  // runs for every record of a batch.
  function validate(input: Record<string, unknown>, shape?: RecordShape): ValidatedRecord {
    return isRecord(input) ? check(input, shape) : { ok: false, error: NOT_A_RECORD };
  }

  const compiled: CompiledTable = { schema, validate };
  compiledTables.set(table, compiled);
  return compiled;
}

/** The OpenAPI description of a record of the table. */
function fieldTableSchema(table: FieldTable) {
  return {
    type: 'object' as const,
    properties: Object.fromEntries(table.map((spec) => [spec.name, propertyOf(spec)])),
    required: table.filter((spec) => spec.required).map((spec) => spec.name),
    additionalProperties: true,
    description: `Fields outside this list are stored as extra data (at most ${STORABLE_LIMITS.maxExtraKeys}); no value may hold NUL or broken Unicode or nest deeper than ${STORABLE_LIMITS.maxDepth}.`,
  };
}

/**
 * Validates one record against a field table. Missing required fields are reported together;
 * a value that cannot be stored (NUL, broken Unicode, nesting over 64, over 1,000 extra fields)
 * and the first invalid field skip the record; correctable deviations are normalized with a
 * warning; fields outside the table are returned as extras, without warning.
 */
export function validateRecord(table: FieldTable, input: Record<string, unknown>, shape?: RecordShape): ValidatedRecord {
  return compileFieldTable(table).validate(input, shape);
}
