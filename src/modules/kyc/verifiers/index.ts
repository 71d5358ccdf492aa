import type { ArtifactType } from '../constants.ts';
import type { Verifier } from './common.ts';
import { verifyDocFront } from './docfront.ts';
import { verifyLiveness } from './liveness.ts';
import { verifyMrz } from './mrz.ts';
import { verifyNfc } from './nfc.ts';
import { verifyRecording } from './recording.ts';
import { verifySelfie, verifySnapshot } from './selfie.ts';

/**
 * The verifier of each artifact type the pipeline checks; an upload of one of these types queues a
 * verification job. Types not listed (doc_back) are complete once stored.
 */
export const VERIFIERS: ReadonlyMap<ArtifactType, Verifier> = new Map<ArtifactType, Verifier>([
  ['doc_front', verifyDocFront],
  ['doc_mrz', verifyMrz],
  ['passport_mrz_page', verifyMrz],
  ['nfc_raw', verifyNfc],
  ['selfie', verifySelfie],
  // a frame of the video call: the face compared with the document portrait, as a selfie's
  ['snapshot', verifySnapshot],
  ['liveness_video', verifyLiveness],
  ['recording', verifyRecording],
]);
