/**
 * JPEG 2000 decoding for chip portraits (ICAO DG2 allows JPEG or JPEG 2000; the bundled sharp has
 * no OpenJPEG). OpenJPEG compiled to WebAssembly (@cornerstonejs/codec-openjpeg, MIT) decodes the
 * codestream; a JP2 file's codestream is its `jp2c` box. 8-bit grey or RGB images only: that is
 * what portraits are; anything else is refused with the reason.
 */
import { createRequire } from 'node:module';
import sharp from 'sharp';

interface Decoder {
  getEncodedBuffer(length: number): Uint8Array;
  decode(): void;
  getFrameInfo(): { width: number; height: number; bitsPerSample: number; componentCount: number; isSigned: boolean };
  getDecodedBuffer(): Uint8Array;
  delete(): void;
}
type OpenJpeg = { J2KDecoder: new () => Decoder };

export class Jpeg2000Error extends Error {}

const JP2_SIGNATURE = Buffer.from([0x00, 0x00, 0x00, 0x0c, 0x6a, 0x50, 0x20, 0x20, 0x0d, 0x0a, 0x87, 0x0a]);
const CODESTREAM_START = Buffer.from([0xff, 0x4f, 0xff, 0x51]);
/** Portraits are a few hundred pixels; this bounds the decoder's memory for a hostile header. */
const MAX_PIXELS = 16_000_000;

let library: Promise<OpenJpeg> | undefined;

function openJpeg(): Promise<OpenJpeg> {
  // Loaded on first use: most chips carry JPEG portraits. The library's own progress lines are muted.
  library ??= (createRequire(import.meta.url)('@cornerstonejs/codec-openjpeg/decodewasmjs') as (module: object) => Promise<OpenJpeg>)({ print: () => {}, printErr: () => {} });
  return library;
}

/** The JPEG 2000 codestream of a JP2 file (its `jp2c` box), or the input when it is a bare codestream. */
export function codestream(data: Buffer): Buffer {
  if (data.subarray(0, 4).equals(CODESTREAM_START)) return data;
  if (!data.subarray(0, JP2_SIGNATURE.length).equals(JP2_SIGNATURE)) throw new Jpeg2000Error('not a JPEG 2000 file (neither a JP2 signature nor a codestream)');
  let offset = 0;
  while (offset + 8 <= data.length) {
    let length = data.readUInt32BE(offset);
    const type = data.toString('latin1', offset + 4, offset + 8);
    let header = 8;
    if (length === 1) {
      if (offset + 16 > data.length) break;
      length = Number(data.readBigUInt64BE(offset + 8));
      header = 16;
    } else if (length === 0) {
      length = data.length - offset;
    }
    if (length < header || offset + length > data.length) throw new Jpeg2000Error(`the JP2 box ${JSON.stringify(type)} at ${offset} runs past the end of the file`);
    if (type === 'jp2c') return data.subarray(offset + header, offset + length);
    offset += length;
  }
  throw new Jpeg2000Error('the JP2 file holds no codestream (jp2c box)');
}

/** Decodes a JPEG 2000 image (JP2 or codestream) and re-encodes it as JPEG. Throws Jpeg2000Error with the reason. */
export async function jpeg2000ToJpeg(data: Buffer): Promise<{ jpeg: Buffer; width: number; height: number }> {
  const stream = codestream(data);
  const decoder = new (await openJpeg()).J2KDecoder();
  try {
    decoder.getEncodedBuffer(stream.length).set(stream);
    try {
      decoder.decode();
    } catch (error) {
      throw new Jpeg2000Error(`the JPEG 2000 image could not be decoded (${(error as Error).message ?? error})`);
    }
    const { width, height, bitsPerSample, componentCount, isSigned } = decoder.getFrameInfo();
    if (width === 0 || height === 0) throw new Jpeg2000Error('the JPEG 2000 image could not be decoded (damaged or truncated codestream)');
    if (width * height > MAX_PIXELS) throw new Jpeg2000Error(`the JPEG 2000 image is ${width}x${height}, more than a portrait`);
    if (bitsPerSample !== 8 || isSigned || (componentCount !== 1 && componentCount !== 3)) {
      throw new Jpeg2000Error(`JPEG 2000 with ${componentCount} components of ${isSigned ? 'signed ' : ''}${bitsPerSample} bits is not supported (8-bit grey or RGB only)`);
    }
    const pixels = Buffer.from(decoder.getDecodedBuffer());
    const jpeg = await sharp(pixels, { raw: { width, height, channels: componentCount } }).jpeg({ quality: 95 }).toBuffer();
    return { jpeg, width, height };
  } finally {
    decoder.delete();
  }
}
