import { createHmac } from 'node:crypto';
import type { AppContext } from '../../context.ts';

/** `X-Warden-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the flow's secret. */
export function signature(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

const TIMEOUT_MS = 10_000;

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
  const timestamp = Math.floor(Date.now() / 1000);
  const started = Date.now();
  let statusCode: number | null = null;
  let error: string | null = null;
  try {
    const response = await fetch(flow.notify_url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-warden-signature': signature(flow.notify_secret, timestamp, body) },
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    statusCode = response.status;
    await response.arrayBuffer();
    if (!response.ok) error = `HTTP ${response.status}`;
  } catch (failure) {
    error = (failure as Error).message;
  }
  await app.db('webhook_deliveries').insert({ session_id: sessionId, url: flow.notify_url, attempt, status_code: statusCode, error, duration_ms: Date.now() - started });
  if (error) throw new Error(`notification to ${flow.notify_url} failed: ${error}`);
}
