import type { FieldSpec, FieldTable } from '../records/fields.ts';

const text = (max?: number) => ({ kind: 'text', max }) as const;

/** Fields the financial and non-financial tables share (the spec's "as in the financial transaction"). */
const sharedFields: FieldSpec[] = [
  { name: 'status', type: text(16), default: 'initiated' },
  { name: 'event_description', type: text(128) },
  { name: 'session_id', type: text(128), description: "End user's session id" },
  { name: 'device_id', type: text(128), description: 'Device fingerprint' },
  { name: 'ip_address', type: { kind: 'ip' } },
  { name: 'channel', type: { kind: 'number_choice', values: [0, 1, 2, 3, 4] }, default: 0 },
  { name: 'user_agent', type: text() },
  { name: 'geo', type: { kind: 'object' } },
  { name: 'metadata', type: { kind: 'object' } },
];

/** The payment method and the counterparties: both tables store and validate them alike. */
const paymentMethod: FieldSpec = { name: 'payment_method', type: text(16) };
const counterpartyFields: FieldSpec[] = [
  { name: 'source_provider', type: text(64) },
  { name: 'source_ref', type: text(64) },
  { name: 'source_address', type: text(64) },
  { name: 'destination_provider', type: text(64) },
  { name: 'destination_ref', type: text(64) },
  { name: 'destination_address', type: text(64) },
];

export const financialFields: FieldTable = [
  { name: 'customer_ref', type: text(48), required: true },
  { name: 'event_slug', type: text(64), required: true, description: 'An active event of type 1 (Financial)' },
  { name: 'amount', type: { kind: 'amount', max: '9999999999.99' }, required: true, description: 'Rounded to 2 decimals; direction comes from io_type' },
  { name: 'currency', type: { kind: 'currency' }, required: true },
  { name: 'transaction_ref', type: text(64), required: true, description: 'Deduplication key' },
  { name: 'io_type', type: { kind: 'number_choice', values: [0, 1] }, required: true, description: '0 Credit, 1 Debit' },
  { name: 'event_date', type: { kind: 'datetime' }, required: true },
  paymentMethod,
  { name: 'fee_amount', type: { kind: 'non_negative_decimal' } },
  { name: 'fee_currency', type: { kind: 'currency' } },
  ...counterpartyFields,
  ...sharedFields,
];

/**
 * Amount, currency, io_type and the fee are not part of this table: sent anyway, they land in raw
 * only. The payment method and the source and destination fields are stored as on the financial
 * table (migration 20261128_0025).
 */
export const nonFinancialFields: FieldTable = [
  { name: 'customer_ref', type: text(48), required: true },
  { name: 'event_slug', type: text(64), required: true, description: 'An active event of type 0 (Onboarding) or 2 (Non-financial)' },
  { name: 'event_date', type: { kind: 'datetime' }, required: true },
  { name: 'transaction_ref', type: text(64), description: 'Optional; without it the record cannot be deduplicated' },
  paymentMethod,
  ...counterpartyFields,
  ...sharedFields,
];
