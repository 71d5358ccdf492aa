import { randomUUID } from 'node:crypto';
import type { AppContext } from '../../../context.ts';
import type { VisionOutcome, VisionTask } from '../../../../workers/vision.ts';
import { runVision } from '../../../pools.ts';
import type { ArtifactType, DerivedArtifactType } from '../constants.ts';
import type { SessionRow } from '../sessions.ts';

export interface ArtifactRow {
  id: string;
  session_id: string;
  artifact_type: ArtifactType | DerivedArtifactType;
  content_type: string;
  sha256: string;
  path: string;
  created_at: Date;
}

/** What a verifier decided about one artifact; the pipeline stores and emits it. */
export interface Outcome {
  code: 'success' | 'fail';
  message: string;
  data: Record<string, unknown> | null;
  details: Record<string, unknown>;
  mrzData?: Record<string, unknown>;
  /** An artifact the verifier derived (the NFC portrait), stored with the result. */
  derivedArtifact?: Record<string, unknown>;
}

export interface VerifyInput {
  artifact: ArtifactRow;
  session: SessionRow;
  /** The time of the verification: a selfie that has waited since long before it stops waiting. */
  now: Date;
  /** YYYY-MM-DD: documents that expired before it fail. */
  today: string;
  /** The job's last attempt: a verifier that would wait must decide now. */
  finalAttempt: boolean;
}

/** 'deferred': nothing is stored yet; something else queues the artifact again. */
export type Verifier = (app: AppContext, input: VerifyInput) => Promise<Outcome | 'deferred'>;

export async function customerOf(app: AppContext, session: SessionRow): Promise<Record<string, unknown> | undefined> {
  return app.db('customers').where({ customer_ref: session.customer_ref }).first();
}

/** Runs a vision task on a stored file. */
export async function visionOnFile<T>(app: AppContext, type: VisionTask['type'], filePath: string): Promise<VisionOutcome<T>> {
  return runVision<T>(app.pools.vision, type, await app.files.read(filePath));
}

/**
 * A portrait the pipeline took from an upload (document front, chip), stored as a file and returned
 * as the artifact row written with the upload's result: a reference for face matching.
 */
export async function portraitArtifact(app: AppContext, session: SessionRow, type: DerivedArtifactType, contentType: string, image: Uint8Array): Promise<Record<string, unknown> & { id: string }> {
  const key = await app.files.putBuffer(Buffer.from(image.buffer, image.byteOffset, image.byteLength));
  return { id: randomUUID(), session_id: session.id, artifact_type: type, content_type: contentType, size: image.byteLength, sha256: key.split('/').at(-1), path: key };
}
