import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { AppContext } from '../../context.ts';
import { requireMerchant, TOKEN_EPOCH_CLAIM } from './bearer.ts';
import { respond } from '../../http/envelope.ts';
import { ForbiddenError, UnauthorizedError } from '../../http/errors.ts';
import { readJsonObject } from '../../http/json-body.ts';
import { envelopeOf, errorResponses } from '../../http/openapi.ts';
import type { RequestState } from '../../http/state.ts';
import { validateBody } from '../../validation/request.ts';
import { TokenRateLimiter, TooManyRequestsError, TOKEN_LIMITS } from './rate-limit.ts';
import { authenticate } from './service.ts';
import { checkData, tokenData, tokenRequest } from './schemas.ts';

const TOKEN_PATH = '/api/merchant/auth/token/';
const CHECK_PATH = '/api/merchant/auth/check/';

export function registerMerchantRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  const limiter = new TokenRateLimiter();
  router.post(TOKEN_PATH, async (ctx) => {
    const body = validateBody(tokenRequest, await readJsonObject(ctx, app.config.bodyLimitBytes));
    const state = ctx.state as RequestState;
    let credential;
    try {
      await limiter.admit(state.clientIp, body.api_key);
      credential = await authenticate(app.db, body.api_key, body.api_secret, state.clientIp);
    } catch (error) {
      if (error instanceof TooManyRequestsError) ctx.set('Retry-After', String(error.retryAfterSeconds));
      if (error instanceof UnauthorizedError) await limiter.failed(state.clientIp, body.api_key);
      throw error;
    }
    const issued = await app.tokens.issue('merchant', credential.id, app.config.tokenTtlSeconds, { [TOKEN_EPOCH_CLAIM]: credential.token_epoch });
    respond(ctx, 'Token issued.', { access_token: issued.token, token_type: 'Bearer', expires_in: issued.expiresIn });
  });

  router.get(CHECK_PATH, requireMerchant(app), async (ctx) => {
    const state = ctx.state as RequestState;
    respond(ctx, `Token is valid for client ${state.credential!.client}.`, {
      client: state.credential!.client,
      session_id: state.tokenSessionId!,
    });
  });

  // The spec answers a POST here with 403 (CSRF protection), not 405.
  router.post(CHECK_PATH, async () => {
    throw new ForbiddenError('Only GET is allowed on the token check endpoint.', 'csrf_forbidden');
  });

  docs.registerPath({
    method: 'post',
    path: TOKEN_PATH,
    summary: 'Exchange api_key and api_secret for a Bearer access token',
    request: { body: { content: { 'application/json': { schema: tokenRequest } } } },
    responses: {
      200: { description: 'Token issued', content: { 'application/json': { schema: envelopeOf(tokenData) } } },
      ...errorResponses({
        400: 'Body not JSON, not an object, or missing fields (named in the message)',
        401: 'Invalid credentials provided.',
        403: 'Credential not active, or Access from this IP address is not allowed.',
        413: 'Body over the size limit',
        429: `Too many requests (Retry-After): over ${TOKEN_LIMITS.requestsPerIp.points} a minute from one IP, or ${TOKEN_LIMITS.failuresPerIp.points} failures from one IP or ${TOKEN_LIMITS.failuresPerKey.points} for one api_key from one IP in a minute`,
        415: 'Content-Type is not application/json',
      }),
    },
  });
  docs.registerPath({
    method: 'get',
    path: CHECK_PATH,
    summary: 'Check a Bearer token',
    security: [{ bearer: [] }],
    responses: {
      200: { description: 'Token valid', content: { 'application/json': { schema: envelopeOf(checkData) } } },
      ...errorResponses({ 401: 'Token missing, malformed, expired, wrongly signed or of another kind', 403: 'Credential deactivated or IP not allowed' }),
    },
  });
  docs.registerPath({
    method: 'post',
    path: CHECK_PATH,
    summary: 'Refused: only GET is allowed (CSRF protection)',
    responses: errorResponses({ 403: 'Always' }),
  });
}
