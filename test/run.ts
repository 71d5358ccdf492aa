/**
 * `npm test` entry: provides one PostgreSQL for the whole run (DATABASE_URL when set, otherwise an
 * embedded one in a temporary folder), migrates a template database once, and runs ava. Each test
 * file then creates its own database from the template (test/helpers/database.ts), so files run
 * in parallel without sharing rows. Every test app checks its answers against the OpenAPI document
 * (test/helpers/openapi-check.ts); the run fails when one did not match it.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import knexFactory from 'knex';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../src/db/embedded.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { readRecords, RECORD_DIR_VARIABLE } from './helpers/openapi-check.ts';

let embedded: EmbeddedPostgres | undefined;
let dataDir: string | undefined;
let adminUrl = process.env.DATABASE_URL;
if (!adminUrl) {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-test-pg-'));
  await fs.chmod(dataDir, 0o755);
  const port = 20000 + Math.floor(Math.random() * 20000);
  embedded = await startEmbeddedPostgres({ dataDir, port });
  adminUrl = embedded.url;
  console.log(`tests: embedded PostgreSQL on port ${port} (set DATABASE_URL to use another server)`);
} else {
  console.log(`tests: PostgreSQL from DATABASE_URL (${new URL(adminUrl).host})`);
}

const recordDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-openapi-check-'));
const template = `warden_tpl_${randomBytes(4).toString('hex')}`;
const admin = knexFactory({ client: 'pg', connection: adminUrl, pool: { min: 0, max: 1 } });
let exitCode = 1;
try {
  await admin.raw(`create database ${template}`);
  const templateUrl = new URL(adminUrl);
  templateUrl.pathname = `/${template}`;
  const templateDb = knexFactory({ client: 'pg', connection: templateUrl.toString(), pool: { min: 0, max: 1 } });
  await migrateToLatest(templateDb);
  await templateDb.destroy();

  exitCode = await new Promise<number>((resolve) => {
    const ava = spawn(process.execPath, [path.resolve('node_modules/ava/entrypoints/cli.mjs'), ...process.argv.slice(2)], {
      stdio: 'inherit',
      env: { ...process.env, WARDEN_TEST_ADMIN_URL: adminUrl, WARDEN_TEST_TEMPLATE: template, [RECORD_DIR_VARIABLE]: recordDir },
    });
    ava.on('close', (code) => resolve(code ?? 1));
  });
  if (!reportOpenApiCheck(recordDir) && exitCode === 0) exitCode = 1;
} finally {
  // Test files drop their own databases; anything a killed worker left behind goes with the template.
  const leftovers = await admin
    .select('datname')
    .from('pg_database')
    .where('datname', 'like', `${template.replace('tpl', 't')}%`)
    .catch(() => [] as { datname: string }[]);
  for (const { datname } of leftovers) await admin.raw(`drop database if exists ${datname} with (force)`).catch(() => {});
  await admin.raw(`drop database if exists ${template} with (force)`).catch(() => {});
  await admin.destroy();
  await embedded?.stop();
  if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  await fs.rm(recordDir, { recursive: true, force: true });
}
process.exit(exitCode);

/** Prints what the OpenAPI check saw; false when a response did not match the document. */
function reportOpenApiCheck(directory: string): boolean {
  const { operations, answered, violations } = readRecords(directory);
  const responses = Object.values(answered).reduce((sum, count) => sum + count, 0);
  const unanswered = operations.filter((operation) => !answered[operation]);
  console.log(`OpenAPI check: ${responses} responses of ${operations.length - unanswered.length}/${operations.length} documented operations validated.`);
  if (unanswered.length) console.log(`  No response in this run for:\n${unanswered.map((operation) => `    ${operation}`).join('\n')}`);
  const failures = Object.entries(violations);
  if (!failures.length) return true;
  console.log(`OpenAPI check: ${failures.length} kinds of response do not match /api/openapi.json:`);
  for (const [violation, { count, example }] of failures) console.log(`  ${violation} (${count}x) e.g. ${example}`);
  return false;
}
