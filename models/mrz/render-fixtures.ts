/**
 * Renders the MRZ reader's test fixtures (test/fixtures/mrz/): synthetic documents photographed with
 * tilt, perspective, shade, blur and JPEG loss, and one page without an MRZ, with the expected lines and
 * fields in expected.json. Deterministic (fixed seeds); needs fonts-ocr-b.
 *
 *   node --import tsx models/mrz/render-fixtures.ts
 */
import fs from 'node:fs';
import path from 'node:path';
import type { MrzFormat } from '../../src/vision/mrz/decode.ts';
import { seededRandom } from './render-training-data.ts';
import { photograph, randomDocument, renderPage, type PhotoOptions, type SyntheticDocument } from './synthetic-document.ts';

const OUT_DIR = path.resolve(import.meta.dirname, '../../test/fixtures/mrz');

interface Fixture {
  file: string;
  format: MrzFormat;
  withMrz?: boolean;
  photo: Partial<PhotoOptions>;
}

const BASE: PhotoOptions = { width: 1000, height: 750, coverage: 0.85, angle: 0, perspective: 0, shadow: 0.1, blur: 0.6, noise: 6, quality: 82 };

const FIXTURES: Fixture[] = [
  { file: 'td3-flat.jpg', format: 'TD3', photo: {} },
  { file: 'td3-tilted.jpg', format: 'TD3', photo: { angle: -12, perspective: 0.08, shadow: 0.45, blur: 1.1 } },
  { file: 'td3-upside-down.jpg', format: 'TD3', photo: { angle: 176 } },
  { file: 'td2-photo.jpg', format: 'TD2', photo: { angle: 7, coverage: 0.75, shadow: 0.3, noise: 9, quality: 70 } },
  { file: 'td1-photo.jpg', format: 'TD1', photo: { width: 800, height: 600, angle: -5, coverage: 0.8, perspective: 0.05 } },
  { file: 'mrva-photo.jpg', format: 'MRVA', photo: { angle: 3, coverage: 0.9 } },
  { file: 'mrvb-photo.jpg', format: 'MRVB', photo: { angle: -3, coverage: 0.8, blur: 0.9 } },
  { file: 'no-mrz.jpg', format: 'TD3', withMrz: false, photo: { angle: 4 } },
];

async function main(): Promise<void> {
  fs.mkdirSync(OUT_DIR, { recursive: true });
  const expected: Record<string, { mrz: boolean; lines: string[]; format: MrzFormat | null; fields: SyntheticDocument['fields'] | null }> = {};
  for (const [index, fixture] of FIXTURES.entries()) {
    const random = seededRandom(1000 + index);
    const document = randomDocument(random, fixture.format);
    const page = renderPage(document, random, 8, fixture.withMrz ?? true);
    const jpeg = await photograph(page, random, { ...BASE, ...fixture.photo });
    fs.writeFileSync(path.join(OUT_DIR, fixture.file), jpeg);
    const withMrz = fixture.withMrz ?? true;
    expected[fixture.file] = { mrz: withMrz, lines: withMrz ? document.lines : [], format: withMrz ? document.format : null, fields: withMrz ? document.fields : null };
    console.log(`${fixture.file}: ${jpeg.length} bytes`);
  }
  fs.writeFileSync(path.join(OUT_DIR, 'expected.json'), `${JSON.stringify(expected, null, 2)}\n`);
}

await main();
