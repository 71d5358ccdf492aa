import { DECISION_CHOICES, decisionTone } from '../backoffice/declare.ts';
import type { ModelRegistration } from '../backoffice/registry.ts';

const CHANNEL_CHOICES = [
  { value: '0', label: 'Unknown' },
  { value: '1', label: 'Web' },
  { value: '2', label: 'Mobile' },
  { value: '3', label: 'API' },
  { value: '4', label: 'Branch' },
];

/** What staff may correct on a scored record: its status and description; scores change by decision only. */
const SHARED = {
  disabled: { add: true, delete: true } as const,
  readonlyScored: ['transaction_ref', 'customer_id', 'event_slug', 'event_date', 'score', 'decision', 'rule_check', 'created_at', 'updated_at'],
};

export const financialEventAdmin: ModelRegistration = {
  appLabel: 'transaction',
  model: 'financialevent',
  table: 'financial_transactions',
  verboseName: 'financial event',
  repr: (row) => String(row.transaction_ref),
  reprColumns: ['transaction_ref'],
  // Sortable where an index serves the order over a million rows (migration 0026, issue 37): the
  // reference (its unique index), amount, score and date. The others are few-valued (event, currency,
  // direction, decision: sorting by them is filtering) or have no ordered index (customer: its
  // search index is a lower-case prefix one); an index each would tax every ingested event.
  columns: [
    { name: 'transaction_ref', label: 'Reference' },
    { name: 'customer_ref', label: 'Customer', sortable: false },
    { name: 'event_slug', label: 'Event', sortable: false },
    { name: 'amount', kind: 'number' },
    { name: 'currency', sortable: false },
    { name: 'io_type', label: 'Direction', kind: 'text', sortable: false },
    { name: 'score', kind: 'number' },
    { name: 'decision', tone: decisionTone, sortable: false },
    { name: 'event_date', label: 'Date' },
  ],
  titleColumn: 'transaction_ref',
  statusColumn: 'decision',
  dateColumn: 'event_date',
  // Each filter has an index led by its column (0026), for its count and for a rare value's page.
  // Direction is not offered: two values of about half the rows each, so an index of its own (a
  // million entries, written by every ingested event) would serve little the date index does not.
  filters: [
    { type: 'choice', field: 'decision' },
    { type: 'range', field: 'score' },
    { type: 'range', field: 'amount' },
    { type: 'range', field: 'event_date', title: 'Date' },
  ],
  searchFields: ['=transaction_ref', '^customer_ref'],
  ordering: ['-event_date'],
  fields: {
    customer_id: { related: 'customer.customer', label: 'Customer' },
    event_slug: { related: 'engine.event', label: 'Event' },
    decision: { choices: DECISION_CHOICES },
    io_type: { label: 'Direction', choices: [{ value: '0', label: 'Incoming' }, { value: '1', label: 'Outgoing' }] },
    channel: { choices: CHANNEL_CHOICES },
  },
  form: ['transaction_ref', 'customer_id', 'event_slug', 'amount', 'currency', 'io_type', 'event_date', 'payment_method', 'status', 'event_description',
    'score', 'decision', 'rule_check', 'created_at', 'updated_at'],
  fieldsets: [
    { title: null, fields: ['transaction_ref', 'customer_id', 'event_slug', 'amount', 'currency', 'io_type', 'event_date', 'payment_method'] },
    { title: 'Review', fields: ['status', 'event_description'] },
    { title: 'Scoring', fields: ['score', 'decision', 'rule_check'] },
    { title: 'History', fields: ['created_at', 'updated_at'], classes: ['collapse'] },
  ],
  readonly: [...SHARED.readonlyScored, 'amount', 'currency', 'io_type', 'payment_method'],
  inlines: [
    { model: 'engine.executionlog', fk: 'record_id', where: { target: 'financial' }, label: 'Execution history', ordering: '-created_at' },
    { model: 'engine.compliancedecision', fk: 'target_id', label: 'Compliance decisions', ordering: '-created_at' },
  ],
  disabled: SHARED.disabled,
  menu: { group: 'Monitoring', icon: 'payments' },
};

/** The source and destination of a non-financial record, as the integration reported them. */
const COUNTERPARTY = ['source_provider', 'source_ref', 'source_address', 'destination_provider', 'destination_ref', 'destination_address'] as const;

export const nonFinancialEventAdmin: ModelRegistration = {
  appLabel: 'transaction',
  model: 'nonfinancialevent',
  table: 'non_financial_events',
  verboseName: 'non-financial event',
  repr: (row) => String(row.transaction_ref ?? row.id),
  reprColumns: ['transaction_ref', 'id'],
  // Sortable by score and date (indexes of 0026 and 0012). The reference may be null here and its
  // unique index orders nulls last, not as lists sort them; event and decision are few-valued.
  columns: [
    { name: 'transaction_ref', label: 'Reference', sortable: false },
    { name: 'customer_ref', label: 'Customer', sortable: false },
    { name: 'event_slug', label: 'Event', sortable: false },
    { name: 'score', kind: 'number' },
    { name: 'decision', tone: decisionTone, sortable: false },
    { name: 'event_date', label: 'Date' },
  ],
  titleColumn: 'transaction_ref',
  statusColumn: 'decision',
  dateColumn: 'event_date',
  filters: [
    { type: 'choice', field: 'decision' },
    { type: 'range', field: 'score' },
    { type: 'range', field: 'event_date', title: 'Date' },
  ],
  searchFields: ['=transaction_ref', '^customer_ref'],
  ordering: ['-event_date'],
  fields: {
    customer_id: { related: 'customer.customer', label: 'Customer' },
    event_slug: { related: 'engine.event', label: 'Event' },
    decision: { choices: DECISION_CHOICES },
    channel: { choices: CHANNEL_CHOICES },
  },
  form: ['transaction_ref', 'customer_id', 'event_slug', 'event_date', 'payment_method', ...COUNTERPARTY, 'status', 'event_description', 'score', 'decision', 'rule_check', 'created_at', 'updated_at'],
  fieldsets: [
    { title: null, fields: ['transaction_ref', 'customer_id', 'event_slug', 'event_date', 'payment_method'] },
    { title: 'Counterparty', fields: [...COUNTERPARTY] },
    { title: 'Review', fields: ['status', 'event_description'] },
    { title: 'Scoring', fields: ['score', 'decision', 'rule_check'] },
    { title: 'History', fields: ['created_at', 'updated_at'], classes: ['collapse'] },
  ],
  // As reported by the merchant: the payment method and the counterparties are not edited here.
  readonly: [...SHARED.readonlyScored, 'payment_method', ...COUNTERPARTY],
  inlines: [
    { model: 'engine.executionlog', fk: 'record_id', where: { target: 'non_financial' }, label: 'Execution history', ordering: '-created_at' },
    { model: 'engine.compliancedecision', fk: 'target_id', label: 'Compliance decisions', ordering: '-created_at' },
  ],
  disabled: SHARED.disabled,
  menu: { group: 'Monitoring', icon: 'event' },
};
