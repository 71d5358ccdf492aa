import fs from 'node:fs';
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';

/**
 * The end user's side of the video call (issue 38): the page at /kyc/call/?token=<endpoint_token>
 * and the ES module it runs, /kyc/call/call.js, which a merchant may also import into its own
 * page (`startCall({token, container, baseUrl})`, see static/call.js). The page is static: the
 * token stays in the browser, which registers it on the documents socket; every check is there
 * and in take_snapshot. Plain files, no build step.
 */

export const CALL_PAGE_PATH = '/kyc/call/';

const TYPES: Record<string, string> = { js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };

/** One file of ./static, read once at start-up, with its content type. */
export function staticAsset(name: string): { type: string; body: Buffer } {
  return { type: TYPES[name.split('.').pop()!]!, body: fs.readFileSync(new URL(`./static/${name}`, import.meta.url)) };
}

/**
 * The page's own policy: scripts, styles and connections to this site only (the socket is
 * same-origin), media from the camera and the peer (blob:/mediastream:), never framed. The
 * camera and microphone are allowed for this site only. The token is in the URL: no referrer.
 */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; media-src 'self' blob: mediastream:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
  'Permissions-Policy': 'camera=(self), microphone=(self), geolocation=()',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Cache-Control': 'no-store',
};

const PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>Video identification</title>
<link rel="stylesheet" href="${CALL_PAGE_PATH}call.css">
<script type="module" src="${CALL_PAGE_PATH}page.js"></script>
</head>
<body>
<main id="call" class="warden-call-page">
<h1>Video identification</h1>
<noscript><p>This page needs JavaScript and a camera.</p></noscript>
</main>
</body>
</html>
`;

export function registerVideoCallEndUserPage(router: Router): void {
  router.get(CALL_PAGE_PATH, (ctx) => {
    for (const [name, value] of Object.entries(PAGE_HEADERS)) ctx.set(name, value);
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });
  for (const name of ['call.js', 'page.js', 'call.css']) {
    const asset = staticAsset(name);
    router.get(`${CALL_PAGE_PATH}${name}`, (ctx: Context) => {
      ctx.type = asset.type;
      ctx.set('Cache-Control', 'public, max-age=300');
      ctx.set('X-Content-Type-Options', 'nosniff');
      // A merchant's page imports the module (and its stylesheet) from another origin: modules load with CORS.
      ctx.set('Access-Control-Allow-Origin', '*');
      ctx.body = asset.body;
    });
  }
}
