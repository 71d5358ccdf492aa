/**
 * Child process of bench/upsert-load.ts: the Warden app with customers, events and the 30
 * benchmark rules. It times each request itself (from the request event to the response's
 * finish) so the parent can tell the service time from the queueing it sees, and reports its
 * memory on request.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../src/config.ts';
import { createKnex } from '../src/db/knex.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { createApp } from '../src/app/http.ts';
import { createLogger } from '../src/logger.ts';
import { defineEvent } from '../src/modules/events/service.ts';
import { createCredential } from '../src/modules/merchant/service.ts';
import { loadRules } from '../src/modules/rules/store.ts';
import { buildContext, KEEP_ALIVE_TIMEOUT_MS } from '../src/server.ts';
import { benchmarkRules, seedCustomers } from './fixture-data.ts';

const url = process.env.BENCH_DATABASE_URL!;
const system = { type: 'system', id: 'bench' } as const;
const knex = createKnex(url, 10);
await knex.raw('drop schema if exists public cascade; create schema public');
await migrateToLatest(knex);
const context = await buildContext(loadConfig({ LOG_LEVEL: 'silent', DATABASE_URL: url }), knex, createLogger('silent'));
await defineEvent(knex, { slug: 'deposit', name: 'Deposit', type: 1, active: true }, system);
await defineEvent(knex, { slug: 'withdrawal', name: 'Withdrawal', type: 1, active: true }, system);
await loadRules(knex, await benchmarkRules(), system);
await seedCustomers(knex, 2000);
const { credential } = await createCredential(knex, { client: 'Bench', allowedIps: ['*'] }, system);
const { token } = await context.tokens.issue('merchant', credential.id, 3600);
const callback = createApp(context).callback();
let serviceTimes: number[] = [];
const server = http.createServer((request, response) => {
  const started = performance.now();
  response.once('finish', () => serviceTimes.push(performance.now() - started));
  void callback(request, response);
});
// As the service's own server: with Node's 5 s default, a keep-alive connection the load generator
// left idle could be closed by the server just as a request went out on it (one ECONNRESET in
// 180,000 requests of a 30-minute soak).
server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
process.on('message', (message: { type: string }) => {
  if (message.type === 'service-times') {
    process.send!({ type: 'service-times', times: serviceTimes });
    serviceTimes = [];
  } else if (message.type === 'memory') {
    process.send!({ type: 'memory', memory: process.memoryUsage() });
  }
});
process.send!({ type: 'ready', port: (server.address() as AddressInfo).port, token });
process.once('SIGINT', () => process.exit(0));
