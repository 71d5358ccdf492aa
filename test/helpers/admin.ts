/** HTTP helpers for the web admin: a server with the shell and a protected probe page, a cookie jar, the CSRF token. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Router from '@koa/router';
import Koa from 'koa';
import { h } from 'preact';
import type { AppContext } from '../../src/context.ts';
import { ForbiddenError } from '../../src/http/errors.ts';
import { requestLifecycle } from '../../src/http/middleware.ts';
import { CsrfField, Layout } from '../../src/modules/backoffice/web/layout.tsx';
import { addMessage } from '../../src/modules/backoffice/web/session.ts';
import { layoutProps, registerAdminShell, sendPage, type AdminState } from '../../src/modules/backoffice/web/shell.tsx';

export interface ProbeServer {
  url: string;
  /** How many writes the protected POST accepted. */
  changes: number;
  close(): Promise<void>;
}

/**
 * The shell on its own router and server, with what a page built on it does: a protected page
 * whose form posts a value (counted, then a message and a redirect), a 403 and a route that
 * answers nothing (404).
 */
export async function probeServer(context: AppContext): Promise<ProbeServer> {
  const koa = new Koa({ proxy: false });
  const router = new Router();
  registerAdminShell(router, context);
  router.get('/admin/probe/', async (ctx) => {
    const state = ctx.state as AdminState;
    const chrome = await layoutProps(ctx, context);
    await sendPage(
      ctx,
      200,
      h(
        Layout,
        { title: 'Probe', ...chrome },
        h('p', { id: 'who' }, `hello ${state.principal.user.username}`),
        h('form', { method: 'post', action: '/admin/probe/' }, h(CsrfField, { token: state.session.csrfToken }), h('input', { name: 'value', id: 'value' }), h('button', { type: 'submit' }, 'Save')),
      ),
    );
  });
  router.post('/admin/probe/', async (ctx) => {
    const state = ctx.state as AdminState;
    probe.changes++;
    await addMessage(context.db, state.session, { level: 'success', text: `Saved ${state.form!.get('value')}.` });
    ctx.redirect('/admin/probe/');
  });
  router.get('/admin/probe/forbidden/', () => {
    throw new ForbiddenError('You cannot see this probe.');
  });
  router.get('/admin/probe/missing/', () => {});
  koa.use(requestLifecycle(context));
  koa.use(router.routes());
  const server = http.createServer(koa.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const probe: ProbeServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    changes: 0,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return probe;
}

export interface AdminResponse {
  status: number;
  headers: Headers;
  text: string;
  location: string | null;
}

/** A browser's cookies for one site, as far as these tests need them (names and values; a cleared cookie goes). */
export class CookieJar {
  readonly cookies = new Map<string, string>();

  store(headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair] = line.split(';');
      const separator = pair!.indexOf('=');
      const name = pair!.slice(0, separator).trim();
      const value = pair!.slice(separator + 1).trim();
      if (!value || /expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  header(): string {
    return [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
  }
}

/** One admin client: keeps cookies, never follows redirects (tests look at them). */
export function adminClient(baseUrl: string, jar = new CookieJar()) {
  const send = async (method: string, path: string, form?: Record<string, string>, headers: Record<string, string> = {}): Promise<AdminResponse> => {
    const response = await fetch(baseUrl + path, {
      method,
      redirect: 'manual',
      headers: {
        ...(jar.cookies.size ? { cookie: jar.header() } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        ...headers,
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    jar.store(response.headers);
    return { status: response.status, headers: response.headers, text: await response.text(), location: response.headers.get('location') };
  };
  return {
    jar,
    get: (path: string, headers?: Record<string, string>) => send('GET', path, undefined, headers),
    post: (path: string, form: Record<string, string>, headers?: Record<string, string>) => send('POST', path, form, headers),
    /** Logs in through the form; returns the final response of the POST. */
    async login(username: string, password: string, next?: string): Promise<AdminResponse> {
      const page = await send('GET', '/admin/login/');
      return send('POST', '/admin/login/', { csrfmiddlewaretoken: csrfTokenIn(page.text), username, password, ...(next ? { next } : {}) });
    },
  };
}

export function csrfTokenIn(html: string): string {
  const match = /name="csrfmiddlewaretoken" value="([^"]+)"/.exec(html);
  if (!match) throw new Error('no csrfmiddlewaretoken in the page');
  return match[1]!;
}
