import type { FieldTable } from '../records/fields.ts';

const text = (max?: number) => ({ kind: 'text', max }) as const;

/** The spec's customer table, then the corporate fields (validated and stored for any customer_type). */
export const customerFields: FieldTable = [
  { name: 'customer_ref', type: text(48), required: true, description: "Caller's unique customer identifier" },
  { name: 'customer_type', type: { kind: 'number_choice', values: [1, 2] }, default: 1, description: '1 Individual, 2 Corporate' },
  { name: 'first_name', type: text(100) },
  { name: 'last_name', type: text(100) },
  { name: 'gender', type: { kind: 'choice', values: ['male', 'female', 'other', 'unknown'] } },
  { name: 'birth_date', type: { kind: 'date' } },
  { name: 'identity_number', type: text(100) },
  { name: 'passport_number', type: text(100) },
  { name: 'passport_issuing_country', type: { kind: 'country_alpha3' } },
  { name: 'nationality', type: { kind: 'country_alpha3' } },
  { name: 'email', type: { kind: 'email', max: 254 }, description: 'Invalid format is kept and flagged' },
  { name: 'phone', type: text(100) },
  { name: 'country', type: text(100) },
  { name: 'occupation', type: text(100) },
  { name: 'ip_address', type: { kind: 'ip' } },
  { name: 'status', type: text(24) },
  { name: 'registration_date', type: { kind: 'datetime' } },
  { name: 'email_verified_at', type: { kind: 'datetime' } },
  { name: 'phone_verified_at', type: { kind: 'datetime' } },
  { name: 'migration', type: { kind: 'boolean' }, default: false, description: 'Historical migration: skips sanctions, IP and email scoring' },
  { name: 'company_name', type: text(255) },
  { name: 'legal_form', type: text(50) },
  { name: 'tax_number', type: text(100) },
  { name: 'tax_office', type: text(100) },
  { name: 'sector', type: text(150) },
  { name: 'incorporation_date', type: { kind: 'date' } },
  { name: 'country_of_origin', type: { kind: 'country_alpha3' } },
  { name: 'registry_number', type: text(100) },
  { name: 'lei_code', type: text(20) },
  { name: 'stock_ticker_symbol', type: text(20) },
  { name: 'website', type: text(255) },
  { name: 'founders', type: { kind: 'array' } },
];
