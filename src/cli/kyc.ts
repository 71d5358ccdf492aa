import type { Database } from '../db/database.ts';
import { loadConfig } from '../config.ts';
import { AGENT_TOKEN_TTL_SECONDS } from '../modules/kyc/constants.ts';
import { defineFlow, FlowInputError, listFlows, type Flow } from '../modules/kyc/flows.ts';
import { findSession } from '../modules/kyc/sessions.ts';
import { loadSigningKey, TokenService } from '../auth/tokens.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

/** The notify secret is shown when the flow is defined, so the receiver can be configured; never in listings. */
function publicFlow({ notify_secret: _secret, ...flow }: Flow) {
  return flow;
}

export async function flowCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  switch (action) {
    case 'define': {
      const { values } = parseOptions(rest, {
        code: { type: 'string' },
        name: { type: 'string' },
        artifacts: { type: 'string' },
        'video-call': { type: 'boolean' },
        default: { type: 'boolean' },
        inactive: { type: 'boolean' },
        notify: { type: 'string' },
      });
      if (!values.code || !values.artifacts) throw new CliError('flow define needs --code C --artifacts type,type', 2);
      try {
        const flow = await defineFlow(
          knex,
          {
            code: values.code,
            ...(values.name ? { name: values.name } : {}),
            artifacts: values.artifacts.split(','),
            videoCall: values['video-call'] ?? false,
            isDefault: values.default ?? false,
            active: !values.inactive,
            notifyUrl: values.notify ?? null,
          },
          OPERATOR,
          loadConfig().outboundAllow,
        );
        return flow.notify_secret ? { ...publicFlow(flow), notify_secret: flow.notify_secret } : publicFlow(flow);
      } catch (error) {
        if (error instanceof FlowInputError) throw new CliError(error.message, 2);
        throw error;
      }
    }
    case 'list':
      return (await listFlows(knex)).map(publicFlow);
    default:
      throw new CliError(`Unknown flow command: ${action ?? '(none)'} (define, list)`, 2);
  }
}

/** An operator's token for end-kyc-session (a call's take mints its own for the agent): to close a session outside a call. */
export async function agentTokenCommand(args: string[], { knex }: Database): Promise<unknown> {
  const { values } = parseOptions(args, { session: { type: 'string' }, agent: { type: 'string' } });
  if (!values.session) throw new CliError('agent-token needs --session ID', 2);
  if (!(await findSession(knex, values.session))) throw new CliError(`No session ${values.session}.`);
  const tokens = new TokenService(await loadSigningKey(knex, loadConfig().jwtSecret));
  const { token } = await tokens.issue('agent', values.session, AGENT_TOKEN_TTL_SECONDS, { agent: values.agent ?? OPERATOR.id });
  return { token };
}
