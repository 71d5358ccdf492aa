import test, { type ExecutionContext } from 'ava';
import fc from 'fast-check';
import sharp from 'sharp';
import { NFC_MAX_BYTES, NfcFormatError, parseNfcUpload } from '../../src/modules/kyc/verifiers/nfc-chip.ts';
import { dg1, dg2, tlv } from '../helpers/lds.ts';

const MRZ = {
  TD3: ['P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<', 'L898902C36UTO7408122F1204159ZE184226B<<<<<10'],
  TD2: ['I<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<', 'D231458907UTO7408122F1204159<<<<<<<6'],
  TD1: ['I<UTOD231458907<<<<<<<<<<<<<<<', '7408122F1204159UTO<<<<<<<<<<<6', 'ERIKSSON<<ANNA<MARIA<<<<<<<<<<'],
};

const JPEG = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#888' } }).jpeg().toBuffer();
/** The JP2 signature box, then the start of a file type box: enough for the signature search. */
const JP2 = Buffer.from('0000000c6a5020200d0a870a00000014667479706a703220', 'hex');
/** A raw JPEG 2000 codestream: SOC and SIZ markers. */
const J2K = Buffer.from('ff4fff51002f0000', 'hex');

const COM = tlv(0x60, [
  tlv(0x5f01, Buffer.from('0107', 'latin1')),
  tlv(0x5f36, Buffer.from('040000', 'latin1')),
  tlv(0x5c, Buffer.from([0x61, 0x75, 0x6b, 0x6c, 0x6e])),
]);
const DG11 = tlv(0x6b, [tlv(0x5c, Buffer.from([0x5f, 0x0e])), tlv(0x5f0e, Buffer.from('ERIKSSON<<ANNA<MARIA', 'latin1'))]);
const DG12 = tlv(0x6c, [tlv(0x5c, Buffer.from([0x5f, 0x19])), tlv(0x5f19, Buffer.from('UTOPIA', 'latin1'))]);
const DG14 = tlv(0x6e, tlv(0x31, tlv(0x30, [tlv(0x06, Buffer.from('04007f0007020202', 'hex')), tlv(0x02, Buffer.from([1]))])));
const SOD = tlv(0x77, tlv(0x30, [tlv(0x06, Buffer.from('2a864886f70d010702', 'hex')), tlv(0xa0, tlv(0x30, Buffer.alloc(40, 7)))]));

function json(groups: Record<string, unknown>): Buffer {
  return Buffer.from(JSON.stringify(groups));
}

function rejects(t: ExecutionContext, data: Buffer, message: RegExp): void {
  t.throws(() => parseNfcUpload(data), { instanceOf: NfcFormatError, message });
}

for (const [format, lines] of Object.entries(MRZ)) {
  test(`a ${format} DG1 and a JPEG DG2 parse from JSON with base64 data groups`, (t) => {
    const chip = parseNfcUpload(json({ dg1: dg1(lines).toString('base64'), dg2: dg2(JPEG).toString('base64') }));
    t.deepEqual(chip.dg1, { mrz: lines.join(''), lines });
    t.is(chip.portrait?.format, 'jpeg');
    t.deepEqual(chip.portrait?.image, JPEG);
    t.deepEqual(chip.dataGroups, ['DG1', 'DG2']);
  });

  test(`a ${format} DG1 and a JPEG DG2 parse from concatenated binary TLVs`, (t) => {
    const chip = parseNfcUpload(Buffer.concat([dg1(lines), dg2(JPEG)]));
    t.deepEqual(chip.dg1, { mrz: lines.join(''), lines });
    t.deepEqual(chip.portrait, { format: 'jpeg', image: JPEG });
    t.deepEqual(chip.dataGroups, ['DG1', 'DG2']);
  });
}

test('the extracted JPEG is the real image', async (t) => {
  const chip = parseNfcUpload(Buffer.concat([dg1(MRZ.TD3), dg2(JPEG)]));
  const metadata = await sharp(chip.portrait!.image).metadata();
  t.like(metadata, { format: 'jpeg', width: 8, height: 8 });
});

test('JPEG 2000 portraits are recognised in the JP2 file format and as a bare codestream', (t) => {
  for (const image of [JP2, J2K]) {
    const chip = parseNfcUpload(Buffer.concat([dg1(MRZ.TD3), dg2(image)]));
    t.deepEqual(chip.portrait, { format: 'jpeg2000', image });
  }
});

test('the 7F2E form of the biometric data block is read like 5F2E', (t) => {
  const chip = parseNfcUpload(Buffer.concat([dg1(MRZ.TD3), dg2(JPEG, { blockTag: 0x7f2e })]));
  t.deepEqual(chip.portrait, { format: 'jpeg', image: JPEG });
});

test('without DG2 the portrait is null', (t) => {
  t.is(parseNfcUpload(dg1(MRZ.TD1)).portrait, null);
  t.is(parseNfcUpload(json({ dg1: dg1(MRZ.TD1).toString('base64'), dg2: null })).portrait, null);
});

test('other LDS files are skipped but listed, in any order', (t) => {
  const chip = parseNfcUpload(Buffer.concat([COM, SOD, dg2(JPEG), DG14, dg1(MRZ.TD3), DG12, DG11]));
  t.deepEqual(chip.dg1.lines, MRZ.TD3);
  t.is(chip.portrait?.format, 'jpeg');
  t.deepEqual(chip.dataGroups, ['COM', 'DG1', 'DG2', 'DG11', 'DG12', 'DG14', 'SOD']);
});

test('JSON keys are case-insensitive, base64url and wrapped base64 are accepted, other keys are ignored', (t) => {
  const wrapped = dg2(J2K).toString('base64').replace(/.{16}/g, '$&\n');
  const groups = { DG1: dg1(MRZ.TD2).toString('base64url'), Dg2: wrapped, sod: SOD.toString('base64'), reader: 'ios-17' };
  const chip = parseNfcUpload(Buffer.from(`\uFEFF \n${JSON.stringify(groups)}`));
  t.deepEqual(chip.dg1.lines, MRZ.TD2);
  t.deepEqual(chip.portrait, { format: 'jpeg2000', image: J2K });
  t.deepEqual(chip.dataGroups, ['DG1', 'DG2', 'SOD']);
});

test('long-form lengths of one, two and three bytes are read', async (t) => {
  const large = await sharp({
    create: { width: 320, height: 320, channels: 3, background: '#000', noise: { type: 'gaussian', mean: 128, sigma: 60 } },
  })
    .jpeg({ quality: 100 })
    .toBuffer();
  t.true(large.length > 65536);
  const images = [Buffer.concat([J2K, Buffer.alloc(100)]), JPEG, large];
  t.deepEqual(
    images.map((image) => dg2(image)[1]),
    [0x81, 0x82, 0x83],
  );
  for (const image of images) {
    const chip = parseNfcUpload(Buffer.concat([dg1(MRZ.TD3), dg2(image)]));
    t.deepEqual(chip.portrait?.image, image);
  }
});

test('an upload of exactly the limit is accepted', (t) => {
  const withPadding = (padding: number) => Buffer.concat([dg1(MRZ.TD3), dg2(Buffer.concat([JPEG, Buffer.alloc(padding)]))]);
  const overhead = withPadding(0x10000).length - 0x10000;
  const upload = withPadding(NFC_MAX_BYTES - overhead);
  t.is(upload.length, NFC_MAX_BYTES);
  t.is(parseNfcUpload(upload).portrait?.image.length, NFC_MAX_BYTES - overhead + JPEG.length);
});

test('empty and oversized uploads are refused', (t) => {
  rejects(t, Buffer.alloc(0), /upload is empty/);
  rejects(t, Buffer.alloc(NFC_MAX_BYTES + 1, 0x61), /upload is 2097153 bytes; the limit is 2097152/);
});

test('an upload that is neither JSON nor an LDS TLV stream is refused', (t) => {
  rejects(t, Buffer.from('hello, chip'), /^upload is not JSON and not an LDS TLV stream: tag 0x68 declares 101 bytes/);
  rejects(t, JPEG, /^upload is not JSON and not an LDS TLV stream: first byte 0xFF is neither '\{' nor an LDS file tag$/);
  rejects(t, Buffer.from('[1, 2]'), /not JSON and not an LDS TLV stream/);
  rejects(t, Buffer.from('{"dg1": '), /starts like JSON but is not valid JSON/);
  rejects(t, Buffer.from([0x7b, 0xff, 0x7d]), /not valid JSON/);
  rejects(
    t,
    Buffer.concat([dg1(MRZ.TD3), Buffer.from('trailing text')]),
    /not an LDS TLV stream: tag 0x74 declares 114 bytes but only 11 remain \(offset 93\)$/,
  );
  rejects(
    t,
    Buffer.concat([dg1(MRZ.TD3), tlv(0x30, Buffer.alloc(4))]),
    /not an LDS TLV stream: tag 0x30 is not an LDS file tag \(offset 93\)$/,
  );
});

test('DG1 is required', (t) => {
  rejects(t, json({ dg2: dg2(JPEG).toString('base64') }), /^DG1 is missing$/);
  rejects(t, json({ dg1: null }), /^DG1 is missing$/);
  rejects(t, Buffer.concat([COM, dg2(JPEG)]), /^DG1 is missing$/);
});

test('JSON data groups must be strict base64 holding the named group', (t) => {
  rejects(t, json({ dg1: '***' }), /"dg1" is not valid base64 or base64url/);
  rejects(t, json({ dg1: dg1(MRZ.TD3).toString('base64').slice(3) }), /"dg1" is not valid base64/);
  rejects(t, json({ dg1: 'YW=Jj' }), /"dg1" is not valid base64/);
  rejects(t, json({ dg1: 'YWJj=' }), /"dg1" is not valid base64/);
  rejects(t, json({ dg1: '' }), /"dg1" is empty/);
  rejects(t, json({ dg1: 42 }), /"dg1" must be a base64 string/);
  rejects(t, json({ dg1: dg2(JPEG).toString('base64') }), /"dg1" must hold exactly one DG1 TLV \(tag 0x61\)/);
  rejects(t, json({ dg1: Buffer.concat([dg1(MRZ.TD3), dg1(MRZ.TD3)]).toString('base64') }), /exactly one DG1/);
  rejects(t, json({ dg1: dg1(MRZ.TD3).toString('base64'), DG1: dg1(MRZ.TD3).toString('base64') }), /gives DG1 twice/);
});

test('truncated TLVs and lengths that run past the end are refused', (t) => {
  const upload = Buffer.concat([dg1(MRZ.TD3), dg2(JPEG)]);
  for (const cut of [1, 2, 50, 91, 92, 94, 95, 120, upload.length - 1]) {
    t.throws(() => parseNfcUpload(upload.subarray(0, cut)), { instanceOf: NfcFormatError }, `cut at ${cut}`);
  }
  rejects(
    t,
    upload.subarray(0, 50),
    /^upload is not JSON and not an LDS TLV stream: tag 0x61 declares 91 bytes but only 48 remain \(offset 0\)$/,
  );
  rejects(t, Buffer.from([0x61]), /tag 0x61 without a length/);
  rejects(t, Buffer.from([0x75, 0x82, 0x01]), /truncated length for tag 0x75/);
  rejects(
    t,
    json({ dg1: Buffer.from([0x61, 0x03, 0x5f]).toString('base64') }),
    /^JSON "dg1": tag 0x61 declares 3 bytes but only 1 remain \(offset 0\)$/,
  );

  const lying = Buffer.from(dg1(MRZ.TD3));
  lying[4] = 0x59; // the MRZ field claims one byte more than its group holds
  rejects(t, lying, /^DG1: tag 0x5F1F declares 89 bytes but only 88 remain \(offset 0\)$/);
  rejects(t, Buffer.from([0x61, 0x84, 0, 0, 0, 1, 0]), /length field of 4 bytes/);
  rejects(t, Buffer.from([0x61, 0x80, 0, 0]), /indefinite length/);
  rejects(t, Buffer.concat([tlv(0x61, Buffer.from([0x5f])), dg2(JPEG)]), /^DG1: truncated tag \(offset 0\)$/);
  rejects(t, tlv(0x61, Buffer.from([0x5f, 0x81, 0x82, 0x83, 0x01, 0x00])), /tag longer than 3 bytes/);
});

test('a DG1 without an MRZ of a known length is refused', (t) => {
  rejects(t, dg1([MRZ.TD3[0]!]), /^DG1 MRZ is 44 characters; expected 90 \(TD1\), 72 \(TD2\) or 88 \(TD3\)$/);
  rejects(t, tlv(0x61, tlv(0x5f1f, Buffer.alloc(0))), /DG1 MRZ is 0 characters/);
  rejects(t, tlv(0x61, Buffer.alloc(0)), /DG1 holds no MRZ \(tag 0x5F1F\)/);
  rejects(t, dg1(MRZ.TD3.map((line) => line.toLowerCase())), /characters other than A-Z, 0-9 and </);
  rejects(t, Buffer.concat([dg1(MRZ.TD3), dg1(MRZ.TD1)]), /holds DG1 twice/);
});

test('a DG2 without a JPEG or JPEG 2000 image is refused', (t) => {
  const withDg2 = (group: Buffer) => Buffer.concat([dg1(MRZ.TD3), group]);
  rejects(t, withDg2(dg2(Buffer.from('not an image at all'))), /^DG2 holds no JPEG or JPEG 2000 image$/);
  rejects(t, withDg2(dg2(Buffer.alloc(0))), /^DG2 holds no JPEG or JPEG 2000 image$/);
  rejects(t, withDg2(tlv(0x75, tlv(0x02, Buffer.from([1])))), /no biometric information group template \(0x7F61\)/);
  rejects(t, withDg2(tlv(0x75, tlv(0x7f61, tlv(0x02, Buffer.from([1]))))), /no biometric information template \(0x7F60\)/);
  rejects(t, withDg2(tlv(0x75, tlv(0x7f61, tlv(0x7f60, tlv(0xa1, Buffer.alloc(0)))))), /no biometric data block/);
  const bare = tlv(0x75, tlv(0x7f61, tlv(0x7f60, tlv(0x5f2e, JPEG))));
  rejects(t, withDg2(bare), /not an ISO\/IEC 19794-5 facial record/);
});

test('random bytes never raise anything but NfcFormatError', (t) => {
  const check = (bytes: Uint8Array) => {
    try {
      parseNfcUpload(Buffer.from(bytes));
    } catch (error) {
      if (!(error instanceof NfcFormatError)) throw error;
    }
  };
  const ldsStart = fc.constantFrom(0x60, 0x61, 0x75, 0x6b, 0x77, 0x7b);
  t.notThrows(() => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 400 }), check), { numRuns: 2000 });
    fc.assert(
      fc.property(ldsStart, fc.uint8Array({ maxLength: 400 }), (first, rest) => check(Uint8Array.of(first, ...rest))),
      { numRuns: 2000 },
    );
  });
});

test('damaged uploads parse or raise NfcFormatError, never anything else', (t) => {
  const valid = Buffer.concat([COM, dg1(MRZ.TD1), dg2(JPEG), SOD]);
  const damage = fc.record({
    // Uncut half the time, so that overwritten bytes reach the parsing inside the data groups.
    cut: fc.option(fc.nat({ max: valid.length }), { nil: valid.length }),
    writes: fc.array(fc.tuple(fc.nat({ max: valid.length - 1 }), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
    asJson: fc.boolean(),
  });
  t.notThrows(() =>
    fc.assert(
      fc.property(damage, ({ cut, writes, asJson }) => {
        const bytes = Buffer.from(valid.subarray(0, cut));
        for (const [position, value] of writes) if (position < bytes.length) bytes[position] = value;
        const upload = asJson ? json({ dg1: bytes.toString('base64'), dg2: bytes.toString('base64url') }) : bytes;
        try {
          parseNfcUpload(upload);
        } catch (error) {
          if (!(error instanceof NfcFormatError)) throw error;
        }
      }),
      { numRuns: 3000 },
    ),
  );
});
