import type { ModelRegistration } from './registry.ts';

const ACTION_FLAGS = [
  { value: '1', label: 'Addition' },
  { value: '2', label: 'Change' },
  { value: '3', label: 'Deletion' },
];

/** The audit log of every write through the back office: read-only, for everyone. */
export const logEntryAdmin: ModelRegistration = {
  appLabel: 'admin',
  model: 'logentry',
  table: 'admin_log_entries',
  verboseName: 'log entry',
  verboseNamePlural: 'log entries',
  repr: (row) => `${ACTION_FLAGS.find((flag) => flag.value === String(row.action_flag))?.label ?? 'Change'} of ${row.content_type} "${row.object_repr}"`,
  reprColumns: ['action_flag', 'content_type', 'object_repr'],
  // Sorted by time only (its index); user, model and object are found by the search (prefix
  // indexes of 0026, which cannot order a list), the action by its filter.
  columns: [
    { name: 'action_time', label: 'Time' },
    { name: 'actor', label: 'User', sortable: false },
    { name: 'action_flag', label: 'Action', kind: 'badge', tone: (value) => (Number(value) === 3 ? 'danger' : Number(value) === 1 ? 'success' : 'info'), sortable: false },
    { name: 'content_type', label: 'Model', sortable: false },
    { name: 'object_repr', label: 'Object', sortable: false },
  ],
  titleColumn: 'object_repr',
  statusColumn: 'action_flag',
  dateColumn: 'action_time',
  filters: [{ type: 'choice', field: 'action_flag', title: 'Action' }, { type: 'range', field: 'action_time', title: 'Time' }],
  // Every term through an index (0026): a contains-search of the object's name would read every row.
  searchFields: ['^content_type', '^object_repr', '=object_id', '^actor'],
  ordering: ['-action_time'],
  fields: {
    action_flag: { choices: ACTION_FLAGS },
    user_id: { related: 'auth.user', label: 'User' },
    object_id: { label: 'Object', relatedModelOf: (row) => String(row.content_type) },
  },
  form: ['action_time', 'user_id', 'actor', 'action_flag', 'content_type', 'object_id', 'object_repr', 'change', 'approval_request_id'],
  readonly: ['action_time', 'user_id', 'actor', 'action_flag', 'content_type', 'object_id', 'object_repr', 'change', 'approval_request_id'],
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Administration', icon: 'receipt_long' },
};
