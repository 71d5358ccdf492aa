import test from 'ava';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, staffUser, type TestClock } from '../helpers/mobile.ts';
import { startScriptedLlm, type ScriptedLlm } from '../helpers/scripted-llm.ts';
import { ServiceMcp } from '../../src/gateway/mcp.ts';
import { delegate } from '../../src/modules/ai/delegation.ts';
import { sweepConversations } from '../../src/modules/assistant/service.ts';

let app: TestApp;
let clock: TestClock;

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});

test.after.always(async () => {
  await app?.close();
});

const mcpUrl = () => `${app.url}/api/mcp/`;

test.serial('the MCP server lists only the models the delegated user may view and refuses the others; reading tools are marked read-only', async (t) => {
  const viewer = await staffUser(app, { permissions: ['engine.view_watchlist'] });
  const { token } = await delegate(app.context.db, viewer.id, 60, clock.now);
  const mcp = await ServiceMcp.connect({ url: mcpUrl(), token }, 5000);
  try {
    t.is(mcp.serverName, 'warden-backoffice');
    t.deepEqual(mcp.tools.filter((tool) => tool.writes).map((tool) => tool.name).sort(), ['add_decision', 'change_case', 'update_record']);
    const models = JSON.parse((await mcp.call('list_models', {}, 5000)).text).models.map((model: { model: string }) => model.model);
    t.deepEqual(models, ['engine.watchlist']);
    const refused = await mcp.call('search_records', { model: 'customer.customer' }, 5000);
    t.true(refused.isError);
    t.regex(refused.text, /may not view customer\.customer/);
    const missing = await mcp.call('get_record', { model: 'engine.watchlist', pk: '00000000-0000-0000-0000-000000000000' }, 5000);
    t.true(missing.isError);
    const bad = await mcp.call('search_records', { model: 'engine.watchlist', filters: { nonsense__exact: '1' } }, 5000);
    t.true(bad.isError, 'a bad filter is the tool refusing, not a transport error');
  } finally {
    await mcp.close();
  }
});

test.serial('a delegated token that expired, or a made-up one, is refused with 401', async (t) => {
  const viewer = await staffUser(app, { permissions: ['engine.view_watchlist'] });
  const { token } = await delegate(app.context.db, viewer.id, 60, clock.now);
  clock.advance(61);
  await t.throwsAsync(ServiceMcp.connect({ url: mcpUrl(), token }, 5000));
  t.truthy((await app.context.db('ai_delegations').where({ user_id: viewer.id }).first('refused_at')).refused_at, 'an expired token presented is recorded as refused (needs_reauth)');
  await t.throwsAsync(ServiceMcp.connect({ url: mcpUrl(), token: 'wdg_made-up' }, 5000));
  const direct = await fetch(mcpUrl(), { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{}' });
  t.is(direct.status, 401);
});

test.serial('conversations untouched for longer than the retention are swept; newer ones stay', async (t) => {
  const user = await staffUser(app);
  const [old] = await app.context.db('assistant_conversations').insert({ user_id: user.id, updated_at: new Date(clock.now.getTime() - 31 * 86_400_000) }).returning('id');
  const [recent] = await app.context.db('assistant_conversations').insert({ user_id: user.id, updated_at: new Date(clock.now.getTime() - 29 * 86_400_000) }).returning('id');
  await app.context.db('assistant_messages').insert({ conversation_id: old.id, seq: 1, role: 'user', content: 'old' });
  t.is(await sweepConversations(app.context), 1);
  t.deepEqual((await app.context.db('assistant_conversations').where('user_id', user.id).select('id')).map((row) => row.id), [recent.id]);
  t.is(Number((await app.context.db('assistant_messages').where('conversation_id', old.id).count('* as n').first())!.n), 0);
});

test.serial('warden gateway runs as its own process: it refuses a missing setting, and serves /v1/ping with the token only', async (t) => {
  const root = path.resolve(import.meta.dirname, '../..');
  const run = (env: Record<string, string>) => spawn(process.execPath, ['bin/warden.js', 'gateway', '--port', '0'], { cwd: root, env: { ...process.env, ...env } });
  const failed = run({ WARDEN_LLM_URL: '', WARDEN_LLM_MODEL: '', WARDEN_GATEWAY_TOKEN: '', WARDEN_GATEWAY_MCP_ORIGIN: 'http://127.0.0.1:8080/api/mcp/' });
  let failure = '';
  failed.stderr.on('data', (chunk) => (failure += chunk));
  t.is(await new Promise((resolve) => failed.on('exit', resolve)), 1);
  t.regex(failure, /WARDEN_LLM_URL/);
  t.regex(failure, /WARDEN_GATEWAY_MCP_ORIGIN: must be the http\(s\):\/\/ origin/, 'an origin, not an address with a path');

  const llm: ScriptedLlm = await startScriptedLlm();
  const token = 'a-gateway-token-of-the-test-0001';
  const gateway = run({ WARDEN_LLM_URL: llm.url, WARDEN_LLM_MODEL: 'scripted', WARDEN_GATEWAY_TOKEN: token, WARDEN_GATEWAY_MCP_ORIGIN: '' });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let text = '';
      gateway.stderr.on('data', (chunk) => {
        text += chunk;
        const match = /"gateway":"([^"]+)"/.exec(text);
        if (match) resolve(match[1]!);
      });
      gateway.on('exit', () => reject(new Error(`the gateway exited: ${text}`)));
    });
    const ping = await fetch(`${url}/v1/ping`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{}' });
    t.deepEqual(await ping.json(), { model: 'scripted' });
    t.is((await fetch(`${url}/v1/ping`, { method: 'POST', headers: { authorization: 'Bearer wrong' }, body: '{}' })).status, 401);
    const bad = await fetch(`${url}/v1/review`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: '{"mcp": 1}' });
    t.is(bad.status, 400);
    // Unset, WARDEN_GATEWAY_MCP_ORIGIN is where a service with the default HOST and PORT listens; any other MCP address is refused.
    const foreign = await fetch(`${url}/v1/status`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: JSON.stringify({ mcp: { url: 'http://evil.example/api/mcp/', token: 'wdg_x' } }) });
    t.is(foreign.status, 403);
    t.regex(((await foreign.json()) as { error: string }).error, /WARDEN_GATEWAY_MCP_ORIGIN is http:\/\/127\.0\.0\.1:8080/);
  } finally {
    const exited = new Promise((resolve) => gateway.on('exit', resolve));
    gateway.kill('SIGTERM');
    t.is(await exited, 0);
    await llm.close();
  }
});
