import { RateLimiterMemory, type RateLimiterRes } from 'rate-limiter-flexible';
import { HttpError } from '../../http/errors.ts';

/**
 * Limits on the token endpoint, whose every attempt costs about 60 ms of argon2 CPU: without them
 * one client could try some 33 secrets a second and hold a core. Checked before the secret is
 * hashed; failures count against the caller IP and against the api_key tried from that IP (so
 * that nobody can lock a merchant out from elsewhere by failing with its key). Kept in memory:
 * each node limits what reaches it, which bounds the CPU it spends.
 */
export const TOKEN_LIMITS = Object.freeze({
  /** Every token request from one IP, successful or not. */
  requestsPerIp: { points: 60, duration: 60 },
  /** Failed authentications from one IP, whatever the key. */
  failuresPerIp: { points: 10, duration: 60 },
  /** Failed authentications for one api_key from one IP. */
  failuresPerKey: { points: 5, duration: 60 },
});

export class TooManyRequestsError extends HttpError {
  constructor(readonly retryAfterSeconds: number) {
    super(429, `Too many token requests; try again in ${retryAfterSeconds} s.`, 'rate_limited', { retry_after: retryAfterSeconds });
  }
}

function exhausted(result: RateLimiterRes | null, points: number): number | null {
  if (!result || result.consumedPoints < points) return null;
  return Math.max(1, Math.ceil(result.msBeforeNext / 1000));
}

export class TokenRateLimiter {
  private readonly requests = new RateLimiterMemory({ keyPrefix: 'token-ip', ...TOKEN_LIMITS.requestsPerIp });
  private readonly ipFailures = new RateLimiterMemory({ keyPrefix: 'token-ip-fail', ...TOKEN_LIMITS.failuresPerIp });
  private readonly keyFailures = new RateLimiterMemory({ keyPrefix: 'token-key-fail', ...TOKEN_LIMITS.failuresPerKey });

  /** Throws TooManyRequestsError when this attempt is over a limit; otherwise counts it. */
  async admit(ip: string, apiKey: string): Promise<void> {
    const [ipFailed, keyFailed] = await Promise.all([this.ipFailures.get(ip), this.keyFailures.get(`${apiKey}\n${ip}`)]);
    const blocked = exhausted(ipFailed, TOKEN_LIMITS.failuresPerIp.points) ?? exhausted(keyFailed, TOKEN_LIMITS.failuresPerKey.points);
    if (blocked !== null) throw new TooManyRequestsError(blocked);
    try {
      await this.requests.consume(ip);
    } catch (rejection) {
      if (rejection instanceof Error) throw rejection;
      throw new TooManyRequestsError(Math.max(1, Math.ceil((rejection as RateLimiterRes).msBeforeNext / 1000)));
    }
  }

  /** Counts a failed authentication (wrong key or secret). */
  async failed(ip: string, apiKey: string): Promise<void> {
    await Promise.all([this.ipFailures.penalty(ip), this.keyFailures.penalty(`${apiKey}\n${ip}`)]);
  }
}
