import { Decimal } from 'decimal.js';
import currencyCodes from 'currency-codes';
import countries from 'i18n-iso-countries';
import validator from 'validator';
import { isIpAddress } from '../../net/ip-ranges.ts';

/**
 * Declarative field tables: one per record type (customer, financial, non-financial), written
 * from the spec's tables. The same table drives validation, normalization with warnings, the
 * storage columns, and the OpenAPI schema.
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

function isCalendarDate(year: number, month: number, day: number): boolean {
  const date = new Date(Date.UTC(year, month - 1, day));
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

function validateField(spec: FieldSpec, raw: unknown): FieldOutcome {
  const { name, type } = spec;
  switch (type.kind) {
    case 'text':
      return validateText(name, raw, type.max);
    case 'email': {
      const text = validateText(name, raw, type.max);
      if ('error' in text) return text;
      const value = text.value as string;
      if (!validator.isEmail(value)) return { value, warning: `${name}: invalid format; kept and flagged.` };
      return text;
    }
    case 'choice': {
      if (typeof raw !== 'string') return { error: `${name}: must be one of ${type.values.join(', ')}.` };
      const value = raw.trim().toLowerCase();
      if (!type.values.includes(value)) return { error: `${name}: ${quote(raw)} is not one of ${type.values.join(', ')}.` };
      return value === raw ? { value } : { value, warning: `${name}: normalized to ${value}.` };
    }
    case 'number_choice': {
      const numeric = typeof raw === 'string' && /^\s*-?\d+\s*$/.test(raw) ? Number(raw) : raw;
      if (typeof numeric !== 'number' || !type.values.includes(numeric)) {
        return { error: `${name}: ${quote(raw)} is not one of ${type.values.join(', ')}.` };
      }
      return numeric === raw ? { value: numeric } : { value: numeric, warning: `${name}: text converted to number.` };
    }
    case 'date': {
      const match = typeof raw === 'string' ? ISO_DATE.exec(raw.trim()) : null;
      if (!match || !isCalendarDate(Number(match[1]), Number(match[2]), Number(match[3]))) {
        return { error: `${name}: ${quote(raw)} is not a date in YYYY-MM-DD form.` };
      }
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
      return { value: instant.toISOString(), warning: zone ? undefined : `${name}: no time zone given; read as UTC.` };
    }
    case 'amount':
    case 'non_negative_decimal': {
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
      if (type.kind === 'amount' && amount.isZero()) return { error: `${name}: must be greater than 0.` };
      const rounded = amount.toDecimalPlaces(2, Decimal.ROUND_HALF_UP);
      if (type.kind === 'amount' && rounded.greaterThan(type.max)) return { error: `${name}: exceeds the maximum of ${type.max}.` };
      if (rounded.greaterThan('999999999999.99')) return { error: `${name}: too large.` };
      const value = rounded.toFixed(2);
      if (!rounded.equals(amount)) return { value, warning: `${name}: rounded to 2 decimal places (${amount.toString()} -> ${value}).` };
      return { value };
    }
    case 'currency': {
      if (typeof raw !== 'string' || !/^[a-z]{3}$/i.test(raw.trim())) return { error: `${name}: ${quote(raw)} is not a 3-letter ISO 4217 currency code.` };
      const value = raw.trim().toUpperCase();
      if (!currencyCodes.code(value)) return { error: `${name}: ${quote(raw)} is not an ISO 4217 currency code.` };
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

/**
 * Validates one record against a field table. Missing required fields are reported together;
 * the first invalid field skips the record; correctable deviations are normalized with a
 * warning; fields outside the table are returned as extras, without warning.
 */
export function validateRecord(table: FieldTable, input: Record<string, unknown>): ValidatedRecord {
  const missing = table
    .filter((spec) => spec.required && spec.default === undefined)
    .filter((spec) => {
      const value = input[spec.name];
      return value === undefined || value === null || (typeof value === 'string' && value.trim() === '');
    })
    .map((spec) => spec.name);
  if (missing.length) return { ok: false, error: `Missing required field(s): ${missing.join(', ')}.` };

  const values: Record<string, unknown> = {};
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
  const known = new Set(table.map((spec) => spec.name));
  const extras: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) if (!known.has(key)) extras[key] = value;
  return { ok: true, values, extras, warnings };
}

/** JSON-schema-style description of a field table, for the OpenAPI document. */
export function fieldTableSchema(table: FieldTable): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const spec of table) {
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
        Object.assign(property, { type: 'string', enum: type.values });
        break;
      case 'number_choice':
        Object.assign(property, { type: 'integer', enum: type.values });
        break;
      case 'date':
        Object.assign(property, { type: 'string', format: 'date' });
        break;
      case 'datetime':
        Object.assign(property, { type: 'string', format: 'date-time' });
        break;
      case 'amount':
        Object.assign(property, { type: ['number', 'string'], exclusiveMinimum: 0, maximum: Number(type.max) });
        break;
      case 'non_negative_decimal':
        Object.assign(property, { type: ['number', 'string'], minimum: 0 });
        break;
      case 'currency':
        Object.assign(property, { type: 'string', pattern: '^[A-Za-z]{3}$', description: 'ISO 4217' });
        break;
      case 'country_alpha3':
        Object.assign(property, { type: 'string', pattern: '^[A-Za-z]{3}$', description: 'ISO 3166-1 alpha-3' });
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
    properties[spec.name] = property;
  }
  return {
    type: 'object',
    properties,
    required: table.filter((spec) => spec.required).map((spec) => spec.name),
    additionalProperties: true,
  };
}
