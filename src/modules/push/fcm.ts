import { importPKCS8, SignJWT } from 'jose';
import type { FcmSettings } from '../../config.ts';
import { PushRetryable, type PushMessage, type PushOutcome } from './types.ts';

const SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
const GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:jwt-bearer';
/** An access token is renewed this long before the expiry the token endpoint gave. */
const RENEW_MARGIN_MS = 60_000;
const REQUEST_TIMEOUT_MS = 10_000;

/**
 * Firebase Cloud Messaging, HTTP v1, without an SDK: the service account signs an OAuth2 JWT
 * grant (RS256, Google's service-account flow) at its own token_uri; the access token is cached
 * until shortly before it expires, and dropped when FCM answers 401 (then fetched again once).
 */
export class FcmClient {
  private accessToken: { value: string; expiresAt: number } | undefined;
  private pending: Promise<string> | undefined;

  constructor(
    private readonly settings: FcmSettings,
    private readonly now: () => number = Date.now,
  ) {}

  async send(token: string, message: PushMessage): Promise<PushOutcome> {
    let response = await this.post(token, message);
    if (response.status === 401) {
      this.accessToken = undefined;
      response = await this.post(token, message);
    }
    if (response.ok) return { kind: 'sent' };
    const text = await response.text();
    const errorCode = fcmErrorCode(text);
    if (response.status === 404 || errorCode === 'UNREGISTERED') return { kind: 'unregistered', reason: errorCode ?? `HTTP ${response.status}` };
    if (response.status === 429 || response.status >= 500) {
      throw new PushRetryable(`FCM answered ${response.status} ${errorCode ?? ''}`.trim(), retryAfterSeconds(response.headers.get('retry-after')));
    }
    return { kind: 'rejected', reason: `FCM answered ${response.status} ${errorCode ?? text.slice(0, 200)}`.trim() };
  }

  private async post(token: string, message: PushMessage): Promise<Response> {
    const accessToken = await this.token();
    const body = {
      message: {
        token,
        notification: { title: message.title, body: message.body },
        data: Object.fromEntries(Object.entries(message.data).map(([key, value]) => [key, String(value ?? '')])),
        android: { priority: 'high' },
      },
    };
    try {
      return await fetch(`${this.settings.url}/v1/projects/${encodeURIComponent(this.settings.projectId)}/messages:send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      throw new PushRetryable(`FCM unreachable: ${(error as Error).message}`);
    }
  }

  /** The cached access token, or a new one; concurrent senders share one token request. */
  private async token(): Promise<string> {
    if (this.accessToken && this.accessToken.expiresAt - RENEW_MARGIN_MS > this.now()) return this.accessToken.value;
    this.pending ??= this.fetchToken().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  private async fetchToken(): Promise<string> {
    const issuedAt = Math.floor(this.now() / 1000);
    const key = await importPKCS8(this.settings.privateKey, 'RS256');
    const assertion = await new SignJWT({ scope: SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT', ...(this.settings.privateKeyId ? { kid: this.settings.privateKeyId } : {}) })
      .setIssuer(this.settings.clientEmail)
      .setAudience(this.settings.tokenUri)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + 3600)
      .sign(key);
    let response: Response;
    try {
      response = await fetch(this.settings.tokenUri, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: GRANT_TYPE, assertion }).toString(),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (error) {
      throw new PushRetryable(`FCM token endpoint unreachable: ${(error as Error).message}`);
    }
    const text = await response.text();
    if (!response.ok) throw new PushRetryable(`FCM token endpoint answered ${response.status}: ${text.slice(0, 200)}`);
    const grant = JSON.parse(text) as { access_token?: unknown; expires_in?: unknown };
    if (typeof grant.access_token !== 'string') throw new PushRetryable('FCM token endpoint gave no access_token');
    const lifetime = typeof grant.expires_in === 'number' ? grant.expires_in : 3600;
    this.accessToken = { value: grant.access_token, expiresAt: this.now() + lifetime * 1000 };
    return grant.access_token;
  }
}

/** FCM's error detail (google.firebase.fcm.v1.FcmError errorCode), or the error status. */
function fcmErrorCode(text: string): string | undefined {
  try {
    const parsed = JSON.parse(text) as { error?: { status?: string; details?: { errorCode?: string }[] } };
    return parsed.error?.details?.find((detail) => detail.errorCode)?.errorCode ?? parsed.error?.status;
  } catch {
    return undefined;
  }
}

export function retryAfterSeconds(header: string | null | undefined): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.round((date - Date.now()) / 1000));
}
