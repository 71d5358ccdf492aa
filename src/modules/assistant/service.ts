import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { BadRequestError, HttpError } from '../../http/errors.ts';
import { anyObject, z } from '../../http/openapi.ts';
import { QUEUES } from '../../jobs/queue.ts';
import { requiredText, validateForm } from '../../validation/form.ts';
import type { PendingCall, TurnMessage, Usage } from '../../gateway/model.ts';
import type { Principal } from '../staff/principal.ts';
import { delegate, latestDelegation, reserveAiJob, revoke } from '../ai/delegation.ts';
import { callGateway, GatewayError, mcpUrlFor, NOT_INSTALLED, streamGateway } from '../ai/gateway-client.ts';

export const MAX_MESSAGE = 8000;
export const MAX_WAIT_SECONDS = 30;
const POLL_MS = 200;
const TITLE_LENGTH = 60;

interface ConversationRow {
  id: string;
  user_id: string;
  title: string;
  status: 'idle' | 'running' | 'awaiting_approval' | 'error';
  seq: number;
  tick: number;
  error: string | null;
  pending_call: (PendingCall & { alias: string }) | null;
  progress: { phase: string; label: string; since: string } | null;
  last_turn: Record<string, unknown> | null;
  updated_at: Date;
}

interface MessageRow {
  seq: number;
  role: string;
  content: string;
  tool_calls: unknown[] | null;
  tool_call_id: string | null;
  name: string | null;
  arguments: unknown;
  status: string | null;
  navigate: string | null;
  created_at: Date;
}

/** Assistant payloads carry offsets (the spec's one exception to the dates rule). */
const withOffset = (date: Date | null) => (date ? date.toISOString().replace(/\.\d{3}Z$/, '+00:00') : null);

/**
 * progress while a turn runs: its phase (queued, starting, then the gateway's model and tool
 * steps), a label, when the phase began, and how many turns queued before this one still wait.
 */
function progressOf(app: AppContext, phase: string, label: string): string {
  return JSON.stringify({ phase, label, since: withOffset(app.now?.() ?? new Date()) });
}

// The answers' shapes, for the OpenAPI document (assistant/openapi.ts); the functions below build them.
export const CONVERSATION = z.object({
  id: z.string(),
  title: z.string(),
  status: z.enum(['idle', 'running', 'awaiting_approval', 'error']),
  seq: z.number().int(),
  tick: z.number().int(),
  error: z.string().nullable(),
  pending_call: z.object({ id: z.string(), name: z.string(), arguments: anyObject, alias: z.string() }).nullable(),
  progress: z.object({ phase: z.string(), label: z.string(), since: z.string(), ahead: z.number().int() }).nullable(),
  last_turn: anyObject.nullable(),
  messages: z.array(
    z.object({
      seq: z.number().int(),
      role: z.string(),
      content: z.string(),
      tool_calls: z.array(z.unknown()).nullable(),
      tool_call_id: z.string().nullable(),
      name: z.string().nullable(),
      arguments: z.unknown(),
      status: z.string().nullable(),
      navigate: z.string().nullable(),
      created_at: z.string().nullable(),
    }),
  ),
});
export const CONVERSATIONS = z.object({
  conversations: z.array(z.object({ id: z.string(), title: z.string(), status: z.string(), updated_at: z.string().nullable(), message_count: z.number().int() })),
});
export const ASSISTANT_STATUS = z.object({
  enabled: z.boolean(),
  reason: z.string().nullable(),
  connected: z.boolean(),
  needs_reauth: z.boolean(),
  server_name: z.string().nullable(),
  tools: z.array(z.string()),
  username: z.string(),
  expires_at: z.string().nullable(),
  retention_days: z.number().int(),
});
export const TURN_ACCEPTED = z.object({ job_id: z.string().nullable(), status: z.string(), seq: z.number().int() });

function present(conversation: ConversationRow, messages: MessageRow[], ahead = 0): z.infer<typeof CONVERSATION> {
  return {
    id: conversation.id,
    title: conversation.title,
    status: conversation.status,
    seq: conversation.seq,
    tick: conversation.tick,
    error: conversation.error,
    pending_call: conversation.pending_call,
    progress: conversation.progress ? { ...conversation.progress, ahead } : null,
    last_turn: conversation.last_turn,
    messages: messages.map((message) => ({ ...message, created_at: withOffset(message.created_at) })),
  };
}

/** The caller's own conversation, or 404 (another user's is not shown to exist). */
async function owned(db: Knex | Knex.Transaction, principal: Principal, id: string, forUpdate = false): Promise<ConversationRow> {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) throw new HttpError(404, 'No such conversation.', 'not_found');
  const query = db('assistant_conversations').where({ id, user_id: principal.user.id });
  const row = (await (forUpdate ? query.forUpdate() : query).first()) as ConversationRow | undefined;
  if (!row) throw new HttpError(404, 'No such conversation.', 'not_found');
  return row;
}

/**
 * The assistant status: whether the gateway answers and which tools the MCP server offers this
 * user (probed with a short delegation revoked right after), and the delegation the user's reviews
 * and turns act with: expires_at, and needs_reauth when the MCP server refused it because it had
 * expired while the gateway still worked with it, or when the gateway refuses the service (401).
 * The user's next message or review renews it.
 */
export async function assistantStatus(app: AppContext, principal: Principal): Promise<z.infer<typeof ASSISTANT_STATUS>> {
  const latest = await latestDelegation(app.db, principal.user.id);
  const base = { username: principal.user.username, expires_at: withOffset(latest?.expiresAt ?? null), retention_days: app.config.ai.retentionDays };
  if (!app.config.ai.gatewayUrl) return { enabled: false, reason: NOT_INSTALLED, connected: false, needs_reauth: false, server_name: null, tools: [], ...base };
  let mcpUrl: string;
  try {
    mcpUrl = mcpUrlFor(app);
  } catch (error) {
    // The status answers 200 always: an MCP address that is not known is its reason.
    return { enabled: true, reason: (error as Error).message, connected: false, needs_reauth: false, server_name: null, tools: [], ...base };
  }
  const probe = await delegate(app.db, principal.user.id, Math.ceil(app.config.ai.timeoutMs / 1000), app.now?.() ?? new Date(), 'probe');
  try {
    const status = await callGateway<{ server_name: string; tools: string[] }>(app.config, '/v1/status', { mcp: { url: mcpUrl, token: probe.token } });
    return { enabled: true, reason: null, connected: true, needs_reauth: latest?.refused ?? false, server_name: status.server_name, tools: status.tools, ...base };
  } catch (error) {
    if (!(error instanceof GatewayError)) throw error;
    return { enabled: true, reason: error.message, connected: false, needs_reauth: error.gatewayStatus === 401 || (latest?.refused ?? false), server_name: null, tools: [], ...base };
  } finally {
    await revoke(app.db, probe.token);
  }
}

export async function listConversations(app: AppContext, principal: Principal): Promise<z.infer<typeof CONVERSATIONS>['conversations']> {
  const rows = (await app.db('assistant_conversations as c')
    .where('c.user_id', principal.user.id)
    .orderBy('c.updated_at', 'desc')
    .select('c.id', 'c.title', 'c.status', 'c.updated_at', app.db.raw('(select count(*) from assistant_messages m where m.conversation_id = c.id)::int as message_count'))) as {
    id: string;
    title: string;
    status: string;
    updated_at: Date;
    message_count: number;
  }[];
  return rows.map((row) => ({ ...row, updated_at: withOffset(row.updated_at) }));
}

export async function createConversation(app: AppContext, principal: Principal) {
  const [row] = (await app.db('assistant_conversations').insert({ user_id: principal.user.id }).returning('*')) as ConversationRow[];
  return present(row!, []);
}

export async function deleteConversation(app: AppContext, principal: Principal, id: string): Promise<void> {
  await owned(app.db, principal, id);
  await app.db('assistant_conversations').where({ id, user_id: principal.user.id }).delete();
}

/** GET with long polling: holds until a message after `after` exists, the tick moves past `tick`, or `wait` (at most 30 s) passes. */
export async function readConversation(app: AppContext, principal: Principal, id: string, query: Record<string, unknown>) {
  const number = (name: string, max: number) => {
    const raw = query[name];
    if (raw === undefined || raw === '') return null;
    if (typeof raw !== 'string' || !/^\d{1,9}$/.test(raw)) throw new BadRequestError(`${name} must be a whole number.`, 'invalid_parameter', { errors: { [name]: [{ message: 'Enter a whole number.', code: 'invalid' }] } });
    return Math.min(Number(raw), max);
  };
  const after = number('after', 1e9) ?? 0;
  const wait = number('wait', MAX_WAIT_SECONDS) ?? 0;
  const tick = number('tick', 1e9);
  const deadline = Date.now() + wait * 1000;
  let conversation = await owned(app.db, principal, id);
  while (Date.now() < deadline && conversation.seq <= after && (tick === null || conversation.tick === tick)) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    conversation = await owned(app.db, principal, id);
  }
  const messages = (await app.db('assistant_messages').where('conversation_id', id).where('seq', '>', after).orderBy('seq').select('seq', 'role', 'content', 'tool_calls', 'tool_call_id', 'name', 'arguments', 'status', 'navigate', 'created_at')) as MessageRow[];
  return present(conversation, messages, await queuedAhead(app.db, conversation));
}

/** Turns queued before this one (anyone's) that no worker has started yet. */
async function queuedAhead(db: Knex, conversation: ConversationRow): Promise<number> {
  if (conversation.progress?.phase !== 'queued') return 0;
  const row = (await db('assistant_conversations')
    .where('status', 'running')
    .whereRaw(`progress->>'phase' = 'queued'`)
    .where('updated_at', '<', conversation.updated_at)
    .count('* as count')
    .first()) as { count: string } | undefined;
  return Number(row?.count ?? 0);
}

function turnAccepted(jobId: string | null, conversation: { status: string; seq: number }): z.infer<typeof TURN_ACCEPTED> {
  return { job_id: jobId, status: conversation.status, seq: conversation.seq };
}

/** The bodies of messages/ and approval/; the OpenAPI document shows the same schemas. */
export const MESSAGE_FORM = z.object({ text: requiredText(MAX_MESSAGE) });
export const APPROVAL_FORM = z.object({ approve: z.boolean() });

/** POST messages/: the user's text, then a turn in a job (202); 409 while busy or awaiting approval; 429 at the user's AI job limit. */
export async function postMessage(app: AppContext, principal: Principal, id: string, body: Record<string, unknown>, mcpUrl: string) {
  const { text } = validateForm(MESSAGE_FORM, body);
  return app.db.transaction(async (trx) => {
    const conversation = await owned(trx, principal, id, true);
    if (conversation.status === 'running') throw new HttpError(409, 'The assistant is still answering the previous message.', 'assistant_busy');
    if (conversation.status === 'awaiting_approval') throw new HttpError(409, 'The assistant waits for your answer to a proposed change.', 'awaiting_approval');
    await reserveAiJob(trx, principal.user.id);
    const seq = conversation.seq + 1;
    await trx('assistant_messages').insert({ conversation_id: id, seq, role: 'user', content: text });
    const [updated] = (await trx('assistant_conversations')
      .where('id', id)
      .update({
        seq,
        tick: conversation.tick + 1,
        status: 'running',
        error: null,
        title: conversation.title || text.slice(0, TITLE_LENGTH),
        progress: progressOf(app, 'queued', 'Waiting for the assistant'),
        updated_at: trx.fn.now(),
      })
      .returning(['status', 'seq'])) as { status: string; seq: number }[];
    const jobId = await app.jobs.runAi(trx, QUEUES.assistantTurn, { conversationId: id, mcpUrl, answer: null });
    return turnAccepted(jobId, updated!);
  });
}

/** POST approval/: the user's answer to a writing tool call (202); 409 when no call waits; 429 at the user's AI job limit. */
export async function answerApproval(app: AppContext, principal: Principal, id: string, body: Record<string, unknown>, mcpUrl: string) {
  const { approve } = validateForm(APPROVAL_FORM, body);
  return app.db.transaction(async (trx) => {
    const conversation = await owned(trx, principal, id, true);
    if (conversation.status !== 'awaiting_approval' || !conversation.pending_call) throw new HttpError(409, 'No call waits for approval.', 'no_pending_call');
    await reserveAiJob(trx, principal.user.id);
    const [updated] = (await trx('assistant_conversations')
      .where('id', id)
      .update({
        status: 'running',
        tick: conversation.tick + 1,
        progress: progressOf(app, 'queued', approve ? 'Waiting to make the approved change' : 'Waiting to tell the assistant you declined'),
        updated_at: trx.fn.now(),
      })
      .returning(['status', 'seq'])) as { status: string; seq: number }[];
    const { alias: _alias, ...call } = conversation.pending_call;
    const jobId = await app.jobs.runAi(trx, QUEUES.assistantTurn, { conversationId: id, mcpUrl, answer: { call, approve } });
    return turnAccepted(jobId, updated!);
  });
}

/** The history as the model reads it (OpenAI chat messages). */
function history(messages: MessageRow[]): TurnMessage[] {
  return messages.map((message) => {
    if (message.role === 'tool') return { role: 'tool', tool_call_id: message.tool_call_id ?? '', content: message.content };
    if (message.role === 'assistant') return { role: 'assistant', content: message.content, ...(message.tool_calls?.length ? { tool_calls: message.tool_calls } : {}) } as TurnMessage;
    return { role: 'user', content: message.content };
  });
}

/** The assistant-turn job: the gateway runs the model with the MCP tools as the conversation's user. */
export async function runAssistantTurn(app: AppContext, conversationId: string, mcpUrl: string, answer: { call: PendingCall; approve: boolean } | null): Promise<void> {
  const conversation = (await app.db('assistant_conversations').where({ id: conversationId, status: 'running' }).first()) as ConversationRow | undefined;
  if (!conversation) return;
  const started = Date.now();
  // Each phase moves the tick, so a long poll waiting on it ends at once.
  const enter = async (phase: string, label: string) => {
    await app.db('assistant_conversations').where({ id: conversationId, status: 'running' }).update({ tick: app.db.raw('tick + 1'), progress: progressOf(app, phase, label) });
  };
  await enter('starting', 'Connecting to the assistant');
  let outcome: { messages: TurnMessage[]; pending_call: PendingCall | null; usage: Usage } | null = null;
  let failure: string | null = null;
  try {
    const { token } = await delegate(app.db, conversation.user_id, app.config.ai.delegationSeconds, app.now?.() ?? new Date());
    const stored = (await app.db('assistant_messages').where('conversation_id', conversationId).orderBy('seq')) as MessageRow[];
    outcome = await streamGateway(app.config, '/v1/turn', { mcp: { url: mcpUrl, token }, messages: history(stored), answer }, (progress) => enter(progress.phase, progress.label));
  } catch (error) {
    if (!(error instanceof GatewayError)) app.logger.error({ err: error, conversationId }, 'assistant turn failed');
    failure = (error as Error).message;
  }
  await app.db.transaction(async (trx) => {
    const current = (await trx('assistant_conversations').where('id', conversationId).forUpdate().first()) as ConversationRow | undefined;
    if (!current) return;
    let seq = current.seq;
    for (const message of outcome?.messages ?? []) {
      seq += 1;
      const raw = message as unknown as Record<string, unknown>;
      await trx('assistant_messages').insert({
        conversation_id: conversationId,
        seq,
        role: String(raw.role),
        content: typeof raw.content === 'string' ? raw.content : '',
        tool_calls: raw.tool_calls ? JSON.stringify(raw.tool_calls) : null,
        tool_call_id: (raw.tool_call_id as string | undefined) ?? null,
        status: (raw.status as string | undefined) ?? null,
        navigate: (raw.navigate as string | undefined) ?? null,
      });
    }
    const pending = outcome?.pending_call ?? null;
    if (pending) {
      // The proposed call shows as its own message, so the panel can render it with its arguments.
      seq += 1;
      await trx('assistant_messages').insert({ conversation_id: conversationId, seq, role: 'assistant', content: '', name: pending.name, arguments: JSON.stringify(pending.arguments), status: 'awaiting_approval' });
    }
    const usage = outcome?.usage;
    await trx('assistant_conversations')
      .where('id', conversationId)
      .update({
        seq,
        tick: current.tick + 1,
        status: failure ? 'error' : pending ? 'awaiting_approval' : 'idle',
        error: failure,
        pending_call: pending ? JSON.stringify({ ...pending, alias: pending.name.replace(/_/g, ' ') }) : null,
        progress: null,
        last_turn: JSON.stringify({ model_calls: usage?.model_calls ?? 0, tool_calls: usage?.tool_calls ?? 0, prompt_tokens: usage?.prompt_tokens ?? 0, completion_tokens: usage?.completion_tokens ?? 0, duration_ms: Date.now() - started }),
        updated_at: trx.fn.now(),
      });
  });
}

/** Conversations untouched for longer than the retention are deleted (daily). */
export async function sweepConversations(app: AppContext): Promise<number> {
  const cutoff = new Date((app.now?.() ?? new Date()).getTime() - app.config.ai.retentionDays * 86_400_000);
  return app.db('assistant_conversations').where('updated_at', '<', cutoff).delete();
}
