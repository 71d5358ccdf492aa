/**
 * Two controls of the web admin found missing by an outside probe, over real HTTP and PostgreSQL:
 * the login's `next` is followed only to a path inside the admin (as a browser resolves it), and
 * the password-change form's old password is a login guess, counted in the login throttle.
 */
import { createHash } from 'node:crypto';
import test from 'ava';
import { LOGIN_LIMITS } from '../../src/modules/backoffice/web/throttle.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const PASSWORD = 'violet-harbour-lantern-42';
const NEW_PASSWORD = 'copper-meadow-signal-77';
const actor = { type: 'operator' as const, id: 'test' };
let app: TestApp;

test.before(async () => {
  app = await startTestApp();
  const known = new Set<string>();
  for (const username of ['nina', 'pat', 'quinn', 'rosa']) await createUser(app.database.knex, { username, password: PASSWORD }, { actor, known });
});
test.after.always(async () => {
  await app?.close();
});

/** Where a browser that got `location` in answer to a request for /admin/login/ goes next. */
function resolved(location: string): URL {
  return new URL(location, `${app.url}/admin/login/`);
}

// Each leaves the admin once resolved: another host, another scheme, or a path outside /admin/.
const HOSTILE_NEXT = [
  '/.//evil.example',
  '/.//evil.example/admin/',
  '/admin/../..//evil.example',
  '/admin/..//evil.example',
  '/admin/%2e%2e//evil.example',
  '/admin/%2E%2E/%2e%2E//evil.example',
  '//evil.example',
  '///evil.example',
  '/\\evil.example',
  '\\\\evil.example',
  '/admin/\\..\\..\\\\evil.example',
  '/\t/evil.example',
  '/\n/evil.example',
  '/\r\n/evil.example',
  '\t//evil.example',
  ' //evil.example',
  '/%2F%2Fevil.example',
  '%2F%2Fevil.example',
  '/%5C%5Cevil.example',
  'https://evil.example/admin/',
  'http:/evil.example',
  'javascript:alert(1)',
  'JaVaScRiPt:alert(1)',
  'java\tscript:alert(1)',
  'data:text/html,<script>alert(1)</script>',
  '/admin\u0000/',
  '/api/mobile/me/',
  '/admin',
  '/metrics',
  'admin/',
  '',
];

test.serial('login: a hostile next falls back to the admin index, never another site', async (t) => {
  for (const next of HOSTILE_NEXT) {
    const login = await adminClient(app.url).login('nina', PASSWORD, next || undefined);
    t.is(login.status, 302, JSON.stringify(next));
    t.is(login.location, '/admin/', JSON.stringify(next));
    t.is(resolved(login.location!).origin, app.url, JSON.stringify(next));
  }
});

test.serial('login page with a session: a hostile next in the query falls back to the admin index', async (t) => {
  const client = adminClient(app.url);
  t.is((await client.login('nina', PASSWORD)).status, 302);
  for (const next of HOSTILE_NEXT) {
    const page = await client.get(`/admin/login/?next=${encodeURIComponent(next)}`);
    t.is(page.status, 302, JSON.stringify(next));
    t.is(page.location, '/admin/', JSON.stringify(next));
  }
});

test.serial('login: a next inside the admin is followed, normalised as a browser resolves it', async (t) => {
  const cases: [next: string, location: string][] = [
    ['/admin/customer/customer/?q=a%20b&o=-2#top', '/admin/customer/customer/?q=a%20b&o=-2#top'],
    ['/admin/', '/admin/'],
    ['/./admin/./customer/', '/admin/customer/'],
    ['/admin/engine/../customer/customer/', '/admin/customer/customer/'],
    ['/admin/customer/customer/?next=//evil.example', '/admin/customer/customer/?next=//evil.example'],
  ];
  for (const [next, location] of cases) {
    const client = adminClient(app.url);
    const login = await client.login('nina', PASSWORD, next);
    t.is(login.status, 302, next);
    t.is(login.location, location, next);
    t.is(resolved(location).origin, app.url);
    t.is((await client.get(`/admin/login/?next=${encodeURIComponent(next)}`)).location, location, `${next} (already signed in)`);
  }
  // The redirect to the login page and back keeps a protected page's address.
  const client = adminClient(app.url);
  const protectedPage = await client.get('/admin/customer/customer/?q=x%2Fy');
  t.is(protectedPage.status, 302);
  const next = new URL(protectedPage.location!, app.url).searchParams.get('next')!;
  t.is((await client.login('nina', PASSWORD, next)).location, '/admin/customer/customer/?q=x%2Fy');
});

const userKey = (username: string) => `login_user:${createHash('sha256').update(username).digest('hex')}`;

/** The window passes: the user's count in the login throttle expires, as it does after its duration. */
async function windowPasses(username: string): Promise<void> {
  const updated = await app.database.knex('staff_login_throttle').where({ key: userKey(username) }).update({ expire: Date.now() - 1 });
  if (updated !== 1) throw new Error(`no throttle row for ${username}`);
}

async function signedIn(username: string) {
  const client = adminClient(app.url);
  const login = await client.login(username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  const id = (await app.database.knex('staff_users').where({ username }).first('id')).id as string;
  const own = await client.get(`/admin/auth/user/${id}/change/`);
  const csrf = csrfTokenIn(own.text);
  const change = (old_password: string, new_password1 = NEW_PASSWORD, new_password2 = new_password1) =>
    client.post(`/admin/auth/user/${id}/password/`, { csrfmiddlewaretoken: csrf, old_password, new_password1, new_password2 });
  return { client, id, change };
}

const passwordHashOf = async (username: string) => (await app.database.knex('staff_users').where({ username }).first('password_hash')).password_hash as string;

test.serial('password change form: wrong old passwords trip the login throttle; then even the right one is refused until the window passes', async (t) => {
  const { change } = await signedIn('pat');
  const before = await passwordHashOf('pat');
  // An old password left out is no guess: it does not count.
  for (let attempt = 0; attempt < 3; attempt++) {
    const missing = await change('');
    t.is(missing.status, 400);
    t.true(missing.text.includes('This field is required.'));
  }
  for (let attempt = 0; attempt < LOGIN_LIMITS.perUsername.points; attempt++) {
    const wrong = await change(`wrong guess ${attempt}`);
    t.is(wrong.status, 400, `attempt ${attempt}`);
    t.true(wrong.text.includes('Your old password was entered incorrectly.'));
  }
  const blocked = await change(PASSWORD);
  t.is(blocked.status, 429);
  t.true(Number(blocked.headers.get('retry-after')) > 0);
  t.regex(blocked.text, /Too many failed login attempts\. Try again in \d+ minutes?\./);
  t.true(blocked.text.includes('<h2>Change password</h2>'), 'the form is shown again, with the error');
  t.false(blocked.text.includes('Your old password was entered incorrectly.'), 'a blocked attempt tells nothing of the password');
  t.is((await change('still wrong')).status, 429);
  t.is(await passwordHashOf('pat'), before, 'the password did not change');

  // The same count as the login's: the login of that user is blocked too; another user's is not.
  t.is((await adminClient(app.url).login('PAT', PASSWORD)).status, 429);
  t.is((await adminClient(app.url).login('quinn', PASSWORD)).status, 302);
  t.is((await (await signedIn('quinn')).change('quinn guess')).status, 400, 'counted per user');

  await windowPasses('pat');
  const changed = await change(PASSWORD);
  t.is(changed.status, 302);
  t.not(await passwordHashOf('pat'), before);
});

test.serial('password change form: failed logins count against it, and a change clears the count', async (t) => {
  const { change } = await signedIn('rosa');
  for (let attempt = 0; attempt < LOGIN_LIMITS.perUsername.points; attempt++) {
    t.is((await adminClient(app.url).login('rosa', `wrong login ${attempt}`)).status, 200);
  }
  t.is((await change(PASSWORD)).status, 429, 'failed logins block the form of a session opened before them');
  await windowPasses('rosa');
  t.is((await change('one wrong guess')).status, 400);
  t.is((await change(PASSWORD)).status, 302);
  t.falsy(await app.database.knex('staff_login_throttle').where({ key: userKey('rosa') }).first(), 'a change clears the user count, as a login does');
});
