import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';

/**
 * Failed web admin logins counted per username and per client IP in PostgreSQL, so every Warden
 * process sees the same counts. The username limit stops guessing one account's password from
 * many addresses; the IP limit stops one address trying many accounts. A successful login clears
 * its username's count.
 */
export const LOGIN_LIMITS = {
  perUsername: { points: 10, duration: 15 * 60 },
  perIp: { points: 50, duration: 60 * 60 },
} as const;

export interface LoginThrottle {
  /** Seconds until another attempt is allowed, or 0 when it is allowed now. */
  retryAfter(username: string, ip: string): Promise<number>;
  recordFailure(username: string, ip: string): Promise<void>;
  recordSuccess(username: string): Promise<void>;
}

export function createLoginThrottle(db: Knex): LoginThrottle {
  const common = { storeClient: db, storeType: 'knex', tableName: 'staff_login_throttle', tableCreated: true };
  const byUsername = new RateLimiterPostgres({ ...common, keyPrefix: 'login_user', ...LOGIN_LIMITS.perUsername });
  const byIp = new RateLimiterPostgres({ ...common, keyPrefix: 'login_ip', ...LOGIN_LIMITS.perIp });
  // Usernames are case-insensitive, so their counts are too; hashed, as the key column takes 255
  // characters and no NUL, and a failed login may name anything.
  const userKey = (username: string) => createHash('sha256').update(username.trim().toLowerCase()).digest('hex');

  return {
    async retryAfter(username, ip) {
      const [user, address] = await Promise.all([byUsername.get(userKey(username)), byIp.get(ip)]);
      const waits = [
        blockedFor(user, LOGIN_LIMITS.perUsername.points),
        blockedFor(address, LOGIN_LIMITS.perIp.points),
      ];
      return Math.max(...waits);
    },
    async recordFailure(username, ip) {
      await Promise.all([swallowLimit(byUsername.consume(userKey(username))), swallowLimit(byIp.consume(ip))]);
    },
    async recordSuccess(username) {
      await byUsername.delete(userKey(username));
    },
  };
}

function blockedFor(state: RateLimiterRes | null, limit: number): number {
  if (!state || state.consumedPoints < limit) return 0;
  return Math.max(1, Math.ceil(state.msBeforeNext / 1000));
}

/** consume() rejects with the limiter's state once over the limit; the count is stored either way. */
async function swallowLimit(attempt: Promise<RateLimiterRes>): Promise<void> {
  try {
    await attempt;
  } catch (error) {
    if (!(error instanceof RateLimiterRes)) throw error;
  }
}
