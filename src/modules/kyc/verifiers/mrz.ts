import type { AppContext } from '../../../context.ts';
import type { MrzReadResult } from '../../../vision/mrz/read.ts';
import { mismatchedFields, NO_CUSTOMER_RECORD } from '../compare.ts';
import { customerOf, visionOnFile, type Outcome, type VerifyInput } from './common.ts';

const MRZ_MESSAGE_FIELDS = ['first_name', 'last_name', 'document_number', 'birth_date', 'expiry_date', 'nationality', 'sex', 'issuing_country', 'document_type'] as const;

/** doc_mrz and passport_mrz_page: the zone read, its check digits, expiry and the customer record. */
export async function verifyMrz(app: AppContext, { artifact, session, today }: VerifyInput): Promise<Outcome> {
  const outcome = await visionOnFile<MrzReadResult>(app, 'mrz', artifact.path);
  if (!outcome.ok) return { code: 'fail', message: outcome.message, data: null, details: { reason: outcome.reason } };
  const read = outcome.result;
  const details = { lines: read.lines, format: read.format, valid: read.valid, invalid_fields: read.invalid_fields, corrections: read.corrections, confidence: read.confidence, timings: read.timings };
  if (!read.found) return { code: 'fail', message: 'No machine-readable zone was found in the image.', data: null, details };
  const fields = Object.fromEntries(MRZ_MESSAGE_FIELDS.map((name) => [name, read.fields[name]]));
  const mismatched = mismatchedFields(fields, await customerOf(app, session));
  const data = { ...fields, mismatched_fields: mismatched };
  if (!read.valid) {
    return { code: 'fail', message: `The MRZ check digits do not hold (${read.invalid_fields.join(', ') || 'composite'}).`, data, details };
  }
  if (read.fields.expiry_date && read.fields.expiry_date < today) {
    return { code: 'fail', message: `The document expired on ${read.fields.expiry_date}.`, data, details, mrzData: { ...fields, format: read.format, lines: read.lines } };
  }
  const mrzData = { ...fields, format: read.format, lines: read.lines };
  if (mismatched.includes(NO_CUSTOMER_RECORD)) {
    return { code: 'fail', message: `There is no customer record with customer_ref ${session.customer_ref} to compare the document with.`, data, details, mrzData };
  }
  if (mismatched.length) return { code: 'fail', message: `The document does not match the customer record: ${mismatched.join(', ')}.`, data, details, mrzData };
  return { code: 'success', message: 'The MRZ was read and its check digits hold.', data, details, mrzData };
}
