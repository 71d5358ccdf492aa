import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import { HttpError } from '../../http/errors.ts';
import { notify } from '../notifications/service.ts';

export const SESSION_MODEL = 'document.documentverificationsession';

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
      const pair = (await trx.raw(`
        select q.id, q.session_id, q.customer_ref, a.user_id
        from (select id, session_id, customer_ref from video_call_queue where status = 'waiting' order by enqueued_at, id limit 1) q,
             lateral (select a.user_id from staff_video_agents a join staff_users u on u.id = a.user_id
                      where a.status = 'AVAILABLE' and not a.in_call and u.is_active
                        and not exists (select 1 from video_call_queue o where o.offered_to = a.user_id and o.status = 'offered')
                      order by a.status_changed_at, a.user_id limit 1) a`)) as { rows: { id: string; session_id: string; customer_ref: string; user_id: string }[] };
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
 */
export async function takeCall(db: Knex, userId: string, sessionId: string): Promise<void> {
  await db.transaction(async (trx) => {
    const agent = (await trx('staff_video_agents').where({ user_id: userId }).forUpdate().first('in_call')) as { in_call: boolean } | undefined;
    if (!agent) throw new HttpError(403, 'You are not a video-call agent.', 'not_an_agent');
    if (agent.in_call) throw new HttpError(409, 'You are already in a call.', 'call_in_progress');
    const taken = await trx('video_call_queue')
      .where({ session_id: sessionId })
      .andWhere((query) => query.where({ status: 'waiting' }).orWhere({ status: 'offered', offered_to: userId }))
      .update({ status: 'in_call', agent_id: userId, taken_at: trx.fn.now() })
      .returning('id');
    if (!taken.length) {
      const exists = await trx('video_call_queue').where({ session_id: sessionId }).first('status');
      if (!exists) throw new HttpError(404, 'No such session in the video-call queue.', 'not_found');
      throw new HttpError(409, 'This call is no longer waiting (taken, offered to another agent, or ended).', 'call_not_waiting');
    }
    await trx('staff_video_agents').where({ user_id: userId }).update({ in_call: true });
    await recordAudit(trx, { type: 'staff', id: userId }, 'video_call.take', 'verification_session', sessionId, {});
  });
}

/** The agent ends their call: the queue row is ended and the agent is free again (AVAILABLE or AWAY as before). */
export async function endCall(db: Knex, userId: string, sessionId: string): Promise<void> {
  await db.transaction(async (trx) => {
    const ended = await trx('video_call_queue').where({ session_id: sessionId, agent_id: userId, status: 'in_call' }).update({ status: 'ended', ended_at: trx.fn.now() }).returning('id');
    if (!ended.length) throw new HttpError(409, 'You are not in a call for this session.', 'not_in_call');
    await trx('staff_video_agents').where({ user_id: userId }).update({ in_call: false });
    await recordAudit(trx, { type: 'staff', id: userId }, 'video_call.end', 'verification_session', sessionId, {});
  });
}
