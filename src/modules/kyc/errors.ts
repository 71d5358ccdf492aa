import { HttpError } from '../../http/errors.ts';
import { TokenVerificationError, type TokenKind } from '../../auth/tokens.ts';
import type { AppContext } from '../../context.ts';

/** The KYC endpoints' errors: status false, message, data.reason, with the spec's stable reasons. */
export class KycError extends HttpError {
  constructor(status: number, reason: string, message: string) {
    super(status, message, reason);
  }
}

const TOKEN_ERRORS = {
  token_invalid: [401, 'The token is malformed or its signature is wrong.'],
  token_expired: [401, 'The token has expired; open a new session.'],
  token_wrong_audience: [403, 'This token is not valid for this endpoint.'],
} as const;

/** Verifies a session or agent token; returns the session id it names. */
export async function verifyKycToken(app: AppContext, kind: TokenKind, token: unknown): Promise<{ sessionId: string; claims: Record<string, unknown> }> {
  if (typeof token !== 'string' || token.trim() === '') throw new KycError(401, 'token_missing', 'The token was not sent.');
  try {
    const verified = await app.tokens.verify(kind, token.trim());
    return { sessionId: verified.subject, claims: verified.claims };
  } catch (error) {
    if (!(error instanceof TokenVerificationError)) throw error;
    const [status, message] = TOKEN_ERRORS[error.reason];
    throw new KycError(status, error.reason, message);
  }
}
