import { AsyncLocalStorage } from 'node:async_hooks';
import type { ComponentChildren, JSX } from 'preact';
import { renderToString } from 'preact-render-to-string';
import type { FlashMessage } from './session.ts';

/**
 * The web admin's frame: header (site name, the signed-in user, logout), breadcrumbs, messages
 * and the page's content. Rendered to a string on the server; preact escapes every text and
 * attribute value, so data shown here is never markup.
 */

export const CSRF_FIELD = 'csrfmiddlewaretoken';

export interface Crumb {
  label: string;
  href?: string;
}

/** Who is signed in, as the header shows them; absent on the login page. */
export interface LayoutUser {
  id: string;
  username: string;
  full_name: string;
}

export interface LayoutProps {
  title: string;
  user?: LayoutUser;
  csrfToken?: string;
  breadcrumbs?: Crumb[];
  messages?: FlashMessage[];
  /** A class on <body>, for pages that lay out differently (the login box). */
  bodyClass?: string;
  children?: ComponentChildren;
}

/** The admin's static files (served by the shell, read once at start-up). */
export const STATIC_FILES = {
  css: '/admin/static/admin.css',
  /** Progressive enhancement only: every page works without it (CSP allows no inline script). */
  script: '/admin/static/admin.js',
  icon: '/admin/static/favicon.svg',
} as const;

/**
 * What the header shows beside the user, per request: the notifications middleware
 * (src/modules/notifications/web.tsx, behind the shell) counts the user's unread notifications
 * once and renders the rest of the request inside this context. Pages the shell answers itself
 * (its error pages) render outside it and show the link without a count. idleSeconds is the
 * session's idle timeout: admin.js stops asking for the count after half of it without the user
 * doing anything, since every request it makes keeps the session alive.
 */
export const headerContext = new AsyncLocalStorage<{ unreadNotifications?: number; idleSeconds?: number }>();

/** The header's link to the user's notifications, with the unread count (kept current by admin.js). */
function NotificationsLink() {
  const store = headerContext.getStore();
  const unread = store?.unreadNotifications;
  return (
    <a href="/admin/notifications/" class="notifications-link" id="notifications-link" data-idle-seconds={store?.idleSeconds === undefined ? undefined : String(store.idleSeconds)}>
      Notifications{' '}
      <span class="unread-badge" id="unread-count" data-unread={unread === undefined ? '' : String(unread)} hidden={!unread}>
        {unread ? String(unread) : ''}
      </span>
      <span class="visually-hidden" id="unread-label" hidden={!unread}>
        {' '}
        unread
      </span>
    </a>
  );
}

export function CsrfField({ token }: { token: string }) {
  return <input type="hidden" name={CSRF_FIELD} value={token} />;
}

export function Layout({ title, user, csrfToken, breadcrumbs, messages, bodyClass, children }: LayoutProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="robots" content="noindex, nofollow" />
        <title>{`${title} | Warden administration`}</title>
        <link rel="stylesheet" href={STATIC_FILES.css} />
        <link rel="icon" href={STATIC_FILES.icon} type="image/svg+xml" />
        <script src={STATIC_FILES.script} defer />
      </head>
      <body class={bodyClass}>
        <header class="site-header">
          <a class="brand" href="/admin/">
            Warden administration
          </a>
          {user && (
            <nav class="user-tools" aria-label="Account">
              <span class="greeting">
                Signed in as <strong>{user.full_name || user.username}</strong>
              </span>
              <NotificationsLink />
              <a href={`/admin/auth/user/${encodeURIComponent(user.id)}/change/`}>My account</a>
              {csrfToken && (
                <form method="post" action="/admin/logout/" class="inline-form">
                  <CsrfField token={csrfToken} />
                  <button type="submit" class="link-button">
                    Log out
                  </button>
                </form>
              )}
            </nav>
          )}
        </header>
        {breadcrumbs && breadcrumbs.length > 0 && (
          <nav class="breadcrumbs" aria-label="Breadcrumbs">
            {breadcrumbs.map((crumb, index) => (
              <span key={index}>
                {index > 0 && <span class="separator"> › </span>}
                {crumb.href ? <a href={crumb.href}>{crumb.label}</a> : <span aria-current="page">{crumb.label}</span>}
              </span>
            ))}
          </nav>
        )}
        {messages && messages.length > 0 && (
          <ul class="messages">
            {messages.map((message, index) => (
              <li key={index} class={`message message-${message.level}`}>
                {message.text}
              </li>
            ))}
          </ul>
        )}
        <main id="content">{children}</main>
      </body>
    </html>
  );
}

export interface ErrorPageProps extends Omit<LayoutProps, 'title' | 'children'> {
  status: 403 | 404 | 429 | 400;
  message?: string;
}

const ERROR_TITLES: Record<ErrorPageProps['status'], string> = {
  400: 'Bad request',
  403: 'Permission denied',
  404: 'Page not found',
  429: 'Too many attempts',
};

const ERROR_TEXTS: Record<ErrorPageProps['status'], string> = {
  400: 'The request could not be understood.',
  403: 'You do not have permission to view or change this.',
  404: 'We’re sorry, but the requested page could not be found.',
  429: 'Too many attempts. Wait a moment and try again.',
};

export function ErrorPage({ status, message, ...layout }: ErrorPageProps) {
  return (
    <Layout title={ERROR_TITLES[status]} breadcrumbs={[{ label: 'Home', href: '/admin/' }, { label: ERROR_TITLES[status] }]} {...layout}>
      <h1>{ERROR_TITLES[status]}</h1>
      <p class="error-text">{message ?? ERROR_TEXTS[status]}</p>
    </Layout>
  );
}

/** A whole HTML document from a page component. */
export function renderDocument(page: JSX.Element): string {
  return `<!DOCTYPE html>${renderToString(page)}`;
}
