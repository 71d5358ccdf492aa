/**
 * The service as a user runs it: `npm start`'s entry on an embedded PostgreSQL (no DATABASE_URL),
 * the `warden` CLI against the same data while the server runs, a kill -9 and a clean restart,
 * and a graceful SIGTERM that stops the database it started.
 */
import { execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { startService } from '../helpers/service.ts';

const execFileAsync = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

function baseEnv(dataDir: string, port: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, WARDEN_DATA_DIR: dataDir, PORT: String(port), WARDEN_EMBEDDED_PG_PORT: String(port + 1), LOG_LEVEL: 'warn' };
  delete env.DATABASE_URL;
  return env;
}


async function cli(env: NodeJS.ProcessEnv, ...args: string[]) {
  const { stdout } = await execFileAsync(process.execPath, ['bin/warden.js', ...args], { cwd: root, env });
  return JSON.parse(stdout);
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

async function postmasterAlive(dataDir: string): Promise<boolean> {
  const pidFile = await fs.readFile(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').catch(() => null);
  if (!pidFile) return false;
  try {
    process.kill(Number(pidFile.split('\n')[0]), 0);
    return true;
  } catch {
    return false;
  }
}

test('npm start on embedded PostgreSQL, CLI alongside, kill -9 recovery, graceful SIGTERM', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-e2e-'));
  await fs.chmod(dataDir, 0o755);
  // Below Linux's ephemeral range (32768-60999), which the suite's outgoing connections draw their
  // local ports from: one of them took the PostgreSQL port between this pick and its bind once.
  const port = 20000 + 2 * Math.floor(Math.random() * 3000);
  const env = baseEnv(dataDir, port);
  try {
    const first = await startService(env);
    const created = await cli(env, 'credential', 'create', '--name', 'E2E Shop', '--allow-ip', '127.0.0.1');
    t.is(created.client, 'E2E Shop');
    t.regex(created.api_key, /^wk_/);

    const tokenResponse = await fetch(`${first.url}/api/merchant/auth/token/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ api_key: created.api_key, api_secret: created.api_secret }),
    });
    t.is(tokenResponse.status, 200);
    const token = ((await tokenResponse.json()) as { data: { access_token: string } }).data.access_token;

    first.child.kill('SIGKILL');
    await exited(first.child);
    t.true(await postmasterAlive(dataDir), 'the killed service leaves its PostgreSQL running');

    const second = await startService(env);
    const check = await fetch(`${second.url}/api/merchant/auth/check/`, { headers: { authorization: `Bearer ${token}` } });
    t.is(check.status, 200, 'the token survives the restart: same signing key, same data');

    const listed = await cli(env, 'credential', 'list');
    t.deepEqual(listed.map((row: { client: string }) => row.client), ['E2E Shop']);
    await cli(env, 'credential', 'deactivate', '--api-key', created.api_key);
    // The CLI's NOTIFY reaches the server's credential cache a moment after the CLI commits.
    let refused = 200;
    for (let attempt = 0; attempt < 50 && refused !== 403; attempt++) {
      refused = (await fetch(`${second.url}/api/merchant/auth/check/`, { headers: { authorization: `Bearer ${token}` } })).status;
      if (refused !== 403) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    t.is(refused, 403);

    second.child.kill('SIGTERM');
    t.is(await exited(second.child), 0);
    t.false(await postmasterAlive(dataDir), 'a graceful stop stops the database it adopted');

    const offline = await cli(env, 'credential', 'list');
    t.is(offline[0].active, false, 'the CLI works against the same data with the server stopped');
    t.false(await postmasterAlive(dataDir), 'the CLI stops the database it started');
  } finally {
    await fs.rm(dataDir, { recursive: true, force: true }).catch(() => {});
  }
});

test('a bad configuration value stops start-up naming the variable', async (t) => {
  const env = { ...process.env, PORT: 'not-a-port' };
  const error = await t.throwsAsync(execFileAsync(process.execPath, ['--import', 'tsx', 'src/main.ts'], { cwd: root, env }));
  t.regex((error as unknown as { stderr: string }).stderr, /PORT/);
});
