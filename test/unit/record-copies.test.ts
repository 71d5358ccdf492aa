/**
 * The copies the upsert paths make of what callers sent (extras, a stored customer's `raw`): own
 * data properties only, as a spread or JSON.parse makes them, so a key named "__proto__" stays a
 * plain key and never becomes the copy's prototype.
 */
import test from 'ava';
import { shapeOf, validateRecord, type FieldTable } from '../../src/modules/records/fields.ts';
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

test("a valid record's values start as the row's shape: its fields in table order, then the other columns as undefined keys that readers skip", (t) => {
  const table: FieldTable = [
    { name: 'ref', type: { kind: 'text' }, required: true },
    { name: 'amount', type: { kind: 'amount', max: '1000' } },
  ];
  const shape = shapeOf(table, ['id', 'ref', 'score']);
  const record = validateRecord(table, { amount: '12.5', ref: ' r1 ', extra: 1 }, shape);
  if (!record.ok) return t.fail(record.error);
  t.deepEqual(Object.keys(record.values), ['ref', 'amount', 'id', 'score']);
  t.is(record.values.id, undefined);
  const plain = validateRecord(table, { amount: '12.5', ref: ' r1 ', extra: 1 });
  if (!plain.ok) return t.fail(plain.error);
  t.deepEqual(Object.keys(plain.values), ['ref', 'amount']);
  t.is(JSON.stringify(record.values), JSON.stringify(plain.values));
  t.deepEqual(Object.keys(withoutNulls(record.values)), ['ref', 'amount']);
  // Each record gets its own copy.
  const other = validateRecord(table, { ref: 'r2' }, shape);
  if (!other.ok) return t.fail(other.error);
  other.values.id = 'x';
  t.is(record.values.id, undefined);
  t.is(shape.id, undefined);
});
