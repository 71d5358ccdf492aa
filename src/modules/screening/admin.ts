import type { ModelRegistration } from '../backoffice/registry.ts';

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
  filters: [{ type: 'choice', field: 'source', choices: [{ value: 'ofac', label: 'OFAC' }, { value: 'un', label: 'UN' }, { value: 'opensanctions', label: 'OpenSanctions' }] }],
  searchFields: ['name', '=source_id'],
  ordering: ['name'],
  form: ['source', 'source_id', 'schema', 'name', 'aliases', 'birth_dates', 'nationalities', 'topics', 'programs', 'remarks', 'imported_at'],
  readonly: ['source', 'source_id', 'schema', 'name', 'aliases', 'birth_dates', 'nationalities', 'topics', 'programs', 'remarks', 'imported_at'],
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Screening', icon: 'policy' },
};
