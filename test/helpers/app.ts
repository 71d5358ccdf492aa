import fs from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { loadConfig, type Config } from '../../src/config.ts';
import type { AppContext } from '../../src/context.ts';
import { createApp } from '../../src/app/http.ts';
import { createLogger } from '../../src/logger.ts';
import { createCredential } from '../../src/modules/merchant/service.ts';
import { buildContext } from '../../src/server.ts';
import { createTestDatabase, joinTestDatabase, type TestDatabase } from './database.ts';
import { OPENAPI_PATH, openApiRecorder } from './openapi-check.ts';

export interface TestApp {
  url: string;
  context: AppContext;
  database: TestDatabase;
  /** JSON request helper: returns status, headers and the parsed body. */
  request(method: string, path: string, options?: RequestOptions): Promise<TestResponse>;
  /** Creates a credential (allowing every IP unless told otherwise) and returns its key and secret. */
  credential(options?: { name?: string; allowedIps?: string[] }): Promise<{ apiKey: string; apiSecret: string; id: string }>;
  /** A Bearer token for a fresh credential. */
  merchantToken(): Promise<string>;
  close(): Promise<void>;
}

export interface RequestOptions {
  json?: unknown;
  body?: string | Buffer;
  headers?: Record<string, string>;
  token?: string;
}

export interface TestResponse {
  status: number;
  headers: Headers;
  // Tests read fields freely from the parsed envelope.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  text: string;
}

/**
 * An app on a fresh test database, or with DATABASE_URL_OVERRIDE on another app's database (a
 * second node); only the app that created its database drops it.
 */
export async function startTestApp(env: Record<string, string> = {}): Promise<TestApp> {
  const { DATABASE_URL_OVERRIDE: sharedUrl, ...settings } = env;
  const database = sharedUrl ? await joinTestDatabase(sharedUrl) : await createTestDatabase();
  env = settings;
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-test-data-'));
  const config: Config = loadConfig({ LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent', WARDEN_DATA_DIR: dataDir, WARDEN_JOB_MAINTENANCE_SECONDS: '1', ...env });
  const context = await buildContext(config, database.knex, createLogger(config.logLevel));
  const koa = createApp(context);
  // Every answer of every test is checked against the OpenAPI document (test/run.ts reports).
  const recorder = openApiRecorder();
  koa.middleware.unshift(recorder.middleware);
  const server = http.createServer(koa.callback());
  await context.documents.attach(server, env.REDIS_URL);
  await context.live.attach(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  context.listenUrl = url;
  recorder.load(await (await fetch(url + OPENAPI_PATH)).json());

  const request = async (method: string, path: string, options: RequestOptions = {}): Promise<TestResponse> => {
    const headers: Record<string, string> = { ...options.headers };
    let body: string | Buffer | undefined = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['content-type'] ??= 'application/json';
    }
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    // a copy as a plain Uint8Array: preact's JSX types bring in the DOM's fetch types, where a Buffer is no body
    const payload = typeof body === 'string' || body === undefined ? body : new Uint8Array(body);
    const response = await fetch(url + path, { method, headers, body: payload });
    const text = await response.text();
    let parsed: unknown = undefined;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    return { status: response.status, headers: response.headers, body: parsed, text };
  };

  const credential = async (options: { name?: string; allowedIps?: string[] } = {}) => {
    const { credential: created, apiSecret } = await createCredential(
      database.knex,
      { client: options.name ?? 'Test Merchant', allowedIps: options.allowedIps ?? ['*'] },
      { type: 'operator', id: 'test' },
    );
    return { apiKey: created.api_key, apiSecret, id: created.id };
  };

  return {
    url,
    context,
    database,
    request,
    credential,
    async merchantToken() {
      const { apiKey, apiSecret } = await credential();
      const response = await request('POST', '/api/merchant/auth/token/', { json: { api_key: apiKey, api_secret: apiSecret } });
      if (response.status !== 200) throw new Error(`token request failed: ${response.text}`);
      return response.body.data.access_token as string;
    },
    async close() {
      server.closeAllConnections();
      const closed = new Promise((resolve) => server.close(resolve));
      // The context ends the websockets, which the HTTP server does not close and would wait for.
      await context.close();
      await closed;
      await database.drop();
      await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}
