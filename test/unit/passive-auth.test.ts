/**
 * Chip passive authentication against test vectors built with pkijs (test/helpers/pki.ts): a valid
 * chip, a tampered data group, a data group the SOD does not list, a SOD signed by another key than
 * its certificate's, a document signer from another CSCA, expired certificates, no SOD, no CSCA;
 * and reading CSCA lists as master list, LDIF, PEM and DER.
 */
import test from 'ava';
import { parseNfcUpload } from '../../src/modules/kyc/verifiers/nfc-chip.ts';
import { CscaFormatError, passiveAuthentication, readCscaFile } from '../../src/modules/kyc/verifiers/passive-auth.ts';
import { dg1, dg2 } from '../helpers/lds.ts';
import { issue, makeLdif, makeMasterList, makeSod } from '../helpers/pki.ts';

const DAY = 86_400_000;
const LINES = ['P<UTOERIKSSON<<ANNA<MARIA<<<<<<<<<<<<<<<<<<<', 'L898902C36UTO7408122F1204159ZE184226B<<<<<10'];

const csca = await issue('CSCA Utopia', undefined, { ca: true });
const signer = await issue('DS Utopia', csca);
const group1 = dg1(LINES);
const group2 = dg2(Buffer.from([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]));

/** The LDS files of an upload, as the verifier receives them from the parser. */
function files(sod: Buffer | null, groups: Buffer[] = [group1, group2]): Map<string, Buffer> {
  return parseNfcUpload(Buffer.concat([...groups, ...(sod ? [sod] : [])])).files;
}

const reasons = (result: Awaited<ReturnType<typeof passiveAuthentication>>) => result.checks.map((check) => `${check.name}:${check.passed}`);

test('a genuine chip passes every check, and the result names the signer and the CSCA', async (t) => {
  const sod = await makeSod({ DG1: group1, DG2: group2 }, signer);
  const result = await passiveAuthentication(files(sod), [csca.certificate], new Date());
  t.true(result.passed, JSON.stringify(result.checks));
  t.deepEqual(reasons(result), ['sod:true', 'data_group_hashes:true', 'sod_signature:true', 'document_signer:true']);
  t.is(result.hash_algorithm, 'sha256');
  t.is(result.document_signer!.subject, 'C=UT, CN=DS Utopia');
  t.is(result.csca!.subject, 'C=UT, CN=CSCA Utopia');
  t.is(result.failed, null);
});

test('a tampered data group fails the hash check and stops there', async (t) => {
  const sod = await makeSod({ DG1: group1, DG2: group2 }, signer);
  const forged = dg1([LINES[0]!.replace('ERIKSSON', 'ERIKSSEN'), LINES[1]!]);
  const result = await passiveAuthentication(files(sod, [forged, group2]), [csca.certificate], new Date());
  t.false(result.passed);
  t.deepEqual(reasons(result), ['sod:true', 'data_group_hashes:false', 'sod_signature:null', 'document_signer:null']);
  t.regex(result.failed!.reason, /DG1 hash does not match/);
});

test('a data group the SOD does not list fails', async (t) => {
  const sod = await makeSod({ DG1: group1 }, signer);
  const result = await passiveAuthentication(files(sod), [csca.certificate], new Date());
  t.is(result.failed!.name, 'data_group_hashes');
  t.regex(result.failed!.reason, /DG2 was sent but the SOD lists no hash/);
});

test('a SOD signed with another key than its certificate\'s fails the signature check', async (t) => {
  const impostor = await issue('DS Utopia', csca);
  // The impostor's certificate, swapped for the genuine signer's after signing.
  const sod = await makeSod({ DG1: group1, DG2: group2 }, { ...signer, keys: impostor.keys });
  const result = await passiveAuthentication(files(sod), [csca.certificate], new Date());
  t.is(result.failed!.name, 'sod_signature');
  t.regex(result.failed!.reason, /does not verify/);
});

test('a document signer from another CSCA, or with the right name but another key, is not trusted', async (t) => {
  const other = await issue('CSCA Elsewhere', undefined, { ca: true, country: 'EL' });
  const foreign = await issue('DS Elsewhere', other);
  const sod = await makeSod({ DG1: group1, DG2: group2 }, foreign);
  const result = await passiveAuthentication(files(sod), [csca.certificate], new Date());
  t.is(result.failed!.name, 'document_signer');
  t.regex(result.failed!.reason, /no imported CSCA certificate is the document signer's issuer \(C=EL, CN=CSCA Elsewhere\)/);

  // A forger's CSCA with the genuine CSCA's name: the name matches, the signature does not.
  const forger = await issue('CSCA Utopia', undefined, { ca: true });
  const forgedSigner = await issue('DS Utopia', forger);
  const forged = await passiveAuthentication(files(await makeSod({ DG1: group1, DG2: group2 }, forgedSigner)), [csca.certificate], new Date());
  t.is(forged.failed!.name, 'document_signer');
  t.regex(forged.failed!.reason, /not signed by the imported CSCA/);
  t.true(forged.checks.find((check) => check.name === 'sod_signature')!.passed!, 'the SOD itself is consistent');
});

test('expired certificates fail with the date', async (t) => {
  const expired = await issue('DS Utopia old', csca, { from: new Date(Date.now() - 900 * DAY), to: new Date(Date.now() - 30 * DAY) });
  const result = await passiveAuthentication(files(await makeSod({ DG1: group1, DG2: group2 }, expired)), [csca.certificate], new Date());
  t.is(result.failed!.name, 'document_signer');
  t.regex(result.failed!.reason, /document signer certificate expired on \d{4}-/);
  const sod = await makeSod({ DG1: group1, DG2: group2 }, signer);
  const later = await passiveAuthentication(files(sod), [csca.certificate], new Date(Date.now() + 400 * DAY));
  t.regex(later.failed!.reason, /expired on/);
});

test('no SOD, an unreadable SOD, or no CSCA imported: the check that cannot pass says why', async (t) => {
  const none = await passiveAuthentication(files(null), [csca.certificate], new Date());
  t.deepEqual(reasons(none), ['sod:false', 'data_group_hashes:null', 'sod_signature:null', 'document_signer:null']);
  t.regex(none.failed!.reason, /no EF.SOD was sent/);
  const garbage = await passiveAuthentication(new Map([...files(null), ['SOD', Buffer.from([0x77, 0x03, 0x30, 0x01, 0x00])]]), [csca.certificate], new Date());
  t.is(garbage.failed!.name, 'sod');
  t.regex(garbage.failed!.reason, /EF.SOD could not be read/);
  const sod = await makeSod({ DG1: group1, DG2: group2 }, signer);
  const untrusted = await passiveAuthentication(files(sod), [], new Date());
  t.is(untrusted.failed!.name, 'document_signer');
  t.regex(untrusted.failed!.reason, /no CSCA certificate has been imported/);
});

test('CSCA lists: a CMS master list (its own signature checked), LDIF, PEM and DER', async (t) => {
  const second = await issue('CSCA Utopia 2', undefined, { ca: true });
  const masterList = await makeMasterList([csca, second], csca);
  const fromList = await readCscaFile(masterList);
  t.is(fromList.certificates.length, 2);
  t.deepEqual(fromList.master_lists, [{ certificates: 2, signature_verified: true, signer: 'C=UT, CN=CSCA Utopia' }]);

  const ldif = await readCscaFile(Buffer.from(makeLdif(masterList, second.der)));
  t.is(ldif.certificates.length, 3);
  t.is(ldif.master_lists.length, 1);

  const pem = `-----BEGIN CERTIFICATE-----\n${csca.der.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
  t.is((await readCscaFile(Buffer.from(pem))).certificates.length, 1);
  t.is((await readCscaFile(csca.der)).certificates.length, 1);

  await t.throwsAsync(readCscaFile(Buffer.from('just some text')), { instanceOf: CscaFormatError });
  await t.throwsAsync(readCscaFile(Buffer.from('version: 1\n\ndn: cn=x\nobjectClass: top\n')), { instanceOf: CscaFormatError, message: /no certificate/ });
});
