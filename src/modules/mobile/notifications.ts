import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { HttpError } from '../../http/errors.ts';
import { envelopeResponse, z } from '../../http/openapi.ts';
import { formatTimestamp } from '../../timestamps.ts';
import { acceptOnly, documentRoutes, invalidParameter, positiveInteger, singleParameter } from './parameters.ts';
import { unreadNotifications, type NotificationRow } from '../notifications/service.ts';
import type { MobileState } from './guard.ts';
import { isNotificationKind, NOTIFICATION_KIND_NAMES } from '../notifications/service.ts';

export const NOTIFICATIONS_MAX_PAGE_SIZE = 100;
const DEFAULT_PAGE_SIZE = 20;
const LIST_PARAMETERS = ['page', 'page_size', 'unread', 'kind'];

// The answers' shapes, for the OpenAPI document.
const NOTIFICATION = z.object({
  id: z.string(),
  kind: z.string(),
  title: z.string(),
  body: z.string(),
  target: z.object({ model: z.string(), pk: z.string() }).nullable(),
  read: z.boolean(),
  created_at: z.string(),
});
const NOTIFICATION_PAGE = z.object({
  timezone: z.literal('UTC'),
  results: z.array(NOTIFICATION),
  pagination: z.object({ page: z.number().int(), page_size: z.number().int(), total: z.number().int(), pages: z.number().int() }),
  unread_count: z.number().int(),
});
const UNREAD = z.object({ unread_count: z.number().int() });
const MARKED = z.object({ marked: z.number().int(), unread_count: z.literal(0) });
const MARKED_ONE = z.object({ notification: NOTIFICATION, unread_count: z.number().int() });

function present(row: NotificationRow): z.infer<typeof NOTIFICATION> {
  return {
    id: String(row.id),
    kind: row.kind,
    title: row.title,
    body: row.body,
    target: row.target_model && row.target_pk ? { model: row.target_model, pk: row.target_pk } : null,
    read: row.read,
    created_at: formatTimestamp(row.created_at),
  };
}

function userOf(ctx: Context): string {
  return (ctx.state as MobileState).mobile.principal.user.id;
}

/** notifications/...: the caller's own rows only; another user's id answers 404 like a missing one. */
export function registerNotificationRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string, docs: OpenAPIRegistry): void {
  router.get(path('notifications/'), authenticated, async (ctx) => {
    acceptOnly(ctx, LIST_PARAMETERS);
    const page = positiveInteger(ctx, 'page', 1, 1_000_000);
    const pageSize = positiveInteger(ctx, 'page_size', DEFAULT_PAGE_SIZE, NOTIFICATIONS_MAX_PAGE_SIZE);
    const unread = singleParameter(ctx, 'unread', 10);
    if (unread !== undefined && !['1', '0', 'true', 'false'].includes(unread)) throw invalidParameter('unread', 'unread must be 1 or 0.');
    const kind = singleParameter(ctx, 'kind', 50);
    if (kind !== undefined && !isNotificationKind(kind)) {
      throw invalidParameter('kind', `kind must be one of ${[...NOTIFICATION_KIND_NAMES].join(', ')}.`);
    }
    const userId = userOf(ctx);
    const filtered = app.db('notifications').where({ user_id: userId });
    if (unread === '1' || unread === 'true') filtered.where({ read: false });
    if (kind) filtered.where({ kind });
    const [rows, total, unreadCount] = await Promise.all([
      filtered.clone().orderBy('id', 'desc').limit(pageSize).offset((page - 1) * pageSize).select('*') as Promise<NotificationRow[]>,
      filtered.clone().count({ count: '*' }).first() as Promise<{ count: string | number }>,
      unreadNotifications(app.db, userId),
    ]);
    const count = Number(total.count);
    respond(ctx, `${count} notification(s).`, {
      timezone: 'UTC',
      results: rows.map(present),
      pagination: { page, page_size: pageSize, total: count, pages: Math.max(1, Math.ceil(count / pageSize)) },
      unread_count: unreadCount,
    } satisfies z.infer<typeof NOTIFICATION_PAGE>);
  });

  router.get(path('notifications/unread-count/'), authenticated, async (ctx) => {
    acceptOnly(ctx, []);
    const count = await unreadNotifications(app.db, userOf(ctx));
    respond(ctx, `${count} unread.`, { unread_count: count } satisfies z.infer<typeof UNREAD>);
  });

  router.post(path('notifications/read-all/'), authenticated, async (ctx) => {
    const marked = await app.db('notifications').where({ user_id: userOf(ctx), read: false }).update({ read: true });
    respond(ctx, `${marked} notification(s) marked read.`, { marked, unread_count: 0 } satisfies z.infer<typeof MARKED>);
  });

  router.post(path('notifications/:id/read/'), authenticated, async (ctx) => {
    const id = ctx.params.id!;
    const userId = userOf(ctx);
    // bigint ids only: anything else cannot name a row, and must not reach PostgreSQL as a bigint
    const found = /^\d{1,18}$/.test(id)
      ? ((await app.db('notifications').where({ id, user_id: userId }).update({ read: true }).returning(['id', 'kind', 'title', 'body', 'target_model', 'target_pk', 'read', 'created_at'])) as NotificationRow[])
      : [];
    if (!found.length) throw new HttpError(404, 'Notification not found.', 'not_found');
    respond(ctx, 'Marked read.', { notification: present(found[0]!), unread_count: await unreadNotifications(app.db, userId) } satisfies z.infer<typeof MARKED_ONE>);
  });

  documentRoutes(docs, path, [
    ['get', 'notifications/', 'Your notifications, newest first (page, page_size up to 100, unread=1, kind); with unread_count', null, { 200: envelopeResponse('One page', NOTIFICATION_PAGE) }, { 400: 'Bad page, page_size, unread or kind' }],
    ['get', 'notifications/unread-count/', 'The bell counter (equals unread_notifications in me/)', null, { 200: envelopeResponse('The counter', UNREAD) }, { 400: 'Unknown parameter (it takes none)' }],
    ['post', 'notifications/{id}/read/', 'Mark one notification read', null, { 200: envelopeResponse('Marked', MARKED_ONE) }, { 404: 'No such notification of yours' }],
    ['post', 'notifications/read-all/', 'Mark all your notifications read', null, { 200: envelopeResponse('Marked', MARKED) }, {}],
  ]);
}
