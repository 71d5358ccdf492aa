import test from 'ava';
import { timeOrderedId } from '../../src/ids.ts';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

test('time-ordered ids are version 7 UUIDs carrying the time they were made', (t) => {
  const before = Date.now();
  const id = timeOrderedId();
  const after = Date.now();
  t.regex(id, UUID_V7);
  const millisecond = parseInt(id.replaceAll('-', '').slice(0, 12), 16);
  // The counter may borrow a millisecond ahead when thousands are made within one.
  t.true(millisecond >= before && millisecond <= after + 1, `${millisecond} not in ${before}-${after}`);
});

test('ids made one after another sort in the order they were made, and never repeat', (t) => {
  // Far more than one millisecond's counter holds, so the borrowing is exercised too.
  const ids = Array.from({ length: 50_000 }, () => timeOrderedId());
  for (let i = 1; i < ids.length; i++) if (!(ids[i]! > ids[i - 1]!)) t.fail(`${ids[i - 1]} then ${ids[i]}`);
  t.is(new Set(ids).size, ids.length);
  t.true(ids.every((id) => UUID_V7.test(id)));
});
