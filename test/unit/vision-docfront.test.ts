/**
 * The document-front reader on the rendered ID card fixtures (test/fixtures/docfront/render.ts):
 * finding and straightening the card, OCR, field extraction, the portrait.
 */
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { readDocumentFront } from '../../src/vision/docfront.ts';
import { extractFields, findDocumentDates, nationalityCode, parseDocumentDate } from '../../src/vision/fields.ts';
import type { TextLine } from '../../src/vision/ocr.ts';

const fixtures = path.resolve(import.meta.dirname, '../fixtures/docfront');
const fixture = (name: string) => fs.readFileSync(path.join(fixtures, name));
const expected = JSON.parse(fs.readFileSync(path.join(fixtures, 'expected.json'), 'utf8')).fields as Record<string, string>;

/** Names as compared: OCR may drop the space between given names. */
const normalized = (fields: Record<string, string | undefined>) =>
  Object.fromEntries(Object.entries(fields).map(([key, value]) => [key, key.endsWith('_name') ? value?.replace(/ /g, '') : value]));

test('a flat scan of the card: every field read, the portrait found, timings reported', async (t) => {
  const { result, portrait } = await readDocumentFront(fixture('card-flat.jpg'));
  t.true(result.text_read);
  t.deepEqual(normalized(result.fields), normalized(expected));
  t.true(result.face_found);
  t.truthy(result.face && result.face.box[0] < 264 && result.face.box[1] > 100, 'the face lies in the portrait area');
  t.truthy(portrait);
  const meta = await sharp(portrait!).metadata();
  t.is(meta.format, 'jpeg');
  t.true(meta.width! >= 240, 'small portraits are enlarged so they can be read again as a reference');
  for (const key of ['decode_ms', 'straighten_ms', 'text_detection_ms', 'text_recognition_ms', 'fields_ms', 'face_ms', 'total_ms'] as const) {
    t.true(result.timings[key] >= 0, key);
  }
  t.true(result.lines.some((line) => line.text.includes('HERNANDEZ') && line.confidence > 0.8));
});

test('a photograph of the card on a table, at an angle: the outline is found and straightened, the fields read', async (t) => {
  const { result } = await readDocumentFront(fixture('card-photo.jpg'));
  t.is(result.document.method, 'outline');
  t.is(result.document.rotation, 0);
  const truth = [
    { x: 215, y: 170 },
    { x: 1085, y: 255 },
    { x: 1030, y: 800 },
    { x: 150, y: 700 },
  ];
  result.document.corners!.forEach((corner, i) => t.true(Math.hypot(corner.x - truth[i]!.x, corner.y - truth[i]!.y) < 20, `corner ${i}: ${JSON.stringify(corner)}`));
  t.true(Math.abs(result.document.width / result.document.height - 85.6 / 53.98) < 0.02, 'warped to the ID-1 proportions');
  t.deepEqual(normalized(result.fields), normalized(expected));
  t.true(result.face_found);
});

test('a card turned by 7 degrees on a white page is straightened before reading', async (t) => {
  const turned = await sharp(fixture('card-flat.jpg')).rotate(7, { background: '#ffffff' }).jpeg().toBuffer();
  const { result } = await readDocumentFront(turned);
  t.not(result.document.method, 'none');
  t.deepEqual(normalized(result.fields), normalized(expected));
  t.true(result.face_found);
});

test('a card upside down or on its side is turned upright before reading', async (t) => {
  for (const [turn, rotation] of [
    [180, 180],
    [90, 270],
    [270, 90],
  ] as const) {
    const { result } = await readDocumentFront(await sharp(fixture('card-flat.jpg')).rotate(turn).jpeg().toBuffer());
    t.is(result.document.rotation, rotation, `turned ${turn}`);
    t.deepEqual(normalized(result.fields), normalized(expected), `turned ${turn}`);
    t.true(result.face_found, `turned ${turn}`);
  }
});

test('a card without a portrait: text read, no face', async (t) => {
  const { result, portrait } = await readDocumentFront(fixture('card-no-portrait.jpg'));
  t.true(result.text_read);
  t.false(result.face_found);
  t.is(portrait, null);
});

test('a photograph that is not a document: the text is not read', async (t) => {
  const { result } = await readDocumentFront(fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/faces/cameraman.jpg')));
  t.false(result.text_read);
  t.deepEqual(result.fields, {});
});

const line = (text: string, x: number, y: number, width = 200, height = 20): TextLine => ({ text, confidence: 0.99, box: { x, y, width, height } });

test('extractFields: values below bilingual labels, values after a label on its line, misread labels', (t) => {
  const fields = extractFields([
    line('Surname/Nom', 10, 10),
    line('DOE', 12, 35),
    line('Given names/Prenoms', 10, 70),
    line('JOHN PETER', 12, 95),
    line('Nationaity/Nationalte', 10, 130),
    line('CANADIAN', 12, 155),
    line('Sex: M', 300, 130),
    line('DaleofBirth/Date de naissance', 10, 190),
    line('01.02.1990', 12, 215),
    line('Passport No.', 300, 190),
    line('AB1234567', 302, 215),
    line('Date of expiry', 10, 250),
    line('2030-06-30', 12, 275),
    line('P<CANDOE<<JOHN<PETER<<<<<<<<<<<<<<<<<<<<<<<', 10, 320, 600),
  ]);
  t.deepEqual(fields, {
    last_name: 'DOE',
    first_name: 'JOHN PETER',
    nationality: 'CANADIAN',
    sex: 'M',
    birth_date: '1990-02-01',
    document_number: 'AB1234567',
    expiry_date: '2030-06-30',
  });
});

test('extractFields: "Name" over "SURNAME, GIVEN NAMES" gives both names; a value that does not parse is passed over', (t) => {
  const fields = extractFields([line('Name/Nom', 10, 10), line('ERIKSSON, ANNA MARIA', 12, 35), line('Date of birth', 300, 10), line('ZENITH', 302, 30), line('12 AUG 74', 302, 50)]);
  t.deepEqual(fields, { last_name: 'ERIKSSON', first_name: 'ANNA MARIA', birth_date: '1974-08-12' });
});

test('extractFields: a whole name without a comma (a visa) is kept whole as full_name', (t) => {
  const fields = extractFields([line('Surname, Given names/Nom, Prenoms', 10, 10, 300), line('ERIKSSONANNAMARIA', 12, 35)]);
  t.deepEqual(fields, { full_name: 'ERIKSSONANNAMARIA' });
});

test('extractFields: a label without a value nearby gives no field, and another label is not taken as a value', (t) => {
  const fields = extractFields([line('Surname', 10, 10), line('Place of birth', 12, 35), line('ZENITH', 12, 60)]);
  t.deepEqual(fields, {});
});

test('parseDocumentDate: the formats documents print, two-digit years by the kind of date', (t) => {
  const today = new Date('2026-11-22');
  t.is(parseDocumentDate('12 AUG/AOUT 74', 'past', today), '1974-08-12');
  t.is(parseDocumentDate('15APR/AVR12', 'future', today), '2012-04-15');
  t.is(parseDocumentDate('03 MAR 1985', 'past', today), '1985-03-03');
  t.is(parseDocumentDate('14.11.2031', 'future', today), '2031-11-14');
  t.is(parseDocumentDate('2031-11-14', 'future', today), '2031-11-14');
  t.is(parseDocumentDate('01 JAN 20', 'past', today), '2020-01-01');
  t.is(parseDocumentDate('01 JAN 30', 'past', today), '1930-01-01');
  t.is(parseDocumentDate('31 FOO 1999', 'past', today), null);
  t.is(parseDocumentDate('31 FEB 1990', 'past', today), null);
  t.is(parseDocumentDate('29.02.2024', 'future', today), '2024-02-29');
  t.is(parseDocumentDate('45.13.1999', 'past', today), null);
});

test('findDocumentDates: two dates joined on one line are both found; a 2-digit year running into the next day is no 4-digit year', (t) => {
  const today = new Date('2026-11-22');
  t.deepEqual(findDocumentDates('10DEC/DEC1110DEC/DEC16', 'future', today), ['2011-12-10', '2016-12-10']);
  t.deepEqual(findDocumentDates('10 DEC 2011 10 DEC 2016', 'future', today), ['2011-12-10', '2016-12-10']);
  t.deepEqual(findDocumentDates('10DEC201110DEC2016', 'future', today), ['2011-12-10', '2016-12-10']);
  t.deepEqual(findDocumentDates('01.02.1990 - 14.11.2031', 'future', today), ['1990-02-01', '2031-11-14']);
  t.is(parseDocumentDate('10DEC/DEC1110DEC/DEC16', 'future', today), '2011-12-10', 'the first date of the line');
  // A single date reads as before.
  t.deepEqual(findDocumentDates('07SEP/SEP86', 'past', today), ['1986-09-07']);
  t.deepEqual(findDocumentDates('12 AUG/AOUT 1974', 'past', today), ['1974-08-12']);
  t.deepEqual(findDocumentDates('12AUG74L898', 'past', today), [], 'a year running into letters is no year');
  t.deepEqual(findDocumentDates('ZENITH', 'past', today), []);
  // A word after a space is no month of a joined next date: the four-digit year stays whole.
  t.deepEqual(findDocumentDates('15 JAN 2030 MAI', 'future', today), ['2030-01-15']);
  t.deepEqual(findDocumentDates('15 MAR 2031 MARS', 'future', today), ['2031-03-15']);
});

test('extractFields: a visa validity row, "valid from" and a damaged "valid until" over one line holding both dates: the until date is the expiry', (t) => {
  const row = [line('Valid from/Valide a partir du', 100, 10, 180, 15), line("Vaid urti/valie jusqu'au", 290, 10, 160, 15), line('10DEC/DEC1110DEC/DEC16', 100, 30, 360, 18)];
  t.deepEqual(extractFields(row), { expiry_date: '2016-12-10' });
  // "Valid from" is no expiry label: its date alone gives no expiry.
  t.deepEqual(extractFields([line('Valid from/Valide a partir du', 100, 10, 180, 15), line('10DEC/DEC11', 100, 30, 120, 18)]), {});
  // A validity read after its label on one line ends with the later date.
  t.deepEqual(extractFields([line('Valid until: 10 DEC 11 - 10 DEC 16', 10, 10, 300)]), { expiry_date: '2016-12-10' });
});

test('extractFields: with no readable expiry label, the latest of two or more dates after the birth date is the expiry, unless an issue label took it; one date is not enough', (t) => {
  const today = new Date('2026-11-22');
  const birth = [line('Date of birth', 10, 10), line('07SEP/SEP86', 12, 35)];
  const validity = [line('Valliduni/V', 300, 70, 60, 14), line('10DEC/DEC11', 150, 90, 120, 18), line('10DEC/DEC16', 300, 90, 120, 18)];
  t.deepEqual(extractFields([...birth, ...validity], today), { birth_date: '1986-09-07', expiry_date: '2016-12-10' });
  // One unlabelled date may be the issue date: no expiry.
  t.deepEqual(extractFields([...birth, line('Valliduni/V', 300, 70, 60, 14), line('10DEC/DEC16', 300, 90, 120, 18)], today), { birth_date: '1986-09-07' });
  // A date under "Valid from" and one under a label not read: the second is the expiry.
  t.deepEqual(
    extractFields([...birth, line('Valid from', 150, 70, 80, 14), line('10DEC/DEC11', 150, 90, 120, 18), line('Valliduni/V', 300, 70, 60, 14), line('10DEC/DEC16', 300, 90, 120, 18)], today),
    { birth_date: '1986-09-07', expiry_date: '2016-12-10' },
  );
  // An issue date and a "valid from" date, both labelled: the later is still no expiry.
  t.deepEqual(
    extractFields([...birth, line('Date of issue', 150, 70, 90, 14), line('01 JAN 2020', 150, 90, 120, 18), line('Valid from', 300, 70, 80, 14), line('05 JAN 2020', 300, 90, 120, 18)], today),
    { birth_date: '1986-09-07' },
  );
  // Without the birth date the dates cannot be told apart: no expiry.
  t.deepEqual(extractFields(validity, today), {});
  // A two-digit year far ahead as an expiry (a second print of the birth date) is no expiry.
  t.deepEqual(extractFields([...birth, line('10DEC/DEC16', 150, 90, 120, 18), line('07SEP/SEP86', 300, 90, 120, 18)], today), { birth_date: '1986-09-07' });
});

test('extractFields: "Nombre d\'entrees" (number of entries) is no given-name label, even damaged; "Nombres" and "Nombre / Given name" are', (t) => {
  for (const text of ["No. of entries/Nombre d'entrees", 'No. ot Ertre s/Nombre cfertrdes', 'Nombre de entradas']) {
    t.deepEqual(extractFields([line(text, 10, 10, 250), line('MULTIPLE', 12, 35)]), {}, text);
  }
  t.deepEqual(extractFields([line('Nombres', 10, 10, 100), line('JUAN CARLOS', 12, 35)]), { first_name: 'JUAN CARLOS' });
  t.deepEqual(extractFields([line('Nombre / Given name', 10, 10), line('JUAN', 12, 35)]), { first_name: 'JUAN' });
  t.deepEqual(extractFields([line('Nom d\'usage', 10, 10, 100), line('MARTIN', 12, 35)]), {}, 'the usage name is not the surname');
  t.deepEqual(extractFields([line('Nom de famille', 10, 10, 100), line('MARTIN', 12, 35)]), { last_name: 'MARTIN' }, 'the family name is');
});

test('extractFields: a name label broken into pieces ("Suma", "ne,Give", "/Nom,Prenoms") begins at its first piece and labels the whole name', (t) => {
  const value = line('ERIKSSONANNAMARIA', 224, 194, 201, 18);
  const pieces = [line('Suma', 218, 180, 20, 11), line('ne,Give', 243, 181, 32, 7)];
  t.deepEqual(extractFields([...pieces, line('/Nom,Prenoms', 302, 179, 61, 12), value]), { full_name: 'ERIKSSONANNAMARIA' });
  // Without the separator the label is whole: a value starting far to its left belongs to another column.
  t.deepEqual(extractFields([...pieces, line('Nom,Prenoms', 302, 179, 61, 12), value]), {});
});

test('nationalityCode: codes, English country names and common nationality words; fictional states stay unknown', (t) => {
  t.is(nationalityCode('ESP'), 'ESP');
  t.is(nationalityCode('Spain'), 'ESP');
  t.is(nationalityCode('BRITISH CITIZEN'), 'GBR');
  t.is(nationalityCode('UTO'), null);
  t.is(nationalityCode(undefined), null);
});
