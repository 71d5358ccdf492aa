import Router from '@koa/router';
import Koa from 'koa';
import type { AppContext } from '../context.ts';
import { registerMerchantRoutes } from '../modules/merchant/routes.ts';
import { registerUpsertRoutes } from '../modules/records/routes.ts';
import { registerKycRoutes } from '../modules/kyc/routes.ts';
import { registerAdminShell } from '../modules/backoffice/web/shell.tsx';
import { registerAdminPages } from '../modules/backoffice/web/pages.tsx';
import { registerMobileRoutes } from '../modules/mobile/routes.ts';
import { registerCaseWorkRoutes } from '../modules/cases/routes.ts';
import { registerMcpServer } from '../modules/ai/mcp-server.ts';
import { respond } from './envelope.ts';
import { HttpError, MethodNotAllowedError } from './errors.ts';
import { buildOpenApiDocument, createOpenApiRegistry } from './openapi.ts';
import { requestLifecycle } from './middleware.ts';

/** Builds the Koa application for one context; main.ts and the tests both call this. */
export function createApp(app: AppContext): Koa {
  const koa = new Koa({ proxy: false });
  const router = new Router();
  const docs = createOpenApiRegistry();

  registerMerchantRoutes(router, app, docs);
  registerUpsertRoutes(router, app, docs);
  registerKycRoutes(router, app, docs);
  // first of the /admin/ routes: its middleware (session, CSRF, headers) runs before theirs
  registerAdminShell(router, app);
  registerAdminPages(router, app);
  registerMobileRoutes(router, app, docs);
  registerCaseWorkRoutes(router, app, docs);
  registerMcpServer(router, app);
  registerOperationalRoutes(router, app);
  const openApiDocument = buildOpenApiDocument(docs);
  router.get('/api/openapi.json', (ctx) => {
    ctx.body = openApiDocument;
  });

  // Every error of a handler is answered by requestLifecycle; what reaches Koa's own handler is a
  // client that closed its connection mid-request (a parse error at the socket's end), which
  // Koa would print to stderr as if it were the service's fault.
  koa.on('error', (error: Error) => app.logger.info({ err: error }, 'client connection error'));
  koa.use(requestLifecycle(app));
  koa.use(addTrailingSlash);
  koa.use(router.routes());
  koa.use(async (ctx, next) => {
    await next();
    // A path that exists under another method: 405 with Allow, in the envelope. A request a route
    // answered needs no second pass over every route (the router walks them all, one regular
    // expression each).
    if (ctx.routeMatched) return;
    const allowed = methodsFor(router, ctx.path);
    if (allowed.length && !allowed.includes(ctx.method)) {
      ctx.set('Allow', allowed.join(', '));
      throw new MethodNotAllowedError(allowed);
    }
  });
  return koa;
}

/** The spec writes every API path with a trailing slash; a caller that leaves it off reaches the same route. */
async function addTrailingSlash(ctx: Koa.Context, next: Koa.Next) {
  if (ctx.path.startsWith('/api/') && !ctx.path.endsWith('/') && !ctx.path.endsWith('.json')) ctx.path = `${ctx.path}/`;
  await next();
}

function methodsFor(router: Router, path: string): string[] {
  const matched = router.match(path, 'GET');
  const methods = new Set<string>();
  for (const layer of matched.path) for (const method of layer.methods) methods.add(method);
  return [...methods];
}

function registerOperationalRoutes(router: Router, app: AppContext): void {
  router.get('/healthz', (ctx) => respond(ctx, 'ok', { uptime_seconds: Math.round(process.uptime()) }));
  router.get('/readyz', async (ctx) => {
    try {
      await app.db.raw('select 1');
    } catch {
      throw new HttpError(503, 'Database unreachable.', 'database_unreachable');
    }
    respond(ctx, 'ready', { database: 'ok' });
  });
  router.get('/metrics', async (ctx) => {
    ctx.type = app.metrics.registry.contentType;
    ctx.body = await app.metrics.registry.metrics();
  });
}
