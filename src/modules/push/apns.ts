import http2 from 'node:http2';
import { importPKCS8, SignJWT } from 'jose';
import type { ApnsSettings } from '../../config.ts';
import { retryAfterSeconds } from './fcm.ts';
import { PushRetryable, type PushMessage, type PushOutcome } from './types.ts';

/** Apple refuses provider tokens older than an hour and throttles renewals more often than every 20 minutes. */
const PROVIDER_TOKEN_LIFETIME_MS = 40 * 60_000;
const REQUEST_TIMEOUT_MS = 10_000;
/** APNs reasons that mean the device token will never work again. */
const DEAD_TOKEN_REASONS = new Set(['BadDeviceToken', 'Unregistered', 'DeviceTokenNotForTopic']);

/**
 * Apple Push Notification service over HTTP/2 (node:http2), token-based authentication: an ES256
 * provider token signed with the .p8 key, reused for 40 minutes and renewed at once when APNs
 * answers ExpiredProviderToken. One HTTP/2 session is kept open and multiplexes every request.
 */
export class ApnsClient {
  private session: http2.ClientHttp2Session | undefined;
  private providerToken: { value: string; issuedAt: number } | undefined;

  constructor(
    private readonly settings: ApnsSettings,
    private readonly tls: { ca?: string | Buffer } = {},
    private readonly now: () => number = Date.now,
  ) {}

  async send(deviceToken: string, message: PushMessage): Promise<PushOutcome> {
    let answer = await this.request(deviceToken, message);
    if (answer.status === 403 && answer.reason === 'ExpiredProviderToken') {
      this.providerToken = undefined;
      answer = await this.request(deviceToken, message);
    }
    if (answer.status === 200) return { kind: 'sent' };
    if (answer.status === 410 || DEAD_TOKEN_REASONS.has(answer.reason ?? '')) return { kind: 'unregistered', reason: answer.reason ?? `HTTP ${answer.status}` };
    if (answer.status === 429 || answer.status >= 500) {
      throw new PushRetryable(`APNs answered ${answer.status} ${answer.reason ?? ''}`.trim(), retryAfterSeconds(answer.retryAfter));
    }
    return { kind: 'rejected', reason: `APNs answered ${answer.status} ${answer.reason ?? ''}`.trim() };
  }

  close(): void {
    this.session?.close();
    this.session = undefined;
  }

  private connect(): http2.ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    const session = http2.connect(this.settings.url, this.tls.ca ? { ca: this.tls.ca } : {});
    session.on('error', () => {
      if (this.session === session) this.session = undefined;
    });
    session.on('close', () => {
      if (this.session === session) this.session = undefined;
    });
    // An idle connection must not keep the process alive.
    session.unref();
    this.session = session;
    return session;
  }

  private async token(): Promise<string> {
    if (this.providerToken && this.now() - this.providerToken.issuedAt < PROVIDER_TOKEN_LIFETIME_MS) return this.providerToken.value;
    const issuedAt = this.now();
    const key = await importPKCS8(this.settings.keyPem, 'ES256');
    const value = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: this.settings.keyId })
      .setIssuer(this.settings.teamId)
      .setIssuedAt(Math.floor(issuedAt / 1000))
      .sign(key);
    this.providerToken = { value, issuedAt };
    return value;
  }

  private async request(deviceToken: string, message: PushMessage): Promise<{ status: number; reason?: string; retryAfter?: string }> {
    const token = await this.token();
    const payload = JSON.stringify({ aps: { alert: { title: message.title, body: message.body }, sound: 'default' }, ...message.data });
    return new Promise((resolve, reject) => {
      let session: http2.ClientHttp2Session;
      try {
        session = this.connect();
      } catch (error) {
        reject(new PushRetryable(`APNs unreachable: ${(error as Error).message}`));
        return;
      }
      const stream = session.request({
        ':method': 'POST',
        ':path': `/3/device/${encodeURIComponent(deviceToken)}`,
        authorization: `bearer ${token}`,
        'apns-topic': this.settings.topic,
        'apns-push-type': 'alert',
        'apns-priority': '10',
        'content-type': 'application/json',
      });
      stream.setTimeout(REQUEST_TIMEOUT_MS, () => stream.close(http2.constants.NGHTTP2_CANCEL));
      let status = 0;
      let retryAfter: string | undefined;
      const chunks: Buffer[] = [];
      stream.on('response', (headers) => {
        status = Number(headers[':status']);
        retryAfter = headers['retry-after'] as string | undefined;
      });
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (error) => reject(new PushRetryable(`APNs request failed: ${error.message}`)));
      stream.on('close', () => {
        if (!status) {
          reject(new PushRetryable('APNs closed the stream without an answer'));
          return;
        }
        let reason: string | undefined;
        try {
          reason = (JSON.parse(Buffer.concat(chunks).toString() || '{}') as { reason?: string }).reason;
        } catch {
          reason = undefined;
        }
        resolve({ status, reason, retryAfter });
      });
      stream.end(payload);
    });
  }
}
