import { z } from 'zod';
import { startGateway } from '../gateway/server.ts';
import { CliError, parseOptions } from './options.ts';

/** Where the service listens with its defaults (HOST 0.0.0.0, PORT 8080), as it tells the gateway. */
export const DEFAULT_MCP_ORIGIN = 'http://127.0.0.1:8080';

const gatewayEnvironment = z.object({
  WARDEN_LLM_URL: z.string().regex(/^https?:\/\//, 'must be the http(s):// address of an OpenAI-compatible API (for example http://localhost:11434/v1)'),
  WARDEN_LLM_MODEL: z.string().min(1, 'must name the model'),
  WARDEN_LLM_API_KEY: z.string().default(''),
  WARDEN_GATEWAY_TOKEN: z.string().min(16, 'must be at least 16 characters (the service presents it)'),
  WARDEN_LLM_TIMEOUT_SECONDS: z.coerce.number().int().positive().max(3600).default(60),
  /**
   * The only origin the gateway sends a delegated token to: the service's MCP server. The default
   * is where a service with the default HOST and PORT listens (its MCP address when neither
   * WARDEN_MCP_URL nor WARDEN_PUBLIC_URL is set); set it to the origin of either when they are.
   */
  WARDEN_GATEWAY_MCP_ORIGIN: z
    .string()
    .regex(/^https?:\/\/[^/?#\s@]+\/?$/, 'must be the http(s):// origin of the service (scheme, host and port, no path), for example http://127.0.0.1:8080')
    .refine((value) => URL.canParse(value), 'is not a valid address')
    .default(DEFAULT_MCP_ORIGIN),
});

/** warden gateway --port P [--host H]: the AI gateway as its own process, until SIGINT or SIGTERM. */
export async function gatewayCommand(args: string[]): Promise<unknown> {
  const { values } = parseOptions(args, { port: { type: 'string' }, host: { type: 'string' } });
  const port = Number(values.port);
  if (!values.port || !Number.isInteger(port) || port < 0 || port > 65535) throw new CliError('gateway needs --port P (0-65535)', 2);
  const parsed = gatewayEnvironment.safeParse(
    Object.fromEntries(Object.keys(gatewayEnvironment.shape).map((key) => [key, process.env[key] === '' ? undefined : process.env[key]])),
  );
  if (!parsed.success) throw new CliError(`Invalid configuration:\n  ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('\n  ')}`);
  const env = parsed.data;
  const gateway = await startGateway(
    {
      llmUrl: env.WARDEN_LLM_URL,
      llmModel: env.WARDEN_LLM_MODEL,
      llmApiKey: env.WARDEN_LLM_API_KEY,
      token: env.WARDEN_GATEWAY_TOKEN,
      timeoutMs: env.WARDEN_LLM_TIMEOUT_SECONDS * 1000,
      mcpOrigin: new URL(env.WARDEN_GATEWAY_MCP_ORIGIN).origin,
    },
    port,
    values.host ?? '127.0.0.1',
  );
  console.error(JSON.stringify({ gateway: gateway.url, model: env.WARDEN_LLM_MODEL, mcp_origin: new URL(env.WARDEN_GATEWAY_MCP_ORIGIN).origin }));
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await gateway.close();
  return { stopped: true, url: gateway.url };
}
