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

/**
 * `next` if it is a path on this site (so a login link cannot send the user elsewhere), else
 * the fallback. Scheme-relative (`//host`), backslash tricks and control characters are refused.
 */
export function safeNextUrl(next: string | undefined | null, fallback = '/admin/'): string {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return fallback;
  if (/[\u0000-\u001f\u007f\\]/.test(next)) return fallback;
  try {
    const base = 'http://warden.invalid';
    const url = new URL(next, base);
    if (url.origin !== base) return fallback;
    return url.pathname + url.search + url.hash;
  } catch {
    return fallback;
  }
}

/** The origin the browser should name in Origin for a same-site request to this server. */
export function expectedOrigin(ctx: Context, https: boolean): string {
  return `${https ? 'https' : 'http'}://${ctx.get('host')}`;
}
