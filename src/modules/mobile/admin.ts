import { choices } from '../backoffice/declare.ts';
import type { ModelRegistration } from '../backoffice/registry.ts';
import { revokeDevice } from './devices.ts';

/**
 * Paired phones. Everyone with view permission sees their own devices; seeing and revoking other
 * people's needs change permission. Revoking is the only write (a bulk action): the device's refresh
 * token dies at once, its access token at the next request, its live sockets close.
 */
export const deviceAdmin: ModelRegistration = {
  appLabel: 'mobile',
  model: 'device',
  table: 'mobile_devices',
  verboseName: 'device',
  repr: (row) => `${row.name} (${row.platform})`,
  reprColumns: ['name', 'platform'],
  columns: [
    { name: 'name' },
    { name: 'user_id__username', label: 'User' },
    { name: 'platform' },
    { name: 'app_version', label: 'App version' },
    { name: 'last_seen_at', label: 'Last seen' },
    { name: 'revoked_at', label: 'Revoked' },
  ],
  titleColumn: 'name',
  dateColumn: 'last_seen_at',
  filters: [{ type: 'isnull', field: 'revoked_at', title: 'Revoked' }, { type: 'choice', field: 'platform' }],
  searchFields: ['name'],
  ordering: ['-created_at'],
  fields: {
    user_id: { related: 'auth.user', label: 'User' },
    platform: { choices: choices(['ios', 'android', 'other'], { ios: 'iOS', android: 'Android', other: 'Other' }) },
    push_token: { hidden: true },
    user_id__full_name: { label: 'Full name' },
  },
  form: ['user_id', 'name', 'platform', 'app_version', 'created_at', 'last_seen_at', 'revoked_at', 'revoked_reason', 'push_provider', 'push_enabled'],
  fieldsets: [
    { title: null, fields: ['user_id', 'user_id__full_name', 'name', 'platform', 'app_version'] },
    { title: 'Activity', fields: ['created_at', 'last_seen_at', 'revoked_at', 'revoked_reason'] },
    { title: 'Push', fields: ['push_provider', 'push_enabled'] },
  ],
  readonly: ['user_id', 'name', 'platform', 'app_version', 'created_at', 'last_seen_at', 'revoked_at', 'revoked_reason', 'push_provider', 'push_enabled'],
  scope(query, principal, alias) {
    if (!principal.has('mobile.change_device')) query.where(`${alias}.user_id`, principal.user.id);
  },
  actions: [
    {
      name: 'revoke',
      label: 'Revoke selected devices',
      permission: 'view',
      async run({ db, principal }, rows) {
        let revoked = 0;
        for (const row of rows) {
          if (row.user_id !== principal.user.id && !principal.has('mobile.change_device')) continue;
          if (await revokeDevice(db, String(row.id), 'admin', { actor: { type: 'staff', id: principal.user.id } })) revoked++;
        }
        return `Revoked ${revoked} device(s).`;
      },
    },
  ],
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Administration', icon: 'smartphone' },
};
