/** The spec's artifact_type constant. */
export const ARTIFACT_TYPES = [
  'doc_front',
  'doc_back',
  'doc_mrz',
  'nfc_raw',
  'passport_mrz_page',
  'selfie',
  'liveness_video',
  'snapshot',
  'recording',
] as const;
export type ArtifactType = (typeof ARTIFACT_TYPES)[number];

/** Artifacts the pipeline derives from uploads: the portraits used as references for the selfie. */
export const DERIVED_ARTIFACT_TYPES = ['doc_portrait', 'nfc_portrait'] as const;
export type DerivedArtifactType = (typeof DERIVED_ARTIFACT_TYPES)[number];

const ARTIFACT_TYPE_SET: ReadonlySet<string> = new Set(ARTIFACT_TYPES);

export function isArtifactType(value: string): value is ArtifactType {
  return ARTIFACT_TYPE_SET.has(value);
}

/** end-kyc-session status values and the session state each leads to. */
export const CLOSING_STATUSES: ReadonlyMap<ClosingStatus, 'completed' | 'reported' | 'failed'> = new Map([
  ['completed', 'completed'],
  ['reported', 'reported'],
  ['ended', 'failed'],
]);
export const CLOSING_STATUS_VALUES = ['completed', 'reported', 'ended'] as const;
export type ClosingStatus = (typeof CLOSING_STATUS_VALUES)[number];

export const SESSION_TOKEN_TTL_SECONDS = 24 * 3600;
/**
 * How long a selfie waits for a document with a portrait to compare it with: as long as the
 * endpoint token it was uploaded with lives at most. Then it gets a fail result (reason
 * reference_timeout); a document that comes later belongs with a new selfie.
 */
export const SELFIE_WAIT_SECONDS = SESSION_TOKEN_TTL_SECONDS;
/** Agent tokens cover one call. */
export const AGENT_TOKEN_TTL_SECONDS = 12 * 3600;

/** The verification message type emitted for each artifact type that is verified. */
export const RESULT_TYPES: Partial<Record<ArtifactType, string>> = {
  doc_front: 'docfront_verification_result',
  doc_mrz: 'mrz_verification_result',
  passport_mrz_page: 'mrz_verification_result',
  nfc_raw: 'nfc_raw_result',
  selfie: 'face_verification_result',
  // the spec lists no type of its own for a call's snapshot: its face is compared as a selfie's
  snapshot: 'face_verification_result',
  liveness_video: 'liveness_result',
  recording: 'recording_result',
};
