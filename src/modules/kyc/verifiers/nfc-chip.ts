/**
 * Reads the chip data of an nfc_raw upload: the ICAO 9303 LDS data groups of an eMRTD, as the
 * phone read them. Two forms are accepted:
 *
 * 1. A JSON object whose keys name LDS files (case-insensitive: "dg1", "DG1", "Dg2"; also "com",
 *    "dg3".."dg16", "sod") and whose values are base64 or base64url strings, each the file's full
 *    TLV as read from the chip (DG1 starts with 0x61, DG2 with 0x75). dg1 is required; a null value
 *    counts as absent; keys that name no LDS file are ignored.
 * 2. The files' TLVs concatenated, in any order (COM 0x60, DG1 0x61, DG2 0x75, DG11 0x6B, SOD 0x77...).
 *
 * Only DG1 (the MRZ) and DG2 (the portrait) are interpreted; the other files are checked to be
 * well-formed TLVs, listed in `dataGroups` and returned whole in `files` for passive
 * authentication (passive-auth.ts), which verifies the SOD.
 */

/** An upload is the LDS of one document: a DG2 with a full-page portrait stays well below this. */
export const NFC_MAX_BYTES = 2 * 1024 * 1024;

export class NfcFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NfcFormatError';
  }
}

export interface NfcChipData {
  dg1: { mrz: string; lines: string[] };
  /** From DG2; null when the upload has no DG2. */
  portrait: { format: 'jpeg' | 'jpeg2000'; image: Buffer } | null;
  /** The LDS files present, in LDS order: 'COM', 'DG1'..'DG16', 'SOD'. */
  dataGroups: string[];
  /** Each file's whole TLV (tag, length and value), as the SOD hashes it. */
  files: Map<string, Buffer>;
}

interface Tlv {
  tag: number;
  /** Where the element starts in the buffer it was read from, for error messages. */
  offset: number;
  value: Buffer;
  /** The whole element: tag, length and value. */
  raw: Buffer;
}

/** ICAO 9303-10 file tags, in the order `dataGroups` lists them. */
const LDS_FILES: ReadonlyArray<readonly [name: string, tag: number]> = [
  ['COM', 0x60],
  ['DG1', 0x61],
  ['DG2', 0x75],
  ['DG3', 0x63],
  ['DG4', 0x76],
  ['DG5', 0x65],
  ['DG6', 0x66],
  ['DG7', 0x67],
  ['DG8', 0x68],
  ['DG9', 0x69],
  ['DG10', 0x6a],
  ['DG11', 0x6b],
  ['DG12', 0x6c],
  ['DG13', 0x6d],
  ['DG14', 0x6e],
  ['DG15', 0x6f],
  ['DG16', 0x70],
  ['SOD', 0x77],
];
const NAME_BY_TAG = new Map(LDS_FILES.map(([name, tag]) => [tag, name]));
const TAG_BY_NAME = new Map(LDS_FILES);
/** Lower-cased, because upper-casing maps some non-ASCII letters onto ASCII ('ſ' to 'S'). */
const NAME_BY_JSON_KEY = new Map(LDS_FILES.map(([name]) => [name.toLowerCase(), name]));

const TAG_MRZ = 0x5f1f;
const TAG_BIOMETRIC_GROUP = 0x7f61;
const TAG_BIOMETRIC_INFO = 0x7f60;
const TAG_BIOMETRIC_DATA = 0x5f2e;
const TAG_BIOMETRIC_DATA_ENCIPHERED = 0x7f2e;

/** ISO/IEC 7816-4 tags are at most three bytes; a longer one means the bytes are not BER-TLV. */
const MAX_TAG_BYTES = 3;
/** Three length bytes already exceed NFC_MAX_BYTES. */
const MAX_LENGTH_BYTES = 3;

/** TD1 3x30, TD2 (and MRV-B) 2x36, TD3 (and MRV-A) 2x44. */
const MRZ_LINE_LENGTH = new Map([
  [90, 30],
  [72, 36],
  [88, 44],
]);

const FACIAL_RECORD_MAGIC = Buffer.from('FAC\0', 'latin1');
/** 'FAC\0', version, record length and image count: the image cannot start inside it. */
const FACIAL_GENERAL_HEADER_BYTES = 14;
const IMAGE_SIGNATURES: ReadonlyArray<{ format: 'jpeg' | 'jpeg2000'; bytes: Buffer }> = [
  { format: 'jpeg', bytes: Buffer.from([0xff, 0xd8, 0xff]) },
  { format: 'jpeg2000', bytes: Buffer.from([0x00, 0x00, 0x00, 0x0c, 0x6a, 0x50, 0x20, 0x20]) },
  { format: 'jpeg2000', bytes: Buffer.from([0xff, 0x4f, 0xff, 0x51]) },
];

const JSON_WHITESPACE = new Set([0x20, 0x09, 0x0a, 0x0d]);
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

export function parseNfcUpload(data: Buffer): NfcChipData {
  if (data.length === 0) throw new NfcFormatError('upload is empty');
  if (data.length > NFC_MAX_BYTES) {
    throw new NfcFormatError(`upload is ${data.length} bytes; the limit is ${NFC_MAX_BYTES}`);
  }
  const files = looksLikeJsonObject(data) ? filesFromJson(data) : filesFromTlvStream(data);
  const dg1 = files.get('DG1');
  if (!dg1) throw new NfcFormatError('DG1 is missing');
  const dg2 = files.get('DG2');
  return {
    dg1: parseDg1(dg1),
    portrait: dg2 ? parseDg2(dg2) : null,
    dataGroups: LDS_FILES.map(([name]) => name).filter((name) => files.has(name)),
    files: new Map([...files].map(([name, file]) => [name, file.raw])),
  };
}

/** No LDS file tag is '{', whitespace or the start of a UTF-8 byte order mark, so this cannot misjudge a TLV stream. */
function looksLikeJsonObject(data: Buffer): boolean {
  let i = data[0] === 0xef && data[1] === 0xbb && data[2] === 0xbf ? 3 : 0;
  while (i < data.length && JSON_WHITESPACE.has(data[i]!)) i++;
  return data[i] === 0x7b;
}

function filesFromJson(data: Buffer): Map<string, Tlv> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(data));
  } catch (error) {
    throw new NfcFormatError(`upload starts like JSON but is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new NfcFormatError('JSON upload must be an object of base64 data groups');
  }
  const files = new Map<string, Tlv>();
  for (const [key, value] of Object.entries(parsed)) {
    const name = NAME_BY_JSON_KEY.get(key.toLowerCase());
    if (name === undefined || value === null) continue;
    if (files.has(name)) throw new NfcFormatError(`JSON upload gives ${name} twice`);
    if (typeof value !== 'string') throw new NfcFormatError(`JSON "${key}" must be a base64 string`);
    const bytes = decodeBase64(value, key);
    const [file, ...rest] = parseTlvs(bytes, `JSON "${key}"`);
    const tag = TAG_BY_NAME.get(name)!;
    if (!file || file.tag !== tag || rest.length > 0) {
      throw new NfcFormatError(`JSON "${key}" must hold exactly one ${name} TLV (tag ${hex(tag)})`);
    }
    files.set(name, file);
  }
  return files;
}

/** Strict, because Buffer.from(…, 'base64') silently skips characters it does not know. */
function decodeBase64(text: string, key: string): Buffer {
  // Line-wrapped (MIME) base64 is common enough to accept.
  const compact = text.replace(/\s+/g, '');
  if (compact.length === 0) throw new NfcFormatError(`JSON "${key}" is empty`);
  const padded = compact.endsWith('=');
  if (!BASE64.test(compact) || compact.length % 4 === 1 || (padded && compact.length % 4 !== 0)) {
    throw new NfcFormatError(`JSON "${key}" is not valid base64 or base64url`);
  }
  return Buffer.from(compact, 'base64');
}

function filesFromTlvStream(data: Buffer): Map<string, Tlv> {
  const context = 'upload is not JSON and not an LDS TLV stream';
  if (!NAME_BY_TAG.has(data[0]!)) {
    throw new NfcFormatError(`${context}: first byte ${hex(data[0]!)} is neither '{' nor an LDS file tag`);
  }
  const files = new Map<string, Tlv>();
  for (const element of parseTlvs(data, context)) {
    const name = NAME_BY_TAG.get(element.tag);
    if (!name) {
      throw new NfcFormatError(`${context}: tag ${hex(element.tag)} is not an LDS file tag (offset ${element.offset})`);
    }
    if (files.has(name)) throw new NfcFormatError(`upload holds ${name} twice`);
    files.set(name, element);
  }
  return files;
}

function parseDg1(dg1: Tlv): NfcChipData['dg1'] {
  const field = parseTlvs(dg1.value, 'DG1').find((element) => element.tag === TAG_MRZ);
  if (!field) throw new NfcFormatError(`DG1 holds no MRZ (tag ${hex(TAG_MRZ)})`);
  const mrz = field.value.toString('latin1');
  const lineLength = MRZ_LINE_LENGTH.get(mrz.length);
  if (lineLength === undefined) {
    throw new NfcFormatError(`DG1 MRZ is ${mrz.length} characters; expected 90 (TD1), 72 (TD2) or 88 (TD3)`);
  }
  if (!/^[A-Z0-9<]+$/.test(mrz)) throw new NfcFormatError('DG1 MRZ has characters other than A-Z, 0-9 and <');
  const lines: string[] = [];
  for (let start = 0; start < mrz.length; start += lineLength) lines.push(mrz.slice(start, start + lineLength));
  return { mrz, lines };
}

/**
 * Walks DG2 > 7F61 > 7F60 > 5F2E/7F2E along this fixed path only, never into other constructed
 * elements, so nesting depth is bounded by the code rather than by the input. The first 7F60 is
 * the portrait; further faces are ignored.
 */
function parseDg2(dg2: Tlv): NonNullable<NfcChipData['portrait']> {
  const group = parseTlvs(dg2.value, 'DG2').find((element) => element.tag === TAG_BIOMETRIC_GROUP);
  if (!group) throw new NfcFormatError(`DG2 has no biometric information group template (${hex(TAG_BIOMETRIC_GROUP)})`);
  const info = parseTlvs(group.value, `DG2 ${hex(TAG_BIOMETRIC_GROUP)}`).find(
    (element) => element.tag === TAG_BIOMETRIC_INFO,
  );
  if (!info) throw new NfcFormatError(`DG2 has no biometric information template (${hex(TAG_BIOMETRIC_INFO)})`);
  const block = parseTlvs(info.value, `DG2 ${hex(TAG_BIOMETRIC_INFO)}`).find(
    (element) => element.tag === TAG_BIOMETRIC_DATA || element.tag === TAG_BIOMETRIC_DATA_ENCIPHERED,
  );
  if (!block) {
    throw new NfcFormatError(
      `DG2 has no biometric data block (${hex(TAG_BIOMETRIC_DATA)} or ${hex(TAG_BIOMETRIC_DATA_ENCIPHERED)})`,
    );
  }
  return portraitFromFacialRecord(block.value);
}

/**
 * The image is found by its signature rather than by walking the ISO/IEC 19794-5 headers, so that
 * feature points, the 2011 layout and vendor quirks in the header do not matter.
 */
function portraitFromFacialRecord(record: Buffer): NonNullable<NfcChipData['portrait']> {
  if (!record.subarray(0, FACIAL_RECORD_MAGIC.length).equals(FACIAL_RECORD_MAGIC)) {
    throw new NfcFormatError("DG2 biometric data block is not an ISO/IEC 19794-5 facial record (no 'FAC\\0' header)");
  }
  let found: { format: 'jpeg' | 'jpeg2000'; start: number } | null = null;
  for (const signature of IMAGE_SIGNATURES) {
    const start = record.indexOf(signature.bytes, FACIAL_GENERAL_HEADER_BYTES);
    if (start !== -1 && (found === null || start < found.start)) found = { format: signature.format, start };
  }
  if (!found) throw new NfcFormatError('DG2 holds no JPEG or JPEG 2000 image');
  // A copy, so that the portrait kept for face matching does not pin or alias the whole upload.
  return { format: found.format, image: Buffer.from(record.subarray(found.start)) };
}

/**
 * The elements that exactly fill `buffer`. `context` starts error messages and names the buffer
 * that their offsets count from.
 */
function parseTlvs(buffer: Buffer, context: string): Tlv[] {
  const elements: Tlv[] = [];
  let offset = 0;
  while (offset < buffer.length) {
    const [element, end] = readTlv(buffer, offset, context);
    elements.push(element);
    offset = end;
  }
  return elements;
}

/**
 * BER-TLV as ISO/IEC 7816-4 uses it: tags of up to three bytes, definite lengths of up to three
 * bytes. Returns the element and the offset just past it; every read is checked against the end.
 */
function readTlv(buffer: Buffer, start: number, context: string): [Tlv, number] {
  const fail = (problem: string): never => {
    throw new NfcFormatError(`${context}: ${problem} (offset ${start})`);
  };
  let position = start;
  let tag = buffer[position++]!;
  if ((tag & 0x1f) === 0x1f) {
    let byte: number;
    do {
      if (position >= buffer.length) fail('truncated tag');
      if (position - start >= MAX_TAG_BYTES) fail(`tag longer than ${MAX_TAG_BYTES} bytes`);
      byte = buffer[position++]!;
      tag = tag * 0x100 + byte;
    } while (byte & 0x80);
  }
  if (position >= buffer.length) fail(`tag ${hex(tag)} without a length`);
  const first = buffer[position++]!;
  let length = first;
  if (first & 0x80) {
    const count = first & 0x7f;
    if (count === 0) fail(`indefinite length (not allowed in the LDS) for tag ${hex(tag)}`);
    if (count > MAX_LENGTH_BYTES) {
      fail(`length field of ${count} bytes for tag ${hex(tag)} (at most ${MAX_LENGTH_BYTES})`);
    }
    if (position + count > buffer.length) fail(`truncated length for tag ${hex(tag)}`);
    length = buffer.readUIntBE(position, count);
    position += count;
  }
  const remaining = buffer.length - position;
  if (length > remaining) fail(`tag ${hex(tag)} declares ${length} bytes but only ${remaining} remain`);
  return [{ tag, offset: start, value: buffer.subarray(position, position + length), raw: buffer.subarray(start, position + length) }, position + length];
}

function hex(value: number): string {
  const digits = value.toString(16).toUpperCase();
  return `0x${digits.length % 2 ? `0${digits}` : digits}`;
}
