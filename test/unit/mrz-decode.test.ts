import test from 'ava';
import { checkDigit, decode } from '../../src/vision/mrz/decode.ts';
import { ALPHABET } from '../../src/vision/mrz/glyphs.ts';

const SPECIMEN_TD3 = ['P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<', 'L898902C36UTO7408122F1204159ZE184226B<<<<<10'];
const SPECIMEN_TD1 = ['I<UTOD231458907<<<<<<<<<<<<<<<', '7408122F1204159UTO<<<<<<<<<<<6', 'ERIKSSON<<ANNA<MARIA<<<<<<<<<<'];
const SPECIMEN_MRVA = ['V<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<', 'L8988901C4XXX4009078F96121096ZE184226B<<<<<<'];

/** Probabilities as a confident model would give them for `lines`, with optional overrides per position. */
function probabilitiesFor(lines: string[], overrides: Record<string, Record<string, number>> = {}): Float32Array {
  const length = lines[0]!.length;
  const classes = ALPHABET.length;
  const out = new Float32Array(lines.length * length * classes).fill(0.001);
  lines.forEach((line, row) => {
    for (let column = 0; column < length; column++) {
      const base = (row * length + column) * classes;
      const override = overrides[`${row}:${column}`];
      if (override) for (const [char, p] of Object.entries(override)) out[base + ALPHABET.indexOf(char)] = p;
      else out[base + ALPHABET.indexOf(line[column]!)] = 0.95;
    }
  });
  return out;
}

test('check digits follow ICAO 9303 (weights 7, 3, 1; letters from 10; filler 0)', (t) => {
  t.is(checkDigit('L898902C3'), 6);
  t.is(checkDigit('740812'), 2);
  t.is(checkDigit('120415'), 9);
  t.is(checkDigit('ZE184226B<<<<<'), 1);
  t.is(checkDigit('<<<'), 0);
});

test('the ICAO specimen passport decodes with valid check digits; its fictional state is flagged, not dropped', (t) => {
  const decoded = decode(probabilitiesFor(SPECIMEN_TD3), 2, 44)!;
  t.is(decoded.format, 'TD3');
  t.deepEqual(decoded.lines, SPECIMEN_TD3);
  t.true(decoded.valid);
  t.deepEqual(decoded.corrections, []);
  t.like(decoded.fields, {
    document_type: 'P',
    issuing_country: 'UTO',
    last_name: 'ERIKSSON',
    first_name: 'ANNA MARIA',
    document_number: 'L898902C3',
    nationality: 'UTO',
    birth_date: '1974-08-12',
    sex: 'F',
    expiry_date: '2012-04-15',
    personal_number: 'ZE184226B',
  });
  t.deepEqual(decoded.invalid_fields.sort(), ['issuing_country', 'nationality']);
});

test('TD1 and visa (MRV-A) layouts are recognised and parsed', (t) => {
  const td1 = decode(probabilitiesFor(SPECIMEN_TD1), 3, 30)!;
  t.is(td1.format, 'TD1');
  t.true(td1.valid);
  t.like(td1.fields, { document_type: 'I', document_number: 'D23145890', birth_date: '1974-08-12', last_name: 'ERIKSSON' });

  const visa = decode(probabilitiesFor(SPECIMEN_MRVA), 2, 44)!;
  t.is(visa.format, 'MRVA');
  t.true(visa.valid);
  t.like(visa.fields, { document_type: 'V', document_number: 'L8988901C', nationality: 'XXX', birth_date: '1940-09-07', expiry_date: '1996-12-10', optional_data: '6ZE184226B' });
});

test('a digit-only position takes the best digit even when a letter scored higher', (t) => {
  // Birth date's first digit read as 'O' (0.6) over '7' (0.3): dates hold digits only.
  const decoded = decode(probabilitiesFor(SPECIMEN_TD3, { '1:13': { O: 0.6, '7': 0.3 } }), 2, 44)!;
  t.is(decoded.lines[1], SPECIMEN_TD3[1]);
  t.true(decoded.valid);
  t.deepEqual(decoded.corrections, []);
});

test('a failing check digit is repaired only with the model’s own runner-up', (t) => {
  // Document number 'L898902C3': the model prefers 'B' over '8' at column 1, both allowed there.
  const ambiguous = decode(probabilitiesFor(SPECIMEN_TD3, { '1:1': { B: 0.55, '8': 0.4 } }), 2, 44)!;
  t.is(ambiguous.lines[1], SPECIMEN_TD3[1]);
  t.true(ambiguous.valid);
  t.deepEqual(ambiguous.corrections.map(({ line, column, read, corrected }) => ({ line, column, read, corrected })), [
    { line: 1, column: 1, read: 'B', corrected: '8' },
  ]);

  // Without a plausible alternative nothing is invented: the line stays as read and is not valid.
  const wrong = decode(probabilitiesFor(SPECIMEN_TD3, { '1:1': { B: 0.97 } }), 2, 44)!;
  t.is(wrong.lines[1]![1], 'B');
  t.false(wrong.valid);
  t.true(wrong.invalid_fields.includes('document_number_check_digit'));
  t.deepEqual(wrong.corrections, []);
});

test('a check digit two different runner-ups would satisfy is left failing rather than guessed', (t) => {
  // 'B' for '8' at column 1 breaks the check; putting the true '8' back fixes it, but so would 'A' for
  // '9' at column 2, which the model also finds plausible.
  const decoded = decode(probabilitiesFor(SPECIMEN_TD3, { '1:1': { B: 0.55, '8': 0.4 }, '1:2': { '9': 0.6, A: 0.3 } }), 2, 44)!;
  t.is(decoded.lines[1]!.slice(0, 3), 'LB9');
  t.false(decoded.valid);
  t.deepEqual(decoded.corrections, []);
});

test('letters read after the end of the name become fillers when the model allows it', (t) => {
  const decoded = decode(probabilitiesFor(SPECIMEN_TD3, { '0:30': { K: 0.6, '<': 0.3 } }), 2, 44)!;
  t.is(decoded.lines[0], SPECIMEN_TD3[0]);
  t.is(decoded.fields.first_name, 'ANNA MARIA');
});

test('an O the model is unsure of in a document number is read as the digit 0, unless the check digit says O', (t) => {
  const zero = decode(probabilitiesFor(SPECIMEN_TD3, { '1:5': { O: 0.6, '0': 0.3 } }), 2, 44)!;
  t.is(zero.lines[1]!.slice(0, 9), 'L898902C3');
  t.true(zero.valid);
  t.deepEqual(zero.corrections, []);

  // A document number with a real O: read as 0 first, the check fails, and the model's O comes back.
  const withO = ['P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<', 'L898O02C3' + '1UTO7408122F1204159ZE184226B<<<<<1'];
  withO[1] = `${withO[1]!.slice(0, 43)}${compositeDigit(withO[1]!)}`;
  const decoded = decode(probabilitiesFor(withO, { '1:4': { O: 0.6, '0': 0.3 } }), 2, 44)!;
  t.is(decoded.lines[1], withO[1]);
  t.true(decoded.valid);
});

function compositeDigit(line: string): number {
  return checkDigit(line.slice(0, 10) + line.slice(13, 20) + line.slice(21, 43));
}

test('lines of a length no MRZ has are not decoded', (t) => {
  t.is(decode(probabilitiesFor(['P'.repeat(40), 'P'.repeat(40)]), 2, 40), null);
});
