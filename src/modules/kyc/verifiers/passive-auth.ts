/**
 * Passive authentication of chip data (ICAO 9303-11, section 5.1), with pkijs and asn1js rather
 * than hand-written ASN.1:
 *
 * 1. `sod`: EF.SOD is a CMS SignedData whose content is the LDS security object (the hash
 *    algorithm and one hash per data group);
 * 2. `data_group_hashes`: every data group sent hashes (whole TLV) to the value the SOD lists;
 * 3. `sod_signature`: the SOD's signature verifies with the document signer certificate it carries
 *    (pkijs also checks the signed messageDigest against the security object);
 * 4. `document_signer`: that certificate is signed by a CSCA certificate the operator imported
 *    (`warden csca import`), and neither is outside its validity period.
 *
 * Each check says whether it passed and why not; a check after a failed one is not run (null).
 * Also here: reading CSCA certificates from an ICAO master list (CMS), an LDIF export of the ICAO
 * PKD or a national list, PEM or DER, and their table (migrations/20261123_0008_csca.ts).
 */
import { createHash } from 'node:crypto';
import * as asn1js from 'asn1js';
import type { Knex } from 'knex';
import * as pkijs from 'pkijs';

const OID_SIGNED_DATA = '1.2.840.113549.1.7.2';
/** id-icao-mrtd-security-ldsSecurityObject and id-icao-cscaMasterList. */
const OID_LDS_SECURITY_OBJECT = '2.23.136.1.1.1';
const OID_CSCA_MASTER_LIST = '2.23.136.1.1.2';
const HASHES: Record<string, string> = {
  '1.3.14.3.2.26': 'sha1',
  '2.16.840.1.101.3.4.2.4': 'sha224',
  '2.16.840.1.101.3.4.2.1': 'sha256',
  '2.16.840.1.101.3.4.2.2': 'sha384',
  '2.16.840.1.101.3.4.2.3': 'sha512',
};
const NAME_ATTRIBUTES: Record<string, string> = { '2.5.4.6': 'C', '2.5.4.10': 'O', '2.5.4.11': 'OU', '2.5.4.3': 'CN', '2.5.4.5': 'serialNumber', '2.5.4.7': 'L' };

export type CheckName = 'sod' | 'data_group_hashes' | 'sod_signature' | 'document_signer';
export interface Check {
  name: CheckName;
  /** null: not run, because an earlier check failed. */
  passed: boolean | null;
  reason: string;
}

export interface CertificateSummary {
  subject: string;
  issuer: string;
  serial: string;
  not_before: string;
  not_after: string;
}

export interface PassiveAuthentication {
  passed: boolean;
  checks: Check[];
  /** The first failed check, whose reason the result's message gives. */
  failed: Check | null;
  hash_algorithm: string | null;
  document_signer: CertificateSummary | null;
  csca: CertificateSummary | null;
}

export class CscaFormatError extends Error {}

/** "C=UT, O=Utopia, CN=CSCA Utopia". */
export function distinguishedName(name: pkijs.RelativeDistinguishedNames): string {
  return name.typesAndValues.map((entry) => `${NAME_ATTRIBUTES[entry.type] ?? entry.type}=${entry.value.valueBlock.value}`).join(', ');
}

export function summarise(certificate: pkijs.Certificate): CertificateSummary {
  return {
    subject: distinguishedName(certificate.subject),
    issuer: distinguishedName(certificate.issuer),
    serial: Buffer.from(certificate.serialNumber.valueBlock.valueHexView).toString('hex'),
    not_before: certificate.notBefore.value.toISOString(),
    not_after: certificate.notAfter.value.toISOString(),
  };
}

const nameDer = (name: pkijs.RelativeDistinguishedNames) => Buffer.from(name.toSchema().toBER()).toString('hex');

/** The subject key identifier extension's value, hex; null when the certificate has none. */
function subjectKeyId(certificate: pkijs.Certificate): string | null {
  const extension = certificate.extensions?.find((e) => e.extnID === '2.5.29.14');
  if (!extension) return null;
  const parsed = asn1js.fromBER(extension.extnValue.getValue());
  return parsed.offset === -1 ? null : Buffer.from((parsed.result as asn1js.OctetString).getValue()).toString('hex');
}

/** The hash algorithm and the data group hashes of an LDS security object (DER). */
function readSecurityObject(der: ArrayBuffer): { algorithm: string; hashes: Map<number, Buffer> } {
  const parsed = asn1js.fromBER(der);
  const root = parsed.result;
  if (parsed.offset === -1 || !(root instanceof asn1js.Sequence)) throw new Error('the LDS security object is not a DER SEQUENCE');
  const [version, algorithm, groups] = root.valueBlock.value;
  if (!(version instanceof asn1js.Integer) || !(algorithm instanceof asn1js.Sequence) || !(groups instanceof asn1js.Sequence)) {
    throw new Error('the LDS security object does not have version, hashAlgorithm and dataGroupHashValues');
  }
  const oid = algorithm.valueBlock.value[0];
  if (!(oid instanceof asn1js.ObjectIdentifier)) throw new Error('the hash algorithm is not an OID');
  const hashes = new Map<number, Buffer>();
  for (const group of groups.valueBlock.value) {
    const [number, value] = group instanceof asn1js.Sequence ? group.valueBlock.value : [];
    if (!(number instanceof asn1js.Integer) || !(value instanceof asn1js.OctetString)) throw new Error('a data group hash is not (INTEGER, OCTET STRING)');
    hashes.set(number.valueBlock.valueDec, Buffer.from(value.getValue()));
  }
  return { algorithm: oid.valueBlock.toString(), hashes };
}

/**
 * Passive authentication of the LDS files of one upload (name to the file's whole TLV: 'DG1',
 * 'DG2', ..., 'SOD') against the imported CSCA certificates, at `now`.
 */
/**
 * Where the CSCA certificates come from: a list, or a lookup by the issuer's name (DER, hex) that
 * also says how many are imported in all (cscaLookup reads the table).
 */
export type CscaSource = readonly pkijs.Certificate[] | ((issuer: string) => Promise<{ imported: number; candidates: pkijs.Certificate[] }>);

export async function passiveAuthentication(files: ReadonlyMap<string, Buffer>, cscas: CscaSource, now: Date): Promise<PassiveAuthentication> {
  const checks: Check[] = [];
  const result: PassiveAuthentication = { passed: false, checks, failed: null, hash_algorithm: null, document_signer: null, csca: null };
  const order: CheckName[] = ['sod', 'data_group_hashes', 'sod_signature', 'document_signer'];
  const finish = (name: CheckName, reason: string): PassiveAuthentication => {
    const failed: Check = { name, passed: false, reason };
    checks.push(failed);
    for (const later of order.slice(order.indexOf(name) + 1)) checks.push({ name: later, passed: null, reason: `not checked: ${name} failed` });
    return { ...result, failed };
  };

  // 1. The SOD and its security object.
  const sodFile = files.get('SOD');
  if (!sodFile) return finish('sod', 'no EF.SOD was sent, so the data groups cannot be authenticated');
  let signedData: pkijs.SignedData;
  let security: ReturnType<typeof readSecurityObject>;
  try {
    const sod = asn1js.fromBER(new Uint8Array(sodFile));
    if (sod.offset === -1 || sod.result.idBlock.tagClass !== 2 || sod.result.idBlock.tagNumber !== 23) throw new Error('not an application 23 (0x77) element');
    const content = (sod.result as asn1js.Constructed).valueBlock.value[0];
    if (!content) throw new Error('EF.SOD is empty');
    const info = new pkijs.ContentInfo({ schema: content });
    if (info.contentType !== OID_SIGNED_DATA) throw new Error(`content type ${info.contentType} is not CMS SignedData`);
    signedData = new pkijs.SignedData({ schema: info.content });
    if (signedData.encapContentInfo.eContentType !== OID_LDS_SECURITY_OBJECT) throw new Error(`the signed content is ${signedData.encapContentInfo.eContentType}, not an LDS security object`);
    if (!signedData.encapContentInfo.eContent) throw new Error('the signed content is missing');
    security = readSecurityObject(signedData.encapContentInfo.eContent.getValue());
  } catch (error) {
    return finish('sod', `EF.SOD could not be read: ${(error as Error).message}`);
  }
  const hash = HASHES[security.algorithm];
  if (!hash) return finish('sod', `the SOD's hash algorithm ${security.algorithm} is not supported`);
  result.hash_algorithm = hash;
  checks.push({ name: 'sod', passed: true, reason: `LDS security object with ${hash} hashes of ${[...security.hashes.keys()].map((n) => `DG${n}`).join(', ')}` });

  // 2. Every data group sent against its hash.
  const sent = [...files.keys()].filter((name) => /^DG\d+$/.test(name));
  for (const name of sent) {
    const expected = security.hashes.get(Number(name.slice(2)));
    if (!expected) return finish('data_group_hashes', `${name} was sent but the SOD lists no hash for it`);
    if (!createHash(hash).update(files.get(name)!).digest().equals(expected)) return finish('data_group_hashes', `the ${name} hash does not match the SOD: the data group was altered`);
  }
  checks.push({ name: 'data_group_hashes', passed: true, reason: `${sent.join(', ')} match their SOD hashes` });

  // 3. The SOD signature, with the document signer certificate it carries.
  const certificates = (signedData.certificates ?? []).filter((item): item is pkijs.Certificate => item instanceof pkijs.Certificate);
  if (certificates.length === 0) return finish('sod_signature', 'the SOD carries no document signer certificate');
  let signer: pkijs.Certificate;
  try {
    const verified = await signedData.verify({ signer: 0, checkChain: false, extendedMode: true });
    if (!verified.signatureVerified || !verified.signerCertificate) throw new Error(verified.message || 'the signature does not verify');
    signer = verified.signerCertificate;
  } catch (error) {
    return finish('sod_signature', `the SOD signature does not verify with its document signer certificate (${(error as Error).message})`);
  }
  result.document_signer = summarise(signer);
  checks.push({ name: 'sod_signature', passed: true, reason: `signed by ${result.document_signer.subject}` });

  // 4. The document signer against the imported CSCAs.
  const issuer = nameDer(signer.issuer);
  const { imported, candidates } = typeof cscas === 'function' ? await cscas(issuer) : { imported: cscas.length, candidates: cscas.filter((csca) => nameDer(csca.subject) === issuer) };
  if (imported === 0) return finish('document_signer', 'no CSCA certificate has been imported (warden csca import), so the document signer cannot be trusted');
  if (candidates.length === 0) return finish('document_signer', `no imported CSCA certificate is the document signer's issuer (${distinguishedName(signer.issuer)})`);
  let anchor: pkijs.Certificate | undefined;
  for (const candidate of candidates) {
    if (await signer.verify(candidate).catch(() => false)) {
      anchor = candidate;
      break;
    }
  }
  if (!anchor) return finish('document_signer', `the document signer certificate is not signed by the imported CSCA ${distinguishedName(signer.issuer)} (a wrong or forged signer)`);
  result.csca = summarise(anchor);
  for (const [what, certificate] of [['document signer', signer], ['CSCA', anchor]] as const) {
    if (now < certificate.notBefore.value) return finish('document_signer', `the ${what} certificate is not valid before ${certificate.notBefore.value.toISOString()}`);
    if (now > certificate.notAfter.value) return finish('document_signer', `the ${what} certificate expired on ${certificate.notAfter.value.toISOString()}`);
  }
  checks.push({ name: 'document_signer', passed: true, reason: `issued by the imported CSCA ${result.csca.subject}; both certificates valid now` });
  return { ...result, passed: true };
}

export interface CscaFile {
  certificates: pkijs.Certificate[];
  /** Master lists found in the file, and whether each one's own signature verified. */
  master_lists: { certificates: number; signature_verified: boolean; signer: string | null }[];
}

function certificateFromDer(der: Uint8Array<ArrayBuffer>, where: string): pkijs.Certificate {
  try {
    return pkijs.Certificate.fromBER(der);
  } catch (error) {
    throw new CscaFormatError(`${where} is not an X.509 certificate: ${(error as Error).message}`);
  }
}

/** The certificates of a CMS CSCA master list (ICAO 9303-12), with its own signature checked. */
async function readMasterList(der: Uint8Array<ArrayBuffer>): Promise<{ certificates: pkijs.Certificate[]; signature_verified: boolean; signer: string | null }> {
  let signedData: pkijs.SignedData;
  try {
    const info = pkijs.ContentInfo.fromBER(der);
    if (info.contentType !== OID_SIGNED_DATA) throw new Error(`content type ${info.contentType} is not CMS SignedData`);
    signedData = new pkijs.SignedData({ schema: info.content });
  } catch (error) {
    throw new CscaFormatError(`not a CMS master list: ${(error as Error).message}`);
  }
  if (signedData.encapContentInfo.eContentType !== OID_CSCA_MASTER_LIST || !signedData.encapContentInfo.eContent) {
    throw new CscaFormatError(`the CMS content is ${signedData.encapContentInfo.eContentType}, not a CSCA master list`);
  }
  const parsed = asn1js.fromBER(signedData.encapContentInfo.eContent.getValue());
  const list = parsed.result;
  const set = list instanceof asn1js.Sequence ? list.valueBlock.value[1] : undefined;
  if (parsed.offset === -1 || !(set instanceof asn1js.Set)) throw new CscaFormatError('the master list is not (version, SET OF Certificate)');
  const certificates = set.valueBlock.value.map((element, i) => {
    try {
      return new pkijs.Certificate({ schema: element });
    } catch (error) {
      throw new CscaFormatError(`master list certificate ${i + 1} is not an X.509 certificate: ${(error as Error).message}`);
    }
  });
  let verified = false;
  let signer: string | null = null;
  try {
    const outcome = await signedData.verify({ signer: 0, checkChain: false, extendedMode: true });
    verified = Boolean(outcome.signatureVerified);
    signer = outcome.signerCertificate ? distinguishedName(outcome.signerCertificate.subject) : null;
  } catch {
    verified = false;
  }
  return { certificates, signature_verified: verified, signer };
}

/**
 * CSCA certificates from a file as published: an LDIF export (ICAO PKD or national: entries with
 * `pkdMasterListContent::` master lists and `userCertificate;binary::` or `cACertificate;binary::`
 * certificates), a CMS master list (DER), PEM certificates, or one DER certificate.
 */
export async function readCscaFile(bytes: Buffer): Promise<CscaFile> {
  const out: CscaFile = { certificates: [], master_lists: [] };
  const addList = async (der: Uint8Array<ArrayBuffer>) => {
    const list = await readMasterList(der);
    out.certificates.push(...list.certificates);
    out.master_lists.push({ certificates: list.certificates.length, signature_verified: list.signature_verified, signer: list.signer });
  };
  const text = bytes.subarray(0, 4096).toString('latin1');
  if (/^(version:|dn:|#)/im.test(text) && /^dn::? /m.test(bytes.toString('latin1'))) {
    // LDIF (RFC 2849): a line starting with one space continues the previous one.
    const lines = bytes.toString('latin1').replace(/\r?\n /g, '').split(/\r?\n/);
    for (const [n, line] of lines.entries()) {
      const match = /^(pkdMasterListContent|userCertificate;binary|cACertificate;binary|pkdCscaCertificate)::\s*(.+)$/i.exec(line);
      if (!match) continue;
      const der = new Uint8Array(Buffer.from(match[2]!, 'base64'));
      if (/masterlist/i.test(match[1]!)) await addList(der);
      else out.certificates.push(certificateFromDer(der, `LDIF line ${n + 1}`));
    }
  } else if (text.includes('-----BEGIN CERTIFICATE-----')) {
    for (const [, body] of bytes.toString('latin1').matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)) {
      out.certificates.push(certificateFromDer(new Uint8Array(Buffer.from(body!.replace(/\s+/g, ''), 'base64')), 'a PEM block'));
    }
  } else {
    const parsed = asn1js.fromBER(new Uint8Array(bytes));
    if (parsed.offset === -1) throw new CscaFormatError('the file is neither LDIF, PEM nor DER');
    // A ContentInfo starts with its content type OID; a certificate with its TBS SEQUENCE.
    const first = parsed.result instanceof asn1js.Sequence ? parsed.result.valueBlock.value[0] : undefined;
    if (first instanceof asn1js.ObjectIdentifier) await addList(new Uint8Array(bytes));
    else out.certificates.push(certificateFromDer(new Uint8Array(bytes), 'the file'));
  }
  if (out.certificates.length === 0) throw new CscaFormatError('no certificate was found in the file');
  return out;
}

/** Stores certificates not already stored (by SHA-256 of the DER); returns how many were new. */
export async function storeCscas(knex: Knex, certificates: readonly pkijs.Certificate[], source: string): Promise<number> {
  const rows = certificates.map((certificate) => {
    const der = Buffer.from(certificate.toSchema().toBER());
    return {
      sha256: createHash('sha256').update(der).digest('hex'),
      der,
      subject: distinguishedName(certificate.subject),
      subject_der: nameDer(certificate.subject),
      key_id: subjectKeyId(certificate),
      not_before: certificate.notBefore.value,
      not_after: certificate.notAfter.value,
      source,
    };
  });
  const unique = [...new Map(rows.map((row) => [row.sha256, row])).values()];
  if (unique.length === 0) return 0;
  const inserted = await knex('csca_certificates').insert(unique).onConflict('sha256').ignore().returning('id');
  return inserted.length;
}

/** The imported CSCA certificates named as an issuer, parsed (a national list holds hundreds; only these are read). */
export function cscaLookup(knex: Knex): Extract<CscaSource, Function> {
  return async (issuer) => {
    const [{ count }] = (await knex('csca_certificates').count({ count: '*' })) as [{ count: string }];
    const rows = (await knex('csca_certificates').where({ subject_der: issuer }).select('der')) as { der: Buffer }[];
    return { imported: Number(count), candidates: rows.map((row) => pkijs.Certificate.fromBER(new Uint8Array(row.der))) };
  };
}
