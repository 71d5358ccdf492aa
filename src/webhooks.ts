import { createHmac } from 'node:crypto';
import { OutboundRefused, type OutboundPolicy } from './net/outbound.ts';

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
 * Posts a signed JSON body to a merchant's webhook once, through the outgoing-URL policy
 * (src/net/outbound.ts): the URL's host, and every address its name resolves to, must be public
 * (or allowed by WARDEN_OUTBOUND_ALLOW), and the request goes to the checked address. A redirect
 * is not followed: a 3xx is a failed attempt like any other non-2xx. Never throws: a refused
 * address, a non-2xx answer or a network error is the attempt's error, for the caller to log and
 * to throw so its job retries.
 */
export async function deliverSigned(url: string, secret: string, body: string, policy: OutboundPolicy): Promise<DeliveryAttempt> {
  const timestamp = Math.floor(Date.now() / 1000);
  const started = Date.now();
  let statusCode: number | null = null;
  let error: string | null = null;
  try {
    statusCode = await policy.post(url, {
      headers: { 'content-type': 'application/json', 'x-warden-signature': signature(secret, timestamp, body) },
      body,
      timeoutMs: TIMEOUT_MS,
    });
    if (statusCode < 200 || statusCode > 299) {
      error = statusCode >= 300 && statusCode < 400 ? `HTTP ${statusCode} (redirects are not followed)` : `HTTP ${statusCode}`;
    }
  } catch (failure) {
    error = failure instanceof OutboundRefused ? `refused: ${failure.message}` : (failure as Error).message;
  }
  return { status_code: statusCode, error, duration_ms: Date.now() - started };
}
