import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/** Where the service's MCP server is and the delegated token the gateway presents there (one staff user's). */
export interface McpTarget {
  url: string;
  token: string;
}

export interface McpTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** A tool that changes data: a turn stops before it until the user approves. */
  writes: boolean;
}

/** One MCP session with the service, as the conversation's user. */
export class ServiceMcp {
  private constructor(
    private readonly client: Client,
    readonly serverName: string,
    readonly tools: McpTool[],
  ) {}

  static async connect(target: McpTarget, timeoutMs: number): Promise<ServiceMcp> {
    const client = new Client({ name: 'warden-gateway', version: '1' });
    const transport = new StreamableHTTPClientTransport(new URL(target.url), {
      requestInit: { headers: { authorization: `Bearer ${target.token}` } },
    });
    await client.connect(transport, { timeout: timeoutMs });
    const listed = await client.listTools(undefined, { timeout: timeoutMs });
    const tools = listed.tools.map((tool) => ({
      name: tool.name,
      description: tool.description ?? '',
      inputSchema: tool.inputSchema as Record<string, unknown>,
      // Unannotated tools count as writing: the safe side is to ask.
      writes: tool.annotations?.readOnlyHint !== true,
    }));
    return new ServiceMcp(client, client.getServerVersion()?.name ?? 'warden', tools);
  }

  /** Calls a tool and gives its text; a tool's refusal (isError) is text for the model, not an exception. */
  async call(name: string, args: Record<string, unknown>, timeoutMs: number): Promise<{ text: string; isError: boolean; structured: unknown }> {
    let result: Awaited<ReturnType<Client['callTool']>>;
    try {
      result = await this.client.callTool({ name, arguments: args }, undefined, { timeout: timeoutMs });
    } catch (error) {
      // The delegated token lapsed (or the user lost access) while the work went on: say so plainly.
      if (error instanceof StreamableHTTPError && error.code === 401) throw new Error(`The service refused the delegated token while calling ${name} (401): it expired or was revoked before the work finished.`);
      throw error;
    }
    const content = (result.content ?? []) as { type: string; text?: string }[];
    const text = content.filter((part) => part.type === 'text').map((part) => part.text ?? '').join('\n');
    return { text, isError: result.isError === true, structured: result.structuredContent ?? null };
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}
