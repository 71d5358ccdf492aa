import type { Config } from '../../config.ts';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { MCP_PATH } from './mcp-server.ts';

/** The gateway is not configured: AI review and the assistant answer 503 with this reason. */
export const NOT_INSTALLED = 'The AI gateway is not installed (WARDEN_GATEWAY_URL is not set).';

/** Whatever went wrong reaching the gateway or below it: 502 to a caller, the stored reason of a job. */
export class GatewayError extends HttpError {
  constructor(message: string, readonly gatewayStatus: number | null = null) {
    super(502, message, 'gateway_error');
  }
}

export function requireGateway(config: Config): string {
  if (!config.ai.gatewayUrl) throw new HttpError(503, NOT_INSTALLED, 'gateway_not_installed');
  return config.ai.gatewayUrl;
}

/**
 * Where the gateway reaches this service's MCP server, from configuration only: WARDEN_MCP_URL,
 * else WARDEN_PUBLIC_URL + /api/mcp/, else the address this process listens on. Never the Host
 * (or X-Forwarded-Host) of a request: any staff user could name an address of their choosing and
 * the gateway would post JSON-RPC with the user's delegated token there. The gateway refuses an
 * address at another origin than its WARDEN_GATEWAY_MCP_ORIGIN as well.
 */
export function mcpUrlFor(app: Pick<AppContext, 'config' | 'listenUrl'>): string {
  const { config } = app;
  if (config.ai.mcpUrl) return config.ai.mcpUrl;
  if (config.publicUrl) return `${config.publicUrl}${MCP_PATH}`;
  if (app.listenUrl) return `${app.listenUrl}${MCP_PATH}`;
  throw new HttpError(503, 'The address of the MCP server is not known: set WARDEN_MCP_URL or WARDEN_PUBLIC_URL.', 'mcp_url_unknown');
}

async function post(config: Config, path: string, body: unknown): Promise<Response> {
  const base = requireGateway(config);
  try {
    return await fetch(`${base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${config.ai.gatewayToken}` },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(config.ai.timeoutMs),
    });
  } catch (error) {
    throw new GatewayError(`The AI gateway cannot be reached: ${reason(config, error)}.`);
  }
}

function reason(config: Config, error: unknown): string {
  return (error as Error).name === 'TimeoutError' ? `no answer within ${config.ai.timeoutMs / 1000} seconds` : ((error as { cause?: Error }).cause?.message ?? (error as Error).message);
}

/** A JSON answer of the gateway, or its error (401 named: the token the service presents is wrong). */
async function answerOf<T>(config: Config, response: Response): Promise<T> {
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    throw new GatewayError(`The AI gateway's answer was cut off: ${reason(config, error)}.`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new GatewayError(`The AI gateway answered ${response.status} without JSON.`, response.status);
  }
  if (response.status === 401) throw new GatewayError('The AI gateway refused the service (401): check WARDEN_GATEWAY_TOKEN on both sides.', 401);
  if (!response.ok) {
    const message = (parsed as { error?: unknown })?.error;
    throw new GatewayError(typeof message === 'string' ? message : `The AI gateway answered ${response.status}.`, response.status);
  }
  return parsed as T;
}

/** One POST to the gateway; every failure is a GatewayError with a reason a person can act on, never a 500. */
export async function callGateway<T>(config: Config, path: string, body: unknown): Promise<T> {
  return answerOf<T>(config, await post(config, path, body));
}

/** A step of long gateway work as it happens (the assistant's progress). */
export interface GatewayProgress {
  phase: string;
  label: string;
}

/**
 * A POST whose answer the gateway streams as JSON lines: {progress} as the work moves on (handed
 * to onProgress in order), then {result} or {error, status}. An answer that is not a stream (a
 * refusal before the work began) is read as callGateway reads it.
 */
export async function streamGateway<T>(config: Config, path: string, body: unknown, onProgress: (progress: GatewayProgress) => Promise<void>): Promise<T> {
  const response = await post(config, path, body);
  if (!response.ok || !response.body || !response.headers.get('content-type')?.includes('application/x-ndjson')) return answerOf<T>(config, response);
  const reader = response.body.getReader();
  const read = async () => {
    try {
      return await reader.read();
    } catch (error) {
      throw new GatewayError(`The AI gateway's answer was cut off: ${reason(config, error)}.`);
    }
  };
  const decoder = new TextDecoder();
  let pending = '';
  try {
    for (let chunk = await read(); !chunk.done; chunk = await read()) {
      pending += decoder.decode(chunk.value, { stream: true });
      let end: number;
      while ((end = pending.indexOf('\n')) >= 0) {
        const line = pending.slice(0, end).trim();
        pending = pending.slice(end + 1);
        if (!line) continue;
        let event: { progress?: GatewayProgress; result?: T; error?: unknown; status?: unknown };
        try {
          event = JSON.parse(line) as typeof event;
        } catch {
          throw new GatewayError('The AI gateway streamed a line that is not JSON.');
        }
        if (event.progress) await onProgress({ phase: String(event.progress.phase), label: String(event.progress.label) });
        else if (event.result !== undefined) return event.result;
        else if (event.error !== undefined) throw new GatewayError(String(event.error), typeof event.status === 'number' ? event.status : null);
      }
    }
  } finally {
    // Whatever ended the reading, the connection is let go.
    void reader.cancel().catch(() => {});
  }
  throw new GatewayError("The AI gateway's answer ended before its result.");
}

/** Before work is queued: a gateway that cannot be reached or refuses the service is a 502 now, not a failed job later. */
export async function pingGateway(config: Config): Promise<void> {
  await callGateway(config, '/v1/ping', {});
}
