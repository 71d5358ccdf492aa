import { DECISION_CHOICES, decisionTone } from '../backoffice/declare.ts';
import type { ModelRegistration, Row } from '../backoffice/registry.ts';

function customerName(row: Row): string {
  const person = [row.first_name, row.last_name].filter(Boolean).join(' ');
  return (row.company_name as string) || person || (row.customer_ref as string);
}

/**
 * Customers come from merchants through the integration API and are scored there; staff may correct
 * descriptive fields but not add, delete or rescore them (a decision does that, on the record).
 */
export const customerAdmin: ModelRegistration = {
  appLabel: 'customer',
  model: 'customer',
  table: 'customers',
  verboseName: 'customer',
  repr: customerName,
  reprColumns: ['customer_ref', 'first_name', 'last_name', 'company_name'],
  // Sortable where an index serves the order (0026): reference, scores, creation. Names are found by
  // the search's prefix indexes (lower case), which cannot order a list; an ordered index per name
  // column besides them would tax every customer upsert. Nationality and decision are few-valued.
  columns: [
    { name: 'customer_ref', label: 'Reference' },
    { name: 'first_name', sortable: false },
    { name: 'last_name', sortable: false },
    { name: 'company_name', label: 'Company', sortable: false },
    { name: 'nationality', sortable: false },
    { name: 'score', kind: 'number' },
    { name: 'decision', tone: decisionTone, sortable: false },
    { name: 'sanction_score', kind: 'number' },
    { name: 'created_at', label: 'Created' },
  ],
  titleColumn: 'customer_ref',
  statusColumn: 'decision',
  dateColumn: 'created_at',
  filters: [
    { type: 'choice', field: 'decision' },
    { type: 'choice', field: 'customer_type', title: 'Type' },
    { type: 'range', field: 'score' },
    { type: 'range', field: 'sanction_score' },
    { type: 'range', field: 'created_at', title: 'Created' },
  ],
  searchFields: ['^customer_ref', '^last_name', '^email', '^company_name'],
  ordering: ['-created_at'],
  fields: {
    customer_type: { choices: [{ value: '1', label: 'Individual' }, { value: '2', label: 'Company' }] },
    decision: { choices: DECISION_CHOICES },
    raw: { label: 'Record as sent' },
    ip_address_score: { label: 'IP address score' },
    email_risk_score: { label: 'Email risk score' },
  },
  form: [
    'customer_ref', 'customer_type', 'first_name', 'last_name', 'company_name', 'birth_date', 'nationality', 'email', 'phone', 'country',
    'occupation', 'status', 'score', 'decision', 'sanction_score', 'sanction_topic', 'ip_address_score', 'email_risk_score', 'created_at', 'updated_at',
  ],
  fieldsets: [
    { title: null, fields: ['customer_ref', 'customer_type', 'first_name', 'last_name', 'company_name', 'birth_date', 'nationality'] },
    { title: 'Contact', fields: ['email', 'phone', 'country', 'occupation', 'status'] },
    { title: 'Risk', fields: ['score', 'decision', 'sanction_score', 'sanction_topic', 'ip_address_score', 'email_risk_score'] },
    { title: 'History', fields: ['created_at', 'updated_at'], classes: ['collapse'] },
  ],
  readonly: ['customer_ref', 'customer_type', 'score', 'decision', 'sanction_score', 'sanction_topic', 'ip_address_score', 'email_risk_score', 'created_at', 'updated_at'],
  inlines: [
    { model: 'transaction.financialevent', fk: 'customer_id', label: 'Financial events', ordering: '-event_date' },
    { model: 'engine.alert', fk: 'customer_id', ordering: '-created_at' },
    { model: 'engine.watchlist', fk: 'customer_id', label: 'Cases', ordering: '-opened_at' },
  ],
  disabled: { add: true, delete: true },
  menu: { group: 'Monitoring', icon: 'people' },
};
