import { choices } from '../backoffice/declare.ts';
import type { ModelRegistration, Tone } from '../backoffice/registry.ts';
import { applyReviewToCustomer, currentFingerprint, HIT_STATUSES, type HitRow } from './hits.ts';

const SOURCE_CHOICES = [
  { value: 'ofac', label: 'OFAC' },
  { value: 'un', label: 'UN' },
  { value: 'opensanctions', label: 'OpenSanctions' },
];

/** Sanction list entries come from the importers; staff read them, nobody edits them by hand. */
export const sanctionEntryAdmin: ModelRegistration = {
  appLabel: 'screening',
  model: 'sanctionentry',
  table: 'sanction_entries',
  verboseName: 'sanction entry',
  verboseNamePlural: 'sanction entries',
  repr: (row) => String(row.name),
  reprColumns: ['name'],
  columns: [{ name: 'name' }, { name: 'source' }, { name: 'schema', label: 'Type' }, { name: 'source_id', label: 'Source id' }, { name: 'imported_at', label: 'Imported' }],
  titleColumn: 'name',
  dateColumn: 'imported_at',
  filters: [{ type: 'choice', field: 'source', choices: SOURCE_CHOICES }],
  searchFields: ['name', '=source_id'],
  ordering: ['name'],
  form: ['source', 'source_id', 'schema', 'name', 'aliases', 'birth_dates', 'nationalities', 'topics', 'programs', 'remarks', 'imported_at'],
  readonly: ['source', 'source_id', 'schema', 'name', 'aliases', 'birth_dates', 'nationalities', 'topics', 'programs', 'remarks', 'imported_at'],
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Screening', icon: 'policy' },
};

export const HIT_STATUS_CHOICES = choices(HIT_STATUSES, { false_positive: 'False positive' });
export const AGREEMENT_CHOICES = choices(['match', 'mismatch', 'unknown'], { match: 'Agrees', mismatch: 'Disagrees', unknown: 'Unknown' });

export function hitStatusTone(value: unknown): Tone | null {
  return value === 'open' ? 'warning' : value === 'confirmed' ? 'danger' : value === 'false_positive' ? 'neutral' : null;
}

export function agreementTone(value: unknown): Tone | null {
  return value === 'match' ? 'danger' : value === 'mismatch' ? 'success' : null;
}

/**
 * A sanctions or PEP list match of one customer, written by screening (screening/hits.ts); an
 * officer reviews it by its status alone, with a rationale. A false positive stops the entry from
 * counting on the customer until the entry or the customer's name, birth date or nationality
 * change; its customer's sanction_score and sanction_topic follow at once. Every change goes
 * through the write chain, so an approval policy on 'change' makes it a request.
 */
export const screeningHitAdmin: ModelRegistration = {
  appLabel: 'screening',
  model: 'screeninghit',
  table: 'screening_hits',
  verboseName: 'screening hit',
  repr: (row) => `${row.entry_name} (${row.source} ${row.source_id})`,
  reprColumns: ['entry_name', 'source', 'source_id'],
  columns: [
    { name: 'customer_id__customer_ref', label: 'Customer' },
    { name: 'entry_name', label: 'List entry' },
    { name: 'source', label: 'List' },
    { name: 'matched_name', label: 'Matched name' },
    { name: 'similarity', kind: 'number' },
    { name: 'birth_date_agreement', label: 'Birth date', tone: agreementTone },
    { name: 'nationality_agreement', label: 'Nationality', tone: agreementTone },
    { name: 'status', tone: hitStatusTone },
    { name: 'first_seen_at', label: 'First seen' },
  ],
  titleColumn: 'entry_name',
  statusColumn: 'status',
  dateColumn: 'first_seen_at',
  filters: [
    { type: 'choice', field: 'status' },
    { type: 'choice', field: 'source', title: 'List' },
    { type: 'choice', field: 'birth_date_agreement', title: 'Birth date' },
    { type: 'choice', field: 'nationality_agreement', title: 'Nationality' },
    { type: 'range', field: 'similarity' },
    { type: 'range', field: 'first_seen_at', title: 'First seen' },
  ],
  searchFields: ['entry_name', 'matched_name', '=source_id'],
  ordering: ['-first_seen_at'],
  fields: {
    customer_id: { related: 'customer.customer', label: 'Customer' },
    entry_id: { related: 'screening.sanctionentry', label: 'List entry' },
    source: { choices: SOURCE_CHOICES, label: 'List' },
    source_id: { label: 'Entry id on the list' },
    entry_name: { label: 'Entry name' },
    matched_name: { label: 'Matched name or alias' },
    similarity: { help: 'The match score, 0-100: name similarity with birth date and nationality taken into account.' },
    birth_date_agreement: { choices: AGREEMENT_CHOICES, label: 'Birth date' },
    nationality_agreement: { choices: AGREEMENT_CHOICES, label: 'Nationality' },
    features: { label: 'Match details' },
    status: { choices: HIT_STATUS_CHOICES },
    rationale: { virtual: true, type: 'text', required: false, help: 'Required when the status changes: why the match is confirmed, a false positive, or open again.' },
    review_rationale: { label: 'Rationale of the last review' },
    // Who reviewed reads as their username (their id is kept beside it): an officer may not view staff users.
    reviewed_by: { label: 'Reviewed by' },
    first_seen_at: { label: 'First seen' },
    last_seen_at: { label: 'Last seen' },
    fingerprint: { hidden: true },
  },
  form: [
    'customer_id', 'status', 'rationale', 'source', 'source_id', 'entry_id', 'entry_name', 'matched_name', 'similarity', 'birth_date_agreement',
    'nationality_agreement', 'topics', 'features', 'review_rationale', 'reviewed_by', 'reviewed_at', 'first_seen_at', 'last_seen_at',
  ],
  fieldsets: [
    { title: null, fields: ['customer_id', 'status', 'rationale'] },
    { title: 'Match', fields: ['source', 'source_id', 'entry_id', 'entry_name', 'matched_name', 'similarity', 'birth_date_agreement', 'nationality_agreement', 'topics', 'features'] },
    { title: 'Review', fields: ['review_rationale', 'reviewed_by', 'reviewed_at', 'first_seen_at', 'last_seen_at'] },
  ],
  readonly: [
    'customer_id', 'source', 'source_id', 'entry_id', 'entry_name', 'matched_name', 'similarity', 'birth_date_agreement', 'nationality_agreement',
    'topics', 'features', 'review_rationale', 'reviewed_by', 'reviewed_at', 'first_seen_at', 'last_seen_at',
  ],
  disabled: { add: true, delete: true },
  hooks: {
    clean(cleaned, before) {
      if (!before || cleaned.status === undefined || cleaned.status === null || cleaned.status === before.status) return undefined;
      if (!String(cleaned.rationale ?? '').trim()) return { rationale: [{ message: 'A rationale is required to change the status.', code: 'required' }] };
      return undefined;
    },
    async beforeSave({ trx, values, before, cleaned, principal }) {
      if (!before || values.status === undefined || values.status === before.status) return;
      // Who reviewed, when and why; a false positive keeps what it was judged on (at the moment it applies, after any approval).
      values.review_rationale = String(cleaned.rationale).trim();
      values.reviewed_by_id = principal.user.id;
      values.reviewed_by = principal.user.username;
      values.reviewed_at = new Date();
      values.fingerprint = values.status === 'false_positive' ? await currentFingerprint(trx, before as unknown as HitRow) : null;
    },
    async afterSave({ trx, before, row, principal }) {
      if (!before || before.status === row.status) return;
      if (before.status === 'false_positive' || row.status === 'false_positive') await applyReviewToCustomer(trx, row as unknown as HitRow, principal);
    },
  },
  menu: { group: 'Screening', icon: 'person_search' },
};
