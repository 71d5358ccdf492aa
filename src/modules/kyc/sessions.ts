import { randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import type { AppContext } from '../../context.ts';
import type { Actor } from '../../actor.ts';
import { BadRequestError } from '../../http/errors.ts';
import { CLOSING_STATUSES, SESSION_TOKEN_TTL_SECONDS, type ClosingStatus } from './constants.ts';
import { KycError } from './errors.ts';
import { findUsableFlow, type Flow } from './flows.ts';

export interface SessionRow {
  id: string;
  customer_ref: string;
  flow_code: string;
  status: 'open' | 'completed' | 'reported' | 'failed';
  attempt_no: number;
  required_artifact_types: string[];
  pending_artifact_types: string[];
  succeeded_artifact_types: string[];
  requires_video_call: boolean;
  videocall_token: string;
  mrz_data: Record<string, unknown> | null;
  created_by: string;
}

/** The spec's verification session object. */
export interface SessionView {
  session_id: string;
  flow: string;
  required_artifact_types: string[];
  pending_artifact_types: string[];
  succeeded_artifact_types: string[];
  requires_video_call: boolean;
  attempt_no: number;
  videocall_token: string;
  endpoint_token: string;
  mrz_data: Record<string, unknown> | null;
}

export interface CreateSessionInput {
  customer_ref: string;
  flow?: string | undefined;
  device_id?: string | undefined;
  ip_address?: string | undefined;
  user_agent?: string | undefined;
  geo?: Record<string, unknown> | undefined;
}

function view(row: SessionRow, endpointToken: string): SessionView {
  return {
    session_id: row.id,
    flow: row.flow_code,
    required_artifact_types: row.required_artifact_types,
    pending_artifact_types: row.pending_artifact_types,
    succeeded_artifact_types: row.succeeded_artifact_types,
    requires_video_call: row.requires_video_call,
    attempt_no: row.attempt_no,
    videocall_token: row.videocall_token,
    endpoint_token: endpointToken,
    mrz_data: row.mrz_data,
  };
}

const UNIQUE_VIOLATION = '23505';

/**
 * Opens a session, or returns the open one of the same customer and flow with attempt_no + 1.
 * Each call gets a fresh endpoint token valid for 24 hours. Two concurrent first calls meet at
 * the one-open-session index; the loser retries and finds the winner's session.
 */
export async function createSession(app: AppContext, input: CreateSessionInput, actor: Actor): Promise<SessionView> {
  const flow = await findUsableFlow(app.db, input.flow);
  if (!flow) {
    throw new BadRequestError(
      input.flow ? `Unknown or inactive verification flow: ${input.flow}` : 'No flow was given and no default verification flow is defined.',
      'flow_invalid',
    );
  }
  const device = {
    device_id: input.device_id ?? null,
    ip_address: input.ip_address ?? null,
    user_agent: input.user_agent ?? null,
    geo: input.geo ?? null,
  };
  for (let attempt = 0; ; attempt++) {
    try {
      const row = await app.db.transaction((trx) => openOrRepeat(trx, flow, input.customer_ref, device, actor));
      const { token } = await app.tokens.issue('session', row.id, SESSION_TOKEN_TTL_SECONDS);
      return view(row, token);
    } catch (error) {
      if ((error as { code?: string }).code !== UNIQUE_VIOLATION || attempt > 2) throw error;
    }
  }
}

async function openOrRepeat(
  trx: Knex.Transaction,
  flow: Flow,
  customerRef: string,
  device: Record<string, unknown>,
  actor: Actor,
): Promise<SessionRow> {
  const open = (await trx('verification_sessions')
    .where({ customer_ref: customerRef, flow_code: flow.code, status: 'open' })
    .forUpdate()
    .first()) as SessionRow | undefined;
  if (open) {
    const [row] = await trx('verification_sessions')
      .where({ id: open.id })
      .update({ attempt_no: open.attempt_no + 1, ...device, updated_at: trx.fn.now() })
      .returning('*');
    await recordAudit(trx, actor, 'session.resume', 'verification_session', open.id, { attempt_no: open.attempt_no + 1 });
    return row as SessionRow;
  }
  const [row] = await trx('verification_sessions')
    .insert({
      id: randomUUID(),
      customer_ref: customerRef,
      flow_code: flow.code,
      required_artifact_types: flow.required_artifact_types,
      pending_artifact_types: flow.required_artifact_types,
      requires_video_call: flow.requires_video_call,
      // "videocall" is the neutral word the spec asks for in place of a product name.
      videocall_token: flow.requires_video_call ? `videocall_${randomBytes(24).toString('base64url')}` : '',
      ...device,
      geo: device.geo === null ? null : JSON.stringify(device.geo),
      created_by: `${actor.type}:${actor.id}`,
    })
    .returning('*');
  await recordAudit(trx, actor, 'session.open', 'verification_session', (row as SessionRow).id, { flow: flow.code, customer_ref: customerRef });
  return row as SessionRow;
}

/**
 * Moves an artifact type from pending to succeeded (once, however often it succeeds): the one
 * place the session's progress changes, for uploads that need no verification and for results.
 */
export async function markArtifactSucceeded(db: Knex | Knex.Transaction, sessionId: string, artifactType: string): Promise<void> {
  await db.raw(
    `update verification_sessions set pending_artifact_types = array_remove(pending_artifact_types, :type),
       succeeded_artifact_types = case when :type = any(succeeded_artifact_types) then succeeded_artifact_types else array_append(succeeded_artifact_types, :type) end,
       updated_at = now() where id = :id`,
    { type: artifactType, id: sessionId },
  );
}

/**
 * Queues a verification of every selfie of the session that has no result yet: the ones waiting
 * for a reference portrait get compared, or answered with a fail when there will be none
 * (verifiers/selfie.ts). A selfie already queued is verified once all the same (one result per artifact).
 */
export async function queueUnansweredSelfies(app: AppContext, trx: Knex.Transaction, sessionId: string): Promise<void> {
  const unanswered = (await trx('verification_artifacts as a')
    .leftJoin('verification_results as r', 'r.artifact_id', 'a.id')
    .where({ 'a.session_id': sessionId, 'a.artifact_type': 'selfie' })
    .whereNull('r.id')
    .pluck('a.id')) as string[];
  for (const selfieId of unanswered) await app.jobs.enqueueVerification(trx, selfieId);
}

export async function findSession(db: Knex | Knex.Transaction, id: string): Promise<SessionRow | undefined> {
  return db('verification_sessions').where({ id }).first();
}

/**
 * end-kyc-session: closes an open session with the agent's checklist. Closing a closed session
 * changes nothing and is not an error. A flow with a notify URL gets its result notification
 * queued in the same transaction, and so do the verifications of selfies still without a result:
 * one waiting for a document gets its fail now (verifiers/selfie.ts).
 */
export async function closeSession(
  app: AppContext,
  sessionId: string,
  status: ClosingStatus,
  checklist: Record<string, boolean>,
  agent: string,
): Promise<SessionRow> {
  return app.db.transaction(async (trx) => {
    const session = (await trx('verification_sessions').where({ id: sessionId }).forUpdate().first()) as SessionRow | undefined;
    if (!session) throw new KycError(404, 'session_not_found', 'The session of this token does not exist.');
    if (session.status !== 'open') return session;
    const [closed] = await trx('verification_sessions')
      .where({ id: sessionId })
      .update({ status: CLOSING_STATUSES.get(status)!, checklist, closed_by: agent, closed_at: trx.fn.now(), updated_at: trx.fn.now() })
      .returning('*');
    await recordAudit(trx, { type: 'staff', id: agent }, 'session.close', 'verification_session', sessionId, { status, session_status: CLOSING_STATUSES.get(status)!, checklist });
    await app.jobs.notifyFlow(trx, sessionId);
    await queueUnansweredSelfies(app, trx, sessionId);
    return closed as SessionRow;
  });
}
