/**
 * The web admin's shell in a real browser (chromium through playwright-core): login, a wrong
 * password, CSRF refusals (a tampered token and a form on another origin), escaped markup, and
 * no Content-Security-Policy violations on the way.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import type { Page } from 'playwright-core';
import { createUser } from '../../src/modules/staff/service.ts';
import { probeServer, type ProbeServer } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { browserAvailable, browserTest, launchBrowser } from '../helpers/browser.ts';

const PASSWORD = 'violet-harbour-lantern-42';
let app: TestApp;
let probe: ProbeServer;
let browser: Awaited<ReturnType<typeof launchBrowser>>;
let evil: http.Server;
let evilUrl: string;
const problems: string[] = [];

test.before(async () => {
  if (!browserAvailable) return;
  app = await startTestApp();
  probe = await probeServer(app.context);
  await createUser(
    app.database.knex,
    { username: 'anna', password: PASSWORD, full_name: '<script>alert(1)</script>' },
    { actor: { type: 'operator', id: 'test' }, known: new Set() },
  );
  // Another origin (another port) with a form aimed at the admin: a cross-site request forgery attempt.
  evil = http.createServer((_request, response) => {
    response.setHeader('content-type', 'text/html');
    response.end(`<!DOCTYPE html><form method="post" action="${probe.url}/admin/probe/"><input name="value" value="forged"><button id="go">Win a prize</button></form>`);
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', () => resolve()));
  evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
  browser = await launchBrowser();
  browser.page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  browser.page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
});
test.after.always(async () => {
  await browser?.close();
  evil?.close();
  await probe?.close();
  await app?.close();
});

async function logIn(page: Page, password: string) {
  await page.fill('#id_username', 'anna');
  await page.fill('#id_password', password);
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')]);
}

browserTest('wrong password: the error is shown on the login page and no session cookie is set', async (t) => {
  const { page, context } = browser;
  await page.goto(`${probe.url}/admin/probe/`);
  t.regex(page.url(), /\/admin\/login\/\?next=%2Fadmin%2Fprobe%2F$/);
  t.is(await page.title(), 'Log in | Warden administration');
  await logIn(page, 'not the password');
  t.regex(await page.locator('.errornote').innerText(), /Please enter the correct username and password/);
  t.is(await page.inputValue('#id_username'), 'anna');
  t.false((await context.cookies()).some((cookie) => cookie.name === 'warden_session'));
});

browserTest('login: redirected to next, the user shown as text, the stylesheet applied, no script run', async (t) => {
  const { page, context } = browser;
  await page.goto(`${probe.url}/admin/login/?next=/admin/probe/`);
  await logIn(page, PASSWORD);
  t.is(new URL(page.url()).pathname, '/admin/probe/');
  t.is(await page.locator('#who').innerText(), 'hello anna');
  t.is(await page.locator('.greeting strong').innerText(), '<script>alert(1)</script>');
  const headerColour = await page.locator('.site-header').evaluate((element) => getComputedStyle(element).backgroundColor);
  t.is(headerColour, 'rgb(28, 43, 63)');
  const session = (await context.cookies()).find((cookie) => cookie.name === 'warden_session')!;
  t.true(session.httpOnly);
  t.is(session.sameSite, 'Lax');
  t.deepEqual(problems, []);
});

browserTest('CSRF: a tampered token and a form on another site are refused with 403; the real form works', async (t) => {
  const { page } = browser;
  await page.goto(`${probe.url}/admin/probe/`);
  await page.locator('#content input[name=csrfmiddlewaretoken]').evaluate((input) => {
    (input as HTMLInputElement).value = 'tampered-token-tampered-token-tampered-toke';
  });
  await page.fill('#value', 'tampered');
  const tampered = await Promise.all([page.waitForResponse((response) => response.request().method() === 'POST'), page.click('#content button[type=submit]')]);
  t.is(tampered[0].status(), 403);
  t.regex(await page.locator('main').innerText(), /CSRF verification failed.*CSRF token incorrect/s);

  await page.goto(evilUrl);
  const forged = await Promise.all([page.waitForResponse((response) => response.request().method() === 'POST'), page.click('#go')]);
  t.is(forged[0].status(), 403);
  t.regex(await page.locator('main').innerText(), /CSRF verification failed/);
  t.is(probe.changes, 0);

  await page.goto(`${probe.url}/admin/probe/`);
  await page.fill('#value', 'honest');
  await Promise.all([page.waitForURL(`${probe.url}/admin/probe/`), page.click('#content button[type=submit]')]);
  t.is(await page.locator('.message-success').innerText(), 'Saved honest.');
  t.is(probe.changes, 1);

  await Promise.all([page.waitForURL(/\/admin\/logout\/$/), page.click('text=Log out')]);
  t.regex(await page.locator('main').innerText(), /Logged out/);
  await page.goto(`${probe.url}/admin/probe/`);
  t.regex(page.url(), /\/admin\/login\//);
});
