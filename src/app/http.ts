import Router from '@koa/router';
import Koa from 'koa';
import type { AppContext } from '../context.ts';
import { respond } from '../http/envelope.ts';
import { HttpError, MethodNotAllowedError } from '../http/errors.ts';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { buildOpenApiDocument, createOpenApiRegistry, envelopeResponse, errorResponses, z } from '../http/openapi.ts';
import { requestLifecycle } from '../http/middleware.ts';
import { registerMcpServer } from '../modules/ai/mcp-server.ts';
import { registerAiReviewRoutes } from '../modules/ai/routes.ts';
import { documentAiRoutes } from '../modules/assistant/openapi.ts';
import { registerAssistantRoutes } from '../modules/assistant/routes.ts';
import { registerAdminPages } from '../modules/backoffice/web/pages.tsx';
import { registerAdminShell } from '../modules/backoffice/web/shell.tsx';
import { registerCaseWorkRoutes } from '../modules/cases/routes.ts';
import { registerCaseWorkPages, registerCaseWorkUploads } from '../modules/cases/web.tsx';
import { registerCaseQueueRoutes } from '../modules/cases/queue.ts';
import { registerWorkbenchPages, registerWorkbenchRoutes } from '../modules/cases/workbench-web.tsx';
import { registerCustomerRoutes } from '../modules/customer/routes.ts';
import { registerDashboardRoutes } from '../modules/dashboard/routes.ts';
import { registerKycRoutes } from '../modules/kyc/routes.ts';
import { registerMerchantRoutes } from '../modules/merchant/routes.ts';
import { registerDataRoutes } from '../modules/mobile/data.ts';
import { createIdentity, requireDevice } from '../modules/mobile/guard.ts';
import { mobilePath, registerMobileRoutes } from '../modules/mobile/routes.ts';
import { registerSchemaRoutes } from '../modules/mobile/schema.ts';
import { registerNotificationRoutes } from '../modules/mobile/notifications.ts';
import { registerNotificationPages } from '../modules/notifications/web.tsx';
import { registerPushRoutes } from '../modules/mobile/push-token.ts';
import { registerReportRoutes } from '../modules/reports/routes.ts';
import { registerReportPages } from '../modules/reports/web.tsx';
import { registerTransactionRoutes } from '../modules/transaction/routes.ts';
import { registerVideoCallEndUserPage } from '../modules/videocall/end-user.ts';
import { registerVideoCallPages, registerVideoCallUploads } from '../modules/videocall/web.tsx';

/**
 * The HTTP face of the service, wired in one place (Django's project urls): every module's routes
 * are mounted here, in the order their paths need; main.ts and the tests both call this.
 */
export function createApp(app: AppContext): Koa {
  const koa = new Koa({ proxy: false });
  const router = new Router();
  const docs = createOpenApiRegistry();

  // The integration API.
  registerMerchantRoutes(router, app, docs);
  registerCustomerRoutes(router, app, docs);
  registerTransactionRoutes(router, app, docs);
  registerKycRoutes(router, app, docs);
  // The web admin: the shell first of the /admin/ routes, so its middleware (session, CSRF,
  // headers) runs before theirs.
  // The decision form's multipart post (evidence files) is answered before the shell, which reads
  // only urlencoded forms: it resolves the session and checks the form's CSRF token itself.
  registerCaseWorkUploads(router, app);
  registerVideoCallUploads(router, app);
  registerAdminShell(router, app);
  registerNotificationPages(router, app);
  registerVideoCallPages(router, app);
  registerAdminPages(router, app);
  registerCaseWorkPages(router, app);
  // Take and next case: the web posts behind the shell and their mobile endpoints.
  registerCaseQueueRoutes(router, app, docs);
  registerWorkbenchPages(router, app);
  registerReportPages(router, app);
  registerVideoCallEndUserPage(router);
  // The mobile API: identity, then the modules' routes, then the generic data routes, whose
  // data/<app>/<model>/ paths would otherwise claim theirs (reports/ answers
  // data/report/reportresult/<pk>/ with a 404, as the spec says).
  registerMobileRoutes(router, app, docs);
  const authenticated = requireDevice(createIdentity(app));
  registerSchemaRoutes(router, app, authenticated, mobilePath, docs);
  registerNotificationRoutes(router, app, authenticated, mobilePath, docs);
  registerPushRoutes(router, app, authenticated, mobilePath, docs);
  registerReportRoutes(router, app, authenticated, mobilePath, docs);
  registerDashboardRoutes(router, app, authenticated, mobilePath, docs);
  registerAiReviewRoutes(router, app, authenticated, mobilePath);
  registerWorkbenchRoutes(router, app, authenticated, mobilePath);
  registerAssistantRoutes(router, app, authenticated, mobilePath);
  documentAiRoutes(docs);
  registerDataRoutes(router, app, authenticated, mobilePath, docs);
  registerCaseWorkRoutes(router, app, docs);
  // The assistant's tools.
  registerMcpServer(router, app);
  registerOperationalRoutes(router, app, docs);
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

const HEALTH = z.object({ uptime_seconds: z.number().int() });
const READINESS = z.object({ database: z.literal('ok') });

function registerOperationalRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  router.get('/healthz', (ctx) => respond(ctx, 'ok', { uptime_seconds: Math.round(process.uptime()) } satisfies z.infer<typeof HEALTH>));
  router.get('/readyz', async (ctx) => {
    try {
      await app.db.raw('select 1');
    } catch {
      throw new HttpError(503, 'Database unreachable.', 'database_unreachable');
    }
    respond(ctx, 'ready', { database: 'ok' } satisfies z.infer<typeof READINESS>);
  });
  router.get('/metrics', async (ctx) => {
    ctx.type = app.metrics.registry.contentType;
    ctx.body = await app.metrics.registry.metrics();
  });

  const tags = ['operations'];
  docs.registerPath({ method: 'get', path: '/healthz', summary: 'Liveness: the process answers', tags, responses: { 200: envelopeResponse('Alive', HEALTH) } });
  docs.registerPath({
    method: 'get',
    path: '/readyz',
    summary: 'Readiness: the database answers',
    tags,
    responses: { 200: envelopeResponse('Ready', READINESS), ...errorResponses({ 503: 'Database unreachable (database_unreachable)' }) },
  });
  docs.registerPath({
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics',
    tags,
    responses: { 200: { description: 'The Prometheus text exposition format', content: { [app.metrics.registry.contentType.split(';')[0]!]: { schema: z.string() } } } },
  });
}
