import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import { HttpError } from '../../http/errors.ts';
import { notify } from '../notifications/service.ts';

export const SESSION_MODEL = 'document.documentverificationsession';

/**
 * A queue row's life (migration 0028): `pending` until the end user's page joins, `waiting` in
 * the lobby, `offered` to one agent, `in_call` once an agent takes it, `ended` (with end_reason).
 */
export type QueueStatus = 'pending' | 'waiting' | 'offered' | 'in_call' | 'ended';

/** What the end user's page sends with `join`: consent to the call and (or not) to its recording. */
export interface CallConsent {
  call: true;
  recording: boolean;
  text: string;
  at: string;
}

/** A refusal the end user's page is told as `{event: "error", data: {reason, message}}`. */
export class CallRefused extends Error {
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One offer round: each waiting session, oldest first, is offered to the agent who has been
 * AVAILABLE longest without a call or an open offer; the agent gets an incoming_call notification
 * (live socket and push). Runs when the queue changes and when an agent becomes available. Rounds
 * of every process queue behind one advisory lock, so no agent is offered two calls at once.
 */
export async function offerCalls(db: Knex): Promise<number> {
  return db.transaction(async (trx) => {
    await trx.raw("select pg_advisory_xact_lock(hashtext('warden_video_call_offers'))");
    let offered = 0;
    for (;;) {
      // The oldest waiting call someone can be offered: not to the agent whose offer of it just lapsed.
      const pair = (await trx.raw(`
        select q.id, q.session_id, q.customer_ref, a.user_id
        from (select id, session_id, customer_ref, passed_over from video_call_queue where status = 'waiting' order by enqueued_at, id) q
        cross join lateral (select a.user_id from staff_video_agents a join staff_users u on u.id = a.user_id
                      where a.status = 'AVAILABLE' and not a.in_call and u.is_active and a.user_id is distinct from q.passed_over
                        and not exists (select 1 from video_call_queue o where o.offered_to = a.user_id and o.status = 'offered')
                      order by a.status_changed_at, a.user_id limit 1) a
        limit 1`)) as { rows: { id: string; session_id: string; customer_ref: string; user_id: string }[] };
      const next = pair.rows[0];
      if (!next) return offered;
      await trx('video_call_queue').where({ id: next.id }).update({ status: 'offered', offered_to: next.user_id, offered_at: trx.fn.now() });
      await notify(trx, {
        userIds: [next.user_id],
        kind: 'incoming_call',
        title: 'Incoming video call',
        body: `Customer ${next.customer_ref} is waiting for identity verification.`,
        target: { model: SESSION_MODEL, pk: next.session_id },
      });
      offered++;
    }
  });
}

/** An agent who goes away hands back the calls offered to them. */
export async function withdrawOffers(db: Knex | Knex.Transaction, userId: string): Promise<void> {
  await db('video_call_queue').where({ offered_to: userId, status: 'offered' }).update({ status: 'waiting', offered_to: null, offered_at: null });
}

/**
 * An agent takes a waiting call, or the one offered to them: the queue row moves to in_call and
 * the agent's profile to in_call (the availability switch then answers 409) in one transaction.
 * The agent's own call in progress can be taken again (resumed); any other answers 409.
 */
export async function takeCall(db: Knex, userId: string, sessionId: string): Promise<{ endUserClient: string | null }> {
  return db.transaction(async (trx) => {
    const agent = (await trx('staff_video_agents').where({ user_id: userId }).forUpdate().first('in_call')) as { in_call: boolean } | undefined;
    if (!agent) throw new HttpError(403, 'You are not a video-call agent.', 'not_an_agent');
    if (agent.in_call) {
      // Taking one's own call again resumes it (a reloaded console, another device of the agent).
      const own = (await trx('video_call_queue').where({ session_id: sessionId, agent_id: userId, status: 'in_call' }).first('end_user_client')) as { end_user_client: string | null } | undefined;
      if (!own) throw new HttpError(409, 'You are already in a call.', 'call_in_progress');
      await recordAudit(trx, { type: 'staff', id: userId }, 'video_call.resume', 'verification_session', sessionId, {});
      return { endUserClient: own.end_user_client };
    }
    const taken = await trx('video_call_queue')
      .where({ session_id: sessionId })
      .andWhere((query) => query.where({ status: 'waiting' }).orWhere({ status: 'offered', offered_to: userId }))
      .update({ status: 'in_call', agent_id: userId, taken_at: trx.fn.now() })
      .returning(['id', 'end_user_client']);
    if (!taken.length) {
      const exists = await trx('video_call_queue').where({ session_id: sessionId }).first('status');
      if (!exists) throw new HttpError(404, 'No such session in the video-call queue.', 'not_found');
      throw new HttpError(409, 'This call is no longer waiting (taken, offered to another agent, or ended).', 'call_not_waiting');
    }
    await trx('staff_video_agents').where({ user_id: userId }).update({ in_call: true });
    await recordAudit(trx, { type: 'staff', id: userId }, 'video_call.take', 'verification_session', sessionId, {});
    return { endUserClient: (taken[0] as { end_user_client: string | null }).end_user_client };
  });
}

/** The agent ends their call: the queue row is ended and the agent is free again (AVAILABLE or AWAY as before). */
export async function endCall(db: Knex, userId: string, sessionId: string, reason = 'agent_ended'): Promise<{ endUserClient: string | null }> {
  return db.transaction(async (trx) => {
    const ended = (await trx('video_call_queue')
      .where({ session_id: sessionId, agent_id: userId, status: 'in_call' })
      .update({ status: 'ended', ended_at: trx.fn.now(), end_reason: reason })
      .returning('end_user_client')) as { end_user_client: string | null }[];
    if (!ended.length) throw new HttpError(409, 'You are not in a call for this session.', 'not_in_call');
    await trx('staff_video_agents').where({ user_id: userId }).update({ in_call: false });
    await recordAudit(trx, { type: 'staff', id: userId }, 'video_call.end', 'verification_session', sessionId, { reason });
    return { endUserClient: ended[0]!.end_user_client };
  });
}

const CONSENT_TEXT_MAX = 4000;

/** The consent `join` carries, checked: both flags booleans, the call consented to, the words shown and when. */
export function parseConsent(value: unknown): CallConsent {
  const consent = (value ?? {}) as Record<string, unknown>;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CallRefused('consent_missing', 'join needs data.consent {call, recording, text, at}.');
  if (consent.call !== true) throw new CallRefused('consent_missing', 'The call needs the end user’s consent (consent.call true).');
  if (typeof consent.recording !== 'boolean') throw new CallRefused('consent_invalid', 'consent.recording must be true or false.');
  if (typeof consent.text !== 'string' || !consent.text.trim() || consent.text.length > CONSENT_TEXT_MAX || consent.text.includes('\u0000')) {
    throw new CallRefused('consent_invalid', `consent.text must be the words shown to the end user (1-${CONSENT_TEXT_MAX} characters).`);
  }
  if (typeof consent.at !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(consent.at) || Number.isNaN(Date.parse(consent.at))) {
    throw new CallRefused('consent_invalid', 'consent.at must be an ISO 8601 time.');
  }
  return { call: true, recording: consent.recording, text: consent.text, at: consent.at };
}

/**
 * The end user's page joins the queue with consent: a pending row becomes waiting (enqueued now)
 * and names this connection; the consent is stored with the session. Refused unless the session
 * is open and its flow asks for a call, and while another connection holds the call.
 */
export async function joinQueue(db: Knex, sessionId: string, clientId: string, consent: CallConsent): Promise<void> {
  await db.transaction(async (trx) => {
    const session = (await trx('verification_sessions').where({ id: sessionId }).first('status', 'requires_video_call')) as { status: string; requires_video_call: boolean } | undefined;
    if (!session || !session.requires_video_call) throw new CallRefused('call_not_required', 'This session’s flow has no video call.');
    if (session.status !== 'open') throw new CallRefused('session_closed', `The session is already ${session.status}.`);
    const row = (await trx('video_call_queue').where({ session_id: sessionId }).forUpdate().first('status', 'end_user_client')) as { status: QueueStatus; end_user_client: string | null } | undefined;
    if (!row || row.status === 'ended') throw new CallRefused('call_ended', 'The call for this session has ended.');
    if (row.status !== 'pending' && row.end_user_client !== clientId) throw new CallRefused('call_already_joined', 'Another page has joined this session’s call.');
    if (row.status === 'pending') {
      await trx('video_call_queue').where({ session_id: sessionId }).update({ status: 'waiting', end_user_client: clientId, enqueued_at: trx.fn.now(), passed_over: null });
    }
    await trx('verification_sessions').where({ id: sessionId }).update({ call_consent: JSON.stringify({ ...consent, received_at: new Date().toISOString() }) });
    await recordAudit(trx, { type: 'system', id: 'end_user' }, 'video_call.join', 'verification_session', sessionId, { recording: consent.recording });
  });
}

/** The end user's place in the lobby (1 = next), or null when the call is not waiting. */
export async function queuePositions(db: Knex, sessionIds: readonly string[]): Promise<Map<string, number>> {
  if (!sessionIds.length) return new Map();
  const { rows } = (await db.raw(
    `select q.session_id, (select count(*)::int from video_call_queue o where o.status in ('waiting', 'offered') and (o.enqueued_at, o.id) <= (q.enqueued_at, q.id)) as position
     from video_call_queue q where q.session_id = any(?) and q.status in ('waiting', 'offered')`,
    [[...sessionIds]],
  )) as { rows: { session_id: string; position: number }[] };
  return new Map(rows.map((row) => [row.session_id, row.position]));
}

/**
 * The end user's connection went: a call not taken yet goes back to pending (out of the lobby); a
 * call in progress ends (reason end_user_left) and its agent is free. Returns the agent to tell.
 */
export async function leaveQueue(db: Knex, sessionId: string, clientId: string): Promise<{ agentId: string | null }> {
  return db.transaction(async (trx) => {
    const row = (await trx('video_call_queue').where({ session_id: sessionId, end_user_client: clientId }).forUpdate().first('status', 'agent_id')) as { status: QueueStatus; agent_id: string | null } | undefined;
    if (!row) return { agentId: null };
    if (row.status === 'waiting' || row.status === 'offered') {
      await trx('video_call_queue').where({ session_id: sessionId }).update({ status: 'pending', end_user_client: null, offered_to: null, offered_at: null });
      return { agentId: null };
    }
    if (row.status !== 'in_call') return { agentId: null };
    await trx('video_call_queue').where({ session_id: sessionId }).update({ status: 'ended', ended_at: trx.fn.now(), end_reason: 'end_user_left' });
    if (row.agent_id) await trx('staff_video_agents').where({ user_id: row.agent_id }).update({ in_call: false });
    await recordAudit(trx, { type: 'system', id: 'end_user' }, 'video_call.end', 'verification_session', sessionId, { reason: 'end_user_left' });
    return { agentId: row.agent_id };
  });
}

/** Offers older than `seconds` lapse: the call waits again and the next round offers it to someone else. */
export async function expireOffers(db: Knex, seconds: number): Promise<number> {
  return db('video_call_queue')
    .where({ status: 'offered' })
    .andWhere('offered_at', '<', db.raw('now() - make_interval(secs => ?)', [seconds]))
    .update({ status: 'waiting', passed_over: db.ref('offered_to'), offered_to: null, offered_at: null });
}

/** The call in progress on a session, as its agent or its end user's connection may signal on it. */
export async function callInProgress(db: Knex, sessionId: string): Promise<{ agentId: string | null; endUserClient: string | null } | null> {
  const row = (await db('video_call_queue').where({ session_id: sessionId, status: 'in_call' }).first('agent_id', 'end_user_client')) as
    | { agent_id: string | null; end_user_client: string | null }
    | undefined;
  return row ? { agentId: row.agent_id, endUserClient: row.end_user_client } : null;
}

/** Ends every call the agent is in (they disconnected): returns the sessions and end users to tell. */
export async function endCallsOfAgent(db: Knex, userId: string, reason: string): Promise<{ sessionId: string; endUserClient: string | null }[]> {
  return db.transaction(async (trx) => {
    const ended = (await trx('video_call_queue')
      .where({ agent_id: userId, status: 'in_call' })
      .update({ status: 'ended', ended_at: trx.fn.now(), end_reason: reason })
      .returning(['session_id', 'end_user_client'])) as { session_id: string; end_user_client: string | null }[];
    if (!ended.length) return [];
    await trx('staff_video_agents').where({ user_id: userId }).update({ in_call: false });
    for (const row of ended) await recordAudit(trx, { type: 'staff', id: userId }, 'video_call.end', 'verification_session', row.session_id, { reason });
    return ended.map((row) => ({ sessionId: row.session_id, endUserClient: row.end_user_client }));
  });
}
