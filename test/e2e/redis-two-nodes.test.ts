/**
 * Two server processes on one database share websocket messages through Redis (the fan-out,
 * src/realtime/fanout.ts): a socket.io client registered on node B hears a verification processed by node A.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { startTestApp } from '../helpers/app.ts';
import { defineTestFlow, openSession, registeredClient, upload, waitFor } from '../helpers/kyc.ts';

const redisUrl = process.env.REDIS_URL;
if (!redisUrl) console.log('redis-two-nodes: REDIS_URL is not set; the two-node socket.io test is skipped.');
const withRedis = redisUrl ? test : test.skip;

withRedis('a result processed on node A reaches a client registered on node B', async (t) => {
  const nodeA = await startTestApp({ REDIS_URL: redisUrl! });
  t.teardown(() => nodeA.close());
  // Node B serves the same database: a second context and HTTP server over it.
  const nodeB = await startTestApp({ REDIS_URL: redisUrl!, DATABASE_URL_OVERRIDE: nodeA.database.url });
  t.teardown(() => nodeB.close());
  const token = await nodeA.merchantToken();
  await defineTestFlow(nodeA.context, 'passport', ['passport_mrz_page'], { default: true });
  const session = await openSession(nodeA, token, { customer_ref: 'redis-1' });
  const client = await registeredClient(nodeB.url, session.endpoint_token);
  t.teardown(() => client.socket.close());
  t.is(client.reply.event, 'registered');
  // Only node A works jobs here, so the message must cross to B through Redis.
  await nodeB.context.jobs.stop();
  const bytes = await fs.readFile(path.resolve(import.meta.dirname, '../fixtures/mrz/td3-flat.jpg'));
  const uploaded = await upload(nodeA, '/api/document/upload_document/', { token: session.endpoint_token, artifact_type: 'passport_mrz_page', file: { bytes, name: 'p.jpg', type: 'image/jpeg' } });
  t.is(uploaded.status, 200);
  const message = await waitFor(() => client.messages[0] as { data: { type: string; to: string } } | undefined, 60_000);
  t.is(message.data.type, 'mrz_verification_result');
  t.is(message.data.to, session.session_id);
});
