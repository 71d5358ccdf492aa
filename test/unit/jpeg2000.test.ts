/**
 * JPEG 2000 chip portraits: encoded here with the same OpenJPEG build's encoder (as a bare
 * codestream and wrapped in JP2 boxes), decoded to JPEG and read as a face; damaged, truncated
 * and non-JPEG 2000 input refused with a reason.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import test from 'ava';
import sharp from 'sharp';
import { DEFAULT_EMBEDDER, loadEmbedderSpec } from '../../src/vision/embedder.ts';
import { faceScore, readFaces } from '../../src/vision/faces.ts';
import { codestream, jpeg2000ToJpeg, Jpeg2000Error } from '../../src/vision/jpeg2000.ts';

interface Encoder {
  getDecodedBuffer(info: { width: number; height: number; bitsPerSample: number; componentCount: number; isSigned: boolean; isUsingColorTransform: boolean }): Uint8Array;
  encode(): void;
  getEncodedBuffer(): Uint8Array;
}
const library = (await (createRequire(import.meta.url)('@cornerstonejs/codec-openjpeg/wasmjs') as (module: object) => Promise<{ J2KEncoder: new () => Encoder }>)({ print: () => {}, printErr: () => {} }));

const astronaut = fs.readFileSync(path.resolve(import.meta.dirname, '../fixtures/faces/astronaut.jpg'));
const spec = loadEmbedderSpec(DEFAULT_EMBEDDER);

async function encode(): Promise<Buffer> {
  const { data, info } = await sharp(astronaut).raw().toBuffer({ resolveWithObject: true });
  const encoder = new library.J2KEncoder();
  encoder.getDecodedBuffer({ width: info.width, height: info.height, bitsPerSample: 8, componentCount: 3, isSigned: false, isUsingColorTransform: true }).set(data);
  encoder.encode();
  return Buffer.from(encoder.getEncodedBuffer());
}

function jp2(stream: Buffer): Buffer {
  const boxed = (type: string, body: Buffer) => {
    const out = Buffer.concat([Buffer.alloc(4), Buffer.from(type, 'latin1'), body]);
    out.writeUInt32BE(out.length, 0);
    return out;
  };
  return Buffer.concat([
    Buffer.from([0x00, 0x00, 0x00, 0x0c, 0x6a, 0x50, 0x20, 0x20, 0x0d, 0x0a, 0x87, 0x0a]),
    boxed('ftyp', Buffer.from('jp2 \0\0\0\0jp2 ', 'latin1')),
    boxed('jp2c', stream),
  ]);
}

test('a JPEG 2000 portrait, bare codestream or JP2, is decoded to a JPEG whose face is the same person', async (t) => {
  const stream = await encode();
  const reference = await readFaces(astronaut, spec);
  for (const [name, file] of [['codestream', stream], ['JP2', jp2(stream)]] as const) {
    const { jpeg, width, height } = await jpeg2000ToJpeg(file);
    t.is(width, 512, name);
    t.is(height, 512, name);
    t.deepEqual([...jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff], name);
    const read = await readFaces(jpeg, spec);
    t.true(faceScore(reference.embedding!, read.embedding!, spec.metric) >= spec.threshold, name);
  }
  t.deepEqual(codestream(jp2(stream)), stream);
});

test('damaged, truncated and non-JPEG 2000 data are refused with the reason', async (t) => {
  const stream = await encode();
  await t.throwsAsync(jpeg2000ToJpeg(Buffer.from('GIF89a not at all')), { instanceOf: Jpeg2000Error, message: /not a JPEG 2000 file/ });
  await t.throwsAsync(jpeg2000ToJpeg(stream.subarray(0, 12)), { instanceOf: Jpeg2000Error, message: /could not be decoded/ });
  const wrapped = jp2(stream);
  await t.throwsAsync(jpeg2000ToJpeg(wrapped.subarray(0, 40)), { instanceOf: Jpeg2000Error, message: /runs past the end/ });
});
