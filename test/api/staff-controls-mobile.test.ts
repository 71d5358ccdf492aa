/**
 * POST /api/mobile/me/password/ checks the old password: it is a login guess, counted in the web
 * admin's login throttle for its user and refused (429 rate_limited, Retry-After) once that trips.
 */
import { createHash } from 'node:crypto';
import test from 'ava';
import { LOGIN_LIMITS } from '../../src/modules/backoffice/web/throttle.ts';
import { adminClient } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, pairDevice, PASSWORD, staffUser, type TestClock } from '../helpers/mobile.ts';

const PASSWORD_NOW = 'correct horse battery staple 42';
const NEW = { new_password1: 'a fresh long passphrase 7', new_password2: 'a fresh long passphrase 7' };
let app: TestApp;
let clock: TestClock;

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

const userKey = (username: string) => `login_user:${createHash('sha256').update(username).digest('hex')}`;

async function pairedUser() {
  const user = await staffUser(app);
  const { accessToken } = await pairDevice(app, clock, user.id);
  const change = (json: unknown) => app.request('POST', PASSWORD, { token: accessToken, json });
  return { user, change };
}

const passwordHashOf = async (id: string) => (await app.database.knex('staff_users').where({ id }).first('password_hash')).password_hash as string;

test.serial('wrong old passwords trip the login throttle: 429 rate_limited with retry_after, even for the right one, until the window passes', async (t) => {
  const { user, change } = await pairedUser();
  const before = await passwordHashOf(user.id);
  // Missing or mistyped fields are no guess of the password: they do not count.
  for (const body of [{}, { old_password: '' }, { old_password: 42 }, { ...NEW }]) {
    const invalid = await change(body);
    t.is(invalid.status, 400);
    t.is(invalid.body.data.reason, 'validation_failed');
  }
  for (let attempt = 0; attempt < LOGIN_LIMITS.perUsername.points; attempt++) {
    const wrong = await change({ old_password: `wrong guess ${attempt}`, ...NEW });
    t.is(wrong.status, 400, `attempt ${attempt}`);
    t.deepEqual(wrong.body.data.errors.old_password.map((error: { code: string }) => error.code), ['password_incorrect']);
  }

  const blocked = await change({ old_password: PASSWORD_NOW, ...NEW });
  t.is(blocked.status, 429);
  const retryAfter = blocked.body.data.retry_after;
  t.true(Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= LOGIN_LIMITS.perUsername.duration, String(retryAfter));
  t.deepEqual(blocked.body, {
    status: false,
    message: `Too many failed login attempts. Try again in ${Math.ceil(retryAfter / 60)} minutes.`,
    data: { reason: 'rate_limited', retry_after: retryAfter },
  });
  const stillWrong = await change({ old_password: 'another guess', ...NEW });
  t.is(stillWrong.status, 429);
  t.is(stillWrong.body.data.reason, 'rate_limited');
  t.is(await passwordHashOf(user.id), before, 'the password did not change');

  // The login's own count: the web login of that user is blocked too; another user's change is not.
  const login = await adminClient(app.url).login(user.username, PASSWORD_NOW);
  t.is(login.status, 429);
  t.regex(login.text, /Too many failed login attempts/);
  const other = await pairedUser();
  t.is((await other.change({ old_password: 'other guess', ...NEW })).status, 400, 'counted per user');

  const updated = await app.database.knex('staff_login_throttle').where({ key: userKey(user.username) }).update({ expire: Date.now() - 1 });
  t.is(updated, 1);
  const changed = await change({ old_password: PASSWORD_NOW, ...NEW });
  t.is(changed.status, 200, changed.text);
  t.not(await passwordHashOf(user.id), before);
  t.falsy(await app.database.knex('staff_login_throttle').where({ key: userKey(user.username) }).first(), 'a change clears the count, as a login does');
});

test.serial('failed web logins count against the mobile password change; its 429 carries Retry-After', async (t) => {
  const { user, change } = await pairedUser();
  for (let attempt = 0; attempt < LOGIN_LIMITS.perUsername.points; attempt++) {
    t.is((await adminClient(app.url).login(user.username, `wrong login ${attempt}`)).status, 200);
  }
  const blocked = await change({ old_password: PASSWORD_NOW, ...NEW });
  t.is(blocked.status, 429);
  t.is(blocked.body.data.reason, 'rate_limited');
  t.is(blocked.headers.get('retry-after'), String(blocked.body.data.retry_after));
});

test.serial('guesses sent at the same moment are counted before they are checked: no more than the limit are answered', async (t) => {
  const { change } = await pairedUser();
  const attempts = LOGIN_LIMITS.perUsername.points * 2;
  const answers = await Promise.all(Array.from({ length: attempts }, (_, attempt) => change({ old_password: `parallel guess ${attempt}`, ...NEW })));
  const judged = answers.filter((answer) => answer.status === 400 && answer.body.data.errors?.old_password?.[0]?.code === 'password_incorrect').length;
  const refused = answers.filter((answer) => answer.status === 429).length;
  t.is(judged + refused, attempts, JSON.stringify(answers.map((answer) => answer.status)));
  t.true(judged <= LOGIN_LIMITS.perUsername.points, `${judged} guesses were checked`);
  t.true(refused >= LOGIN_LIMITS.perUsername.points);
});
