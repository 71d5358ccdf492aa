import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { adminState, count, objectUrl, renderPage } from '../backoffice/web/common.tsx';
import { formatDateTime } from '../backoffice/web/format.ts';
import { CsrfField, headerContext } from '../backoffice/web/layout.tsx';
import { addMessage } from '../backoffice/web/session.ts';
import { isNotificationKind, unreadNotifications, type NotificationRow } from './service.ts';

/**
 * Every staff user's own notifications on the web (issue 37): the inbox at /admin/notifications/
 * (newest first, paginated, unread marked), opening one (POST .../<id>/open/: marks it read and
 * goes to its target's admin page when the user may view that model), mark all read, and the
 * unread count in the header of every admin page (one count query per page, put in the layout's
 * header context by the middleware below). The page needs no permission: everyone reads only
 * their own rows; another user's id answers 404 like a missing one. The header count and the
 * open inbox refresh without reload: admin.js keeps the staff live socket open (its web door,
 * /admin/live/, signed in by the session cookie) and reads unread.json when a notification
 * for the user arrives.
 */

export const INBOX_PATH = '/admin/notifications/';
export const INBOX_PAGE_SIZE = 50;
/** bigint ids only: anything else names no row and must not reach PostgreSQL as a bigint. */
const ID_PATTERN = /^\d{1,18}$/;

function kindLabel(kind: string): string {
  return isNotificationKind(kind) ? kind.replace(/_/g, ' ') : kind;
}

/** Registers the header count middleware and the inbox pages; call it right after the admin shell. */
export function registerNotificationPages(router: Router, app: AppContext): void {
  router.use('/admin', async (ctx: Context, next: Next) => {
    const state = adminState(ctx);
    if (!state.principal || ctx.method !== 'GET' || ctx.path === `${INBOX_PATH}unread.json`) return next();
    const unread = await unreadNotifications(app.db, state.principal.user.id);
    return headerContext.run({ unreadNotifications: unread, idleSeconds: app.config.adminSessionIdleSeconds }, next);
  });

  router.get(`${INBOX_PATH}unread.json`, async (ctx) => {
    const userId = adminState(ctx).principal.user.id;
    const [unread, newest] = await Promise.all([
      unreadNotifications(app.db, userId),
      app.db('notifications').where({ user_id: userId }).max({ id: 'id' }).first() as Promise<{ id: string | number | null }>,
    ]);
    ctx.type = 'application/json';
    ctx.body = { unread, newest_id: newest?.id === null || newest?.id === undefined ? null : String(newest.id) };
  });

  router.get(INBOX_PATH, async (ctx) => {
    const state = adminState(ctx);
    const user = state.principal.user;
    const raw = ctx.query.page;
    if (raw !== undefined && (typeof raw !== 'string' || !/^\d{1,6}$/.test(raw) || Number(raw) < 1)) {
      await renderPage(ctx, app, 400, 'Bad page', [{ label: 'Home', href: '/admin/' }, { label: 'Notifications', href: INBOX_PATH }, { label: 'Bad page' }], <p class="errornote">page must be a whole number from 1.</p>);
      return;
    }
    const page = raw === undefined ? 1 : Number(raw);
    const mine = app.db('notifications').where({ user_id: user.id });
    const [rows, total, unread] = await Promise.all([
      mine.clone().orderBy('id', 'desc').limit(INBOX_PAGE_SIZE).offset((page - 1) * INBOX_PAGE_SIZE).select('id', 'kind', 'title', 'body', 'target_model', 'target_pk', 'read', 'created_at') as Promise<NotificationRow[]>,
      mine.clone().count({ count: '*' }).first() as Promise<{ count: string | number }>,
      unreadNotifications(app.db, user.id),
    ]);
    const totalCount = Number(total.count);
    const pages = Math.max(1, Math.ceil(totalCount / INBOX_PAGE_SIZE));
    await renderPage(
      ctx,
      app,
      200,
      'Notifications',
      [{ label: 'Home', href: '/admin/' }, { label: 'Notifications' }],
      <section class="notifications-inbox" id="notifications-inbox" data-page={String(page)} aria-labelledby="notifications-title">
        <h1 id="notifications-title">Notifications</h1>
        <p class="notifications-summary">
          {count(totalCount)} notification{totalCount === 1 ? '' : 's'}, {count(unread)} unread.
        </p>
        {unread > 0 && (
          <form method="post" action={`${INBOX_PATH}read-all/`} class="inline-form">
            <CsrfField token={state.session.csrfToken} />
            <button type="submit">Mark all as read</button>
          </form>
        )}
        {rows.length ? (
          <div class="results-wrapper">
            <table class="results notifications-list">
              <thead>
                <tr>
                  <th scope="col">Notification</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Received</th>
                  <th scope="col">Status</th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={String(row.id)} class={row.read ? 'notification read' : 'notification unread'} data-id={String(row.id)}>
                    <td>
                      <form method="post" action={`${INBOX_PATH}${row.id}/open/`} class="inline-form">
                        <CsrfField token={state.session.csrfToken} />
                        <button type="submit" class="link-button notification-open">
                          {row.read ? row.title : <strong>{row.title}</strong>}
                        </button>
                      </form>
                      {row.body && <div class="notification-body">{row.body}</div>}
                    </td>
                    <td>{kindLabel(row.kind)}</td>
                    <td>{formatDateTime(row.created_at, user)}</td>
                    <td>{row.read ? 'Read' : <span class="badge tone-warning">Unread</span>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        ) : (
          <p>{page === 1 ? 'You have no notifications.' : 'No notifications on this page.'}</p>
        )}
        {pages > 1 && (
          <nav class="paginator" aria-label="Notification pages">
            Page {page} of {pages}. {page > 1 && <a href={`${INBOX_PATH}?page=${page - 1}`}>Previous</a>} {page < pages && <a href={`${INBOX_PATH}?page=${page + 1}`}>Next</a>}
          </nav>
        )}
      </section>,
    );
  });

  router.post(`${INBOX_PATH}read-all/`, async (ctx) => {
    const state = adminState(ctx);
    const marked = await app.db('notifications').where({ user_id: state.principal.user.id, read: false }).update({ read: true });
    await addMessage(app.db, state.session, { level: 'success', text: `${marked} notification${marked === 1 ? '' : 's'} marked as read.` });
    ctx.redirect(INBOX_PATH);
  });

  router.post(`${INBOX_PATH}:id/open/`, async (ctx) => {
    const state = adminState(ctx);
    const id = ctx.params.id!;
    const found = ID_PATTERN.test(id)
      ? ((await app.db('notifications').where({ id, user_id: state.principal.user.id }).update({ read: true }).returning(['id', 'title', 'target_model', 'target_pk'])) as Pick<NotificationRow, 'id' | 'title' | 'target_model' | 'target_pk'>[])
      : [];
    const row = found[0];
    if (!row) throw new HttpError(404, 'Notification not found.');
    const site = app.backoffice.site;
    const target = row.target_model && row.target_pk ? site.models.get(row.target_model) : undefined;
    if (target && row.target_pk && site.can(state.principal, target, 'view')) {
      ctx.redirect(objectUrl(target, row.target_pk));
      return;
    }
    await addMessage(app.db, state.session, {
      level: 'info',
      text: row.target_model ? `“${row.title}” marked as read; you may not view what it is about.` : `“${row.title}” marked as read.`,
    });
    ctx.redirect(INBOX_PATH);
  });
}
