import type { Context } from 'koa';
import { IpRangeList } from '../../../net/ip-ranges.ts';

/**
 * Sent with every /admin/ response: no inline script, no framing, no sniffing, no cross-site
 * referrers. Images may be data: URLs: the pairing QR code is one, so it is never a fetchable URL.
 */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
  'X-Frame-Options': 'DENY',
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
};

/**
 * Whether the browser reached us over HTTPS: the connection itself, or, when the peer is a
 * configured trusted proxy (the same list that decides whose X-Forwarded-For counts), the
 * proxy's X-Forwarded-Proto. A client elsewhere cannot claim HTTPS with the header.
 */
export function createHttpsDetector(trustedProxies: readonly string[]) {
  const trusted = new IpRangeList(trustedProxies);
  return (ctx: Context): boolean => {
    if (ctx.secure) return true;
    if (!trustedProxies.length || !trusted.contains(ctx.req.socket.remoteAddress ?? '')) return false;
    // The nearest proxy appends last; it is the one that saw the client's scheme.
    const proto = ctx.get('x-forwarded-proto').split(',').pop()?.trim().toLowerCase();
    return proto === 'https';
  };
}

export const ADMIN_INDEX = '/admin/';
// Where the browser resolves a Location header from: the login page, which is where `next` is followed.
const LOGIN_URL = new URL('http://warden.invalid/admin/login/');

/**
 * The one gate for every redirect to a user-supplied `next`: the path it names, normalised the way
 * a browser resolves it, when that is a path inside the admin on this site; the admin index
 * otherwise. Checking the text alone is not enough: `/.//evil.example` and
 * `/admin/%2e%2e//evil.example` resolve to `//evil.example`, another host. So the text must be an
 * absolute path without backslashes (browsers read them as `/`), whitespace or control characters
 * (browsers drop tabs and newlines inside URLs), and the path it resolves to must start with
 * /admin/; what is returned is that resolved path, never the text sent.
 */
export function safeNextUrl(next: string | undefined | null): string {
  if (!next || !next.startsWith('/') || /[\\\s\u0000-\u001f\u007f]/.test(next)) return ADMIN_INDEX;
  let url: URL;
  try {
    url = new URL(next, LOGIN_URL);
  } catch {
    return ADMIN_INDEX;
  }
  if (url.origin !== LOGIN_URL.origin || !url.pathname.startsWith(ADMIN_INDEX)) return ADMIN_INDEX;
  return url.pathname + url.search + url.hash;
}

/** The origin the browser should name in Origin for a same-site request to this server. */
export function expectedOrigin(ctx: Context, https: boolean): string {
  return `${https ? 'https' : 'http'}://${ctx.get('host')}`;
}
