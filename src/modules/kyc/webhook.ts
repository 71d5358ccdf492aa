import type { AppContext } from '../../context.ts';
import { outboundPolicy } from '../../net/outbound.ts';
import { deliverSigned } from '../../webhooks.ts';

/**
 * The notify-flow job: posts the closed session's result to the flow's URL, signed, and logs
 * every attempt. A non-2xx answer or a network error throws, so the queue retries with backoff.
 */
export async function notifyFlow(app: AppContext, sessionId: string, attempt: number): Promise<void> {
  const session = await app.db('verification_sessions').where({ id: sessionId }).first();
  if (!session) return;
  const flow = await app.db('verification_flows').where({ code: session.flow_code }).first();
  if (!flow?.notify_url || !flow.notify_secret) return;
  const results = await app.db('verification_results').where({ session_id: sessionId }).orderBy('created_at').select('type', 'code', 'message', 'created_at');
  const body = JSON.stringify({
    event: 'verification_session.closed',
    session_id: session.id,
    customer_ref: session.customer_ref,
    flow: session.flow_code,
    status: session.status,
    checklist: session.checklist,
    closed_at: session.closed_at,
    succeeded_artifact_types: session.succeeded_artifact_types,
    pending_artifact_types: session.pending_artifact_types,
    mrz_data: session.mrz_data,
    results,
  });
  const delivery = await deliverSigned(flow.notify_url, flow.notify_secret, body, outboundPolicy(app.config));
  await app.db('webhook_deliveries').insert({ session_id: sessionId, url: flow.notify_url, attempt, ...delivery });
  if (delivery.error) throw new Error(`notification to ${flow.notify_url} failed: ${delivery.error}`);
}
