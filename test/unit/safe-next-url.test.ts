/**
 * safeNextUrl, the one gate of every redirect to a user-supplied `next`: whatever the text, a
 * browser that follows the answer from the login page stays on this site, inside /admin/.
 */
import test from 'ava';
import fc from 'fast-check';
import { ADMIN_INDEX, safeNextUrl } from '../../src/modules/backoffice/web/security.ts';

const LOGIN_PAGE = 'https://warden.example/admin/login/';

/** Where a browser on the login page goes when told `location`. */
const followed = (location: string) => new URL(location, LOGIN_PAGE);

test('paths that resolve outside the admin fall back to the admin index', (t) => {
  for (const next of ['/.//evil.example', '/admin/../..//evil.example', '/admin/%2e%2e//evil.example', '/\\evil.example', '/%2F%2Fevil.example', '/\t/evil.example', '/a\u2028//evil', '/admin', '/api/']) {
    t.is(safeNextUrl(next), ADMIN_INDEX, JSON.stringify(next));
  }
});

test('a path inside the admin comes back as the browser resolves it', (t) => {
  t.is(safeNextUrl('/./admin/x/../customer/?q=%2F#f'), '/admin/customer/?q=%2F#f');
  t.is(safeNextUrl('/admin/a b/'), ADMIN_INDEX, 'raw whitespace is refused (a browser sends %20)');
  t.is(safeNextUrl('/admin/a%20b/'), '/admin/a%20b/');
});

test('property: any text leads a browser to this site, inside /admin/, and the answer is its own fixed point', (t) => {
  const pieces = fc.constantFrom('/', '//', '\\', '.', '..', '%2e', '%2F', '%5C', 'admin', 'evil.example', ':', '@', '?', '#', '\t', '\n', ' ', 'javascript:', 'http:', '\u0000');
  const hostile = fc.oneof(fc.string(), fc.array(pieces, { maxLength: 12 }).map((parts) => parts.join('')), fc.array(pieces, { maxLength: 12 }).map((parts) => `/${parts.join('')}`));
  fc.assert(
    fc.property(hostile, (next) => {
      const location = safeNextUrl(next);
      const url = followed(location);
      return url.origin === new URL(LOGIN_PAGE).origin && url.pathname.startsWith(ADMIN_INDEX) && location.startsWith(ADMIN_INDEX) && safeNextUrl(location) === location;
    }),
    { numRuns: 5000 },
  );
  t.pass();
});
