import { randomBytes, randomUUID } from 'node:crypto';
import { SignJWT, errors as joseErrors, jwtVerify } from 'jose';
import type { Knex } from 'knex';

/** Each kind of token has its own audience, so a token of one kind never passes where another is required. */
export const TOKEN_AUDIENCES = {
  merchant: 'merchant',
  session: 'session',
  agent: 'agent',
} as const;
export type TokenKind = keyof typeof TOKEN_AUDIENCES;

const ISSUER = 'warden';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ALGORITHM = 'HS256';

export type TokenFailure = 'token_invalid' | 'token_expired' | 'token_wrong_audience';

export class TokenVerificationError extends Error {
  constructor(readonly reason: TokenFailure) {
    super(reason);
  }
}

export interface VerifiedToken {
  subject: string;
  sessionId: string;
  expiresAt: number;
  claims: Record<string, unknown>;
}

/** How many verified tokens are remembered; merchants reuse one token for many calls. */
const VERIFIED_CACHE_SIZE = 10_000;

export class TokenService {
  /**
   * Verified tokens by their full text. jose verifies through WebCrypto at ~150 µs a call; the
   * same string carries the same signature, so a repeat only needs its expiry checked again.
   */
  private readonly verified = new Map<string, { kind: TokenKind; token: VerifiedToken }>();

  constructor(private readonly key: Uint8Array) {}

  /** Signs a token of `kind` for `subject`; `sessionId` becomes the jti. */
  async issue(
    kind: TokenKind,
    subject: string,
    ttlSeconds: number,
    extraClaims: Record<string, unknown> = {},
  ): Promise<{ token: string; sessionId: string; expiresIn: number }> {
    const sessionId = randomUUID();
    const token = await new SignJWT(extraClaims)
      .setProtectedHeader({ alg: ALGORITHM, typ: 'JWT' })
      .setIssuer(ISSUER)
      .setAudience(TOKEN_AUDIENCES[kind])
      .setSubject(subject)
      .setJti(sessionId)
      .setIssuedAt()
      .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
      .sign(this.key);
    return { token, sessionId, expiresIn: ttlSeconds };
  }

  /** Verifies signature, algorithm, issuer, audience and expiry; throws TokenVerificationError. */
  async verify(kind: TokenKind, token: string): Promise<VerifiedToken> {
    const cached = this.verified.get(token);
    if (cached) {
      if (cached.kind !== kind) throw new TokenVerificationError('token_wrong_audience');
      if (cached.token.expiresAt * 1000 > Date.now()) return cached.token;
      this.verified.delete(token);
      throw new TokenVerificationError('token_expired');
    }
    const verified = await this.verifySignature(kind, token);
    if (this.verified.size >= VERIFIED_CACHE_SIZE) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, { kind, token: verified });
    return verified;
  }

  private async verifySignature(kind: TokenKind, token: string): Promise<VerifiedToken> {
    try {
      const { payload } = await jwtVerify(token, this.key, {
        algorithms: [ALGORITHM],
        issuer: ISSUER,
        audience: TOKEN_AUDIENCES[kind],
        requiredClaims: ['sub', 'jti', 'exp'],
      });
      // Every subject this service signs is a UUID; anything else (a token signed with a leaked
      // or configured key by someone else) would reach PostgreSQL's uuid columns as a 500.
      if (!UUID.test(payload.sub!)) throw new TokenVerificationError('token_invalid');
      return { subject: payload.sub!, sessionId: payload.jti!, expiresAt: payload.exp!, claims: payload };
    } catch (error) {
      if (error instanceof TokenVerificationError) throw error;
      if (error instanceof joseErrors.JWTExpired) throw new TokenVerificationError('token_expired');
      if (error instanceof joseErrors.JWTClaimValidationFailed && error.claim === 'aud') {
        throw new TokenVerificationError('token_wrong_audience');
      }
      throw new TokenVerificationError('token_invalid');
    }
  }
}

const SIGNING_KEY_NAME = 'jwt_hs256_key';

/**
 * The signing key: WARDEN_JWT_SECRET when set, otherwise a random key generated once and kept in
 * the database, so that every node and every restart signs and verifies with the same key.
 */
export async function loadSigningKey(db: Knex, configured: string | undefined): Promise<Uint8Array> {
  if (configured) return new TextEncoder().encode(configured);
  await db('server_secrets')
    .insert({ name: SIGNING_KEY_NAME, value: randomBytes(32).toString('base64') })
    .onConflict('name')
    .ignore();
  const row = await db('server_secrets').where({ name: SIGNING_KEY_NAME }).first('value');
  return new Uint8Array(Buffer.from(row.value as string, 'base64'));
}
