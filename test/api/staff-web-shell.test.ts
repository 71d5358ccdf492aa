/**
 * The web admin's shell over real HTTP and PostgreSQL: login, logout, session cookies and their
 * expiry, CSRF, throttling, security headers and error pages, with a protected route registered
 * here on a router that carries the shell.
 */
import { createHash } from 'node:crypto';
import test from 'ava';
import { LOGIN_LIMITS } from '../../src/modules/backoffice/web/throttle.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { adminClient, csrfTokenIn, probeServer, type ProbeServer } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const PASSWORD = 'violet-harbour-lantern-42';
let app: TestApp;
let probe: ProbeServer;
let proxied: ProbeServer;

test.before(async () => {
  app = await startTestApp();
  probe = await probeServer(app.context);
  proxied = await probeServer({ ...app.context, config: { ...app.context.config, trustedProxies: ['127.0.0.1'] } });
  const actor = { type: 'operator' as const, id: 'test' };
  const known = new Set<string>();
  await createUser(app.database.knex, { username: 'anna', password: PASSWORD, full_name: '<script>alert(1)</script>' }, { actor, known });
  await createUser(app.database.knex, { username: 'bob', password: PASSWORD }, { actor, known });
  await createUser(app.database.knex, { username: 'notstaff', password: PASSWORD }, { actor, known });
  await app.database.knex('staff_users').where({ username: 'notstaff' }).update({ is_staff: false });
});
test.after.always(async () => {
  await probe?.close();
  await proxied?.close();
  await app?.close();
});

const sha256 = (value: string) => createHash('sha256').update(value).digest('hex');

test.serial('the real app serves the login page and stylesheet with the security headers', async (t) => {
  const client = adminClient(app.url);
  const page = await client.get('/admin/login/');
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type')!, /text\/html/);
  const csp = page.headers.get('content-security-policy')!;
  for (const directive of ["default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"]) {
    t.true(csp.split('; ').includes(directive), directive);
  }
  t.notRegex(csp, /unsafe-inline|unsafe-eval/);
  t.is(page.headers.get('x-frame-options'), 'DENY');
  t.is(page.headers.get('x-content-type-options'), 'nosniff');
  t.is(page.headers.get('referrer-policy'), 'same-origin');
  t.is(page.headers.get('cache-control'), 'no-store');
  t.regex(page.text, /^<!DOCTYPE html><html lang="en">/);
  // No inline script or style: the one script is a file of this site, loaded by src.
  t.deepEqual(page.text.match(/<script[^>]*>/g), ['<script src="/admin/static/admin.js" defer>']);
  t.notRegex(page.text, /<script[^>]*><\/script>[\s\S]*<script|<script[^>]*>[^<]|style=/);
  csrfTokenIn(page.text);
  const csrfCookie = page.headers.getSetCookie().find((line) => line.startsWith('warden_csrftoken='))!;
  t.regex(csrfCookie, /httponly/i);
  t.regex(csrfCookie, /samesite=lax/i);
  t.notRegex(csrfCookie, /secure/i);
  const css = await client.get('/admin/static/admin.css');
  t.is(css.status, 200);
  t.regex(css.headers.get('content-type')!, /text\/css/);
  t.is(css.headers.get('x-content-type-options'), 'nosniff');
  t.notRegex(css.text, /@import|url\(/);
  const script = await adminClient(app.url).get('/admin/static/admin.js');
  t.is(script.status, 200, 'served without a session, like the stylesheet');
  t.regex(script.headers.get('content-type')!, /text\/javascript/);
  t.is(script.headers.get('x-content-type-options'), 'nosniff');
});

test.serial('a protected page without a session redirects to the login with next', async (t) => {
  const client = adminClient(probe.url);
  const response = await client.get('/admin/probe/?q=a%20b');
  t.is(response.status, 302);
  t.is(response.location, '/admin/login/?next=%2Fadmin%2Fprobe%2F%3Fq%3Da%2520b');
  t.is(response.headers.get('x-frame-options'), 'DENY');
  const post = await client.post('/admin/probe/', { value: 'x' });
  t.is(post.status, 302);
  t.is(probe.changes, 0);
});

test.serial('wrong password: 200 with the error, no session; unknown user and non-staff alike', async (t) => {
  for (const [username, password] of [['anna', 'not the password'], ['ghost', PASSWORD], ['notstaff', PASSWORD], ['', '']]) {
    const client = adminClient(probe.url);
    const response = await client.login(username!, password!);
    t.is(response.status, 200, username);
    t.regex(response.text, /Please enter the correct username and password for a staff account/);
    t.false(client.jar.cookies.has('warden_session'));
  }
  t.is(Number((await app.database.knex('staff_web_sessions').count({ n: '*' }).first())!.n), 0);
});

test.serial('login: session cookie (HttpOnly, SameSite=Lax, hashed in the database), next honoured, page shows the user escaped', async (t) => {
  const client = adminClient(probe.url);
  const response = await client.login('ANNA', PASSWORD, '/admin/probe/');
  t.is(response.status, 302);
  t.is(response.location, '/admin/probe/');
  const cookie = response.headers.getSetCookie().find((line) => line.startsWith('warden_session='))!;
  t.regex(cookie, /httponly/i);
  t.regex(cookie, /samesite=lax/i);
  t.regex(cookie, /path=\/admin\//i);
  t.notRegex(cookie, /secure/i);
  const value = client.jar.cookies.get('warden_session')!;
  t.true(Buffer.from(value, 'base64url').length === 32);
  const rows = await app.database.knex('staff_web_sessions').select('id_hash');
  t.deepEqual(rows.map((row) => row.id_hash), [sha256(value)]);

  const page = await client.get('/admin/probe/');
  t.is(page.status, 200);
  t.regex(page.text, /hello anna/);
  t.true(page.text.includes('&lt;script>alert(1)&lt;/script>'));
  t.false(page.text.includes('<script>alert(1)'));
  t.regex(page.text, /action="\/admin\/logout\/"/);

  for (const [next, expected] of [['https://evil.example/', '/admin/'], ['//evil.example/', '/admin/'], ['/admin/probe/?x=1', '/admin/probe/?x=1']] as const) {
    const other = adminClient(probe.url);
    t.is((await other.login('anna', PASSWORD, next)).location, expected);
  }
  const again = adminClient(probe.url, client.jar);
  t.is((await again.get('/admin/login/?next=/admin/probe/')).location, '/admin/probe/', 'a signed-in visitor skips the form');
});

test.serial('CSRF: a write without the token, with a wrong one, or from another origin is refused with 403 and changes nothing', async (t) => {
  const client = adminClient(probe.url);
  await client.login('anna', PASSWORD);
  const token = csrfTokenIn((await client.get('/admin/probe/')).text);
  const missing = await client.post('/admin/probe/', { value: 'a' });
  t.is(missing.status, 403);
  t.regex(missing.text, /CSRF verification failed/);
  t.regex(missing.text, /CSRF token missing/);
  t.is((await client.post('/admin/probe/', { value: 'a', csrfmiddlewaretoken: 'x'.repeat(43) })).status, 403);
  const foreign = await client.post('/admin/probe/', { value: 'a', csrfmiddlewaretoken: token }, { origin: 'https://evil.example' });
  t.is(foreign.status, 403);
  t.regex(foreign.text, /Origin checking failed/);
  const json = await fetch(`${probe.url}/admin/probe/`, {
    method: 'POST',
    headers: { cookie: client.jar.header(), 'content-type': 'application/json' },
    body: JSON.stringify({ csrfmiddlewaretoken: token }),
  });
  t.is(json.status, 403);
  t.is(probe.changes, 0);

  // another user's token is not this session's
  const bob = adminClient(probe.url);
  await bob.login('bob', PASSWORD);
  const bobToken = csrfTokenIn((await bob.get('/admin/probe/')).text);
  t.is((await client.post('/admin/probe/', { value: 'a', csrfmiddlewaretoken: bobToken })).status, 403);
  t.is(probe.changes, 0);

  const saved = await client.post('/admin/probe/', { value: '<b>1</b>', csrfmiddlewaretoken: token }, { origin: probe.url });
  t.is(saved.status, 302);
  t.is(probe.changes, 1);
  const shown = await client.get('/admin/probe/');
  t.true(shown.text.includes('Saved &lt;b>1&lt;/b>.'));
  t.false((await client.get('/admin/probe/')).text.includes('Saved'), 'a message shows once');

  const anonymous = adminClient(probe.url);
  await anonymous.get('/admin/login/');
  t.is((await anonymous.post('/admin/login/', { username: 'anna', password: PASSWORD })).status, 403, 'the login form is protected too');
  t.false(anonymous.jar.cookies.has('warden_session'));
});

test.serial('the session id changes at every login and the old one stops working', async (t) => {
  const client = adminClient(probe.url);
  await client.login('anna', PASSWORD);
  const first = client.jar.cookies.get('warden_session')!;
  const page = await client.get('/admin/login/');
  t.is(page.status, 302, 'already signed in');
  // logging in again from the same browser (as another user) replaces the session
  const token = csrfTokenIn((await client.get('/admin/probe/')).text);
  const relogin = await client.post('/admin/login/', { csrfmiddlewaretoken: token, username: 'bob', password: PASSWORD });
  t.is(relogin.status, 302);
  const second = client.jar.cookies.get('warden_session')!;
  t.not(second, first);
  t.falsy(await app.database.knex('staff_web_sessions').where({ id_hash: sha256(first) }).first());
  const stale = adminClient(probe.url);
  stale.jar.cookies.set('warden_session', first);
  t.is((await stale.get('/admin/probe/')).status, 302);
  t.regex((await client.get('/admin/probe/')).text, /hello bob/);
});

test.serial('sessions end after the idle time, after a password change and on deactivation', async (t) => {
  const { knex } = app.database;
  const client = adminClient(probe.url);
  await client.login('anna', PASSWORD);
  const hash = sha256(client.jar.cookies.get('warden_session')!);
  await knex('staff_web_sessions').where({ id_hash: hash }).update({ last_seen_at: knex.raw("now() - interval '1 hour'") });
  t.is((await client.get('/admin/probe/')).status, 200, 'one hour idle is within the default two');
  t.true((await knex('staff_web_sessions').where({ id_hash: hash }).first()).last_seen_at > new Date(Date.now() - 60_000), 'use moves last_seen_at');
  await knex('staff_web_sessions').where({ id_hash: hash }).update({ last_seen_at: knex.raw("now() - interval '2 hours 1 minute'") });
  const idle = await client.get('/admin/probe/');
  t.is(idle.status, 302);
  t.regex(idle.location!, /^\/admin\/login\//);
  t.falsy(await knex('staff_web_sessions').where({ id_hash: hash }).first());
  t.false(client.jar.cookies.has('warden_session'));

  await client.login('anna', PASSWORD);
  await knex('staff_users').where({ username: 'anna' }).update({ password_changed_at: knex.raw("now() + interval '1 second'") });
  t.is((await client.get('/admin/probe/')).status, 302, 'password changed after the session began');
  await knex('staff_users').where({ username: 'anna' }).update({ password_changed_at: knex.raw("now() - interval '1 minute'") });

  await client.login('anna', PASSWORD);
  t.is((await client.get('/admin/probe/')).status, 200);
  await knex('staff_users').where({ username: 'anna' }).update({ is_active: false });
  t.is((await client.get('/admin/probe/')).status, 302, 'deactivated');
  await knex('staff_users').where({ username: 'anna' }).update({ is_active: true });
});

test.serial('logout needs the CSRF token, ends the session and clears the cookie', async (t) => {
  const client = adminClient(probe.url);
  await client.login('anna', PASSWORD);
  const token = csrfTokenIn((await client.get('/admin/probe/')).text);
  t.is((await client.post('/admin/logout/', {})).status, 403);
  t.is((await client.get('/admin/probe/')).status, 200, 'still signed in');
  const hash = sha256(client.jar.cookies.get('warden_session')!);
  const out = await client.post('/admin/logout/', { csrfmiddlewaretoken: token });
  t.is(out.status, 200);
  t.regex(out.text, /Logged out/);
  t.false(client.jar.cookies.has('warden_session'));
  t.falsy(await app.database.knex('staff_web_sessions').where({ id_hash: hash }).first());
  t.is((await client.get('/admin/probe/')).status, 302);
  t.is((await fetch(`${app.url}/admin/logout/`, { redirect: 'manual', method: 'PUT' })).status, 405);
});

test.serial('403 and 404 are HTML pages in the layout', async (t) => {
  const client = adminClient(probe.url);
  await client.login('anna', PASSWORD);
  const forbidden = await client.get('/admin/probe/forbidden/');
  t.is(forbidden.status, 403);
  t.regex(forbidden.headers.get('content-type')!, /text\/html/);
  t.regex(forbidden.text, /Permission denied/);
  t.regex(forbidden.text, /You cannot see this probe\./);
  t.regex(forbidden.text, /Log out/);
  const missing = await client.get('/admin/probe/missing/');
  t.is(missing.status, 404);
  t.regex(missing.text, /Page not found/);
  for (const path of ['/admin/no/such/page/', '/admin/logout/']) {
    const unknown = await client.get(path);
    t.is(unknown.status, 404, path);
    t.regex(unknown.headers.get('content-type')!, /text\/html/);
    t.regex(unknown.text, /Page not found/);
    t.is(unknown.headers.get('x-frame-options'), 'DENY');
  }
  t.is((await adminClient(probe.url).get('/admin/no/such/page/')).status, 302, 'anonymous visitors go to the login first');
});

test.serial('behind a trusted proxy that terminated HTTPS the cookies are Secure; the header from elsewhere is ignored', async (t) => {
  const secure = adminClient(proxied.url);
  const page = await secure.get('/admin/login/', { 'x-forwarded-proto': 'https' });
  t.regex(page.headers.getSetCookie().join('\n'), /warden_csrftoken=.*secure/i);
  const login = await secure.post(
    '/admin/login/',
    { csrfmiddlewaretoken: csrfTokenIn(page.text), username: 'anna', password: PASSWORD },
    { 'x-forwarded-proto': 'https', origin: proxied.url.replace('http:', 'https:') },
  );
  t.is(login.status, 302);
  t.regex(login.headers.getSetCookie().find((line) => line.startsWith('warden_session='))!, /secure/i);

  const direct = adminClient(probe.url);
  const plain = await direct.get('/admin/login/', { 'x-forwarded-proto': 'https' });
  t.notRegex(plain.headers.getSetCookie().join('\n'), /secure/i);
});

test.serial('a username PostgreSQL cannot store, or longer than a throttle key, is a failed login, not a 500', async (t) => {
  const { knex } = app.database;
  await knex('staff_login_throttle').delete();
  for (const username of ['bo\u0000b', 'b'.repeat(5000)]) {
    const refused = await adminClient(probe.url).login(username, PASSWORD);
    t.is(refused.status, 200, refused.text.slice(0, 300));
    t.regex(refused.text, /Please enter the correct username and password/);
  }
  await knex('staff_login_throttle').delete();
});

test.serial('login throttling per username and per IP', async (t) => {
  const { knex } = app.database;
  await knex('staff_login_throttle').delete();
  const client = adminClient(probe.url);
  for (let attempt = 0; attempt < LOGIN_LIMITS.perUsername.points; attempt++) {
    t.is((await client.login('bob', `wrong password ${attempt}`)).status, 200);
  }
  const blocked = await client.login('BOB', PASSWORD);
  t.is(blocked.status, 429);
  t.regex(blocked.text, /Too many failed login attempts/);
  t.true(Number(blocked.headers.get('retry-after')) > 0);
  t.false(client.jar.cookies.has('warden_session'), 'even the right password is refused while blocked');
  t.is((await adminClient(probe.url).login('anna', PASSWORD)).status, 302, 'another username from the same address still works');

  // a success clears its username's count
  await knex('staff_login_throttle').delete();
  for (let attempt = 0; attempt < LOGIN_LIMITS.perUsername.points - 1; attempt++) await adminClient(probe.url).login('bob', 'wrong wrong wrong');
  t.is((await adminClient(probe.url).login('bob', PASSWORD)).status, 302);
  t.is((await adminClient(probe.url).login('bob', 'wrong wrong wrong')).status, 200);
  t.is((await adminClient(probe.url).login('bob', PASSWORD)).status, 302);

  // many usernames from one address
  await knex('staff_login_throttle').delete();
  await knex('staff_login_throttle').insert({ key: 'login_ip:127.0.0.1', points: LOGIN_LIMITS.perIp.points, expire: Date.now() + 60_000 });
  const fromIp = await adminClient(probe.url).login('anna', PASSWORD);
  t.is(fromIp.status, 429);
  await knex('staff_login_throttle').delete();
});
