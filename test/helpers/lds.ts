/**
 * Builds ICAO 9303 LDS data groups for tests, laid out as a chip returns them: BER-TLV with the
 * shortest length form, DG1 = 61 { 5F1F MRZ }, DG2 = 75 { 7F61 { 02 count, 7F60 { A1 header,
 * 5F2E ISO/IEC 19794-5 facial record } } }.
 */

/** `tag` as its bytes, e.g. 0x5F1F for a two-byte tag. */
export function tlv(tag: number, value: Buffer | Buffer[]): Buffer {
  const body = Array.isArray(value) ? Buffer.concat(value) : value;
  return Buffer.concat([bigEndian(tag), encodeLength(body.length), body]);
}

export function dg1(mrzLines: string[]): Buffer {
  return tlv(0x61, tlv(0x5f1f, Buffer.from(mrzLines.join(''), 'latin1')));
}

/** `blockTag` 0x7F2E gives the variant some chips use for the biometric data block. */
export function dg2(image: Buffer, { blockTag = 0x5f2e }: { blockTag?: number } = {}): Buffer {
  const header = tlv(0xa1, [
    tlv(0x80, Buffer.from([0x01, 0x01])), // ICAO header version 1.1
    tlv(0x81, Buffer.from([0x02])), // biometric type: facial features
    tlv(0x87, Buffer.from([0x01, 0x01])), // format owner: ISO/IEC JTC 1/SC 37
    tlv(0x88, Buffer.from([0x00, 0x08])), // format type: face image
  ]);
  const info = tlv(0x7f60, [header, tlv(blockTag, facialRecord(image))]);
  return tlv(0x75, tlv(0x7f61, [tlv(0x02, Buffer.from([0x01])), info]));
}

/** ISO/IEC 19794-5:2005 with one image and no feature points; width and height left 0 (unread by the parser). */
function facialRecord(image: Buffer): Buffer {
  const facialInformation = Buffer.alloc(20);
  facialInformation.writeUInt32BE(20 + 12 + image.length, 0); // facial record data length
  const imageInformation = Buffer.alloc(12);
  imageInformation.writeUInt8(1, 0); // face image type: full frontal
  imageInformation.writeUInt8(image[0] === 0xff && image[1] === 0xd8 ? 0 : 1, 1); // image data type: JPEG or JPEG 2000
  imageInformation.writeUInt8(1, 6); // colour space: 24-bit RGB
  const general = Buffer.alloc(14);
  general.write('FAC\x00010\x00', 0, 'latin1'); // format identifier and version 010
  general.writeUInt32BE(14 + 20 + 12 + image.length, 8);
  general.writeUInt16BE(1, 12); // number of facial images
  return Buffer.concat([general, facialInformation, imageInformation, image]);
}

function encodeLength(length: number): Buffer {
  if (length < 0x80) return Buffer.from([length]);
  const bytes = bigEndian(length);
  return Buffer.concat([Buffer.from([0x80 | bytes.length]), bytes]);
}

function bigEndian(value: number): Buffer {
  const bytes: number[] = [];
  for (let rest = value; rest > 0; rest = Math.floor(rest / 0x100)) bytes.unshift(rest % 0x100);
  return Buffer.from(bytes.length > 0 ? bytes : [0]);
}
