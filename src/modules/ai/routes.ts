import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { readJsonObject } from '../../http/json-body.ts';
import type { MobileState } from '../mobile/guard.ts';
import { registeredModel } from '../mobile/present.ts';
import { mcpUrlFor, requireGateway } from './gateway-client.ts';
import { gatewayOfSite } from './blocks.ts';
import { aiBlock, caseFor, giveFeedback, startReview } from './review.ts';

const BODY_LIMIT = 64 * 1024;

/** data/<app>/<model>/<pk>/ai/ (GET, no gateway needed), ai/run/ and ai/feedback/ (POST, 503 without a gateway): the AI review of a case. */
export function registerAiReviewRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string): void {
  // The case detail's `ai` block asks this app whether a gateway is installed (for can_run).
  gatewayOfSite.set(app.backoffice.site, () => Boolean(app.config.ai.gatewayUrl));
  const target = async (ctx: Context, gateway = true) => {
    if (gateway) requireGateway(app.config);
    const principal = (ctx.state as MobileState).mobile.principal;
    const model = registeredModel(app.backoffice.site, ctx.params.app!, ctx.params.model!);
    return { principal, model, row: await caseFor(app, model, principal, ctx.params.pk!) };
  };

  // Read from the stored reviews: answers without a gateway too (can_run false then).
  router.get(path('data/:app/:model/:pk/ai/'), authenticated, async (ctx) => {
    const { principal, model, row } = await target(ctx, false);
    respond(ctx, 'AI review.', await aiBlock(app, model, principal, row));
  });

  router.post(path('data/:app/:model/:pk/ai/run/'), authenticated, async (ctx) => {
    const { principal, model, row } = await target(ctx);
    const reviewId = await startReview(app, model, principal, row, mcpUrlFor(app));
    respond(ctx, 'AI review queued.', { review_id: reviewId, ...(await aiBlock(app, model, principal, row)) }, 202);
  });

  router.post(path('data/:app/:model/:pk/ai/feedback/'), authenticated, async (ctx) => {
    const { principal, model, row } = await target(ctx);
    await giveFeedback(app, model, principal, row, await readJsonObject(ctx, BODY_LIMIT));
    respond(ctx, 'Feedback recorded.', await aiBlock(app, model, principal, row));
  });
}
