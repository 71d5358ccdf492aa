import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { RateLimiterPostgres, RateLimiterRes } from 'rate-limiter-flexible';
import { TooManyRequestsError } from '../../../http/errors.ts';
import type { FieldErrors } from '../../../validation/form.ts';

/**
 * Failed web admin logins counted per username and per client IP in PostgreSQL, so every Warden
 * process sees the same counts. The username limit stops guessing one account's password from
 * many addresses; the IP limit stops one address trying many accounts. A successful login clears
 * its username's count. The old password of the password-change forms (web and mobile) is a guess
 * like a login's, so it counts in the same username count (throttledPasswordChange).
 */
export const LOGIN_LIMITS = {
  perUsername: { points: 10, duration: 15 * 60 },
  perIp: { points: 50, duration: 60 * 60 },
} as const;

export interface LoginThrottle {
  /** Seconds until another attempt is allowed, or 0 when it is allowed now; without an IP, by the username's count alone. */
  retryAfter(username: string, ip?: string): Promise<number>;
  /** Counts a failure for the username, and for the IP when given. */
  recordFailure(username: string, ip?: string): Promise<void>;
  recordSuccess(username: string): Promise<void>;
  /**
   * Counts one attempt for the username before it is made, and answers the seconds to wait (0: go
   * on). Counted first, so that guesses sent at the same moment cannot all pass a check made before
   * any of them is counted; an attempt that turns out not to be a guess is handed back (release).
   */
  reserve(username: string): Promise<number>;
  release(username: string): Promise<void>;
}

/** What the login and the password-change forms answer once the throttle trips (the reason the merchant token endpoint uses too). */
export const THROTTLED_REASON = 'rate_limited';

export function throttledMessage(retryAfterSeconds: number): string {
  const minutes = Math.ceil(retryAfterSeconds / 60);
  return `Too many failed login attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
}

/** A password check refused by the login throttle: 429 in the envelope, Retry-After for whoever answers it. */
export class LoginThrottledError extends TooManyRequestsError {
  constructor(retryAfterSeconds: number) {
    super(throttledMessage(retryAfterSeconds), THROTTLED_REASON, retryAfterSeconds);
  }
}

// One throttle per database, shared by the login and the password-change forms.
const throttles = new WeakMap<Knex, LoginThrottle>();

export function loginThrottle(db: Knex): LoginThrottle {
  let throttle = throttles.get(db);
  if (!throttle) throttles.set(db, (throttle = createLoginThrottle(db)));
  return throttle;
}

/**
 * Runs a password change of a signed-in user behind that user's login count, so the form is no
 * unthrottled oracle for the old password: while the count is over the limit the change is refused
 * (LoginThrottledError) before the old password is looked at, right or wrong; a wrong old password
 * counts as a failed login (a missing one is no guess and does not); a change clears the count, as
 * a successful login does.
 */
export async function throttledPasswordChange<Result extends { ok: true } | { ok: false; errors: FieldErrors }>(
  db: Knex,
  username: string,
  change: () => Promise<Result>,
): Promise<Result> {
  const throttle = loginThrottle(db);
  const wait = await throttle.reserve(username);
  if (wait > 0) throw new LoginThrottledError(wait);
  const result = await change().catch(async (error: unknown) => {
    await throttle.release(username);
    throw error;
  });
  if (result.ok) await throttle.recordSuccess(username);
  // A wrong old password keeps the point it reserved; anything else (a missing field) was no guess.
  else if (!result.errors.old_password?.some((error) => error.code === 'password_incorrect')) await throttle.release(username);
  return result;
}

function createLoginThrottle(db: Knex): LoginThrottle {
  const common = { storeClient: db, storeType: 'knex', tableName: 'staff_login_throttle', tableCreated: true };
  const byUsername = new RateLimiterPostgres({ ...common, keyPrefix: 'login_user', ...LOGIN_LIMITS.perUsername });
  const byIp = new RateLimiterPostgres({ ...common, keyPrefix: 'login_ip', ...LOGIN_LIMITS.perIp });
  // Usernames are case-insensitive, so their counts are too; hashed, as the key column takes 255
  // characters and no NUL, and a failed login may name anything.
  const userKey = (username: string) => createHash('sha256').update(username.trim().toLowerCase()).digest('hex');

  return {
    async retryAfter(username, ip) {
      const [user, address] = await Promise.all([byUsername.get(userKey(username)), ip === undefined ? null : byIp.get(ip)]);
      const waits = [
        blockedFor(user, LOGIN_LIMITS.perUsername.points),
        blockedFor(address, LOGIN_LIMITS.perIp.points),
      ];
      return Math.max(...waits);
    },
    async recordFailure(username, ip) {
      await Promise.all([swallowLimit(byUsername.consume(userKey(username))), ip === undefined ? null : swallowLimit(byIp.consume(ip))]);
    },
    async recordSuccess(username) {
      await byUsername.delete(userKey(username));
    },
    async reserve(username) {
      const state = await byUsername.consume(userKey(username)).catch((error: unknown) => {
        if (error instanceof RateLimiterRes) return error;
        throw error;
      });
      return state.consumedPoints > LOGIN_LIMITS.perUsername.points ? Math.max(1, Math.ceil(state.msBeforeNext / 1000)) : 0;
    },
    async release(username) {
      await byUsername.reward(userKey(username), 1);
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
