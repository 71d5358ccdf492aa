/**
 * Durable verification jobs: the service is killed with -9 while jobs are pending or running,
 * and the next start finishes every one of them. Also the KYC commands of the CLI.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { startService } from '../helpers/service.ts';
import { createTestDatabase } from '../helpers/database.ts';

const root = path.resolve(import.meta.dirname, '../..');
const fixtures = path.join(root, 'test/fixtures/mrz');


test('jobs left by a kill -9 are finished after restart; flow and agent-token commands', async (t) => {
  const database = await createTestDatabase();
  const dataDir = await fs.mkdtemp('/tmp/warden-kyc-e2e-');
  t.teardown(async () => {
    await database.drop();
    await fs.rm(dataDir, { recursive: true, force: true });
  });
  const env = {
    ...process.env,
    DATABASE_URL: database.url,
    WARDEN_DATA_DIR: dataDir,
    PORT: '0',
    LOG_LEVEL: 'warn',
    WARDEN_JOB_TIMEOUT_SECONDS: '3',
    WARDEN_JOB_MAINTENANCE_SECONDS: '1',
  };
  const warden = async (...args: string[]) => JSON.parse((await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], { cwd: root, env })).stdout);

  const flow = await warden('flow', 'define', '--code', 'passport', '--artifacts', 'passport_mrz_page,liveness_video', '--default');
  t.is(flow.is_default, true);
  t.deepEqual((await warden('flow', 'list')).map((row: { code: string }) => row.code), ['passport']);
  const credential = await warden('credential', 'create', '--name', 'KYC e2e', '--allow-ip', '*');

  const first = await startService(env);
  const post = async (url: string, body: unknown, token?: string) =>
    (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })).json() as Promise<any>;
  const access = (await post(`${first.url}/api/merchant/auth/token/`, { api_key: credential.api_key, api_secret: credential.api_secret })).data.access_token;
  // The customer exists: a session for an unknown customer_ref fails its document comparisons.
  await post(`${first.url}/api/customer/upsert/`, { customer_ref: 'e2e-kyc', migration: true }, access);
  const session = (await post(`${first.url}/api/document/create-session/`, { customer_ref: 'e2e-kyc' }, access)).data.session;

  const page = await fs.readFile(path.join(fixtures, 'td3-flat.jpg'));
  const artifactIds: string[] = [];
  for (let index = 0; index < 4; index++) {
    const form = new FormData();
    form.set('token', session.endpoint_token);
    form.set('artifact_type', 'passport_mrz_page');
    form.set('snapshot', new Blob([page], { type: 'image/jpeg' }), `page-${index}.jpg`);
    const response = await fetch(`${first.url}/api/document/upload_document/`, { method: 'POST', body: form });
    artifactIds.push(((await response.json()) as { artifact_id: string }).artifact_id);
  }
  first.child.kill('SIGKILL');
  await new Promise((resolve) => first.child.once('exit', resolve));
  const finishedBefore = await database.knex('verification_results').whereIn('artifact_id', artifactIds).count({ count: '*' });
  t.log(`results stored before the kill: ${finishedBefore[0]!.count} of ${artifactIds.length}`);

  const second = await startService(env);
  t.teardown(() => second.child.kill('SIGKILL'));
  const deadline = Date.now() + 90_000;
  let done = 0;
  while (Date.now() < deadline) {
    done = Number((await database.knex('verification_results').whereIn('artifact_id', artifactIds).count({ count: '*' }))[0]!.count);
    if (done === artifactIds.length) break;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  t.is(done, artifactIds.length, 'every upload confirmed before the kill has exactly one result after the restart');
  const codes = await database.knex('verification_results').whereIn('artifact_id', artifactIds).pluck('code');
  t.deepEqual([...new Set(codes)], ['success']);

  const { token: agentToken } = await warden('agent-token', '--session', session.session_id, '--agent', 'anna');
  const closed = await post(`${second.url}/api/document/end-kyc-session/`, { token: agentToken, status: 'completed', checklist: { '1': true } });
  t.is(closed.session_status, 'completed');
  const unknown = await t.throwsAsync(warden('agent-token', '--session', 'nope'));
  t.regex(String((unknown as { stderr?: string }).stderr), /No session nope/);
});
