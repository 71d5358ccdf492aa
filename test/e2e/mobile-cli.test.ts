/** warden login-ticket and issue_review_ticket against a test database, and the tickets they print redeemed over HTTP. */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { ME, PAIR, staffUser } from '../helpers/mobile.ts';

const root = path.resolve(import.meta.dirname, '../..');
let app: TestApp;
let dir: string;

test.before(async () => {
  app = await startTestApp();
  dir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-mobile-cli-'));
});
test.after.always(async () => {
  await app?.close();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function warden(...args: string[]): Promise<{ code: number; json: any }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: app.database.url, WARDEN_PUBLIC_URL: 'https://warden.example.org' },
    });
    return { code: 0, json: JSON.parse(stdout) };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!) };
  }
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

test.serial('login-ticket prints the QR payload and its expiry, writes the QR image, and the ticket pairs once', async (t) => {
  const user = await staffUser(app);
  const image = path.join(dir, 'login.png');
  const result = await warden('login-ticket', '--username', user.username.toUpperCase(), '--qr', image);
  t.is(result.code, 0);
  t.deepEqual(Object.keys(result.json), ['qr', 'expires_at']);
  t.like(result.json.qr, { v: 1, typ: 'warden-mobile-login', endpoint: '/api/mobile/auth/qr/' });
  t.regex(result.json.expires_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/);
  t.deepEqual((await fs.readFile(image)).subarray(0, 8), PNG_SIGNATURE);

  const paired = await app.request('POST', PAIR, { json: { ticket: result.json.qr.ticket, device_name: 'cli', platform: 'ios' } });
  t.is(paired.status, 200);
  t.is((await app.request('GET', ME, { token: paired.body.data.access_token })).body.data.user.id, user.id);
  t.is((await app.request('POST', PAIR, { json: { ticket: result.json.qr.ticket, device_name: 'cli', platform: 'ios' } })).status, 401);

  t.deepEqual(await warden('login-ticket', '--username', 'nobody-here'), { code: 1, json: { error: 'No staff user named nobody-here.' } });
  t.is((await warden('login-ticket')).code, 2);
});

test.serial('issue_review_ticket: the code once with the workspace, --list without codes, --revoke, --force for superusers', async (t) => {
  const reviewer = await staffUser(app);
  const image = path.join(dir, 'review.png');
  const issued = await warden('issue_review_ticket', '--user', reviewer.username, '--days', '3', '--note', 'app store review', '--qr', image);
  t.is(issued.code, 0);
  t.deepEqual(Object.keys(issued.json), ['workspace', 'code', 'expires_at']);
  t.is(issued.json.workspace, 'https://warden.example.org');
  t.deepEqual((await fs.readFile(image)).subarray(0, 8), PNG_SIGNATURE);
  for (const name of ['one', 'two']) {
    t.is((await app.request('POST', PAIR, { json: { ticket: issued.json.code, device_name: name, platform: 'android' } })).status, 200);
  }

  const listed = await warden('issue_review_ticket', '--list');
  t.is(listed.code, 0);
  const row = listed.json.find((entry: { username: string }) => entry.username === reviewer.username);
  t.like(row, { note: 'app store review', state: 'valid', devices: 2 });
  t.false(JSON.stringify(listed.json).includes(issued.json.code));

  const revoked = await warden('issue_review_ticket', '--revoke', '--user', reviewer.username);
  t.deepEqual(revoked.json, { user: reviewer.username, revoked: { tickets: 1, devices: 2 } });
  t.is((await app.request('POST', PAIR, { json: { ticket: issued.json.code, device_name: 'three', platform: 'android' } })).status, 401);

  const admin = await staffUser(app, { is_superuser: true });
  const refused = await warden('issue_review_ticket', '--user', admin.username);
  t.is(refused.code, 1);
  t.regex(refused.json.error, /superuser/);
  t.is((await warden('issue_review_ticket', '--user', admin.username, '--force')).code, 0);

  const inactive = await staffUser(app);
  await app.database.knex('staff_users').where({ id: inactive.id }).update({ is_active: false });
  const none = await warden('issue_review_ticket', '--user', inactive.username);
  t.is(none.code, 1);
  t.regex(none.json.error, /not eligible/);
  t.is((await app.database.knex('mobile_login_tickets').where({ user_id: inactive.id })).length, 0);
  t.is((await warden('issue_review_ticket', '--user', reviewer.username, '--days', 'ten')).code, 2);
  t.is((await warden('issue_review_ticket')).code, 2);
});
