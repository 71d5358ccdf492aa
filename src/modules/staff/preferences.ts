import type { Choice } from '../backoffice/registry.ts';

/** The choices of a staff user's preferences: the web form, the mobile account menu and their checks read them here. */

export const LANGUAGES: readonly Choice[] = [
  { value: 'en', label: 'English' },
  { value: 'de', label: 'Deutsch' },
  { value: 'es', label: 'Español' },
  { value: 'fr', label: 'Français' },
  { value: 'tr', label: 'Türkçe' },
];

export const LANGUAGE_CODES: ReadonlySet<string> = new Set(LANGUAGES.map((language) => language.value));

/** IANA zone names this runtime knows, UTC first (Intl lists it under Etc/ names only on some runtimes). */
export const TIMEZONES: readonly string[] = ['UTC', ...Intl.supportedValuesOf('timeZone').filter((zone) => zone !== 'UTC')];

export const TIMEZONE_SET: ReadonlySet<string> = new Set(TIMEZONES);
