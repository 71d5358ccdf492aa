import type { Context, Next } from 'koa';
import type { AppContext } from '../context.ts';
import { assertCredentialUsable } from '../modules/merchant/service.ts';
import { TokenVerificationError } from '../modules/merchant/tokens.ts';
import { UnauthorizedError } from './errors.ts';
import type { RequestState } from './state.ts';

const MESSAGES = {
  token_missing: 'Authentication credentials were not provided.',
  token_invalid: 'Invalid access token.',
  token_expired: 'The access token has expired.',
  token_wrong_audience: 'This token is not a merchant access token.',
} as const;

/**
 * Guards every merchant (Bearer) endpoint: 401 for a missing, malformed, expired or wrongly
 * signed token or a token of another kind; 403 when the credential has been deactivated or the
 * caller IP left its allowed list since the token was issued. The credential comes from a cache that
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
    state.credential = cached.credential;
    state.tokenSessionId = verified.sessionId;
    await next();
  };
}
