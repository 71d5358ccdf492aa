import { choices } from '../backoffice/declare.ts';
import type { ModelRegistration } from '../backoffice/registry.ts';
import { NOTIFICATION_KINDS } from './service.ts';

/** In-app notifications: everyone sees only their own; marking read is the only change. */
export const notificationAdmin: ModelRegistration = {
  appLabel: 'notification',
  model: 'notification',
  table: 'notifications',
  verboseName: 'notification',
  repr: (row) => String(row.title),
  reprColumns: ['title'],
  columns: [{ name: 'title' }, { name: 'kind' }, { name: 'read', kind: 'bool' }, { name: 'created_at', label: 'Received' }],
  titleColumn: 'title',
  dateColumn: 'created_at',
  filters: [{ type: 'choice', field: 'read' }, { type: 'choice', field: 'kind' }],
  ordering: ['-created_at'],
  fields: {
    kind: { choices: choices(Object.keys(NOTIFICATION_KINDS)) },
    user_id: { related: 'auth.user', label: 'User' },
    target_pk: { label: 'Target', relatedModelOf: (row) => (row.target_model as string | null) ?? null },
  },
  form: ['kind', 'title', 'body', 'target_model', 'target_pk', 'read', 'created_at'],
  readonly: ['kind', 'title', 'body', 'target_model', 'target_pk', 'created_at'],
  scope(query, principal, alias) {
    query.where(`${alias}.user_id`, principal.user.id);
  },
  disabled: { add: true },
  menu: { group: 'Administration', icon: 'notifications' },
};
