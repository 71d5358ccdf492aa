import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Config } from '../config.ts';
import type { Logger } from '../logger.ts';
import type { Metrics } from './metrics.ts';
import { createClientIpResolver } from './client-ip.ts';
import { envelope } from './envelope.ts';
import { HttpError, TooManyRequestsError } from './errors.ts';
import type { RequestState } from './state.ts';

const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Outermost middleware: request id, caller IP, one access-log line, metrics, and the single place
 * where errors become responses. 4xx are logged at info; anything else is a 500 with a generic
 * message, logged at error with the real cause.
 */
/** What the outermost middleware needs of the service: its settings, log and metrics. */
export interface LifecycleServices {
  config: Pick<Config, 'trustedProxies'>;
  logger: Logger;
  metrics: Metrics;
}

export function requestLifecycle(app: LifecycleServices) {
  const resolveClientIp = createClientIpResolver(app.config.trustedProxies);
  return async (ctx: Context, next: Next) => {
    const started = process.hrtime.bigint();
    const incomingId = ctx.get('x-request-id');
    const requestId = REQUEST_ID.test(incomingId) ? incomingId : randomUUID();
    const state = ctx.state as RequestState;
    state.requestId = requestId;
    state.log = app.logger.child({ requestId });
    state.clientIp = resolveClientIp(ctx.req.socket.remoteAddress, ctx.get('x-forwarded-for') || undefined);
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw new HttpError(404, 'Not found.', 'not_found');
    } catch (error) {
      renderError(ctx, error, state);
    } finally {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      // The handler's own time, for benchmarks and browsers' developer tools (body serialisation excluded).
      if (!ctx.headerSent) ctx.set('Server-Timing', `app;dur=${(seconds * 1000).toFixed(2)}`);
      const route = (ctx as Context & { _matchedRoute?: string })._matchedRoute ?? 'unmatched';
      app.metrics.requests.inc({ method: ctx.method, route, status: String(ctx.status) });
      app.metrics.duration.observe({ method: ctx.method, route }, seconds);
      state.log.info(
        { method: ctx.method, url: ctx.url, status: ctx.status, ms: Math.round(seconds * 1e4) / 10, ip: state.clientIp },
        'request',
      );
    }
  };
}

function renderError(ctx: Context, error: unknown, state: RequestState): void {
  if (error instanceof HttpError) {
    state.log.info({ status: error.status, reason: error.reason }, error.message);
    ctx.status = error.status;
    if (error instanceof TooManyRequestsError) ctx.set('Retry-After', String(error.retryAfterSeconds));
    ctx.body = envelope(false, error.message, { ...(error.reason ? { reason: error.reason } : {}), ...error.data });
    return;
  }
  // Errors from Koa and its body parsers carry an `expose`d 4xx status.
  const status = (error as { status?: number }).status;
  if (typeof status === 'number' && status >= 400 && status < 500 && (error as { expose?: boolean }).expose) {
    state.log.info({ status }, (error as Error).message);
    ctx.status = status;
    ctx.body = envelope(false, (error as Error).message, { reason: 'bad_request' });
    return;
  }
  state.log.error({ err: error }, 'unhandled error');
  ctx.status = 500;
  ctx.body = envelope(false, 'Internal server error.', { reason: 'internal_error', request_id: state.requestId });
}
