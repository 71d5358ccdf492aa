import { parse as parseMrz } from 'mrz';
import type { AppContext } from '../../../context.ts';
import { portraitArtifact, type Outcome, type VerifyInput } from './common.ts';
import { NfcFormatError, parseNfcUpload } from './nfc-chip.ts';
import { cscaLookup, passiveAuthentication } from './passive-auth.ts';
import { jpeg2000ToJpeg, Jpeg2000Error } from '../../../vision/jpeg2000.ts';

/**
 * nfc_raw: passive authentication (passive-auth.ts: SOD, data group hashes, SOD signature,
 * document signer against the imported CSCAs), then the chip's DG1 check digits and its agreement
 * with the photographed MRZ; its portrait kept as a reference either way (a failed chip's portrait
 * is still the document's portrait, and the selfie result says what it was compared with).
 */
export async function verifyNfc(app: AppContext, { artifact, session }: VerifyInput): Promise<Outcome> {
  let chip;
  try {
    chip = parseNfcUpload(await app.files.read(artifact.path));
  } catch (error) {
    if (error instanceof NfcFormatError) return { code: 'fail', message: `The chip data could not be read: ${error.message}`, data: null, details: {} };
    throw error;
  }
  const parsed = parseMrz(chip.dg1.lines);
  const authentication = await passiveAuthentication(chip.files, cscaLookup(app.db), new Date());
  const details: Record<string, unknown> = { dg1_lines: chip.dg1.lines, dg1_valid: parsed.valid, data_groups: chip.dataGroups, passive_authentication: authentication };
  let derivedArtifact: Record<string, unknown> | undefined;
  if (chip.portrait) {
    // A reference for face matching, after a document-front portrait or the passport page. JPEG
    // 2000 (which the image decoder of the vision workers cannot read) is decoded here and kept as
    // JPEG; one that cannot be decoded is not kept, and the result says why.
    let portrait: Buffer | null = chip.portrait.image;
    details.portrait_format = chip.portrait.format;
    if (chip.portrait.format === 'jpeg2000') {
      try {
        portrait = (await jpeg2000ToJpeg(chip.portrait.image)).jpeg;
      } catch (error) {
        if (!(error instanceof Jpeg2000Error)) throw error;
        portrait = null;
        details.portrait_error = `portrait format not supported: ${error.message}`;
      }
    }
    if (portrait) {
      derivedArtifact = await portraitArtifact(app, session, 'nfc_portrait', 'image/jpeg', portrait);
      details.portrait_artifact_id = derivedArtifact.id;
    }
  }
  if (authentication.failed) {
    const { name, reason } = authentication.failed;
    return { code: 'fail', message: `Passive authentication failed at ${name}: ${reason}.`, data: null, details, derivedArtifact };
  }
  if (!parsed.valid) return { code: 'fail', message: 'The chip MRZ (DG1) check digits do not hold.', data: null, details, derivedArtifact };
  const readLines = session.mrz_data?.lines as string[] | undefined;
  if (readLines && readLines.join('\n') !== chip.dg1.lines.join('\n')) {
    return { code: 'fail', message: 'The chip MRZ (DG1) differs from the MRZ read from the document.', data: null, details: { ...details, document_lines: readLines }, derivedArtifact };
  }
  return {
    code: 'success',
    message: readLines ? 'The chip data passed passive authentication and matches the document MRZ.' : 'The chip data passed passive authentication; no document MRZ has been read to compare yet.',
    data: null,
    details,
    derivedArtifact,
  };
}
