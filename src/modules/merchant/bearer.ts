import type { Context, Next } from 'koa';
import type { AppContext } from '../../context.ts';
import { TokenVerificationError } from '../../auth/tokens.ts';
import { UnauthorizedError } from '../../http/errors.ts';
import type { RequestState } from '../../http/state.ts';
import { assertCredentialUsable } from './service.ts';

/** The claim that carries the credential's token epoch. */
export const TOKEN_EPOCH_CLAIM = 'epoch';

const MESSAGES = {
  token_missing: 'Authentication credentials were not provided.',
  token_invalid: 'Invalid access token.',
  token_expired: 'The access token has expired.',
  token_wrong_audience: 'This token is not a merchant access token.',
} as const;

/**
 * Guards every merchant (Bearer) endpoint: 401 for a missing, malformed, expired or wrongly
 * signed token, a token of another kind or one issued before the credential was deactivated or its
 * secret rotated; 403 when the credential has been deactivated or the caller IP left its allowed
 * list since the token was issued. The credential comes from a cache that
 * PostgreSQL notifications invalidate, so that a deactivation takes effect at once.
 */
export function requireMerchant(app: AppContext) {
  return async (ctx: Context, next: Next) => {
    const header = ctx.get('authorization');
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!header) throw new UnauthorizedError(MESSAGES.token_missing, 'token_missing');
    if (!match) throw new UnauthorizedError('Authorization header must be "Bearer <token>".', 'token_invalid');
    let verified;
    try {
      verified = await app.tokens.verify('merchant', match[1]!);
    } catch (error) {
      if (!(error instanceof TokenVerificationError)) throw error;
      // A session or agent token here is a 401, not a 403: it is no merchant credential at all.
      throw new UnauthorizedError(MESSAGES[error.reason], error.reason);
    }
    const cached = await app.credentials.get(verified.subject);
    if (!cached) throw new UnauthorizedError(MESSAGES.token_invalid, 'token_invalid');
    const state = ctx.state as RequestState;
    assertCredentialUsable(cached.credential, state.clientIp, cached.allowList);
    // A token from before a deactivation or a secret rotation stays dead after reactivation.
    if ((verified.claims[TOKEN_EPOCH_CLAIM] ?? 0) !== cached.credential.token_epoch) {
      throw new UnauthorizedError('This token was issued before the credential was deactivated or its secret rotated; request a new token.', 'token_invalid');
    }
    state.credential = cached.credential;
    state.tokenSessionId = verified.sessionId;
    await next();
  };
}
