import type { AppContext } from '../../../context.ts';
import { faceScore, MIN_EYE_DISTANCE, type FaceReadResult } from '../../../vision/faces.ts';
import { SELFIE_WAIT_SECONDS } from '../constants.ts';
import { visionOnFile, type ArtifactRow, type Outcome, type VerifyInput } from './common.ts';

/** Thrown while the reference document is still being verified: the job is retried later. */
class ReferenceNotReady extends Error {}

/** Artifact types that hold a reference portrait, in order of preference, and the uploads they come from. */
const REFERENCE_TYPES = ['doc_portrait', 'passport_mrz_page', 'nfc_portrait'] as const;
export const REFERENCE_SOURCES: readonly string[] = ['doc_front', 'passport_mrz_page', 'nfc_raw'];

/** selfie: exactly one face, compared with the session's best reference portrait. */
export function verifySelfie(app: AppContext, input: VerifyInput): Promise<Outcome | 'deferred'> {
  return verifyFace(app, input, 'selfie');
}

/**
 * snapshot (a frame of the end user's camera during the video call): the same comparison; it does
 * not wait for a document (the agent asks for it while the documents are on the table), so with
 * no reference portrait yet it fails at once with no_reference.
 */
export function verifySnapshot(app: AppContext, input: VerifyInput): Promise<Outcome | 'deferred'> {
  return verifyFace(app, input, 'snapshot');
}

async function verifyFace(app: AppContext, { artifact, session, now, finalAttempt }: VerifyInput, noun: 'selfie' | 'snapshot'): Promise<Outcome | 'deferred'> {
  const threshold = app.config.face.threshold;
  const model = app.config.face.model.name;
  const metric = app.config.face.model.metric;
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
    // also queues this selfie again).
    if (sources.some((row) => !verified.has(row.id))) {
      if (!finalAttempt) throw new ReferenceNotReady('the reference document is still being verified');
      return 'deferred';
    }
    // No document yet while the flow asks for one: wait for it, but not past the session's
    // closing or SELFIE_WAIT_SECONDS (both queue this selfie again, so it always gets an answer).
    if (noun === 'selfie' && sources.length === 0 && session.pending_artifact_types.some((type) => REFERENCE_SOURCES.includes(type))) {
      if (session.status !== 'open') {
        return noDocument(`The session was closed (${session.status}) before a document with a portrait arrived, so the selfie could not be compared.`, 'session_closed');
      }
      if (now.getTime() - new Date(artifact.created_at).getTime() >= SELFIE_WAIT_SECONDS * 1000) {
        return noDocument(`No document with a portrait arrived within ${SELFIE_WAIT_SECONDS / 3600} hours of the selfie, so it could not be compared; upload the document, then the selfie again.`, 'reference_timeout');
      }
      return 'deferred';
    }
  }

  const selfie = await visionOnFile<FaceReadResult>(app, 'faces', artifact.path);
  if (!selfie.ok) return { code: 'fail', message: selfie.message, data: null, details: { reason: selfie.reason, threshold, model } };
  const faces = selfie.result.faces;
  if (faces.length === 0) return { code: 'fail', message: `No face was found in the ${noun}.`, data: null, details: { reason: 'no_face', faces, threshold, model } };
  if (faces.length > 1) {
    return { code: 'fail', message: `${faces.length} faces were found in the ${noun}; exactly one person must be in the picture.`, data: null, details: { reason: 'several_faces', faces, threshold, model } };
  }

  if (selfie.result.too_small) {
    return {
      code: 'fail',
      message: `The face in the ${noun} is too small to compare (eyes ${selfie.result.eye_distance} px apart; at least ${MIN_EYE_DISTANCE} needed): take it closer.`,
      data: null,
      details: { reason: 'face_too_small', faces, eye_distance: selfie.result.eye_distance, threshold, model },
    };
  }
  if (sources.some((row) => row.sha256 === artifact.sha256)) {
    return { code: 'fail', message: `The ${noun} is the same file as a document photograph of this session.`, data: null, details: { reason: 'same_image', selfie_face: faces[0], threshold, model } };
  }

  const tried: { artifact_id: string; artifact_type: string; reason: string }[] = [];
  for (const reference of references) {
    const read = await visionOnFile<FaceReadResult>(app, 'faces', reference.path);
    if (!read.ok || !read.result.embedding) {
      tried.push({ artifact_id: reference.id, artifact_type: reference.artifact_type, reason: read.ok ? (read.result.too_small ? 'face_too_small' : 'no_face') : read.reason });
      continue;
    }
    const similarity = Math.round(faceScore(selfie.result.embedding!, read.result.embedding, metric) * 10000) / 10000;
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
      ? { code: 'success', message: `The ${noun} matches the document portrait (similarity ${similarity.toFixed(3)}, threshold ${threshold}).`, data: null, details }
      : { code: 'fail', message: `The ${noun} does not match the document portrait (similarity ${similarity.toFixed(3)}, threshold ${threshold}).`, data: null, details };
  }
  const message = tried.length
    ? `No usable face could be read from the reference document portrait (none found, or too small to compare), so the ${noun} cannot be compared.`
    : 'There is no reference portrait: the documents of this session gave none (upload the document front, the passport page or the chip data).';
  return { code: 'fail', message, data: null, details: { reason: tried.length ? 'reference_without_face' : 'no_reference', skipped_references: tried, selfie_face: faces[0], threshold, model } };
}

/** A selfie that stopped waiting for its document: nothing was compared, so nothing was read either. */
function noDocument(message: string, reason: 'session_closed' | 'reference_timeout'): Outcome {
  return { code: 'fail', message, data: null, details: { reason } };
}
