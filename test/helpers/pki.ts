/**
 * Test vectors for chip passive authentication, made with the libraries the verifier uses (pkijs,
 * asn1js, WebCrypto): a country signing CA, document signers it issues, an EF.SOD over a set of data
 * groups, and a CSCA master list. ECDSA P-256 keeps key generation fast.
 */
import { createHash, webcrypto } from 'node:crypto';
import * as asn1js from 'asn1js';
import * as pkijs from 'pkijs';

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const DAY = 86_400_000;

export interface Issued {
  certificate: pkijs.Certificate;
  keys: CryptoKeyPair;
  der: Buffer;
}

let serial = 1;

function name(country: string, common: string): pkijs.RelativeDistinguishedNames {
  return new pkijs.RelativeDistinguishedNames({
    typesAndValues: [
      new pkijs.AttributeTypeAndValue({ type: '2.5.4.6', value: new asn1js.PrintableString({ value: country }) }),
      new pkijs.AttributeTypeAndValue({ type: '2.5.4.3', value: new asn1js.Utf8String({ value: common }) }),
    ],
  });
}

/**
 * A certificate for `subject`, signed by `issuer` (self-signed when absent), valid from
 * `from` to `to` (defaults: a year ago to a year ahead).
 */
export async function issue(subject: string, issuer?: Issued, options: { ca?: boolean; from?: Date; to?: Date; country?: string } = {}): Promise<Issued> {
  const keys = (await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify'])) as CryptoKeyPair;
  const certificate = new pkijs.Certificate();
  certificate.version = 2;
  certificate.serialNumber = new asn1js.Integer({ value: serial++ });
  certificate.subject = name(options.country ?? 'UT', subject);
  certificate.issuer = issuer ? issuer.certificate.subject : certificate.subject;
  certificate.notBefore.value = options.from ?? new Date(Date.now() - 365 * DAY);
  certificate.notAfter.value = options.to ?? new Date(Date.now() + 365 * DAY);
  certificate.extensions = [
    new pkijs.Extension({ extnID: '2.5.29.19', critical: true, extnValue: new pkijs.BasicConstraints({ cA: options.ca ?? false }).toSchema().toBER(false) }),
  ];
  await certificate.subjectPublicKeyInfo.importKey(keys.publicKey);
  await certificate.sign((issuer ?? { keys }).keys.privateKey, 'SHA-256');
  return { certificate, keys, der: Buffer.from(certificate.toSchema().toBER()) };
}

/** A CMS SignedData (as a ContentInfo, DER) over `content` of type `contentType`, signed by `signer`. */
async function signedContent(contentType: string, content: ArrayBuffer, signer: Issued, certificates: pkijs.Certificate[]): Promise<Buffer> {
  const signedData = new pkijs.SignedData({
    version: 3,
    encapContentInfo: new pkijs.EncapsulatedContentInfo({ eContentType: contentType, eContent: new asn1js.OctetString({ valueHex: content }) }),
    signerInfos: [
      new pkijs.SignerInfo({
        version: 1,
        sid: new pkijs.IssuerAndSerialNumber({ issuer: signer.certificate.issuer, serialNumber: signer.certificate.serialNumber }),
      }),
    ],
    certificates,
  });
  await signedData.sign(signer.keys.privateKey, 0, 'SHA-256');
  const info = new pkijs.ContentInfo({ contentType: pkijs.ContentInfo.SIGNED_DATA, content: signedData.toSchema(true) });
  return Buffer.from(info.toSchema().toBER());
}

/**
 * EF.SOD (tag 0x77) over the given data groups' whole TLVs (name 'DG1' ... to bytes), SHA-256,
 * signed by `signer`, which it carries. `hashes` overrides what is listed (to forge a SOD).
 */
export async function makeSod(groups: Record<string, Buffer>, signer: Issued, hashes?: Record<number, Buffer>): Promise<Buffer> {
  const listed = hashes ?? Object.fromEntries(Object.entries(groups).map(([group, bytes]) => [Number(group.slice(2)), createHash('sha256').update(bytes).digest()]));
  const security = new asn1js.Sequence({
    value: [
      new asn1js.Integer({ value: 0 }),
      new asn1js.Sequence({ value: [new asn1js.ObjectIdentifier({ value: '2.16.840.1.101.3.4.2.1' })] }),
      new asn1js.Sequence({
        value: Object.entries(listed).map(([number, hash]) => new asn1js.Sequence({ value: [new asn1js.Integer({ value: Number(number) }), new asn1js.OctetString({ valueHex: new Uint8Array(hash) })] })),
      }),
    ],
  });
  const cms = await signedContent('2.23.136.1.1.1', security.toBER(), signer, [signer.certificate]);
  return Buffer.from(new asn1js.Constructed({ idBlock: { tagClass: 2, tagNumber: 23 }, value: [asn1js.fromBER(new Uint8Array(cms)).result] }).toBER());
}

/** An ICAO CSCA master list (CMS, DER) holding `cscas`, signed by `signer`. */
export async function makeMasterList(cscas: Issued[], signer: Issued): Promise<Buffer> {
  const list = new asn1js.Sequence({ value: [new asn1js.Integer({ value: 0 }), new asn1js.Set({ value: cscas.map((csca) => csca.certificate.toSchema()) })] });
  return signedContent('2.23.136.1.1.2', list.toBER(), signer, [signer.certificate]);
}

/** An LDIF export as the ICAO PKD writes them: one master list entry and one certificate entry, base64 folded at 76 columns. */
export function makeLdif(masterList: Buffer, certificate: Buffer): string {
  const fold = (line: string) => line.match(/.{1,76}/g)!.join('\n ');
  return [
    'version: 1',
    '',
    'dn: cn=ml,o=ml,c=UT,dc=data,dc=download,dc=pkd',
    'objectClass: CscaMasterList',
    fold(`pkdMasterListContent:: ${masterList.toString('base64')}`),
    '',
    'dn: cn=csca,o=csca,c=UT,dc=data,dc=download,dc=pkd',
    'objectClass: pkdDownload',
    fold(`userCertificate;binary:: ${certificate.toString('base64')}`),
    '',
  ].join('\n');
}
