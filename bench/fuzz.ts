/**
 * `npm run fuzz [count]`: the long fuzz run (100,000 requests by default) of the generator in
 * test/fuzz/openapi-fuzz.ts (integration API, mobile API as two staff identities, web admin) against
 * a real app on a fresh database, in this process, so a crash ends the run. Reports the statuses
 * (in all and per side), every response of 500 or more or dropped connection, the documented 503s
 * of the AI endpoints without a gateway, the identity repairs, the temporary upload files left,
 * /healthz afterwards and the process's memory, and writes them to bench/RESULTS.md.
 * FUZZ_MINUTES=N stops it after N minutes (the result then says how many were sent).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import knexFactory from 'knex';
import { migrateToLatest } from '../src/db/migrate.ts';
import { startTestApp } from '../test/helpers/app.ts';
import { requestsFrom, runFuzz, statusLine } from '../test/fuzz/openapi-fuzz.ts';
import { prepareFuzzTarget } from '../test/fuzz/target.ts';
import { benchDatabaseUrl } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

/**
 * FUZZ_SEED=N draws another sequence (to look for more defects); the recorded run uses the default.
 * Each batch of 250 is drawn with the seed plus its offset, so seeds less than the count apart
 * share batches: take them at least that far apart.
 */
const SEED = Number(process.env.FUZZ_SEED ?? 160_000);
const count = Number(process.argv[2] ?? 100_000);
const concurrency = 8;
/** FUZZ_MINUTES: stop after that long, reporting how many requests were sent (the result says so). */
const deadline = process.env.FUZZ_MINUTES ? Date.now() + Number(process.env.FUZZ_MINUTES) * 60_000 : undefined;

function loadLine(load: number[]): string {
  return load.map((value) => value.toFixed(2)).join(' ');
}

const server = await benchDatabaseUrl();
const template = `warden_tpl_fuzz_${randomBytes(4).toString('hex')}`;
const admin = knexFactory({ client: 'pg', connection: server.url, pool: { min: 0, max: 1 } });
await admin.raw(`create database ${template}`);
const templateUrl = new URL(server.url);
templateUrl.pathname = `/${template}`;
const templateDb = knexFactory({ client: 'pg', connection: templateUrl.toString(), pool: { min: 0, max: 1 } });
await migrateToLatest(templateDb);
await templateDb.destroy();
process.env.WARDEN_TEST_ADMIN_URL = server.url;
process.env.WARDEN_TEST_TEMPLATE = template;

const app = await startTestApp();
let exitCode = 1;
try {
  const { document, target, credentials, repairs } = await prepareFuzzTarget(app);
  const operations = Object.values(document.paths).reduce((sum, methods) => sum + Object.keys(methods).length, 0);
  const started = Date.now();
  const loadAtStart = os.loadavg();
  const outcome = await runFuzz(app.url, requestsFrom(document, target), {
    seed: SEED,
    count,
    concurrency,
    credentials,
    ...(deadline ? { deadline } : {}),
    onBatch: (progress) => console.error(`${progress.requests} requests, ${progress.failures.length} failures, ${Math.round((Date.now() - started) / 1000)} s`),
  });
  const seconds = (Date.now() - started) / 1000;
  const leftovers = await fs.readdir(app.context.files.temporaryDirectory()).catch(() => []);
  const health = (await app.request('GET', '/healthz')).status;
  const serverErrors = outcome.failures.length;
  const documented = [...outcome.documented.values()].reduce((sum, times) => sum + times, 0);
  const markdown = [
    '## Fuzz run (issue 16)',
    '',
    `${machineLine()}; load average (1, 5, 15 min) at the start ${loadLine(loadAtStart)}, at the end ${loadLine(os.loadavg())}`,
    '',
    ...(outcome.requests < count ? [`**Stopped by FUZZ_MINUTES after ${outcome.requests} of ${count} requests.**`, ''] : []),
    `\`npm run fuzz\`: ${outcome.requests} requests generated from the service's OpenAPI document (${operations} operations) and the back-office registry (${target.staff!.models.length} models, web admin pages), seed ${SEED}, ${concurrency} at a time, ${seconds.toFixed(0)} s.`,
    '',
    `- responses of 500 or more, or no response: **${serverErrors}** (besides ${documented} documented 503s of the AI and assistant endpoints, which have no gateway here)`,
    `- statuses: ${statusLine(outcome.byStatus)}`,
    ...[...outcome.bySurface].map(([surface, statuses]) => `  - ${surface}: ${statusLine(statuses)}`),
    `- staff identities repaired after the fuzzer logged them out, revoked, demoted or re-passworded them: ${[...repairs].map(([cause, times]) => `${cause} ${times}`).join(', ') || 'none'}`,
    `- temporary upload files left: ${leftovers.length}`,
    `- /healthz afterwards: ${health}; the process did not crash (the app runs in the fuzzing process)`,
    `- resident memory afterwards: ${Math.round(process.memoryUsage().rss / 2 ** 20)} MiB`,
    ...outcome.failures.slice(0, 10).map((failure) => `  - ${failure.route} ${failure.status}: \`${failure.sample.slice(0, 200).replace(/`/g, "'")}\``),
  ].join('\n');
  console.log(markdown);
  if (process.env.BENCH_WRITE !== '0') await writeSection('fuzz', markdown);
  exitCode = serverErrors === 0 && leftovers.length === 0 && health === 200 ? 0 : 1;
} finally {
  await app.close();
  await admin.raw(`drop database if exists ${template} with (force)`);
  await admin.destroy();
  await server.stop();
}
process.exit(exitCode);

