import { createHmac } from 'node:crypto';

/** How long a merchant's endpoint may take to answer one delivery. */
const TIMEOUT_MS = 10_000;

/** `X-Warden-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">` with the receiver's secret. */
export function signature(secret: string, timestamp: number, body: string): string {
  return `t=${timestamp},v1=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** One delivery attempt as the delivery logs keep it. */
export interface DeliveryAttempt {
  status_code: number | null;
  /** null when the receiver answered 2xx */
  error: string | null;
  duration_ms: number;
}

/**
 * Posts a signed JSON body to a merchant's webhook once. Never throws: a non-2xx answer or a
 * network error is the attempt's error, for the caller to log and to throw so its job retries.
 */
export async function deliverSigned(url: string, secret: string, body: string): Promise<DeliveryAttempt> {
  const timestamp = Math.floor(Date.now() / 1000);
  const started = Date.now();
  let statusCode: number | null = null;
  let error: string | null = null;
  try {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-warden-signature': signature(secret, timestamp, body) },
      body,
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    statusCode = response.status;
    await response.arrayBuffer();
    if (!response.ok) error = `HTTP ${response.status}`;
  } catch (failure) {
    error = (failure as Error).message;
  }
  return { status_code: statusCode, error, duration_ms: Date.now() - started };
}
