// Fixtures in test/fixtures/mrz are made by models/mrz/render-fixtures.ts (expected.json holds the truth).
import fs from 'node:fs';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { seededRandom } from '../../models/mrz/render-training-data.ts';
import { photograph, randomDocument, renderPage } from '../../models/mrz/synthetic-document.ts';
import type { MrzFormat } from '../../src/vision/mrz/decode.ts';
import { readMrz, type MrzReadResult } from '../../src/vision/mrz/read.ts';
import { ImageError } from '../../src/vision/image.ts';
import { bombPng } from '../helpers/images.ts';

const FIXTURES = path.resolve(import.meta.dirname, '../fixtures/mrz');

interface Expected {
  mrz: boolean;
  lines: string[];
  format: MrzFormat | null;
  fields: Record<string, string> | null;
}

const expected: Record<string, Expected> = JSON.parse(fs.readFileSync(path.join(FIXTURES, 'expected.json'), 'utf8'));
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, name));

function assertRead(t: import('ava').ExecutionContext, result: MrzReadResult, want: Expected, label: string) {
  t.true(result.found, `${label}: found`);
  t.deepEqual(result.lines, want.lines, `${label}: lines`);
  t.is(result.format, want.format, `${label}: format`);
  t.true(result.valid, `${label}: check digits`);
  t.like(result.fields, want.fields!, `${label}: fields`);
}

for (const [name, want] of Object.entries(expected)) {
  test(`fixture ${name}: ${want.mrz ? `reads the ${want.format} MRZ` : 'reports no MRZ'}`, async (t) => {
    const result = await readMrz(fixture(name));
    if (want.mrz) assertRead(t, result, want, name);
    else t.false(result.found);
    t.true(result.timings.total_ms >= result.timings.decode_ms);
  });
}

test('sharp-made variants of a photographed passport: rotated, blurred, shrunk, turned by EXIF, upside down', async (t) => {
  const want = expected['td3-flat.jpg']!;
  const source = fixture('td3-flat.jpg');
  const { width = 0 } = await sharp(source).metadata();
  const variants: Record<string, Buffer> = {
    'rotated 14 degrees': await sharp(source).rotate(14, { background: '#505050' }).jpeg().toBuffer(),
    'rotated -9 degrees': await sharp(source).rotate(-9, { background: '#d0d0d0' }).jpeg().toBuffer(),
    'gaussian blur 1.3': await sharp(source).blur(1.3).jpeg({ quality: 60 }).toBuffer(),
    'shrunk to 65 %': await sharp(source).resize(Math.round(width * 0.65)).jpeg().toBuffer(),
    'a 4000 px photograph (read at a quarter)': await sharp(source).resize(4000).jpeg().toBuffer(),
    'stored sideways with EXIF orientation 6': await sharp(source).rotate(-90).withMetadata({ orientation: 6 }).jpeg().toBuffer(),
    'upside down': await sharp(source).rotate(180).png().toBuffer(),
  };
  for (const [label, image] of Object.entries(variants)) assertRead(t, await readMrz(image), want, label);
});

test('freshly rendered documents of every format, tilted up to 15 degrees', async (t) => {
  const formats: MrzFormat[] = ['TD3', 'TD2', 'TD1', 'MRVA', 'MRVB', 'TD3'];
  for (const [index, format] of formats.entries()) {
    const random = seededRandom(77 + index);
    const document = randomDocument(random, format);
    const page = renderPage(document, random, 8);
    const angle = (random() * 2 - 1) * 15;
    const image = await photograph(page, random, {
      width: 1000,
      height: 760,
      coverage: 0.7 + 0.2 * random(),
      angle,
      perspective: 0.06 * random(),
      shadow: 0.4 * random(),
      blur: 0.4 + random() * 0.7,
      noise: 4 + random() * 6,
      quality: 60 + Math.floor(random() * 30),
    });
    assertRead(t, await readMrz(image), { mrz: true, lines: document.lines, format, fields: document.fields }, `${format} at ${angle.toFixed(1)} degrees`);
  }
});

test('an ArrayBuffer handed over by Piscina.move() reads like a Buffer', async (t) => {
  const bytes = fixture('td1-photo.jpg');
  const moved = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  assertRead(t, await readMrz(moved), expected['td1-photo.jpg']!, 'ArrayBuffer');
});

test('an image without text has no MRZ', async (t) => {
  const blank = await sharp({ create: { width: 640, height: 480, channels: 3, background: '#8090a0' } }).jpeg().toBuffer();
  const result = await readMrz(blank);
  t.false(result.found);
  t.deepEqual(result.lines, []);
  t.is(result.format, null);
  t.false(result.valid);
});

async function rejection(t: import('ava').ExecutionContext, image: Buffer, options = {}): Promise<ImageError> {
  const error = await t.throwsAsync(readMrz(image, options), { instanceOf: ImageError });
  return error!;
}

test('an empty file is refused as image_empty', async (t) => {
  t.is((await rejection(t, Buffer.alloc(0))).reason, 'image_empty');
});

test('text named like an image is refused as image_unreadable', async (t) => {
  t.is((await rejection(t, Buffer.from('this is not a JPEG, just text\n'.repeat(20)))).reason, 'image_unreadable');
});

test('a truncated JPEG is refused as image_unreadable', async (t) => {
  const jpeg = fixture('td3-flat.jpg');
  t.is((await rejection(t, jpeg.subarray(0, Math.floor(jpeg.length / 2)))).reason, 'image_unreadable');
});

test('a decompression bomb is refused as image_too_large before it is decoded', async (t) => {
  const error = await rejection(t, bombPng());
  t.is(error.reason, 'image_too_large');
  t.regex(error.message, /60000x60000/);
});

test('the pixel limit is configurable', async (t) => {
  t.is((await rejection(t, fixture('td3-flat.jpg'), { maxPixels: 100_000 })).reason, 'image_too_large');
});

test('the process survives a burst of bad and good images read concurrently', async (t) => {
  const inputs = [Buffer.alloc(0), Buffer.from('nope'), bombPng(), fixture('td2-photo.jpg'), fixture('no-mrz.jpg')];
  const results = await Promise.allSettled(inputs.map((input) => readMrz(input)));
  t.deepEqual(
    results.map((result) => result.status),
    ['rejected', 'rejected', 'rejected', 'fulfilled', 'fulfilled'],
  );
  const good = results[3] as PromiseFulfilledResult<MrzReadResult>;
  t.true(good.value.valid);
});
