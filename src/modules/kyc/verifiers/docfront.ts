import type { AppContext } from '../../../context.ts';
import type { DocumentFrontOutput } from '../../../../workers/vision.ts';
import { nationalityCode } from '../../../vision/fields.ts';
import { mismatchedFields, mismatchedWithMrz } from '../compare.ts';
import { customerOf, portraitArtifact, visionOnFile, type Outcome, type VerifyInput } from './common.ts';

/** doc_front: the printed fields read and compared with the customer and the MRZ; its portrait kept as a reference. */
export async function verifyDocFront(app: AppContext, { artifact, session, today }: VerifyInput): Promise<Outcome> {
  const outcome = await visionOnFile<DocumentFrontOutput>(app, 'docfront', artifact.path);
  if (!outcome.ok) {
    const data = { ocr_read: false, fields: {}, face_found: false, mismatched_fields: [], timings: null };
    return { code: 'fail', message: outcome.message, data, details: { reason: outcome.reason } };
  }
  const { result, portrait } = outcome.result;
  const comparable = { ...result.fields, nationality: nationalityCode(result.fields.nationality) ?? undefined };
  const againstCustomer = mismatchedFields(comparable, await customerOf(app, session));
  const againstMrz = session.mrz_data ? mismatchedWithMrz(comparable, session.mrz_data) : [];
  const mismatched = [...new Set([...againstCustomer, ...againstMrz])];
  const data = { ocr_read: result.text_read, fields: result.fields, face_found: result.face_found, mismatched_fields: mismatched, timings: result.timings };
  const derivedArtifact = portrait ? await portraitArtifact(app, session, 'doc_portrait', 'image/jpeg', portrait) : undefined;
  const details = {
    document: result.document,
    lines: result.lines,
    face: result.face,
    mismatches: { customer: againstCustomer, mrz: againstMrz },
    ...(derivedArtifact ? { portrait_artifact_id: derivedArtifact.id } : {}),
  };
  const base = { data, details, derivedArtifact };
  if (!result.text_read) return { ...base, code: 'fail', message: 'The text of the document could not be read; please take a sharper, well-lit photograph of the whole document.' };
  if (!result.face_found) return { ...base, code: 'fail', message: 'No portrait was found on the document.' };
  if (result.fields.expiry_date && result.fields.expiry_date < today) return { ...base, code: 'fail', message: `The document expired on ${result.fields.expiry_date}.` };
  if (mismatched.length) {
    const sources = [againstCustomer.length ? 'the customer record' : null, againstMrz.length ? 'the MRZ' : null].filter(Boolean).join(' and ');
    return { ...base, code: 'fail', message: `The document does not match ${sources}: ${mismatched.join(', ')}.` };
  }
  return { ...base, code: 'success', message: 'The document was read and its portrait found; the fields match.' };
}
