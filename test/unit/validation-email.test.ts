import test from 'ava';
import validator from 'validator';
import { isEmailAddress } from '../../src/validation/email.ts';

test('isEmailAddress answers as validator.isEmail does, first time and remembered, also once the memo starts over', (t) => {
  const samples = ['anna@example.com', 'not an email', 'a@b', 'x@localhost', 'first.last+tag@sub.example.co.uk', '@example.com', 'anna@exa mple.com'];
  for (let round = 0; round < 2; round++) for (const sample of samples) t.is(isEmailAddress(sample), validator.isEmail(sample), sample);
  // More distinct addresses than the memo holds: it starts over and keeps answering right.
  for (let index = 0; index < 5000; index++) if (isEmailAddress(`user${index}@example.com`) !== true) t.fail(`user${index}`);
  for (const sample of samples) t.is(isEmailAddress(sample), validator.isEmail(sample), sample);
});
