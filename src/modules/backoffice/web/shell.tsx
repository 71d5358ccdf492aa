import fs from 'node:fs';
import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { JSX } from 'preact';
import type { AppContext } from '../../../context.ts';
import { HttpError, PayloadTooLargeError } from '../../../http/errors.ts';
import type { RequestState } from '../../../http/state.ts';
import { staffUserExists, type Principal } from '../../staff/principal.ts';
import { authenticate } from '../../staff/service.ts';
import { CSRF_FIELD, CsrfField, ErrorPage, Layout, renderDocument, STATIC_FILES, type LayoutProps } from './layout.tsx';
import { createHttpsDetector, expectedOrigin, safeNextUrl, SECURITY_HEADERS } from './security.ts';
import { endSession, newToken, resolveSession, sameSecret, SESSION_COOKIE, startSession, takeMessages, type AdminSession } from './session.ts';
import { loginThrottle, throttledMessage } from './throttle.ts';

/**
 * The web admin's shell: security headers, sessions, CSRF, the login and logout pages, the
 * stylesheet, and HTML error pages. Pages registered after it on the same router under /admin/
 * find `ctx.state.principal` and `ctx.state.session` set (a visitor without a session never
 * reaches them), and the submitted form, CSRF-checked, in `ctx.state.form`.
 */

export interface AdminState extends RequestState {
  principal: Principal;
  session: AdminSession;
  /** The urlencoded body of a POST/PUT/PATCH/DELETE, after its CSRF token was checked. */
  form?: URLSearchParams;
  https: boolean;
}

export const LOGIN_PATH = '/admin/login/';
export const LOGOUT_PATH = '/admin/logout/';
/** Before login there is no session to hold a CSRF token: this cookie does (double submit). */
export const ANONYMOUS_CSRF_COOKIE = 'warden_csrftoken';
const COOKIE_PATH = '/admin/';
const FORM_LIMIT_BYTES = 1024 * 1024;
const UNSAFE_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const LOGIN_ERROR = 'Please enter the correct username and password for a staff account. Note that both fields may be case-sensitive.';

/** Path, content type, cache lifetime and contents of each static file; public (no session needed). */
const STATIC = new Map(
  (
    [
      [STATIC_FILES.css, 'text/css; charset=utf-8', 3600],
      [STATIC_FILES.script, 'text/javascript; charset=utf-8', 3600],
      [STATIC_FILES.icon, 'image/svg+xml', 86400],
    ] as const
  ).map(([path, type, maxAge]) => [path as string, { type, maxAge, body: fs.readFileSync(new URL(`./static/${path.split('/').pop()}`, import.meta.url)) }]),
);

/** Registers the shell; call it before any other /admin/ route so its middleware runs first. */
export function registerAdminShell(router: Router, app: AppContext): void {
  const isHttps = createHttpsDetector(app.config.trustedProxies);
  const throttle = loginThrottle(app.db);

  router.use('/admin', async (ctx: Context, next: Next) => {
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) ctx.set(name, value);
    const state = ctx.state as AdminState;
    state.https = isHttps(ctx);
    // Koa refuses to set a Secure cookie on a plain connection; behind a trusted TLS proxy it is right to.
    ctx.cookies.secure = state.https;
    try {
      if (STATIC.has(ctx.path)) return await next();
      ctx.set('Cache-Control', 'no-store');
      const cookieValue = ctx.cookies.get(SESSION_COOKIE);
      const resolved = cookieValue ? await resolveSession(app.db, cookieValue, app.config.adminSessionIdleSeconds) : null;
      if (resolved && resolved.principal.user.is_staff) {
        state.principal = resolved.principal;
        state.session = resolved.session;
      } else if (cookieValue) {
        clearCookie(ctx, SESSION_COOKIE);
      }
      const isLogin = ctx.path === LOGIN_PATH;
      if (!state.session && !isLogin) return toLogin(ctx);
      if (UNSAFE_METHODS.has(ctx.method)) {
        const accepted = [state.session?.csrfToken, isLogin ? ctx.cookies.get(ANONYMOUS_CSRF_COOKIE) : undefined];
        const refusal = await checkCsrf(ctx, state, accepted.filter((token): token is string => Boolean(token)));
        if (refusal) {
          state.log.info({ reason: refusal }, 'CSRF check failed');
          await sendPage(ctx, 403, <ErrorPage status={403} message={`CSRF verification failed. Request aborted. ${refusal}`} {...chrome(state)} />);
          return;
        }
      }
      await next();
      if (ctx.status === 404 && ctx.body === undefined) await renderError(ctx, 404);
    } catch (error) {
      // A user deleted while its page ran fails it (a write's foreign key to the gone row): sent to
      // the login page, as a request after the deletion is (its sessions went with the user).
      if (!(error instanceof HttpError) && state.principal && !(await staffUserExists(app.db, state.principal.user.id))) {
        clearCookie(ctx, SESSION_COOKIE);
        return toLogin(ctx);
      }
      if (!(error instanceof HttpError) || error.status >= 500) throw error;
      await renderError(ctx, error.status, error.message);
    }
  });

  // Every GET under /admin/ matches at least this pass-through, so the middleware above runs for
  // paths no page claims and answers them with the HTML 404 page (after the login redirect).
  router.get('/admin/{*rest}', (_ctx, next) => next());

  for (const [path, file] of STATIC) {
    router.get(path, (ctx) => {
      ctx.type = file.type;
      ctx.set('Cache-Control', `public, max-age=${file.maxAge}`);
      ctx.body = file.body;
    });
  }

  router.get(LOGIN_PATH, async (ctx) => {
    const state = ctx.state as Partial<AdminState> & RequestState;
    const next = typeof ctx.query.next === 'string' ? ctx.query.next : undefined;
    if (state.principal) return ctx.redirect(safeNextUrl(next));
    await sendLoginPage(ctx, 200, { next, csrfToken: anonymousCsrfToken(ctx, state.https!) });
  });

  router.post(LOGIN_PATH, async (ctx) => {
    const state = ctx.state as Partial<AdminState> & RequestState;
    const form = state.form ?? new URLSearchParams();
    const username = form.get('username') ?? '';
    const password = form.get('password') ?? '';
    const next = form.get('next') ?? undefined;
    const csrfToken = anonymousCsrfToken(ctx, state.https!);
    const wait = await throttle.retryAfter(username, state.clientIp);
    if (wait > 0) {
      ctx.set('Retry-After', String(wait));
      return sendLoginPage(ctx, 429, { next, username, csrfToken, error: throttledMessage(wait) });
    }
    const user = username && password ? await authenticate(app.db, username, password) : null;
    if (!user || !user.is_staff) {
      await throttle.recordFailure(username, state.clientIp);
      state.log.info({ username }, 'staff login failed');
      return sendLoginPage(ctx, 200, { next, username, csrfToken, error: LOGIN_ERROR });
    }
    await throttle.recordSuccess(username);
    // A new session id at every login, so a session id planted before login is worthless after it.
    if (state.session) await endSession(app.db, state.session.idHash);
    // The user may be deleted after the password check: its session's row then names no user.
    const started = await startSession(app.db, user.id).catch((error: { code?: string }) => {
      if (error.code === '23503') return null;
      throw error;
    });
    if (!started) return sendLoginPage(ctx, 200, { next, username, csrfToken, error: LOGIN_ERROR });
    const { cookieValue } = started;
    ctx.cookies.set(SESSION_COOKIE, cookieValue, cookieOptions(state.https!));
    state.log.info({ userId: user.id }, 'staff login');
    ctx.redirect(safeNextUrl(next));
  });

  router.post(LOGOUT_PATH, async (ctx) => {
    const state = ctx.state as AdminState;
    await endSession(app.db, state.session.idHash);
    clearCookie(ctx, SESSION_COOKIE);
    await sendPage(
      ctx,
      200,
      <Layout title="Logged out" breadcrumbs={[{ label: 'Home', href: '/admin/' }, { label: 'Logged out' }]}>
        <h1>Logged out</h1>
        <p>You have been logged out.</p>
        <p>
          <a href={LOGIN_PATH}>Log in again</a>
        </p>
      </Layout>,
    );
  });

  async function renderError(ctx: Context, status: number, message?: string) {
    const known = status === 400 || status === 403 || status === 404 || status === 429 ? status : 400;
    await sendPage(ctx, status, <ErrorPage status={known} message={message} {...chrome(ctx.state as AdminState)} />);
  }
}

/** The layout's user-dependent parts for the current request: the header's user and logout form. */
export function chrome(state: Partial<AdminState>): Pick<LayoutProps, 'user' | 'csrfToken'> {
  if (!state.principal || !state.session) return {};
  const { id, username, full_name } = state.principal.user;
  return { user: { id, username, full_name }, csrfToken: state.session.csrfToken };
}

/**
 * Everything a page's Layout needs from the request: user, CSRF token, and the session's pending
 * messages (taken: they show once).
 */
export async function layoutProps(ctx: Context, app: AppContext): Promise<Pick<LayoutProps, 'user' | 'csrfToken' | 'messages'>> {
  const state = ctx.state as Partial<AdminState>;
  const messages = state.session ? await takeMessages(app.db, state.session) : [];
  return { ...chrome(state), messages };
}

export async function sendPage(ctx: Context, status: number, page: JSX.Element): Promise<void> {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = renderDocument(page);
}

interface LoginPageProps {
  csrfToken: string;
  next?: string;
  username?: string;
  error?: string;
}

function LoginPage({ csrfToken, next, username, error }: LoginPageProps) {
  return (
    <Layout title="Log in" bodyClass="login-page">
      <div class="panel">
        <h1>Log in</h1>
        {error && (
          <p class="errornote" role="alert">
            {error}
          </p>
        )}
        <form method="post" action={LOGIN_PATH}>
          <CsrfField token={csrfToken} />
          {next && <input type="hidden" name="next" value={next} />}
          <div class="form-row">
            <label for="id_username">Username</label>
            <input type="text" name="username" id="id_username" value={username ?? ''} autocomplete="username" autocapitalize="none" required autofocus />
          </div>
          <div class="form-row">
            <label for="id_password">Password</label>
            <input type="password" name="password" id="id_password" autocomplete="current-password" required />
          </div>
          <button type="submit">Log in</button>
        </form>
      </div>
    </Layout>
  );
}

function sendLoginPage(ctx: Context, status: number, props: LoginPageProps) {
  return sendPage(ctx, status, <LoginPage {...props} />);
}

function anonymousCsrfToken(ctx: Context, https: boolean): string {
  const existing = ctx.cookies.get(ANONYMOUS_CSRF_COOKIE);
  if (existing && /^[\w-]{43}$/.test(existing)) return existing;
  const token = newToken();
  ctx.cookies.set(ANONYMOUS_CSRF_COOKIE, token, cookieOptions(https));
  return token;
}

function cookieOptions(https: boolean) {
  return { httpOnly: true, sameSite: 'lax' as const, secure: https, path: COOKIE_PATH, overwrite: true };
}

/** To the login page, back to this page after it. */
function toLogin(ctx: Context): void {
  ctx.redirect(`${LOGIN_PATH}?next=${encodeURIComponent(ctx.originalUrl)}`);
}

function clearCookie(ctx: Context, name: string) {
  ctx.cookies.set(name, null, { path: COOKIE_PATH, overwrite: true });
}

/**
 * Why a state-changing request is refused, or null when it may go on: a foreign Origin, or a
 * missing or wrong csrfmiddlewaretoken in the urlencoded form (which is read here, once, and
 * left on ctx.state.form).
 */
async function checkCsrf(ctx: Context, state: Partial<AdminState> & RequestState, accepted: string[]): Promise<string | null> {
  const origin = ctx.get('origin');
  if (origin && origin !== expectedOrigin(ctx, state.https!)) return `Origin checking failed: ${origin} does not match this site.`;
  if (!ctx.is('application/x-www-form-urlencoded')) return 'CSRF token missing (the form was not sent as application/x-www-form-urlencoded).';
  state.form = new URLSearchParams(await readBody(ctx));
  const token = state.form.get(CSRF_FIELD);
  if (!token) return 'CSRF token missing.';
  if (!accepted.some((expected) => sameSecret(expected, token))) return 'CSRF token incorrect.';
  return null;
}

async function readBody(ctx: Context): Promise<string> {
  const declared = Number(ctx.get('content-length'));
  if (declared > FORM_LIMIT_BYTES) throw new PayloadTooLargeError('The form is too large.');
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > FORM_LIMIT_BYTES) throw new PayloadTooLargeError('The form is too large.');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
