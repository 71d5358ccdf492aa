import { randomUUID } from 'node:crypto';
import { fileTypeFromBuffer } from 'file-type';
import type { AppContext } from '../../context.ts';
import { describeProblem, storableProblem } from '../../validation/storable.ts';
import { isArtifactType, SELFIE_WAIT_SECONDS, type ArtifactType } from './constants.ts';
import { KycError, verifyKycToken } from './errors.ts';
import { discard, type ReceivedUpload } from './multipart.ts';
import type { ReceivedFile } from '../../http/multipart.ts';
import { findSession, markArtifactSucceeded } from './sessions.ts';
import { VERIFIERS } from './verifiers/index.ts';

export interface StoredArtifact {
  artifact_id: string;
  artifact_type: ArtifactType;
  path: string;
}

/** Artifact types whose verifier takes the upload for a video without looking again. */
const VIDEO_TYPES: ReadonlySet<ArtifactType> = new Set(['liveness_video', 'recording']);

/**
 * extra_data as stored: text that is not JSON is kept as null, as before; JSON that PostgreSQL
 * cannot store (NUL, broken Unicode, nesting over 64) is refused.
 */
function parseExtraData(text: string | undefined): unknown {
  if (!text) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const unstorable = storableProblem(parsed);
  if (unstorable) throw new KycError(400, 'extra_data_invalid', `extra_data cannot be stored: ${describeProblem(unstorable)}`);
  return parsed;
}

/**
 * Judges the file by its bytes: images and videos for every type but nfc_raw, whose chip data is
 * JSON or binary TLV and is checked by the NFC parser in the pipeline.
 */
export async function contentType(artifactType: ArtifactType, head: Buffer): Promise<string> {
  if (artifactType === 'nfc_raw') return head[0] === 0x7b ? 'application/json' : 'application/octet-stream';
  const detected = await fileTypeFromBuffer(head);
  if (!detected || !(detected.mime.startsWith('image/') || detected.mime.startsWith('video/'))) {
    throw new KycError(415, 'file_type_not_allowed', 'Only image and video files are accepted; the content of this file is neither.');
  }
  if (artifactType === 'snapshot' && !detected.mime.startsWith('image/')) {
    throw new KycError(415, 'file_type_not_allowed', 'A snapshot must be an image.');
  }
  if (VIDEO_TYPES.has(artifactType) && !detected.mime.startsWith('video/')) {
    throw new KycError(415, 'file_type_not_allowed', `A ${artifactType} must be a video; the content of this file is ${detected.mime}.`);
  }
  return detected.mime;
}

/**
 * Stores a received file as an artifact of the session: the file held until its artifact row and
 * verification job (or, for a type without a verifier, its success) commit together. The caller
 * has checked the session, the type and the content (`mime`); the temporary file is the caller's.
 */
export async function storeArtifact(app: AppContext, sessionId: string, artifactType: ArtifactType, file: ReceivedFile, mime: string, extraData: unknown = null): Promise<StoredArtifact> {
  // Held until the artifact row commits: a failed write takes the file it added away again.
  const held = await app.files.hold(file.temporaryPath, file.sha256);
  const key = held.key;
  const artifactId = randomUUID();
  let committed = false;
  try {
    await app.db.transaction(async (trx) => {
      await trx('verification_artifacts').insert({
        id: artifactId,
        session_id: sessionId,
        artifact_type: artifactType,
        content_type: mime,
        size: file.size,
        sha256: file.sha256,
        path: key,
        extra_data: extraData === null ? null : JSON.stringify(extraData),
      });
      if (VERIFIERS.has(artifactType)) await app.jobs.enqueueVerification(trx, artifactId);
      else await markArtifactSucceeded(trx, sessionId, artifactType);
      // A selfie may wait for its document: this later look ends the wait (verifiers/selfie.ts).
      if (artifactType === 'selfie') await app.jobs.enqueueVerification(trx, artifactId, SELFIE_WAIT_SECONDS);
    });
    committed = true;
  } finally {
    await held.settle(committed);
  }
  return { artifact_id: artifactId, artifact_type: artifactType, path: key };
}

/**
 * The checks of upload_document and take_snapshot in the order of the spec's error table, then
 * the file stored and its artifact row and verification job committed together: the upload is
 * confirmed only once both are durable.
 */
export async function storeUpload(app: AppContext, upload: ReceivedUpload, fixedType: ArtifactType | null): Promise<StoredArtifact> {
  try {
    const { sessionId } = await verifyKycToken(app, 'session', upload.fields.token);
    const session = await findSession(app.db, sessionId);
    if (!session) throw new KycError(404, 'session_not_found', 'The session of this token does not exist.');
    if (session.status !== 'open') throw new KycError(409, 'session_closed', `The session is already ${session.status}.`);
    const requestedType = fixedType ?? upload.fields.artifact_type?.trim();
    if (!requestedType) throw new KycError(400, 'artifact_type_missing', 'artifact_type was not sent.');
    if (!isArtifactType(requestedType)) throw new KycError(400, 'artifact_type_invalid', `"${requestedType}" is not an artifact type.`);
    const file = upload.file;
    if (!file) throw new KycError(400, 'file_missing', 'No file was sent in the snapshot field.');
    if (file.size === 0) throw new KycError(400, 'file_empty', 'The file is empty.');
    const mime = await contentType(requestedType, file.head);

    return await storeArtifact(app, session.id, requestedType, file, mime, parseExtraData(upload.fields.extra_data));
  } catch (error) {
    await discard(upload.file);
    throw error;
  }
}
