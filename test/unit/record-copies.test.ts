/**
 * The copies the upsert paths make of what callers sent (extras, a stored customer's `raw`): own
 * data properties only, as a spread or JSON.parse makes them, so a key named "__proto__" stays a
 * plain key and never becomes the copy's prototype.
 */
import test from 'ava';
import { ownCopy, withoutNulls } from '../../src/modules/records/results.ts';

const sent = () => JSON.parse('{"a": 1, "__proto__": {"admin": true}, "b": null, "c": "x", "d": [1, null]}') as Record<string, unknown>;

test('ownCopy copies every own key, "__proto__" as a plain key, in order', (t) => {
  const copy = ownCopy(sent());
  t.deepEqual(Object.keys(copy), ['a', '__proto__', 'b', 'c', 'd']);
  t.is(Object.getPrototypeOf(copy), Object.prototype);
  t.is((copy as { admin?: unknown }).admin, undefined);
  t.deepEqual(Object.getOwnPropertyDescriptor(copy, '__proto__')?.value, { admin: true });
  t.is(JSON.stringify(copy), '{"a":1,"__proto__":{"admin":true},"b":null,"c":"x","d":[1,null]}');
});

test('withoutNulls drops null and undefined values and keeps "__proto__" a plain key', (t) => {
  const kept = withoutNulls({ ...sent(), e: undefined });
  t.deepEqual(Object.keys(kept), ['a', '__proto__', 'c', 'd']);
  t.is(Object.getPrototypeOf(kept), Object.prototype);
  t.is((kept as { admin?: unknown }).admin, undefined);
  t.is(JSON.stringify(kept), '{"a":1,"__proto__":{"admin":true},"c":"x","d":[1,null]}');
});
