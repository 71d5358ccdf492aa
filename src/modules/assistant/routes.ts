import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { readJsonObject } from '../../http/json-body.ts';
import type { MobileState } from '../mobile/guard.ts';
import { mcpUrlFor, pingGateway, requireGateway } from '../ai/gateway-client.ts';
import { answerApproval, assistantStatus, createConversation, deleteConversation, listConversations, postMessage, readConversation } from './service.ts';

const BODY_LIMIT = 64 * 1024;

/**
 * assistant/...: status always answers; every other endpoint (list, read, create and delete of
 * conversations included) is 503 with the reason when the assistant is unavailable (no gateway, no
 * known MCP address) and 502 when the gateway cannot be reached or refuses the service (its 401).
 */
export function registerAssistantRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string): void {
  const principal = (ctx: Context) => (ctx.state as MobileState).mobile.principal;
  const available: Middleware = async (_ctx, next) => {
    requireGateway(app.config);
    mcpUrlFor(app);
    await pingGateway(app.config);
    await next();
  };

  router.get(path('assistant/status/'), authenticated, async (ctx) => {
    respond(ctx, 'Assistant status.', await assistantStatus(app, principal(ctx)));
  });
  router.get(path('assistant/conversations/'), authenticated, available, async (ctx) => {
    respond(ctx, 'Conversations.', { conversations: await listConversations(app, principal(ctx)) });
  });
  router.post(path('assistant/conversations/'), authenticated, available, async (ctx) => {
    respond(ctx, 'Conversation created.', await createConversation(app, principal(ctx)), 201);
  });
  router.get(path('assistant/conversations/:id/'), authenticated, available, async (ctx) => {
    respond(ctx, 'Conversation.', await readConversation(app, principal(ctx), ctx.params.id!, ctx.query as Record<string, unknown>));
  });
  router.delete(path('assistant/conversations/:id/'), authenticated, available, async (ctx) => {
    await deleteConversation(app, principal(ctx), ctx.params.id!);
    respond(ctx, 'Conversation deleted.', {});
  });
  router.post(path('assistant/conversations/:id/messages/'), authenticated, available, async (ctx) => {
    respond(ctx, 'Message accepted.', await postMessage(app, principal(ctx), ctx.params.id!, await readJsonObject(ctx, BODY_LIMIT), mcpUrlFor(app)), 202);
  });
  router.post(path('assistant/conversations/:id/approval/'), authenticated, available, async (ctx) => {
    respond(ctx, 'Answer accepted.', await answerApproval(app, principal(ctx), ctx.params.id!, await readJsonObject(ctx, BODY_LIMIT), mcpUrlFor(app)), 202);
  });
}
