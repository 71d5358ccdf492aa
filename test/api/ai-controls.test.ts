import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { startScriptedLlm, type ScriptedLlm } from '../helpers/scripted-llm.ts';
import { startGateway, type RunningGateway } from '../../src/gateway/server.ts';
import type { GatewaySettings } from '../../src/gateway/model.ts';

/**
 * Two controls on the AI features: where the gateway is told to reach the MCP server (from
 * configuration or the address the service listens on, never from a request's Host header; the
 * gateway itself refuses any other origin), and how many AI jobs one user may have queued or
 * running at once (MAX_AI_JOBS_PER_USER, 3; beyond it 429 too_many_running with Retry-After).
 */

const GATEWAY_TOKEN = 'gateway-token-for-the-tests-0123';
const A = '/api/mobile/assistant/';
const OFFICER = ['engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'customer.view_customer', 'transaction.view_financialevent'];
const LIMIT = 3;
const EVIL_HOST = 'evil.example:4444';

/** A stand-in gateway: records every call's body; turns and reviews wait while `hold` is set, else fail at once (502). */
interface FakeGateway {
  url: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  calls: { path: string; body: any }[];
  hold: boolean;
  held: http.ServerResponse[];
  release(): void;
  close(): Promise<void>;
}

async function startFakeGateway(): Promise<FakeGateway> {
  const fake: FakeGateway = {
    url: '',
    calls: [],
    hold: false,
    held: [],
    release() {
      fake.hold = false;
      for (const response of fake.held.splice(0)) response.writeHead(502, { 'content-type': 'application/json' }).end('{"error":"released by the test"}');
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of fake.held.splice(0)) response.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
  const server = http.createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const path = request.url ?? '';
    fake.calls.push({ path, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') });
    const json = (status: number, value: unknown) => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    if (path === '/v1/ping') return json(200, { model: 'fake' });
    if (path === '/v1/status') return json(200, { server_name: 'fake', tools: [] });
    if (fake.hold) fake.held.push(response);
    else json(502, { error: 'the fake gateway does no work' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}

/** A server that should never be called: it counts what reaches it (a delegated token would arrive here). */
async function startTrap(): Promise<{ origin: string; hits: { url: string; authorization: string | undefined }[]; close(): Promise<void> }> {
  const hits: { url: string; authorization: string | undefined }[] = [];
  const server = http.createServer((request, response) => {
    hits.push({ url: request.url ?? '', authorization: request.headers.authorization });
    request.resume();
    response.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A request with a Host (and X-Forwarded-Host) of the caller's choosing: fetch would not send one. */
function forged(app: TestApp, method: string, path: string, token: string, host: string, json?: unknown): Promise<{ status: number; body: Record<string, any> }> {
  const target = new URL(app.url);
  const payload = json === undefined ? undefined : JSON.stringify(json);
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: target.hostname,
        port: target.port,
        method,
        path,
        headers: {
          host,
          'x-forwarded-host': host,
          'x-forwarded-proto': 'http',
          authorization: `Bearer ${token}`,
          ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') }));
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

let fake: FakeGateway;
let app: TestApp;
let clock: TestClock;
let merchant: string;
let officer: { id: string; token: string };
let colleague: { id: string; token: string };
let sequence = 0;

async function caseOf(customer: string): Promise<string> {
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: customer }] });
  sequence += 1;
  const response = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: customer, event_slug: 'deposit', amount: '9000', currency: 'EUR', transaction_ref: `ctl-${process.pid}-${sequence}`, io_type: 0, event_date: hoursAgo(1) }],
  });
  if (response.status !== 200) throw new Error(response.text);
  const row = await app.context.db('cases as k').join('customers as c', 'c.id', 'k.customer_id').where('c.customer_ref', customer).first('k.id');
  return row.id as string;
}

const run = (pk: string) => `/api/mobile/data/engine/watchlist/${pk}/ai/run/`;

async function newConversation(token: string): Promise<string> {
  const created = await app.request('POST', `${A}conversations/`, { token });
  if (created.status !== 201) throw new Error(created.text);
  return created.body.data.id as string;
}

/** The user's AI jobs still queued or running (reviews and assistant turns). */
async function inFlight(userId: string): Promise<number> {
  const reviews = await app.context.db('ai_reviews').where('requested_by', userId).whereIn('status', ['queued', 'running']).count('* as n').first();
  const turns = await app.context.db('assistant_conversations').where({ user_id: userId, status: 'running' }).count('* as n').first();
  return Number(reviews!.n) + Number(turns!.n);
}

/** Lets every held job fail and waits until none of the users' jobs is in flight. */
async function drain(...userIds: string[]): Promise<void> {
  fake.release();
  for (const userId of userIds) await until('the jobs to settle', async () => (await inFlight(userId)) === 0);
}

test.before(async () => {
  fake = await startFakeGateway();
  app = await startTestApp({ WARDEN_GATEWAY_URL: fake.url, WARDEN_GATEWAY_TOKEN: GATEWAY_TOKEN });
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  const pair = async () => {
    const user = await staffUser(app, { permissions: OFFICER });
    return { id: user.id, token: (await pairDevice(app, clock, user.id)).accessToken };
  };
  officer = await pair();
  colleague = await pair();
});

test.after.always(async () => {
  await app?.close();
  await fake?.close();
});

test.serial('the MCP address the gateway is given comes from configuration or the listen address, never from the Host header', async (t) => {
  const listening = `${app.url}/api/mcp/`;
  const mcpUrls = (path: string) => fake.calls.filter((call) => call.path === path).map((call) => call.body.mcp?.url as string);

  // The status probe, an assistant turn and a review, each asked for with a forged Host.
  const status = await forged(app, 'GET', `${A}status/`, officer.token, EVIL_HOST);
  t.is(status.status, 200);
  t.like(status.body.data, { enabled: true, connected: true });
  t.deepEqual(mcpUrls('/v1/status'), [listening]);
  t.is(app.context.listenUrl, app.url, 'the test app records the address it listens on');

  const id = await newConversation(officer.token);
  const message = await forged(app, 'POST', `${A}conversations/${id}/messages/`, officer.token, EVIL_HOST, { text: 'hello' });
  t.is(message.status, 202, JSON.stringify(message.body));
  await until('the turn to reach the gateway', () => mcpUrls('/v1/turn').length === 1);
  t.deepEqual(mcpUrls('/v1/turn'), [listening]);

  const pk = await caseOf('ctl-host');
  const review = await forged(app, 'POST', run(pk), officer.token, EVIL_HOST);
  t.is(review.status, 202, JSON.stringify(review.body));
  await until('the review to reach the gateway', () => mcpUrls('/v1/review').length === 1);
  t.deepEqual(mcpUrls('/v1/review'), [listening]);

  // WARDEN_PUBLIC_URL comes before the listen address, WARDEN_MCP_URL before both.
  const original = app.context.config;
  t.teardown(() => {
    app.context.config = original;
  });
  app.context.config = { ...original, publicUrl: 'https://warden.example.com' };
  await forged(app, 'GET', `${A}status/`, officer.token, EVIL_HOST);
  t.is(mcpUrls('/v1/status').at(-1), 'https://warden.example.com/api/mcp/');
  app.context.config = { ...original, publicUrl: 'https://warden.example.com', ai: { ...original.ai, mcpUrl: 'http://mcp.internal:9000/api/mcp/' } };
  await forged(app, 'GET', `${A}status/`, officer.token, EVIL_HOST);
  t.is(mcpUrls('/v1/status').at(-1), 'http://mcp.internal:9000/api/mcp/');
  app.context.config = original;

  t.false(fake.calls.some((call) => JSON.stringify(call.body).includes('evil.example')), 'the Host header never reaches the gateway');
  await drain(officer.id);
});

test.serial('the gateway refuses an MCP address at another origin than the one it is configured with; the service still reaches its own', async (t) => {
  const llm: ScriptedLlm = await startScriptedLlm();
  const trap = await startTrap();
  const settings: GatewaySettings = { llmUrl: llm.url, llmModel: 'scripted', llmApiKey: '', token: GATEWAY_TOKEN, timeoutMs: 1500, mcpOrigin: 'http://127.0.0.1:1' };
  const gateway: RunningGateway = await startGateway(settings, 0);
  const wired = await startTestApp({ WARDEN_GATEWAY_URL: gateway.url, WARDEN_GATEWAY_TOKEN: GATEWAY_TOKEN });
  t.teardown(async () => {
    await wired.close();
    await gateway.close();
    await trap.close();
    await llm.close();
  });
  // The gateway is told where the service is (WARDEN_GATEWAY_MCP_ORIGIN for `warden gateway`).
  settings.mcpOrigin = wired.url;

  const post = (path: string, body: unknown) =>
    fetch(`${gateway.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${GATEWAY_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const foreign = [`${trap.origin}/api/mcp/`, `${wired.url.replace('127.0.0.1', 'localhost')}/api/mcp/`, `${wired.url.replace(/:(\d+)$/, (_, port) => `:${Number(port) + 1}`)}/api/mcp/`, `${trap.origin.replace('http://', 'http://127.0.0.1@')}/api/mcp/`];
  for (const url of foreign) {
    const mcp = { url, token: 'wdg_a-delegated-token' };
    for (const [path, body] of [['/v1/status', { mcp }], ['/v1/review', { mcp, model: 'engine.watchlist', pk: '1' }], ['/v1/turn', { mcp, messages: [{ role: 'user', content: 'hi' }] }]] as const) {
      const response = await post(path, body);
      t.is(response.status, 403, `${path} ${url}`);
      t.regex(((await response.json()) as { error: string }).error, /WARDEN_GATEWAY_MCP_ORIGIN/);
    }
  }
  t.deepEqual(trap.hits, [], 'nothing reached the foreign address, so no delegated token left the gateway');

  // Through the service, a Host naming the trap changes nothing: the gateway reaches the service's own MCP server.
  const user = await staffUser(wired, { permissions: OFFICER });
  const token = (await pairDevice(wired, installClock(wired), user.id)).accessToken;
  const status = await forged(wired, 'GET', `${A}status/`, token, new URL(trap.origin).host);
  t.is(status.status, 200);
  t.like(status.body.data, { enabled: true, connected: true, server_name: 'warden-backoffice' });
  t.deepEqual(trap.hits, []);
});

test.serial(`assistant turns: of ${LIMIT + 1} parallel messages from one user exactly ${LIMIT} are accepted, the next is 429 too_many_running with Retry-After; reviews share the quota`, async (t) => {
  fake.hold = true;
  t.teardown(() => fake.release());
  const ids = await Promise.all(Array.from({ length: LIMIT + 1 }, () => newConversation(officer.token)));
  const answers = await Promise.all(ids.map((id) => app.request('POST', `${A}conversations/${id}/messages/`, { token: officer.token, json: { text: 'look at my cases' } })));
  t.deepEqual(answers.map((answer) => answer.status).sort(), [...Array(LIMIT).fill(202), 429]);
  const refused = answers.find((answer) => answer.status === 429)!;
  t.is(refused.body.status, false);
  t.is(refused.body.data.reason, 'too_many_running');
  t.truthy(refused.body.message);
  t.regex(refused.headers.get('retry-after') ?? '', /^\d+$/);
  // The refused message was not stored: its conversation is as it was.
  const refusedId = ids[answers.indexOf(refused)]!;
  t.like((await app.request('GET', `${A}conversations/${refusedId}/`, { token: officer.token })).body.data, { status: 'idle', seq: 0, messages: [] });
  t.is(await inFlight(officer.id), LIMIT);

  // A review counts against the same quota; another user has their own.
  const pk = await caseOf('ctl-quota-mixed');
  const review = await app.request('POST', run(pk), { token: officer.token });
  t.is(review.status, 429);
  t.is(review.body.data.reason, 'too_many_running');
  t.regex(review.headers.get('retry-after') ?? '', /^\d+$/);
  t.is(await app.context.db('ai_reviews').where({ object_pk: pk }).count('* as n').first().then((row) => Number(row!.n)), 0);
  const other = await newConversation(colleague.token);
  t.is((await app.request('POST', `${A}conversations/${other}/messages/`, { token: colleague.token, json: { text: 'hello' } })).status, 202);

  // When the jobs end, the user may start more.
  await drain(officer.id, colleague.id);
  t.is((await app.request('POST', `${A}conversations/${refusedId}/messages/`, { token: officer.token, json: { text: 'again' } })).status, 202);
  await drain(officer.id);
});

test.serial(`AI reviews: of ${LIMIT + 1} parallel runs on different cases from one user exactly ${LIMIT} are accepted; an assistant turn beyond them is 429`, async (t) => {
  fake.hold = true;
  t.teardown(() => fake.release());
  const cases = [];
  for (let n = 0; n <= LIMIT; n++) cases.push(await caseOf(`ctl-quota-review-${n}`));
  const answers = await Promise.all(cases.map((pk) => app.request('POST', run(pk), { token: officer.token })));
  t.deepEqual(answers.map((answer) => answer.status).sort(), [...Array(LIMIT).fill(202), 429]);
  const refused = answers.find((answer) => answer.status === 429)!;
  t.like(refused.body, { status: false, data: { reason: 'too_many_running' } });
  t.regex(refused.headers.get('retry-after') ?? '', /^\d+$/);
  t.is(await inFlight(officer.id), LIMIT);

  const id = await newConversation(officer.token);
  const message = await app.request('POST', `${A}conversations/${id}/messages/`, { token: officer.token, json: { text: 'and this?' } });
  t.is(message.status, 429);
  t.is(message.body.data.reason, 'too_many_running');

  await drain(officer.id);
  t.is((await app.request('POST', run(cases[answers.indexOf(refused)]!), { token: officer.token })).status, 202);
  await drain(officer.id);
});
