/** Images made by the tests: unusable ones for the intake's refusals, and compositions of the test faces. */
import zlib from 'node:zlib';
import sharp from 'sharp';

/** A valid PNG header claiming 60000 x 60000 pixels over a few bytes of data: a decompression bomb. */
export function bombPng(): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
    const length = Buffer.alloc(4);
    length.writeUInt32BE(data.length);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body));
    return Buffer.concat([length, body, crc]);
  };
  const header = Buffer.alloc(13);
  header.writeUInt32BE(60_000, 0);
  header.writeUInt32BE(60_000, 4);
  header.set([8, 0, 0, 0, 0], 8);
  const rows = zlib.deflateSync(Buffer.alloc(60_001 * 4));
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', header), chunk('IDAT', rows), chunk('IEND', Buffer.alloc(0))]);
}

/** A two-frame animation of a photograph; the frames differ, since GIF writers merge identical ones. */
export async function animated(photo: Buffer, format: 'gif' | 'webp'): Promise<Buffer> {
  const frames = [await sharp(photo).resize(100).png().toBuffer(), await sharp(photo).resize(100).negate().png().toBuffer()];
  return sharp(frames, { join: { animated: true } })[format]().toBuffer();
}

/** The face twice, side by side, at two sizes (the larger on the left): a picture of two people. */
export async function twoFaces(face: Buffer): Promise<Buffer> {
  return sharp({ create: { width: 760, height: 420, channels: 3, background: '#888' } })
    .composite([
      { input: await sharp(face).resize(400).toBuffer(), left: 0, top: 0 },
      { input: await sharp(face).flop().resize(300).toBuffer(), left: 440, top: 60 },
    ])
    .jpeg()
    .toBuffer();
}
