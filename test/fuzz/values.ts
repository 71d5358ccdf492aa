/**
 * What every fuzz generator draws from: hostile strings, numbers, keys and JSON, one-place
 * corruptions of a valid value, and live placeholders: `{{name}}` stands for a value that only the
 * running service knows (a staff token, the pk of a row read at the last checkpoint, a fresh login
 * ticket), filled in when the request is sent (test/fuzz/staff.ts), so a credential lost during the
 * run is replaced without changing the generated requests.
 */
import fc from 'fast-check';

export const HOSTILE_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udc00y',
  '\ud83d\ude00',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'valueOf',
  'hasOwnProperty',
  '[object Object]',
  'null',
  'undefined',
  'NaN',
  '-1',
  '0',
  '1e309',
  '9999-12-31T23:59:59-23:59',
  '0000-01-01',
  '0001-01-01T00:00:00+01:00',
  '2024-02-30',
  '2024-13-01T25:61:61Z',
  '../../../etc/passwd',
  '%00',
  "' or 1=1 --",
  '<script>alert(1)</script>',
  '\u202e\u200b\ufeff',
  'ǅ̈̈̈̈̈',
  '0.001',
  '-0.00',
  '999999999999999999999.99',
  'a'.repeat(49),
  'a'.repeat(5000),
];

export const HOSTILE_NUMBERS = [0, -0, -1, 0.001, 0.005, 0.0049, 1e-320, 1e308, -1e308, 2 ** 53, 2 ** 53 + 2, 2 ** 31, 999999999999.995, 3.14159];

export const HOSTILE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '', '\u0000', 'k\u0000', '\ud800', 'a.b', '$where', 'k'.repeat(300)];

export const hostileString = fc.oneof(fc.constantFrom(...HOSTILE_STRINGS), fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ maxLength: 20 }));
export const hostileNumber = fc.oneof(fc.constantFrom(...HOSTILE_NUMBERS), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer());

/** Any JSON value, with hostile leaves and keys. */
export const anyJson: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    hostileString,
    hostileNumber,
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(fc.oneof(fc.constantFrom(...HOSTILE_KEYS), fc.string({ maxLength: 8 })), tie('value'), { maxKeys: 4 }),
  ),
})).value;

/** A value nested `depth` levels, as JSON text (deeper than JSON.stringify can write). */
export function nestedText(depth: number, kind: 'array' | 'object'): string {
  return kind === 'array' ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

/** Turns a valid value hostile in one place: a wrong type, a hostile string or number, a deleted or extra key. */
export function corrupt(value: unknown): fc.Arbitrary<unknown> {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const keys = Object.keys(value);
    return fc.oneof(
      fc.record({ key: fc.constantFrom(...(keys.length ? keys : ['x'])), replacement: anyJson }).map(({ key, replacement }) => ({ ...value, [key]: replacement })),
      fc.record({ key: fc.constantFrom(...HOSTILE_KEYS), replacement: anyJson }).map(({ key, replacement }) => {
        const copy: Record<string, unknown> = { ...value };
        Object.defineProperty(copy, key, { value: replacement, enumerable: true, writable: true, configurable: true });
        return copy;
      }),
      fc.constantFrom(...(keys.length ? keys : ['x'])).map((key) => {
        const copy: Record<string, unknown> = { ...value };
        delete copy[key];
        return copy;
      }),
      fc.constantFrom(...(keys.length ? keys : ['x'])).chain((key) => hostileString.map((text) => ({ ...value, [key]: text }))),
      fc.constantFrom(...(keys.length ? keys : ['x'])).chain((key) => hostileNumber.map((number) => ({ ...value, [key]: number }))),
    );
  }
  if (Array.isArray(value)) return fc.oneof(fc.constant([]), fc.constant([...value, null]), fc.constant([...value, 'x']), anyJson);
  return anyJson;
}

/** A live value's placeholder: `live('access:super')` is the superuser's current access token when the request is sent. */
export function live(name: string): string {
  return `{{${name}}}`;
}

/** Every placeholder in a text (hostile strings never contain `{{`, so nothing else matches). */
export const LIVE_PLACEHOLDER = /\{\{([a-z-]+(?::[^{}:]+)*)\}\}/g;

/** Percent-encodes the UTF-8 bytes (a lone surrogate becomes U+FFFD's bytes; encodeURIComponent would throw). */
export function percentEncode(text: string): string {
  return [...Buffer.from(text, 'utf8')].map((byte) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(byte)) ? String.fromCharCode(byte) : `%${byte.toString(16).padStart(2, '0')}`)).join('');
}

/** Percent-encodes a text but leaves its placeholders as they are, for filling at send time. */
export function encodeKeepingLive(text: string): string {
  let encoded = '';
  let last = 0;
  for (const match of text.matchAll(LIVE_PLACEHOLDER)) {
    encoded += percentEncode(text.slice(last, match.index)) + match[0];
    last = match.index + match[0].length;
  }
  return encoded + percentEncode(text.slice(last));
}

/** A query string or urlencoded form of name/value pairs (in order, repeats kept), placeholders left to fill. */
export function encodePairs(pairs: ReadonlyArray<readonly [string, string]>): string {
  return pairs.map(([name, value]) => `${encodeKeepingLive(name)}=${encodeKeepingLive(value)}`).join('&');
}
