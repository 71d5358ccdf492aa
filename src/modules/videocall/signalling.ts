import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config, IceServer } from '../../config.ts';
import { CHANNELS, type NotificationHub } from '../../db/notifications.ts';
import type { Logger } from '../../logger.ts';
import type { LivePublisher } from '../../realtime/live-message.ts';
import { iceServersFor } from './ice.ts';
import { CallRefused, callInProgress, endCallsOfAgent, expireOffers, joinQueue, leaveQueue, offerCalls, parseConsent, queuePositions } from './queue.ts';

/** One connection of an end user's page on the documents socket (either transport). */
export interface EndUserClient {
  /** Random per connection: the queue row names the one that joined. */
  id: string;
  sessionId: string;
  send(frame: object): void;
}

/** What the call needs of the documents socket: the end users' frames in, frames out to one connection on any process. */
export interface EndUserChannel {
  onClientMessage(handler: (client: EndUserClient, message: Record<string, unknown>) => void): void;
  onClientClose(handler: (client: EndUserClient) => void): void;
  sendToClient(sessionId: string, clientId: string, frame: object): Promise<void>;
}

/** What the call needs of the staff live socket: the agents' signal frames in, messages out to one user. */
export interface AgentChannel extends LivePublisher {
  handleMessages(type: string, handler: (userId: string, payload: unknown, reply: (frame: object) => void) => void): void;
  onUserGone(handler: (userId: string) => void): void;
  isConnected(userId: string): boolean;
}

/** Which signal kinds each side sends: the agent makes the offer, the end user answers. */
const END_USER_KINDS: ReadonlySet<string> = new Set(['answer', 'ice', 'hangup']);
const AGENT_KINDS: ReadonlySet<string> = new Set(['offer', 'ice', 'hangup']);
const MAX_SDP_CHARS = 64 * 1024;
const MAX_CANDIDATE_CHARS = 4 * 1024;
/** An agent whose last socket went is given this long to come back (a page reload) before the call ends. */
export const AGENT_GRACE_MS = 10_000;
/** Margin after an offer's time is up before it is looked at: the lapse is then certainly past. */
const LAPSE_MARGIN_MS = 200;

export interface Signal {
  kind: string;
  sdp?: string;
  candidate?: Record<string, unknown>;
}

/** A signal as sent by one side, checked: its kind allowed for that side, an SDP or candidate of sane size. */
function parseSignal(value: unknown, allowed: ReadonlySet<string>): Signal {
  const signal = (value ?? {}) as Record<string, unknown>;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new CallRefused('signal_invalid', 'A signal is {kind, sdp?, candidate?}.');
  if (typeof signal.kind !== 'string' || !allowed.has(signal.kind)) throw new CallRefused('signal_invalid', `kind must be one of ${[...allowed].join(', ')}.`);
  const parsed: Signal = { kind: signal.kind };
  if (signal.kind === 'offer' || signal.kind === 'answer') {
    if (typeof signal.sdp !== 'string' || !signal.sdp || signal.sdp.length > MAX_SDP_CHARS) throw new CallRefused('signal_invalid', `An ${signal.kind} carries its sdp (at most ${MAX_SDP_CHARS} characters).`);
    parsed.sdp = signal.sdp;
  }
  if (signal.kind === 'ice') {
    const candidate = signal.candidate;
    if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate) || JSON.stringify(candidate).length > MAX_CANDIDATE_CHARS) {
      throw new CallRefused('signal_invalid', 'An ice signal carries its candidate object.');
    }
    parsed.candidate = candidate as Record<string, unknown>;
  }
  return parsed;
}

/**
 * The video call's signalling (issue 38): relays offers, answers and ICE candidates between the
 * one end user who joined a session's call (documents socket) and the one agent who took it
 * (staff live socket), and nobody else. Every relay checks the call's row (in call, this agent,
 * this connection), so a signal for another session, from a second page, from another agent or
 * before the agent joined goes nowhere and is answered with a refusal. It also keeps the queue
 * moving: the end user's position, lapsed offers, an end user who leaves, an agent who goes.
 */
export class VideoCallSignalling {
  /** End users who joined on this process, by connection id: their position is pushed to them. */
  private readonly waiting = new Map<string, { client: EndUserClient; position: number | null }>();
  /** One timer per offer heard, at its lapse; gone when the process closes. */
  private readonly lapses = new Set<NodeJS.Timeout>();
  private refreshing = false;
  private refreshAgain = false;

  constructor(
    private readonly db: Knex,
    private readonly config: Config,
    private readonly logger: Logger,
  ) {}

  private endUsers: EndUserChannel | undefined;
  private agents: AgentChannel | undefined;

  attach(endUsers: EndUserChannel, agents: AgentChannel, hub: NotificationHub): void {
    this.endUsers = endUsers;
    this.agents = agents;
    endUsers.onClientMessage((client, message) => void this.fromEndUser(client, message).catch((error) => this.fail(client, error)));
    endUsers.onClientClose((client) => void this.endUserGone(client).catch((error) => this.logger.warn({ err: error }, 'video call: end user leaving not recorded')));
    agents.handleMessages('signal', (userId, payload, reply) =>
      void this.fromAgent(userId, payload).catch((error) => {
        if (!(error instanceof CallRefused)) this.logger.warn({ err: error }, 'video call: agent signal failed');
        const session = (payload as { session?: unknown } | null)?.session;
        reply({ type: 'signal_refused', payload: { session: typeof session === 'string' ? session : null, reason: error instanceof CallRefused ? error.reason : 'server_error', message: error instanceof Error ? error.message : 'failed' } });
      }),
    );
    agents.onUserGone((userId) => this.agentGone(userId));
    hub.subscribe(CHANNELS.videoQueue, (payload) => {
      this.refreshPositions();
      if (offered(payload)) this.lapseAfter(this.config.videoCall.offerSeconds * 1000 + LAPSE_MARGIN_MS);
    });
    // Offers made before this process started lapse too.
    this.lapseAfter(0);
  }

  close(): void {
    for (const timer of this.lapses) clearTimeout(timer);
    this.lapses.clear();
  }

  /**
   * Every process hears each offer (the queue's trigger) and looks at lapsed offers when its time
   * is up: no polling while nobody is offered a call. Moving lapsed offers on is one update that
   * finds nothing the second time, and offer rounds queue behind one lock, so processes may race.
   */
  private lapseAfter(ms: number): void {
    const timer = setTimeout(() => {
      this.lapses.delete(timer);
      void this.expire();
    }, ms);
    timer.unref();
    this.lapses.add(timer);
  }

  /** The ICE servers for one party of a session's call. */
  iceServers(sessionId: string, party: string): IceServer[] {
    return iceServersFor(this.config, `${sessionId}:${party}`);
  }

  /** Tells the end user's page that the agent has joined (after take): both sides may now signal. */
  async agentJoined(sessionId: string, endUserClient: string | null): Promise<void> {
    if (endUserClient) await this.endUsers?.sendToClient(sessionId, endUserClient, { event: 'call', type: 'agent_joined', data: { ice_servers: this.iceServers(sessionId, 'end_user') } });
  }

  /** Asks the end user's page for a full-resolution frame from its own camera (uploaded with take_snapshot). */
  async requestSnapshot(sessionId: string, endUserClient: string): Promise<string> {
    const requestId = randomUUID();
    await this.endUsers?.sendToClient(sessionId, endUserClient, { event: 'call', type: 'snapshot_request', data: { request_id: requestId } });
    return requestId;
  }

  /** Tells the end user's page that the call is over and why. */
  async ended(sessionId: string, endUserClient: string | null, reason: string): Promise<void> {
    if (endUserClient) await this.endUsers?.sendToClient(sessionId, endUserClient, { event: 'call', type: 'ended', data: { reason } });
  }

  private async fromEndUser(client: EndUserClient, message: Record<string, unknown>): Promise<void> {
    if (message.event === 'call' && message.type === 'join') {
      const consent = parseConsent((message.data as { consent?: unknown } | undefined)?.consent);
      await joinQueue(this.db, client.sessionId, client.id, consent);
      this.waiting.set(client.id, { client, position: null });
      await this.sendPositions([client.id]);
      return;
    }
    if (message.event === 'call' && message.type === 'leave') {
      await this.endUserGone(client);
      return;
    }
    if (message.event !== 'signal') return;
    const signal = parseSignal(message.data, END_USER_KINDS);
    const call = await callInProgress(this.db, client.sessionId);
    if (!call || call.endUserClient !== client.id || !call.agentId) throw new CallRefused('call_not_connected', 'No agent has joined this page’s call.');
    await this.agents!.publish(this.db, { to: call.agentId, type: 'videoCallSignal', model: null, data: { session: client.sessionId, ...signal } });
  }

  private async fromAgent(userId: string, payload: unknown): Promise<void> {
    const session = (payload as { session?: unknown } | null)?.session;
    if (typeof session !== 'string' || !session) throw new CallRefused('signal_invalid', 'payload.session names the session of your call.');
    const signal = parseSignal(payload, AGENT_KINDS);
    const call = await callInProgress(this.db, session);
    if (!call || call.agentId !== userId || !call.endUserClient) throw new CallRefused('call_not_connected', 'You are not in a call for this session.');
    await this.endUsers!.sendToClient(session, call.endUserClient, { event: 'signal', data: signal });
  }

  private async endUserGone(client: EndUserClient): Promise<void> {
    this.waiting.delete(client.id);
    const { agentId } = await leaveQueue(this.db, client.sessionId, client.id);
    if (agentId) await this.agents!.publish(this.db, { to: agentId, type: 'videoCallEnded', model: null, data: { session: client.sessionId, reason: 'end_user_left' } });
  }

  /** An agent's last socket here went: unless it is back within the grace period, their call ends for both. */
  private agentGone(userId: string): void {
    setTimeout(() => {
      if (this.agents!.isConnected(userId)) return;
      void endCallsOfAgent(this.db, userId, 'agent_disconnected')
        .then(async (ended) => {
          for (const call of ended) {
            await this.ended(call.sessionId, call.endUserClient, 'agent_disconnected');
            await this.agents!.publish(this.db, { to: userId, type: 'videoCallEnded', model: null, data: { session: call.sessionId, reason: 'agent_disconnected' } });
          }
          if (ended.length) await offerCalls(this.db);
        })
        .catch((error) => this.logger.warn({ err: error }, 'video call: ending a disconnected agent’s call failed'));
    }, AGENT_GRACE_MS).unref();
  }

  private async expire(): Promise<void> {
    try {
      if (await expireOffers(this.db, this.config.videoCall.offerSeconds)) await offerCalls(this.db);
    } catch (error) {
      this.logger.warn({ err: error }, 'video call: lapsed offers not moved on');
    }
  }

  /** The queue changed somewhere: every end user waiting on this process whose place moved is told (one query). */
  private refreshPositions(): void {
    if (!this.waiting.size) return;
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    void this.sendPositions([...this.waiting.keys()])
      .catch((error) => this.logger.warn({ err: error }, 'video call: positions not sent'))
      .finally(() => {
        this.refreshing = false;
        if (this.refreshAgain) {
          this.refreshAgain = false;
          this.refreshPositions();
        }
      });
  }

  private async sendPositions(clientIds: string[]): Promise<void> {
    const entries = clientIds.map((id) => this.waiting.get(id)).filter((entry) => entry !== undefined);
    const positions = await queuePositions(this.db, [...new Set(entries.map((entry) => entry.client.sessionId))]);
    for (const entry of entries) {
      const position = positions.get(entry.client.sessionId);
      if (position === undefined) {
        // taken or ended: agent_joined or ended reaches the page on its own
        this.waiting.delete(entry.client.id);
        continue;
      }
      if (position === entry.position) continue;
      entry.position = position;
      entry.client.send({ event: 'call', type: 'queued', data: { position } });
    }
  }

  private fail(client: EndUserClient, error: unknown): void {
    if (!(error instanceof CallRefused)) this.logger.warn({ err: error }, 'video call: end user frame failed');
    client.send({
      event: 'error',
      data: error instanceof CallRefused ? { reason: error.reason, message: error.message } : { reason: 'server_error', message: 'The call could not go on; try again.' },
    });
  }
}

/** Whether a queue announcement ({session_id, status}) is an offer. */
function offered(payload: string): boolean {
  try {
    return (JSON.parse(payload) as { status?: unknown }).status === 'offered';
  } catch {
    return false;
  }
}
