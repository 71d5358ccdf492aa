/** Field comparison of documents with the customer record and with the MRZ. */
import test from 'ava';
import { alpha3, mismatchedFields, mismatchedWithMrz, sameName } from '../../src/modules/kyc/compare.ts';

test('names: case, accents, order and a dropped space do not matter; another name does', (t) => {
  t.true(sameName('HERNANDEZ', 'Hernández'));
  t.true(sameName('MARIA ELENA', 'Elena María'));
  t.true(sameName('MARIAELENA', 'María Elena'));
  t.false(sameName('MARIA', 'Marta'));
});

test('the MRZ may cut a long name short; the printed front may not differ otherwise', (t) => {
  const front = { last_name: 'SCHWARZENEGGER', first_name: 'ARNOLD ALOIS' };
  t.deepEqual(mismatchedWithMrz(front, { last_name: 'SCHWARZENEGGE', first_name: 'ARNOLD ALOIS' }), []);
  t.deepEqual(mismatchedWithMrz(front, { last_name: 'SCHWARZKOPF', first_name: 'ARNOLD ALOIS' }), ['last_name']);
});

test('ICAO document codes are read as the ISO country they stand for', (t) => {
  t.is(alpha3('D<<'), 'DEU');
  t.is(alpha3('GBD'), 'GBR');
  t.is(alpha3('de'), 'DEU');
  t.is(alpha3('UTO'), 'UTO');
  t.deepEqual(mismatchedWithMrz({ nationality: 'DEU' }, { nationality: 'D' }), []);
  t.deepEqual(mismatchedFields({ nationality: 'D' }, { nationality: 'DE' }), []);
  t.deepEqual(mismatchedFields({ nationality: 'D' }, { nationality: 'FR' }), ['nationality']);
});

test('a field missing on either side is not a mismatch; dates, sex and numbers must agree', (t) => {
  t.deepEqual(mismatchedWithMrz({ birth_date: '1985-03-03' }, { sex: 'F' }), []);
  t.deepEqual(mismatchedWithMrz({ birth_date: '1985-03-03', sex: 'F', document_number: 'X4K92L817' }, { birth_date: '1985-03-04', sex: 'M', document_number: 'X4K92L817<' }), ['birth_date', 'sex']);
  t.deepEqual(mismatchedFields({ document_number: 'X4K92L817' }, { passport_number: 'x4k 92l-817' }), []);
});

test('a whole printed name is compared with the whole known name', (t) => {
  t.deepEqual(mismatchedFields({ full_name: 'ERIKSSONANNAMARIA' }, { first_name: 'Anna Maria', last_name: 'Eriksson' }), []);
  t.deepEqual(mismatchedFields({ full_name: 'ERIKSSON ANNA' }, { first_name: 'Anna Maria', last_name: 'Eriksson' }), ['full_name']);
  t.deepEqual(mismatchedWithMrz({ full_name: 'ERIKSSON ANNA MARIA' }, { first_name: 'ANNA MARIA', last_name: 'ERIKSSON' }), []);
});
