/**
 * A real browser for the web admin's tests: Debian's chromium driven by playwright-core (no
 * browser download). Where chromium is not installed the tests say so visibly and skip; they
 * never pass silently.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test, { type ExecutionContext } from 'ava';
import { createRequire } from 'node:module';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.WARDEN_CHROMIUM ?? '/usr/bin/chromium';

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const browserAvailable = fs.existsSync(CHROMIUM);
const SKIP_MESSAGE = `browser tests SKIPPED: no chromium at ${CHROMIUM} (apt-get install chromium, or set WARDEN_CHROMIUM)`;

if (!browserAvailable) console.log(SKIP_MESSAGE);

/** A browser with its own fresh profile; close() removes the profile. */
export async function launchBrowser(): Promise<{ context: BrowserContext; page: Page; close(): Promise<void> }> {
  const profile = await fsp.mkdtemp(path.join(os.tmpdir(), 'warden-chromium-'));
  // launchPersistentContext passes the profile as --user-data-dir
  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS });
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    async close() {
      await context.close();
      await fsp.rm(profile, { recursive: true, force: true });
    },
  };
}

/**
 * A serial test that needs the browser: without one it is registered as skipped and the reason
 * printed, so the run's output shows it.
 */
export function browserTest(title: string, body: (t: ExecutionContext) => Promise<void>): void {
  if (browserAvailable) {
    test.serial(title, body);
  } else {
    test.serial.skip(`${title} (${SKIP_MESSAGE})`, body);
  }
}

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: string[];
}

let axeSource: Promise<string> | undefined;

/**
 * axe-core's serious and critical violations on the page as it is now. The source is evaluated
 * through the DevTools protocol, so the admin's CSP (no inline script) does not stop it.
 */
export async function seriousViolations(page: Page): Promise<AxeViolation[]> {
  axeSource ??= fsp.readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
  await page.evaluate(await axeSource);
  const violations = await page.evaluate(async () => {
    // @ts-expect-error axe is what the evaluated source defines on window
    const result = await window.axe.run(document, { resultTypes: ['violations'] });
    return (result.violations as Array<{ id: string; impact: string | null; help: string; nodes: Array<{ target: string[] }> }>).map((violation) => ({
      id: violation.id,
      impact: violation.impact,
      help: violation.help,
      nodes: violation.nodes.slice(0, 5).map((node) => node.target.join(' ')),
    }));
  });
  return violations.filter((violation) => violation.impact === 'serious' || violation.impact === 'critical');
}

/** Signs in through the admin's login form, as a fresh visitor (cookies cleared first). */
export async function logIn(page: Page, baseUrl: string, username: string, password: string): Promise<void> {
  await page.context().clearCookies();
  await page.goto(`${baseUrl}/admin/`);
  await page.fill('#id_username', username);
  await page.fill('#id_password', password);
  await Promise.all([page.waitForLoadState('load'), page.click('button[type=submit]')]);
}
