import { createHmac, randomUUID } from 'node:crypto';
import { errors as joseErrors, jwtVerify } from 'jose';
import { ACCESS_TOKEN_TTL_SECONDS, UUID } from './constants.ts';

const ISSUER = 'warden';
/** An audience of their own: a merchant, session or agent token never passes here, nor a mobile token there. */
const AUDIENCE = 'mobile';
const ALGORITHM = 'HS256';
const DEVICE_CLAIM = 'dev';
/** The protected header of every access token, base64url-encoded once. */
const ENCODED_HEADER = Buffer.from(JSON.stringify({ alg: ALGORITHM, typ: 'JWT' })).toString('base64url');
/** How many verified tokens are remembered (the oldest is forgotten first). */
const VERIFIED_CACHE_SIZE = 10_000;

export type AccessTokenFailure = 'token_invalid' | 'token_expired';

export class AccessTokenError extends Error {
  constructor(readonly reason: AccessTokenFailure) {
    super(reason);
  }
}

export interface AccessClaims {
  userId: string;
  deviceId: string;
}

/**
 * Signs and checks mobile access tokens: HS256 with the service's key, one hour, bound to one
 * device by a claim. Time comes from the caller, so tests move the clock instead of sleeping.
 */
export class MobileTokens {
  /**
   * Verified tokens by their full text: an app sends the same token for an hour, and the same
   * text carries the same signature, so a repeat only needs its expiry checked again (the device
   * and the user are still read on every request, so revocation is not delayed).
   */
  private readonly verified = new Map<string, { claims: AccessClaims; expiresAt: number }>();

  constructor(private readonly key: () => Promise<Uint8Array>) {}

  /**
   * Signs on the calling thread with node:crypto's HMAC: an HS256 compact JWS is the encoded header
   * and claims joined by a dot, then their HMAC-SHA256. jose's SignJWT signs through WebCrypto,
   * whose HMAC job runs on libuv's thread pool: waking a pool thread and coming back cost about
   * half a millisecond per token on the 2-core benchmark machine, a tenth of pairing's 5 ms budget
   * (bench/RESULTS.md). Verification stays with jose (jwtVerify), which checks what we signed.
   */
  async issue(claims: AccessClaims, now: Date): Promise<{ token: string; expiresIn: number }> {
    const issuedAt = Math.floor(now.getTime() / 1000);
    const payload = {
      [DEVICE_CLAIM]: claims.deviceId,
      iss: ISSUER,
      aud: AUDIENCE,
      sub: claims.userId,
      jti: randomUUID(),
      iat: issuedAt,
      exp: issuedAt + ACCESS_TOKEN_TTL_SECONDS,
    };
    const signingInput = `${ENCODED_HEADER}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
    const signature = createHmac('sha256', await this.key()).update(signingInput).digest('base64url');
    return { token: `${signingInput}.${signature}`, expiresIn: ACCESS_TOKEN_TTL_SECONDS };
  }

  /** Signature, algorithm (HS256 only: alg none and others are refused), issuer, audience and expiry. */
  async verify(token: string, now: Date): Promise<AccessClaims> {
    const cached = this.verified.get(token);
    if (cached) {
      if (now.getTime() < cached.expiresAt * 1000) return cached.claims;
      throw new AccessTokenError('token_expired');
    }
    let payload;
    try {
      ({ payload } = await jwtVerify(token, await this.key(), {
        algorithms: [ALGORITHM],
        issuer: ISSUER,
        audience: AUDIENCE,
        requiredClaims: ['sub', 'exp', DEVICE_CLAIM],
        currentDate: now,
        clockTolerance: 0,
      }));
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw new AccessTokenError('token_expired');
      throw new AccessTokenError('token_invalid');
    }
    const deviceId = payload[DEVICE_CLAIM];
    if (typeof deviceId !== 'string' || !UUID.test(deviceId) || !UUID.test(payload.sub!)) throw new AccessTokenError('token_invalid');
    const claims = { userId: payload.sub!, deviceId };
    if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, { claims, expiresAt: payload.exp! });
    return claims;
  }
}
