/**
 * Child process of bench/token-check.ts: serves a bare Koa hello-world and the Warden app side by
 * side, so the load generator in the parent does not share an event loop with either.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createApp } from '../src/app/http.ts';
import { createLogger } from '../src/logger.ts';
import { createCredential } from '../src/modules/merchant/service.ts';
import { buildContext } from '../src/server.ts';

const url = process.env.BENCH_DATABASE_URL!;
const config = loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: url });
const knex = createKnex(url, 10);
await migrateToLatest(knex);
const context = await buildContext(config, knex, createLogger('silent'));
const { credential } = await createCredential(knex, { client: 'Bench', allowedIps: ['*'] }, { type: 'system', id: 'bench' });
const { token } = await context.tokens.issue('merchant', credential.id, 3600);

const bare = new Koa();
bare.use((ctx) => {
  ctx.body = { status: true, message: 'hello', data: {} };
});

async function listen(handler: http.RequestListener): Promise<number> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return (server.address() as AddressInfo).port;
}

const barePort = await listen(bare.callback());
const wardenPort = await listen(createApp(context).callback());
process.send!({ barePort, wardenPort, token });
