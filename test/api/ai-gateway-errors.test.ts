import test from 'ava';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, pairDevice, staffUser } from '../helpers/mobile.ts';
import { startGateway, type RunningGateway } from '../../src/gateway/server.ts';

const A = '/api/mobile/assistant/';
const CASE = '00000000-0000-0000-0000-000000000001';
let bare: TestApp;
let wired: TestApp;
let gateway: RunningGateway;
let bareToken: string;
let wiredToken: string;

async function tokenFor(app: TestApp): Promise<string> {
  const user = await staffUser(app, { permissions: ['engine.view_watchlist', 'engine.change_watchlist', 'customer.view_customer'] });
  return (await pairDevice(app, installClock(app), user.id)).accessToken;
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test.before(async () => {
  // The gateway runs with another token than the service presents: every call is its 401.
  // It refuses before it would reach any MCP server, so the origin it allows does not matter here.
  gateway = await startGateway({ llmUrl: 'http://127.0.0.1:9/v1', llmModel: 'none', llmApiKey: '', token: 'the-gateway-expects-this-token', timeoutMs: 1000, mcpOrigin: 'http://127.0.0.1:1' }, 0);
  bare = await startTestApp();
  wired = await startTestApp({ WARDEN_GATEWAY_URL: gateway.url, WARDEN_GATEWAY_TOKEN: 'but-the-service-presents-this-one' });
  bareToken = await tokenFor(bare);
  wiredToken = await tokenFor(wired);
});

test.after.always(async () => {
  await bare?.close();
  await wired?.close();
  await gateway?.close();
});

test('without WARDEN_GATEWAY_URL: status is 200 with enabled false and the reason; every other AI and assistant endpoint is 503 with it, but the AI block, read from the stored reviews', async (t) => {
  const status = await bare.request('GET', `${A}status/`, { token: bareToken });
  t.is(status.status, 200);
  t.like(status.body.data, { enabled: false, connected: false, retention_days: 30 });
  t.regex(status.body.data.reason, /WARDEN_GATEWAY_URL/);
  const calls: [string, string][] = [
    ['GET', `${A}conversations/`], ['POST', `${A}conversations/`], ['GET', `${A}conversations/${CASE}/`], ['DELETE', `${A}conversations/${CASE}/`],
    ['POST', `${A}conversations/${CASE}/messages/`], ['POST', `${A}conversations/${CASE}/approval/`],
    ['POST', `/api/mobile/data/engine/watchlist/${CASE}/ai/run/`], ['POST', `/api/mobile/data/engine/watchlist/${CASE}/ai/feedback/`],
  ];
  // The AI block needs no gateway: an unknown case is a 404 then, not a 503.
  t.is((await bare.request('GET', `/api/mobile/data/engine/watchlist/${CASE}/ai/`, { token: bareToken })).status, 404);
  for (const [method, path] of calls) {
    const response = await bare.request(method, path, { token: bareToken, ...(method === 'POST' ? { json: {} } : {}) });
    t.is(response.status, 503, `${method} ${path}`);
    t.false(response.body.status);
    t.regex(response.body.message, /not installed/);
  }
  t.is((await bare.request('GET', `${A}status/`)).status, 401, 'the token is checked first');
  const paths = (await bare.request('GET', '/api/openapi.json')).body.paths;
  t.deepEqual(Object.keys(paths['/api/mobile/assistant/conversations/{id}/']).sort(), ['delete', 'get']);
  t.truthy(paths['/api/mobile/data/{app}/{model}/{pk}/ai/run/'].post.responses['502']);
});

test.serial('a gateway that answers 401 gives 502 (status: connected false with the reason); an unreachable one gives 502 too, never a 500', async (t) => {
  const status = await wired.request('GET', `${A}status/`, { token: wiredToken });
  t.is(status.status, 200);
  t.like(status.body.data, { enabled: true, connected: false, needs_reauth: true });
  t.regex(status.body.data.reason, /401/);
  // Creating a conversation asks the gateway first: its 401 is a 502 as well.
  const creation = await wired.request('POST', `${A}conversations/`, { token: wiredToken });
  t.is(creation.status, 502);
  t.regex(creation.body.message, /401/);
  const owner = (await wired.context.db('mobile_devices').orderBy('created_at', 'desc').first('user_id')).user_id as string;
  const [created] = (await wired.context.db('assistant_conversations').insert({ user_id: owner }).returning('id')) as { id: string }[];
  const conversation = { body: { data: { id: created!.id } } };
  const refused = await wired.request('POST', `${A}conversations/${conversation.body.data.id}/messages/`, { token: wiredToken, json: { text: 'hello' } });
  t.is(refused.status, 502);
  t.regex(refused.body.message, /401/);

  const original = wired.context.config;
  wired.context.config = { ...original, ai: { ...original.ai, gatewayUrl: `http://127.0.0.1:${await closedPort()}` } };
  try {
    const unreachable = await wired.request('POST', `${A}conversations/${conversation.body.data.id}/messages/`, { token: wiredToken, json: { text: 'hello' } });
    t.is(unreachable.status, 502);
    t.regex(unreachable.body.message, /cannot be reached/);
    const offline = await wired.request('GET', `${A}status/`, { token: wiredToken });
    t.like(offline.body.data, { enabled: true, connected: false });
  } finally {
    wired.context.config = original;
  }
  // Nothing was queued: the conversation is still idle and empty.
  t.like(await wired.context.db('assistant_conversations').where({ id: conversation.body.data.id }).first('status', 'seq'), { status: 'idle', seq: 0 });
});

test.serial('a gateway that hangs: the status says so, a turn that stops mid-stream and a review that gets no answer fail with the reason, never a 500', async (t) => {
  // Answers the ping (so work is queued), streams one progress line of a turn and then nothing, never answers a review or a status.
  const held: http.ServerResponse[] = [];
  const hanging = http.createServer((request, response) => {
    request.resume();
    if (request.url === '/v1/ping') {
      response.writeHead(200, { 'content-type': 'application/json' }).end('{"model":"stuck"}');
      return;
    }
    if (request.url === '/v1/turn') {
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.write(`${JSON.stringify({ progress: { phase: 'model', label: 'The assistant is thinking' } })}\n`);
    }
    held.push(response);
  });
  await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', () => resolve()));
  const original = wired.context.config;
  wired.context.config = { ...original, ai: { ...original.ai, gatewayUrl: `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`, timeoutMs: 1000 } };
  t.teardown(async () => {
    wired.context.config = original;
    for (const response of held) response.destroy();
    await new Promise((resolve) => hanging.close(resolve));
  });

  const status = await wired.request('GET', `${A}status/`, { token: wiredToken });
  t.is(status.status, 200);
  t.like(status.body.data, { enabled: true, connected: false, needs_reauth: false });
  t.regex(status.body.data.reason, /no answer within 1 seconds/);

  const conversation = (await wired.request('POST', `${A}conversations/`, { token: wiredToken })).body.data.id;
  t.is((await wired.request('POST', `${A}conversations/${conversation}/messages/`, { token: wiredToken, json: { text: 'hello' } })).status, 202);
  let turn = (await wired.request('GET', `${A}conversations/${conversation}/`, { token: wiredToken })).body.data;
  const seen = new Set<string>();
  for (let i = 0; i < 10 && turn.status === 'running'; i++) {
    if (turn.progress) seen.add(turn.progress.phase);
    turn = (await wired.request('GET', `${A}conversations/${conversation}/?after=${turn.seq}&tick=${turn.tick}&wait=5`, { token: wiredToken })).body.data;
  }
  t.is(turn.status, 'error');
  t.regex(turn.error, /cut off: no answer within 1 seconds/);
  t.true(seen.has('model'), `the streamed phase was shown (${[...seen].join(', ')})`);

  await wired.request('POST', '/api/customer/upsert/', { token: await wired.merchantToken(), json: [{ customer_ref: 'stuck-1' }] });
  const customer = await wired.context.db('customers').where({ customer_ref: 'stuck-1' }).first('id');
  const [caseRow] = await wired.context.db('cases').insert({ customer_id: customer.id }).returning('id');
  const ai = `/api/mobile/data/engine/watchlist/${caseRow.id}/ai/`;
  t.is((await wired.request('POST', `${ai}run/`, { token: wiredToken })).status, 202);
  let block = (await wired.request('GET', ai, { token: wiredToken })).body.data;
  for (let i = 0; i < 50 && block.in_flight; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    block = (await wired.request('GET', ai, { token: wiredToken })).body.data;
  }
  t.is(block.status, 'failed');
  t.regex(block.warnings.join(' '), /no answer within 1 seconds/);
});
