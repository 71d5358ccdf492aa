import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import type { IceServer } from '../../config.ts';
import { z } from '../../http/openapi.ts';
import { readMultipart, type ReceivedMultipart, type ReceivedFile } from '../../http/multipart.ts';
import type { Context } from 'koa';
import { contentType, storeArtifact, type StoredArtifact } from '../kyc/uploads.ts';
import { recordAudit } from '../../audit.ts';
import { callInProgress, endCall, offerCalls, takeCall, withdrawOffers } from './queue.ts';

/**
 * The agent's side of a call, one function per action, shared by the mobile API (dashboard/lobby/)
 * and the web console (/admin/videocall/): whichever door, the same checks and the same effects.
 */

/** The agent token end-kyc-session takes: for the call (at most CALL_MAX_SECONDS) plus one hour. */
const CALL_MAX_SECONDS = 2 * 3600;
const AGENT_CALL_TOKEN_SECONDS = CALL_MAX_SECONDS + 3600;

const ICE_SERVER = z.object({ urls: z.union([z.string(), z.array(z.string())]), username: z.string().optional(), credential: z.string().optional() });

/** What taking a call adds to the lobby's answer (the OpenAPI document's schema of it). */
export const TAKEN_CALL = z.object({
  session_id: z.string(),
  agent_token: z.string().openapi({ description: 'The token end-kyc-session takes; valid for the call (at most 2 hours) plus one hour' }),
  agent_token_expires_in: z.number().int(),
  ice_servers: z.array(ICE_SERVER).openapi({ description: 'As RTCPeerConnection takes them; TURN credentials valid one hour' }),
});
export const SNAPSHOT_REQUESTED = z.object({ request_id: z.string() });
export const RECORDING_STORED = z.object({ artifact_id: z.string(), artifact_type: z.literal('recording'), path: z.string() });

export interface TakenCall extends z.infer<typeof TAKEN_CALL> {
  ice_servers: IceServer[];
}

/** Takes the call, mints the agent token (generated now, as the spec says) and tells the end user's page. */
export async function takeAndJoin(app: AppContext, userId: string, sessionId: string): Promise<TakenCall> {
  const { endUserClient } = await takeCall(app.db, userId, sessionId);
  const { token, expiresIn } = await app.tokens.issue('agent', sessionId, AGENT_CALL_TOKEN_SECONDS, { agent: userId });
  await app.videoCalls.agentJoined(sessionId, endUserClient);
  return { session_id: sessionId, agent_token: token, agent_token_expires_in: expiresIn, ice_servers: app.videoCalls.iceServers(sessionId, 'agent') };
}

/** The agent's call on `sessionId`, or 409. */
async function ownCall(app: AppContext, userId: string, sessionId: string) {
  const call = await callInProgress(app.db, sessionId);
  if (!call || call.agentId !== userId) throw new HttpError(409, 'You are not in a call for this session.', 'not_in_call');
  if (!call.endUserClient) throw new HttpError(409, 'The end user is not connected to this call.', 'end_user_not_connected');
  return { ...call, endUserClient: call.endUserClient };
}

/** Asks the end user's page for a snapshot; the upload arrives through take_snapshot and its verification. */
export async function requestSnapshot(app: AppContext, userId: string, sessionId: string): Promise<{ request_id: string }> {
  const call = await ownCall(app, userId, sessionId);
  return { request_id: await app.videoCalls.requestSnapshot(sessionId, call.endUserClient) };
}

/** Ends the agent's call, tells the end user's page, and offers the next waiting call. */
export async function endAndTell(app: AppContext, userId: string, sessionId: string): Promise<void> {
  const { endUserClient } = await endCall(app.db, userId, sessionId);
  await app.videoCalls.ended(sessionId, endUserClient, 'agent_ended');
  // The agent is free again: the next waiting call may be offered to them.
  await offerCalls(app.db);
}

/** The spec's upload limit holds for the call's recording too. */
const MAX_RECORDING_BYTES = 25 * 1024 * 1024;
const RECORDING_TYPES: ReadonlySet<string> = new Set(['video/webm', 'video/mp4']);

/**
 * Stores the call's recording as the session's `recording` artifact: only by the agent who took
 * the call, during it or within an hour of its end (the upload follows the hang-up), and only
 * when the end user consented to the recording in `join`. The content decides the type (WebM or
 * MP4 video). The temporary file is the caller's to discard.
 */
export async function storeRecording(app: AppContext, userId: string, sessionId: string, file: ReceivedFile | null): Promise<StoredArtifact> {
  await checkRecording(app, userId, sessionId);
  if (!file || file.size === 0) throw new HttpError(400, 'Send the recording as the multipart field "file".', 'file_missing');
  const mime = await contentType('recording', file.head);
  if (!RECORDING_TYPES.has(mime)) throw new HttpError(415, `A recording must be WebM or MP4 video; this file is ${mime}.`, 'file_type_not_allowed');
  return storeArtifact(app, sessionId, 'recording', file, mime, { agent: userId });
}

/** Whether this agent may store a recording of the session now (checked before the upload is read, and again with it). */
export async function checkRecording(app: AppContext, userId: string, sessionId: string): Promise<void> {
  const call = (await app.db('video_call_queue as q')
    .join('verification_sessions as s', 's.id', 'q.session_id')
    .where({ 'q.session_id': sessionId, 'q.agent_id': userId })
    .andWhere((query) => query.where('q.status', 'in_call').orWhere((ended) => ended.where('q.status', 'ended').andWhere('q.ended_at', '>', app.db.raw("now() - interval '1 hour'"))))
    .first('s.call_consent')) as { call_consent: { recording?: boolean } | null } | undefined;
  if (!call) throw new HttpError(409, 'You have not had a call for this session in the last hour.', 'not_in_call');
  if (call.call_consent?.recording !== true) throw new HttpError(409, 'The end user did not consent to recording this call.', 'recording_not_consented');
}

/**
 * An agent switches between AVAILABLE and AWAY (me/video-call-availability/ on the phone, the
 * console's switch on the web). The change and the in-call check are one statement, so a call that
 * starts at the same moment is never overwritten; going away hands back the calls offered; coming
 * back starts a round of offers. 403 for a user without the agent profile, 409 during a call.
 */
export async function setAgentAvailability(app: Pick<AppContext, 'db'>, userId: string, available: boolean, at: Date): Promise<void> {
  const status = available ? 'AVAILABLE' : 'AWAY';
  const updated = await app.db.transaction(async (trx) => {
    const rows = await trx('staff_video_agents').where({ user_id: userId, in_call: false }).update({ status, status_changed_at: at }).returning('user_id');
    if (rows.length) await recordAudit(trx, { type: 'staff', id: userId }, 'video_agent.availability', 'staff_user', userId, { status });
    if (rows.length && !available) await withdrawOffers(trx, userId);
    return rows.length > 0;
  });
  if (!updated) {
    const agent = await app.db('staff_video_agents').where({ user_id: userId }).first('user_id');
    if (!agent) throw new HttpError(403, 'You are not a video-call agent.', 'not_an_agent');
    throw new HttpError(409, 'A call is in progress: availability cannot change until it ends.', 'call_in_progress');
  }
  // A newly available agent may take the oldest waiting call at once.
  if (available) await offerCalls(app.db);
}

/** Reads a recording upload (multipart `file`, plus a few small fields such as the web's CSRF token) under the recording's limits. */
export function readRecordingUpload(app: AppContext, ctx: Context): Promise<ReceivedMultipart> {
  return readMultipart(ctx, {
    temporaryDirectory: app.files.temporaryDirectory(),
    fileFields: ['file'],
    maxFiles: 1,
    maxFileBytes: MAX_RECORDING_BYTES,
    tooLargeMessage: `The recording is larger than ${MAX_RECORDING_BYTES / (1024 * 1024)} MB.`,
    limits: { files: 2, fields: 5, fieldSize: 4096, parts: 8 },
  });
}
