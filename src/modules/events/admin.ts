import { announce, CHANNELS } from '../../db/notifications.ts';
import { activeTone } from '../backoffice/declare.ts';
import type { ModelRegistration } from '../backoffice/registry.ts';
import { EVENT_TYPES } from './service.ts';

const SLUG = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

export const eventAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'event',
  table: 'events',
  pk: 'slug',
  verboseName: 'event',
  repr: (row) => `${row.name} (${row.slug})`,
  reprColumns: ['slug', 'name'],
  columns: [
    { name: 'slug' },
    { name: 'name' },
    { name: 'type', kind: 'text' },
    { name: 'active', tone: activeTone, kind: 'bool' },
    { name: 'updated_at', label: 'Updated' },
  ],
  titleColumn: 'name',
  dateColumn: 'updated_at',
  filters: [{ type: 'choice', field: 'type' }, { type: 'choice', field: 'active' }],
  searchFields: ['^slug', 'name'],
  ordering: ['slug'],
  fields: {
    type: { choices: Object.entries(EVENT_TYPES).map(([value, label]) => ({ value, label })) },
    slug: { help: 'Lower-case letters, digits, _ . - (at most 64).' },
  },
  form: ['slug', 'name', 'type', 'active'],
  hooks: {
    clean(cleaned, before) {
      if (!before && typeof cleaned.slug === 'string' && !SLUG.test(cleaned.slug)) {
        return { slug: [{ message: 'Lower-case letters, digits, _ . - (at most 64), starting with a letter or digit.', code: 'invalid' }] };
      }
      if (before && cleaned.slug !== undefined && cleaned.slug !== before.slug) {
        return { slug: [{ message: 'The slug of an event cannot change: records refer to it.', code: 'immutable' }] };
      }
    },
    async afterSave({ trx, row }) {
      // Upsert endpoints cache events per process: drop them everywhere at commit.
      await announce(trx, CHANNELS.events, String(row.slug));
    },
  },
  menu: { group: 'Rules', icon: 'bolt' },
};
