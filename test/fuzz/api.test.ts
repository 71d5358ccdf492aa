/**
 * The fixed-seed fuzz run of `npm test`: a few thousand requests generated from the service's own
 * OpenAPI document (test/fuzz/openapi-fuzz.ts) and the back-office registry, to the integration
 * API, the mobile API as a superuser and as a limited staff user, and the web admin, against a real
 * app. No answer may be a 500 (beyond a documented one: the AI endpoints without a gateway) or
 * missing, no temporary upload file may be left, and the service answers /healthz afterwards.
 * `npm run fuzz` (bench/fuzz.ts) runs the same generator for 100,000 requests.
 */
import fs from 'node:fs/promises';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { prepareFuzzTarget } from './target.ts';
import { requestsFrom, runFuzz, statusLine } from './openapi-fuzz.ts';

const SEED = 16;
const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 3000);

let app: TestApp;
test.before(async () => {
  app = await startTestApp();
});
test.after.always(async () => {
  await app?.close();
});

test('generated requests to every documented endpoint never get a 500, leave no temporary file, and the service stays healthy', async (t) => {
  t.timeout(10 * 60_000);
  const { document, target, credentials, repairs } = await prepareFuzzTarget(app);
  const operations = Object.values(document.paths).reduce((count, methods) => count + Object.keys(methods).length, 0);
  t.true(operations >= 10, `the document lists ${operations} operations`);
  const outcome = await runFuzz(app.url, requestsFrom(document, target), { seed: SEED, count: REQUESTS, concurrency: 4, credentials });
  for (const [surface, statuses] of outcome.bySurface) t.log(`${surface}: ${statusLine(statuses)}`);
  t.log(`documented 5xx: ${JSON.stringify(Object.fromEntries(outcome.documented))}; identity repairs: ${JSON.stringify(Object.fromEntries(repairs))}`);
  t.is(outcome.requests, REQUESTS);
  t.deepEqual(outcome.failures, [], 'no 5xx and no dropped connection');
  t.true((outcome.byStatus.get(200) ?? 0) > 0, 'some requests got through every check');
  t.true((outcome.byStatus.get(401) ?? 0) < outcome.requests / 4, 'the staff side is reached: most requests carry a live credential');
  t.deepEqual(await fs.readdir(app.context.files.temporaryDirectory()).catch(() => []), []);
  t.is((await app.request('GET', '/healthz')).status, 200);
});
