import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { ServiceMcp } from './mcp.ts';
import { ModelError, reviewCase, runTurn, type GatewaySettings, type TurnMessage } from './model.ts';

/**
 * The gateway: a small HTTP service between Warden and the model. Warden sends it a job (a review,
 * an assistant turn) with the address of its MCP server and a delegated token; the gateway reads and
 * writes the back office only through those MCP tools, as that user. It keeps no state.
 *
 *   POST /v1/ping    {}                             -> {model} (the service checks the gateway before it queues work)
 *   POST /v1/status  {mcp}                          -> {server_name, tools}
 *   POST /v1/review  {mcp, model, pk, knowledge}     -> {result, usage}
 *   POST /v1/turn    {mcp, messages, answer}          -> JSON lines: {progress: {phase, label}} as the turn
 *                                                       moves on, then {result: {messages, pending_call, usage}}
 *                                                       or {error, status}
 *
 * Errors answer {error} with 401 (bad token), 400 (bad request), 403 (mcp.url is not at the
 * origin of WARDEN_GATEWAY_MCP_ORIGIN: nothing is sent there), 422 (the model's fault),
 * 502 (the MCP server or the model unreachable), 504 (a timeout); a turn that already streams
 * ends with its error line instead.
 */

const mcpTarget = z.object({ url: z.url(), token: z.string().min(1) });
const statusRequest = z.object({ mcp: mcpTarget });
const reviewRequest = z.object({
  mcp: mcpTarget,
  model: z.string().min(1),
  pk: z.string().min(1),
  knowledge: z.array(z.object({ id: z.string(), note: z.string() })).default([]),
});
const turnRequest = z.object({
  mcp: mcpTarget,
  messages: z.array(z.record(z.string(), z.unknown())),
  answer: z
    .object({ call: z.object({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()) }), approve: z.boolean() })
    .nullable()
    .default(null),
});

class Refusal extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function sameToken(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

async function readJson(request: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > 8 * 1024 * 1024) throw new Refusal(413, 'The request body is too large.');
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
  } catch {
    throw new Refusal(400, 'The request body is not JSON.');
  }
}

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (!result.success) throw new Refusal(400, `Invalid request: ${result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
  return result.data;
}

/** Maps what went wrong below the gateway to a status and a reason a person can act on. */
function classify(error: unknown): { status: number; message: string } {
  if (error instanceof Refusal) return { status: error.status, message: error.message };
  if (error instanceof ModelError) return { status: 422, message: error.message };
  const name = (error as Error)?.name ?? '';
  const message = (error as Error)?.message ?? String(error);
  if (/timeout|timed out/i.test(name) || /timeout|timed out/i.test(message)) return { status: 504, message: `Timed out: ${message}` };
  return { status: 502, message };
}

/** The origin of an http(s) address; null for anything else. */
function originOf(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.origin : null;
  } catch {
    return null;
  }
}

/**
 * The MCP address of a job must be at the service's origin (WARDEN_GATEWAY_MCP_ORIGIN): the
 * delegated token goes nowhere else, whatever address the job names.
 */
function checkMcpOrigin(settings: GatewaySettings, target: z.infer<typeof mcpTarget>): void {
  const expected = originOf(settings.mcpOrigin);
  const given = originOf(target.url);
  if (!expected || given !== expected) {
    throw new Refusal(403, `The MCP address ${given ?? 'given'} is not at the service's origin this gateway serves (WARDEN_GATEWAY_MCP_ORIGIN is ${expected ?? 'not a valid origin'}).`);
  }
}

async function withMcp<T>(settings: GatewaySettings, target: z.infer<typeof mcpTarget>, work: (mcp: ServiceMcp) => Promise<T>): Promise<T> {
  checkMcpOrigin(settings, target);
  let mcp: ServiceMcp;
  try {
    mcp = await ServiceMcp.connect(target, settings.timeoutMs);
  } catch (error) {
    throw new Refusal(502, `The service's MCP server refused or could not be reached: ${(error as Error).message}`);
  }
  try {
    return await work(mcp);
  } finally {
    await mcp.close().catch(() => {});
  }
}

/** The answer was streamed to the response already. */
const STREAMED = Symbol('streamed');

/** Streams a turn as JSON lines: its progress as it goes, then its result or its error. */
async function streamTurn(settings: GatewaySettings, client: ServiceMcp, input: z.infer<typeof turnRequest>, response: http.ServerResponse): Promise<typeof STREAMED> {
  response.writeHead(200, { 'content-type': 'application/x-ndjson' });
  const line = (value: unknown) => response.write(`${JSON.stringify(value)}\n`);
  try {
    line({ result: await runTurn(settings, client, input.messages as unknown as TurnMessage[], input.answer, (phase, label) => line({ progress: { phase, label } })) });
  } catch (error) {
    const { status, message } = classify(error);
    line({ error: message, status });
  }
  response.end();
  return STREAMED;
}

async function handle(settings: GatewaySettings, request: http.IncomingMessage, response: http.ServerResponse): Promise<unknown> {
  const authorization = request.headers.authorization ?? '';
  const token = /^Bearer\s+(\S+)$/i.exec(authorization)?.[1] ?? '';
  if (!settings.token || !sameToken(token, settings.token)) throw new Refusal(401, 'Invalid gateway token.');
  if (request.method !== 'POST') throw new Refusal(405, 'Only POST is served.');
  const body = await readJson(request);
  switch (request.url) {
    case '/v1/ping':
      return { model: settings.llmModel };
    case '/v1/status': {
      const { mcp } = parse(statusRequest, body);
      return withMcp(settings, mcp, async (client) => ({ server_name: client.serverName, tools: client.tools.map((tool) => tool.name), model: settings.llmModel }));
    }
    case '/v1/review': {
      const input = parse(reviewRequest, body);
      return withMcp(settings, input.mcp, (client) => reviewCase(settings, client, input));
    }
    case '/v1/turn': {
      const input = parse(turnRequest, body);
      return withMcp(settings, input.mcp, (client) => streamTurn(settings, client, input, response));
    }
    default:
      throw new Refusal(404, `No gateway endpoint ${request.url}.`);
  }
}

export interface RunningGateway {
  url: string;
  close(): Promise<void>;
}

export async function startGateway(settings: GatewaySettings, port: number, host = '127.0.0.1'): Promise<RunningGateway> {
  const server = http.createServer((request, response) => {
    handle(settings, request, response).then(
      (data) => {
        if (data === STREAMED) return;
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify(data));
      },
      (error: unknown) => {
        const { status, message } = classify(error);
        response.writeHead(status, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: message }));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${host}:${address.port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
