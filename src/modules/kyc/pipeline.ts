import { randomUUID } from 'node:crypto';
import { parse as parseMrz } from 'mrz';
import type { AppContext } from '../../context.ts';
import type { ResultMessage } from '../../realtime/documents.ts';
import type { DocumentFrontOutput, VisionOutcome, VisionTask } from '../../../workers/vision.ts';
import { runVision } from '../../pools.ts';
import { RESULT_TYPES, type ArtifactType, type DerivedArtifactType } from './constants.ts';
import { mismatchedFields, mismatchedWithMrz } from './compare.ts';
import type { MrzReadResult } from './mrz/read.ts';
import { cosineSimilarity, type FaceReadResult } from './vision/faces.ts';
import { nationalityCode } from './vision/fields.ts';
import { NfcFormatError, parseNfcUpload } from './nfc.ts';
import type { SessionRow } from './sessions.ts';

interface ArtifactRow {
  id: string;
  session_id: string;
  artifact_type: ArtifactType | DerivedArtifactType;
  content_type: string;
  sha256: string;
  path: string;
}

interface Outcome {
  code: 'success' | 'fail';
  message: string;
  data: Record<string, unknown> | null;
  details: Record<string, unknown>;
  mrzData?: Record<string, unknown>;
  /** An artifact the verifier derived (the NFC portrait), stored with the result. */
  derivedArtifact?: Record<string, unknown>;
}

const MRZ_MESSAGE_FIELDS = ['first_name', 'last_name', 'document_number', 'birth_date', 'expiry_date', 'nationality', 'sex', 'issuing_country', 'document_type'] as const;

async function customerOf(app: AppContext, session: SessionRow): Promise<Record<string, unknown> | undefined> {
  return app.db('customers').where({ customer_ref: session.customer_ref }).first();
}

/** Runs a vision task on a stored file. */
async function visionOnFile<T>(app: AppContext, type: VisionTask['type'], filePath: string): Promise<VisionOutcome<T>> {
  return runVision<T>(app.pools.vision, type, await app.files.read(filePath));
}

async function verifyMrz(app: AppContext, artifact: ArtifactRow, session: SessionRow, today: string): Promise<Outcome> {
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
  if (mismatched.length) return { code: 'fail', message: `The document does not match the customer record: ${mismatched.join(', ')}.`, data, details, mrzData };
  return { code: 'success', message: 'The MRZ was read and its check digits hold.', data, details, mrzData };
}

/**
 * A portrait the pipeline took from an upload (document front, chip), stored as a file and returned
 * as the artifact row written with the upload's result: a reference for face matching.
 */
async function portraitArtifact(app: AppContext, session: SessionRow, type: DerivedArtifactType, contentType: string, image: Uint8Array): Promise<Record<string, unknown> & { id: string }> {
  const key = await app.files.putBuffer(Buffer.from(image.buffer, image.byteOffset, image.byteLength));
  return { id: randomUUID(), session_id: session.id, artifact_type: type, content_type: contentType, size: image.byteLength, sha256: key.split('/').at(-1), path: key };
}

async function verifyDocFront(app: AppContext, artifact: ArtifactRow, session: SessionRow, today: string): Promise<Outcome> {
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

/** Thrown while the reference document is still being verified: the job is retried later. */
class ReferenceNotReady extends Error {}

/** Artifact types that hold a reference portrait, in order of preference, and the uploads they come from. */
const REFERENCE_TYPES = ['doc_portrait', 'passport_mrz_page', 'nfc_portrait'] as const;
export const REFERENCE_SOURCES: readonly string[] = ['doc_front', 'passport_mrz_page', 'nfc_raw'];

async function verifySelfie(app: AppContext, artifact: ArtifactRow, session: SessionRow, finalAttempt: boolean): Promise<Outcome | 'deferred'> {
  const threshold = app.config.face.threshold;
  const model = app.config.face.model.name;
  // Results first: a document verified after this read is then still seen as pending, never as
  // verified without its portrait.
  const verified = new Set((await app.db('verification_results').where({ session_id: session.id }).pluck('artifact_id')) as string[]);
  const artifacts = (await app.db('verification_artifacts')
    .where({ session_id: session.id })
    .whereIn('artifact_type', [...REFERENCE_TYPES, ...REFERENCE_SOURCES])
    .orderBy('created_at', 'desc')) as ArtifactRow[];
  const sources = artifacts.filter((row) => REFERENCE_SOURCES.includes(row.artifact_type));
  const references = REFERENCE_TYPES.flatMap((type) => artifacts.filter((row) => row.artifact_type === (type as string)));
  if (references.length === 0) {
    // Nothing to compare with yet. A document still being verified: retry shortly (its result
    // also queues this selfie again). No document yet while the flow asks for one: wait for it.
    if (sources.some((row) => !verified.has(row.id))) {
      if (!finalAttempt) throw new ReferenceNotReady('the reference document is still being verified');
      return 'deferred';
    }
    if (sources.length === 0 && session.status === 'open' && session.pending_artifact_types.some((type) => REFERENCE_SOURCES.includes(type))) return 'deferred';
  }

  const selfie = await visionOnFile<FaceReadResult>(app, 'faces', artifact.path);
  if (!selfie.ok) return { code: 'fail', message: selfie.message, data: null, details: { reason: selfie.reason, threshold, model } };
  const faces = selfie.result.faces;
  if (faces.length === 0) return { code: 'fail', message: 'No face was found in the selfie.', data: null, details: { reason: 'no_face', faces, threshold, model } };
  if (faces.length > 1) {
    return { code: 'fail', message: `${faces.length} faces were found in the selfie; exactly one person must be in the picture.`, data: null, details: { reason: 'several_faces', faces, threshold, model } };
  }

  if (sources.some((row) => row.sha256 === artifact.sha256)) {
    return { code: 'fail', message: 'The selfie is the same file as a document photograph of this session.', data: null, details: { reason: 'same_image', selfie_face: faces[0], threshold, model } };
  }

  const tried: { artifact_id: string; artifact_type: string; reason: string }[] = [];
  for (const reference of references) {
    const read = await visionOnFile<FaceReadResult>(app, 'faces', reference.path);
    if (!read.ok || !read.result.embedding) {
      tried.push({ artifact_id: reference.id, artifact_type: reference.artifact_type, reason: read.ok ? 'no_face' : read.reason });
      continue;
    }
    const similarity = Math.round(cosineSimilarity(selfie.result.embedding!, read.result.embedding) * 10000) / 10000;
    const match = similarity >= threshold;
    const details = {
      similarity,
      threshold,
      match,
      model,
      reference: { artifact_id: reference.id, artifact_type: reference.artifact_type, face: read.result.faces[0] },
      selfie_face: faces[0],
      skipped_references: tried,
      timings: { selfie: selfie.result.timings, reference: read.result.timings },
    };
    return match
      ? { code: 'success', message: `The selfie matches the document portrait (similarity ${similarity.toFixed(3)}, threshold ${threshold}).`, data: null, details }
      : { code: 'fail', message: `The selfie does not match the document portrait (similarity ${similarity.toFixed(3)}, threshold ${threshold}).`, data: null, details };
  }
  const message = tried.length
    ? 'No face could be read from the reference document portrait, so the selfie cannot be compared.'
    : 'There is no reference portrait: the documents of this session gave none (upload the document front, the passport page or the chip data).';
  return { code: 'fail', message, data: null, details: { reason: tried.length ? 'reference_without_face' : 'no_reference', skipped_references: tried, selfie_face: faces[0], threshold, model } };
}

async function verifyNfc(app: AppContext, artifact: ArtifactRow, session: SessionRow): Promise<Outcome> {
  let chip;
  try {
    chip = parseNfcUpload(await app.files.read(artifact.path));
  } catch (error) {
    if (error instanceof NfcFormatError) return { code: 'fail', message: `The chip data could not be read: ${error.message}`, data: null, details: {} };
    throw error;
  }
  const parsed = parseMrz(chip.dg1.lines);
  const details: Record<string, unknown> = { dg1_lines: chip.dg1.lines, dg1_valid: parsed.valid, data_groups: chip.dataGroups };
  let derivedArtifact: Record<string, unknown> | undefined;
  if (chip.portrait) {
    // A reference for face matching, after a document-front portrait or the passport page.
    derivedArtifact = await portraitArtifact(app, session, 'nfc_portrait', chip.portrait.format === 'jpeg' ? 'image/jpeg' : 'image/jp2', chip.portrait.image);
    details.portrait_artifact_id = derivedArtifact.id;
  }
  if (!parsed.valid) return { code: 'fail', message: 'The chip MRZ (DG1) check digits do not hold.', data: null, details, derivedArtifact };
  const readLines = session.mrz_data?.lines as string[] | undefined;
  if (readLines && readLines.join('\n') !== chip.dg1.lines.join('\n')) {
    return { code: 'fail', message: 'The chip MRZ (DG1) differs from the MRZ read from the document.', data: null, details: { ...details, document_lines: readLines }, derivedArtifact };
  }
  return {
    code: 'success',
    message: readLines ? 'The chip data was read and matches the document MRZ.' : 'The chip data was read; no document MRZ has been read to compare yet.',
    data: null,
    details,
    derivedArtifact,
  };
}

async function verify(app: AppContext, artifact: ArtifactRow, session: SessionRow, today: string, finalAttempt: boolean): Promise<Outcome | 'deferred'> {
  switch (artifact.artifact_type) {
    case 'doc_front':
      return verifyDocFront(app, artifact, session, today);
    case 'selfie':
      return verifySelfie(app, artifact, session, finalAttempt);
    case 'doc_mrz':
    case 'passport_mrz_page':
      return verifyMrz(app, artifact, session, today);
    case 'nfc_raw':
      return verifyNfc(app, artifact, session);
    case 'liveness_video':
      // Content is not analysed yet (the spec: always success); the upload was already checked to be a video.
      return { code: 'success', message: 'Liveness video received.', data: null, details: { content_type: artifact.content_type } };
    case 'recording':
      return { code: 'success', message: 'Recording stored.', data: null, details: { content_type: artifact.content_type, path: artifact.path } };
    default:
      throw new Error(`no verifier for ${artifact.artifact_type}`);
  }
}

/**
 * The verify-artifact job: runs the verifier, stores exactly one result per artifact together
 * with the session's progress, and then emits it. A retried job whose result is already stored
 * does nothing; on the last attempt a failing verifier becomes a fail result instead of a lost job.
 * A selfie without a reference portrait yet stores nothing and is queued again by the result of
 * the document that brings one. `now` decides whether a document has expired.
 */
export async function verifyArtifact(app: AppContext, artifactId: string, finalAttempt: boolean, now = new Date()): Promise<void> {
  const artifact = (await app.db('verification_artifacts').where({ id: artifactId }).first()) as ArtifactRow | undefined;
  if (!artifact) return;
  if (await app.db('verification_results').where({ artifact_id: artifactId }).first()) return;
  const session = (await app.db('verification_sessions').where({ id: artifact.session_id }).first()) as SessionRow;
  const type = RESULT_TYPES[artifact.artifact_type as ArtifactType];
  if (!type) return;

  let outcome: Outcome;
  try {
    const verified = await verify(app, artifact, session, now.toISOString().slice(0, 10), finalAttempt);
    // A selfie waiting for its document: no result yet; the document's result queues it again.
    if (verified === 'deferred') return;
    outcome = verified;
  } catch (error) {
    if (!finalAttempt) throw error;
    app.logger.error({ err: error, artifactId }, 'verification failed on its last attempt');
    outcome = { code: 'fail', message: 'The verification could not be completed; please upload the document again.', data: null, details: { error: (error as Error).message } };
  }

  const correlationId = randomUUID();
  const stored = await app.db.transaction(async (trx) => {
    const inserted = await trx('verification_results')
      .insert({
        id: randomUUID(),
        session_id: session.id,
        artifact_id: artifact.id,
        type,
        code: outcome.code,
        message: outcome.message,
        data: outcome.data === null ? null : JSON.stringify(outcome.data),
        details: JSON.stringify(outcome.details),
        correlation_id: correlationId,
      })
      .onConflict('artifact_id')
      .ignore()
      .returning('id');
    if (inserted.length === 0) return false;
    if (outcome.derivedArtifact) await trx('verification_artifacts').insert(outcome.derivedArtifact);
    if (outcome.code === 'success') {
      await trx.raw(
        `update verification_sessions set pending_artifact_types = array_remove(pending_artifact_types, :type),
           succeeded_artifact_types = case when :type = any(succeeded_artifact_types) then succeeded_artifact_types else array_append(succeeded_artifact_types, :type) end,
           updated_at = now() where id = :id`,
        { type: artifact.artifact_type, id: session.id },
      );
    }
    if (outcome.mrzData) await trx('verification_sessions').where({ id: session.id }).update({ mrz_data: JSON.stringify(outcome.mrzData) });
    if (REFERENCE_SOURCES.includes(artifact.artifact_type)) {
      // Selfies that were waiting for a reference portrait are verified now.
      const waiting = (await trx('verification_artifacts as a')
        .leftJoin('verification_results as r', 'r.artifact_id', 'a.id')
        .where({ 'a.session_id': session.id, 'a.artifact_type': 'selfie' })
        .whereNull('r.id')
        .pluck('a.id')) as string[];
      for (const selfieId of waiting) await app.jobs.enqueueVerification(trx, selfieId);
    }
    return true;
  });
  if (!stored) return;
  const message: ResultMessage = {
    event: 'broadcast',
    client_id: session.created_by.replace(/^merchant:/, ''),
    timestamp: Date.now(),
    correlation_id: correlationId,
    data: { to: session.id, delivery: 'websocket', type, result: { code: outcome.code, data: outcome.data, message: outcome.message } },
  };
  app.documents.emit(message);
}
