import { randomBytes } from 'node:crypto';
import { hash } from '@node-rs/argon2';
import { announce, CHANNELS } from '../../db/notifications.ts';
import { activeTone } from '../backoffice/declare.ts';
import type { ModelRegistration } from '../backoffice/registry.ts';
import { validateIpEntries } from './service.ts';

/** The secret of a credential added through the back office, kept only until its success message is built. */
const newSecrets = new WeakMap<object, string>();

/**
 * Merchant credentials: a new API key created here is shown once and stored hashed, as the CLI
 * does; a change is announced so every node's credential cache drops it at commit.
 */
export const credentialAdmin: ModelRegistration = {
  appLabel: 'merchant',
  model: 'credential',
  table: 'merchant_credentials',
  verboseName: 'API credential',
  repr: (row) => `${row.client} (${row.api_key})`,
  reprColumns: ['client', 'api_key'],
  columns: [
    { name: 'client' },
    { name: 'api_key', label: 'API key' },
    { name: 'active', kind: 'bool', tone: activeTone },
    { name: 'created_at', label: 'Created' },
  ],
  titleColumn: 'client',
  dateColumn: 'created_at',
  filters: [{ type: 'choice', field: 'active' }],
  searchFields: ['client', '=api_key'],
  ordering: ['client'],
  fields: {
    secret_hash: { hidden: true },
    allowed_ips: { label: 'Allowed IPs', help: 'A JSON list of IPs, CIDRs or "*"; empty allows none.' },
  },
  form: ['client', 'api_key', 'active', 'allowed_ips', 'created_by', 'created_at', 'updated_at'],
  readonly: ['api_key', 'created_by', 'created_at', 'updated_at'],
  hooks: {
    clean(cleaned) {
      if (cleaned.allowed_ips === undefined) return undefined;
      const entries = cleaned.allowed_ips;
      if (!Array.isArray(entries) || !entries.every((entry) => typeof entry === 'string')) {
        return { allowed_ips: [{ message: 'Enter a JSON list of IPs, CIDRs or "*".', code: 'invalid' }] };
      }
      try {
        cleaned.allowed_ips = validateIpEntries(entries as string[]);
      } catch (error) {
        return { allowed_ips: [{ message: (error as Error).message, code: 'invalid' }] };
      }
    },
    async beforeSave({ values, cleaned, before, principal }) {
      if (cleaned.allowed_ips !== undefined) values.allowed_ips = cleaned.allowed_ips;
      if (before) return;
      const secret = randomBytes(32).toString('base64url');
      values.api_key = `wk_${randomBytes(16).toString('hex')}`;
      values.secret_hash = await hash(secret);
      values.created_by = `staff:${principal.user.username}`;
      newSecrets.set(values, secret);
    },
    async afterSave({ trx, row }) {
      await announce(trx, CHANNELS.credentials, String(row.id));
    },
    messages({ values }) {
      const secret = newSecrets.get(values);
      return secret ? [{ level: 'warning', message: `API secret (shown once, copy it now): ${secret}` }] : [];
    },
  },
  menu: { group: 'Integration', icon: 'key' },
};
