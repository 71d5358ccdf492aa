import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A local server that speaks the OpenAI chat-completions protocol with scripted answers, so the
 * AI tests run offline and deterministically against the real openai client and the real gateway.
 * Each POST /v1/chat/completions takes the next step of the script: a message (text, tool calls),
 * a raw body (garbage), or 'hang' (never answers, for timeouts). A step's `before` runs (and is
 * awaited) when its request arrives, before the answer: a test holds the model there, or moves
 * its clock.
 */
export type ScriptStep =
  | { content?: string; tool_calls?: { id: string; name: string; arguments: unknown }[]; before?: () => unknown }
  | { raw: string; status?: number }
  | 'hang';

export interface ScriptedLlm {
  /** The base URL to give WARDEN_LLM_URL (ends in /v1). */
  url: string;
  /** Every request body the model received, in order. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  requests: any[];
  script(...steps: ScriptStep[]): void;
  /** Steps not yet used: a test checks it is empty at its end. */
  remaining(): number;
  close(): Promise<void>;
}

export async function startScriptedLlm(): Promise<ScriptedLlm> {
  const steps: ScriptStep[] = [];
  const requests: unknown[] = [];
  const hanging: http.ServerResponse[] = [];
  const server = http.createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    if (request.method !== 'POST' || request.url !== '/v1/chat/completions') {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    requests.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
    const step = steps.shift();
    if (!step) {
      response.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"the script has no more steps"}}');
      return;
    }
    if (step === 'hang') {
      hanging.push(response);
      return;
    }
    if ('before' in step && step.before) await step.before();
    if ('raw' in step) {
      response.writeHead(step.status ?? 200, { 'content-type': 'application/json' }).end(step.raw);
      return;
    }
    const toolCalls = step.tool_calls?.map((call) => ({
      id: call.id,
      type: 'function',
      function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
    }));
    response.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: `chatcmpl-${requests.length}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: 'scripted',
        choices: [{ index: 0, finish_reason: toolCalls?.length ? 'tool_calls' : 'stop', message: { role: 'assistant', content: step.content ?? null, ...(toolCalls?.length ? { tool_calls: toolCalls } : {}) } }],
        usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
      }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    script: (...more) => steps.push(...more),
    remaining: () => steps.length,
    close: () =>
      new Promise<void>((resolve) => {
        for (const response of hanging) response.destroy();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
