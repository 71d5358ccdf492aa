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
  columns: [
    { name: 'action_time', label: 'Time' },
    { name: 'actor', label: 'User' },
    { name: 'action_flag', label: 'Action', kind: 'badge', tone: (value) => (Number(value) === 3 ? 'danger' : Number(value) === 1 ? 'success' : 'info') },
    { name: 'content_type', label: 'Model' },
    { name: 'object_repr', label: 'Object' },
  ],
  titleColumn: 'object_repr',
  statusColumn: 'action_flag',
  dateColumn: 'action_time',
  filters: [{ type: 'choice', field: 'action_flag', title: 'Action' }, { type: 'range', field: 'action_time', title: 'Time' }],
  searchFields: ['^content_type', 'object_repr', '=object_id', '^actor'],
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
