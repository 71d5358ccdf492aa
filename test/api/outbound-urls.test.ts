/**
 * Outgoing URLs staff set (a flow's notify_url, a merchant's decision webhook) never reach the
 * service's own network: refused at save time (library, mobile/web form, CLI) and again at each
 * delivery after DNS resolution; a redirect is never followed.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import test from 'ava';
import { defineFlow, FlowInputError } from '../../src/modules/kyc/flows.ts';
import { notifyFlow } from '../../src/modules/kyc/webhook.ts';
import { PolicyInputError, setDecisionWebhook } from '../../src/app/policies.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { openSession } from '../helpers/kyc.ts';
import { installClock, operator, pairDevice, staffUser } from '../helpers/mobile.ts';

const root = path.resolve(import.meta.dirname, '../..');
const FLOWS = '/api/mobile/data/document/flow/';

/** Every form of a refused address a staff member might type; each must be refused at save time. */
const REFUSED = [
  'https://169.254.169.254/latest/meta-data/',
  'https://[fd00:ec2::254]/latest/meta-data/',
  'https://100.100.100.200/latest/meta-data/',
  'https://metadata.google.internal/computeMetadata/v1/',
  'https://127.0.0.1/hook',
  'https://127.0.0.1./hook',
  'http://127.0.0.1:8080/hook',
  'https://0x7f000001/hook',
  'https://2130706433/hook',
  'https://0177.0.0.1/hook',
  'https://127.1/hook',
  'https://%31%32%37.0.0.1/hook',
  'https://localhost/hook',
  'http://localhost:8080/hook',
  'https://LOCALHOST./hook',
  'https://api.localhost/hook',
  'https://[::1]/hook',
  'https://[::ffff:127.0.0.1]/hook',
  'https://[::ffff:a9fe:a9fe]/hook',
  'https://[64:ff9b::a9fe:a9fe]/hook',
  'https://[2002:a00:1::1]/hook',
  'https://[::127.0.0.1]/hook',
  'https://10.1.2.3/hook',
  'https://172.16.0.1/hook',
  'https://172.31.255.254/hook',
  'https://192.168.1.1/hook',
  'https://100.64.0.1/hook',
  'https://0.0.0.0/hook',
  'https://0/hook',
  'https://[::]/hook',
  'https://224.0.0.1/hook',
  'https://255.255.255.255/hook',
  'https://[ff02::1]/hook',
  'https://[fc00::1]/hook',
  'https://[fe80::1]/hook',
];

let app: TestApp;
let allowing: TestApp;
let superuserToken: string;
let merchantToken: string;

test.before(async () => {
  app = await startTestApp();
  allowing = await startTestApp({ WARDEN_OUTBOUND_ALLOW: '127.0.0.1' });
  const clock = installClock(app);
  const admin = await staffUser(app, { is_superuser: true });
  superuserToken = (await pairDevice(app, clock, admin.id)).accessToken;
  merchantToken = await app.merchantToken();
});

test.after.always(async () => {
  await app?.close();
  await allowing?.close();
});

function flowInput(code: string, notifyUrl: string) {
  return { code, artifacts: ['doc_mrz'], videoCall: false, isDefault: false, active: true, notifyUrl };
}

async function warden(database: TestApp, ...args: string[]): Promise<{ code: number; json: unknown }> {
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], { cwd: root, env: { ...process.env, DATABASE_URL: database.database.url, WARDEN_OUTBOUND_ALLOW: '' } });
    return { code: 0, json: JSON.parse(stdout) };
  } catch (error) {
    const failure = error as { code: number; stderr: string };
    return { code: failure.code, json: JSON.parse(failure.stderr.split('\n')[0]!) };
  }
}

/** A local receiver that counts what reaches it and answers with `answer`. */
async function receiver(answer: (response: http.ServerResponse) => void = (response) => response.writeHead(204).end()) {
  const requests: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders }> = [];
  const server = http.createServer((request, response) => {
    requests.push({ method: request.method!, url: request.url!, headers: request.headers });
    request.resume();
    request.on('end', () => answer(response));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    requests,
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

test('a flow notify_url in a refused range is refused at save time, whatever form the address is written in', async (t) => {
  for (const [index, url] of REFUSED.entries()) {
    const error = await t.throwsAsync(defineFlow(app.database.knex, flowInput(`refused-${index}`, url), operator), { instanceOf: FlowInputError }, url);
    t.regex(error?.message ?? '', /--notify/, url);
  }
  t.is(Number((await app.database.knex('verification_flows').where('code', 'like', 'refused-%').count({ n: '*' }))[0]!.n), 0);
});

test('public notify URLs are still accepted, normalised', async (t) => {
  for (const [code, url, stored] of [
    ['public-name', 'https://merchant.example/hook', 'https://merchant.example/hook'],
    ['public-v4', 'https://8.8.8.8/hook', 'https://8.8.8.8/hook'],
    ['public-v6', 'https://[2001:4860:4860::8888]/hook', 'https://[2001:4860:4860::8888]/hook'],
    ['public-nat64', 'https://[64:ff9b::808:808]/hook', 'https://[64:ff9b::808:808]/hook'],
  ] as const) {
    const flow = await defineFlow(app.database.knex, flowInput(code, url), operator);
    t.is(flow.notify_url, stored);
  }
});

test('the mobile/web form of a flow gives a field error on notify_url for each refused form', async (t) => {
  for (const [index, url] of REFUSED.entries()) {
    const response = await app.request('POST', FLOWS, {
      token: superuserToken,
      json: { code: `form-${index}`, name: 'Form', active: true, required_artifact_types: ['doc_mrz'], requires_video_call: false, notify_url: url, is_default: false },
    });
    t.is(response.status, 400, `${url}: ${response.text}`);
    t.is(response.body?.data?.errors?.notify_url?.[0]?.code, 'invalid', url);
  }
  const accepted = await app.request('POST', FLOWS, {
    token: superuserToken,
    json: { code: 'form-public', name: 'Form', active: true, required_artifact_types: ['doc_mrz'], requires_video_call: false, notify_url: 'https://merchant.example/hook', is_default: false },
  });
  t.is(accepted.status, 201, accepted.text);
});

test('the form keeps a stored notify_url it did not change (set where WARDEN_OUTBOUND_ALLOW allowed it), and refuses a new refused one', async (t) => {
  await app.database.knex('verification_flows').insert({
    code: 'allowed-earlier', name: 'Allowed earlier', active: true, required_artifact_types: ['doc_mrz'], requires_video_call: false,
    notify_url: 'http://10.0.0.5/hook', notify_secret: 'secret', is_default: false,
  });
  const renamed = await app.request('PATCH', `${FLOWS}allowed-earlier/`, { token: superuserToken, json: { name: 'Renamed', notify_url: 'http://10.0.0.5/hook' } });
  t.is(renamed.status, 200, renamed.text);
  const moved = await app.request('PATCH', `${FLOWS}allowed-earlier/`, { token: superuserToken, json: { notify_url: 'https://10.0.0.6/hook' } });
  t.is(moved.status, 400, moved.text);
  t.regex(moved.body.data.errors.notify_url[0].message, /10\.0\.0\.6 is a private address/);
  t.is((await app.database.knex('verification_flows').where({ code: 'allowed-earlier' }).first()).notify_url, 'http://10.0.0.5/hook');
});

test('warden flow define --notify and warden decision-webhook set refuse obscure loopback and metadata forms (exit 2)', async (t) => {
  const flow = await warden(app, 'flow', 'define', '--code', 'cli-refused', '--artifacts', 'doc_mrz', '--notify', 'https://0x7f000001/hook');
  t.is(flow.code, 2, JSON.stringify(flow.json));
  t.regex(JSON.stringify(flow.json), /--notify: 127\.0\.0\.1 is a loopback address/);
  t.falsy(await app.database.knex('verification_flows').where({ code: 'cli-refused' }).first());
  const { apiKey } = await app.credential();
  const refused = await warden(app, 'decision-webhook', 'set', '--api-key', apiKey, '--url', 'https://2130706433/hook');
  t.is(refused.code, 2, JSON.stringify(refused.json));
  t.regex(JSON.stringify(refused.json), /127\.0\.0\.1/);
});

test('a decision webhook URL in a refused range is refused at save time', async (t) => {
  const { apiKey, id } = await app.credential();
  for (const url of REFUSED) {
    await t.throwsAsync(setDecisionWebhook(app.database.knex, apiKey, url), { instanceOf: PolicyInputError }, url);
  }
  t.falsy(await app.database.knex('merchant_decision_webhooks').where({ credential_id: id }).first());
  const saved = await setDecisionWebhook(app.database.knex, apiKey, 'https://merchant.example/decisions');
  t.is(saved.url, 'https://merchant.example/decisions');
});

test('at delivery, a host name that resolves to a refused address is not contacted, and the attempt is logged failed', async (t) => {
  const local = await receiver();
  t.teardown(local.close);
  // Set directly in the database, past the save-time check: only the delivery's own check stands.
  await app.database.knex('verification_flows').insert({
    code: 'resolves-local', name: 'Resolves local', active: true, required_artifact_types: ['doc_mrz'], requires_video_call: false,
    notify_url: `http://localhost:${local.port}/hook`, notify_secret: 'secret', is_default: false,
  });
  const session = await openSession(app, merchantToken, { customer_ref: 'ssrf-dns', flow: 'resolves-local' });
  await t.throwsAsync(notifyFlow(app.context, session.session_id, 1));
  t.is(local.requests.length, 0, 'nothing reached the local server');
  const [delivery] = await app.database.knex('webhook_deliveries').where({ session_id: session.session_id });
  t.is(delivery.status_code, null);
  t.regex(delivery.error, /loopback/);
});

test('a redirect is not followed: the 3xx is a failed delivery and its target gets nothing', async (t) => {
  const target = await receiver();
  t.teardown(target.close);
  const redirecting = await receiver((response) => response.writeHead(302, { location: `http://127.0.0.1:${target.port}/stolen` }).end());
  t.teardown(redirecting.close);
  const flow = await defineFlow(allowing.database.knex, flowInput('redirects', `http://127.0.0.1:${redirecting.port}/hook`), operator, allowing.context.config.outboundAllow);
  t.truthy(flow.notify_secret);
  const token = await allowing.merchantToken();
  const session = await openSession(allowing, token, { customer_ref: 'ssrf-redirect', flow: 'redirects' });
  await t.throwsAsync(notifyFlow(allowing.context, session.session_id, 1), { message: /302/ });
  t.is(redirecting.requests.length, 1);
  t.is(target.requests.length, 0, 'the redirect target got nothing');
  const [delivery] = await allowing.database.knex('webhook_deliveries').where({ session_id: session.session_id });
  t.is(delivery.status_code, 302);
  t.regex(delivery.error, /302/);
});

test('WARDEN_OUTBOUND_ALLOW lets a delivery through to an allowed address, with the Host the URL names', async (t) => {
  const local = await receiver();
  t.teardown(local.close);
  const url = `http://127.0.0.1:${local.port}/allowed`;
  await t.throwsAsync(defineFlow(app.database.knex, flowInput('not-allowed', url), operator), { instanceOf: FlowInputError });
  await defineFlow(allowing.database.knex, flowInput('allowed', url), operator, allowing.context.config.outboundAllow);
  const token = await allowing.merchantToken();
  const session = await openSession(allowing, token, { customer_ref: 'ssrf-allowed', flow: 'allowed' });
  await notifyFlow(allowing.context, session.session_id, 1);
  t.is(local.requests.length, 1);
  t.like(local.requests[0], { method: 'POST', url: '/allowed' });
  t.is(local.requests[0]!.headers.host, `127.0.0.1:${local.port}`);
  t.regex(String(local.requests[0]!.headers['x-warden-signature']), /^t=\d+,v1=[0-9a-f]{64}$/);
  const [delivery] = await allowing.database.knex('webhook_deliveries').where({ session_id: session.session_id });
  t.like(delivery, { status_code: 204, error: null });
});
