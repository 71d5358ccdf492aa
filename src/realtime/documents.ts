import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Knex } from 'knex';
import { Server } from 'socket.io';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Executor } from '../db/knex.ts';
import type { NotificationHub } from '../db/notifications.ts';
import type { Logger } from '../logger.ts';
import { TokenVerificationError, type TokenService } from '../auth/tokens.ts';
import { Fanout } from './fanout.ts';

export const DOCUMENTS_NAMESPACE = '/documents';
/** The plain WebSocket's path: the websocket_url of create-session. */
export const DOCUMENTS_PATH = '/ws/documents/';

/** The spec's message envelope for one verification result. */
export interface ResultMessage {
  event: 'broadcast';
  client_id: string;
  timestamp: number;
  correlation_id: string;
  data: {
    to: string;
    delivery: 'websocket';
    type: string;
    result: { code: 'success' | 'fail'; data: Record<string, unknown> | null; message: string };
  };
}

/** One registered connection, on either transport, as the channel's handlers see it. */
export interface DocumentsClient {
  /** Random per connection. */
  id: string;
  /** The session of the token it registered with. */
  sessionId: string;
  /** Sends a frame to this connection (it must be held by this process; see sendToClient otherwise). */
  send(frame: object): void;
}

export interface DocumentsSettings {
  /** How often every plain socket is pinged; one that did not answer the previous ping is closed. */
  heartbeatMs: number;
  /** A connection (either transport) that has not registered this long after opening is closed. */
  registerTimeoutMs: number;
}

const DEFAULT_SETTINGS: DocumentsSettings = { heartbeatMs: 30_000, registerTimeoutMs: 60_000 };
/** Frames a client may send; a bigger one (up to MAX_PAYLOAD_BYTES) is answered with an error and ignored. */
const MAX_FRAME_BYTES = 64 * 1024;
/** Beyond this `ws` itself closes the socket (1009) without reading the frame into memory. */
const MAX_PAYLOAD_BYTES = 1024 * 1024;

const ERRORS: Record<string, string> = {
  token_missing: 'Send {"event": "register", "token": "<endpoint_token>"}.',
  token_invalid: 'The token is malformed or its signature is wrong.',
  token_expired: 'The token has expired; open a new session.',
  token_wrong_audience: 'Only a session endpoint_token can register.',
  already_registered: 'This connection is registered already; open another one for another session.',
  not_registered: 'Register first: {"event": "register", "token": "<endpoint_token>"}.',
  frame_invalid: 'Frames are JSON objects sent as text.',
  frame_too_large: `Frames are at most ${MAX_FRAME_BYTES} bytes.`,
};

/** What crosses processes: a frame for every connection of a session, or for one of them. */
interface Delivery {
  session: string;
  client?: string;
  frame: object;
}

/** One open connection of either transport. */
interface Connection {
  client: DocumentsClient | null;
  registering: boolean;
  closed: boolean;
  send(frame: object): void;
  /** Cancels the register timeout. */
  timer: NodeJS.Timeout;
}

/**
 * The documents websocket, on two transports with the same frames:
 * - a plain WebSocket at DOCUMENTS_PATH (JSON text frames, ping/pong heartbeats);
 * - socket.io, namespace /documents (frames are `message` events; `register`, `call` and `signal`
 *   may also come as named events).
 * A client sends `{event: "register", token: <endpoint_token>}` and gets `registered` with its
 * session id, or `error` with a reason; it then receives the frames sent to its session only.
 * Every frame goes out through one path: published to every process (Fanout: PostgreSQL
 * LISTEN/NOTIFY, or Redis pub/sub with REDIS_URL), each delivering to the connections it holds.
 */
export class DocumentsChannel {
  private io: Server | undefined;
  private wss: WebSocketServer | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly fanout: Fanout;
  private readonly settings: DocumentsSettings;
  /** Registered connections on this process: session id, then client id. */
  private readonly sessions = new Map<string, Map<string, Connection>>();
  private readonly plain = new Map<WebSocket, Connection & { alive: boolean }>();
  private readonly messageHandlers: Array<(client: DocumentsClient, message: Record<string, unknown>) => void> = [];
  private readonly closeHandlers: Array<(client: DocumentsClient) => void> = [];

  constructor(
    private readonly db: Knex,
    hub: NotificationHub,
    private readonly tokens: TokenService,
    private readonly logger: Logger,
    settings: Partial<DocumentsSettings> = {},
  ) {
    this.settings = { ...DEFAULT_SETTINGS, ...settings };
    this.fanout = new Fanout(db, hub, logger, 'documents');
    this.fanout.onMessage((payload) => this.deliver(JSON.parse(payload) as Delivery));
  }

  /** Serves both transports on `server` and starts the fan-out (through Redis when `redisUrl` is set). */
  async attach(server: http.Server, redisUrl: string | undefined): Promise<void> {
    await this.fanout.start(redisUrl);
    this.wss = new WebSocketServer({ noServer: true, maxPayload: MAX_PAYLOAD_BYTES, perMessageDeflate: false });
    server.on('upgrade', (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (request.url ?? '').split('?')[0]!;
      if (path !== DOCUMENTS_PATH && path !== DOCUMENTS_PATH.slice(0, -1)) return;
      this.wss!.handleUpgrade(request, socket, head, (ws) => this.acceptPlain(ws));
    });
    this.heartbeat = setInterval(() => this.beat(), this.settings.heartbeatMs);
    this.heartbeat.unref();
    this.io = new Server(server, { serveClient: false, cors: { origin: true } });
    this.io.of(DOCUMENTS_NAMESPACE).on('connection', (socket) => {
      const connection = this.open((frame) => socket.emit('message', frame), () => socket.disconnect(true));
      socket.on('message', (payload: unknown) => void this.receive(connection, typeof payload === 'string' ? parseFrame(payload) : payload));
      // Named events carry the frame's other fields; the name is the frame's event.
      for (const name of ['register', 'call', 'signal']) {
        socket.on(name, (payload: unknown) => void this.receive(connection, { ...(isObject(payload) ? payload : {}), event: name }));
      }
      socket.on('disconnect', () => this.drop(connection));
    });
  }

  /**
   * Calls `handler` with every frame a registered client sends other than `register`: a plain
   * socket's parsed JSON object, a socket.io `message` payload, or a socket.io `call`/`signal`
   * event as `{...payload, event: name}`. For the video call (its signalling rides this socket).
   */
  onClientMessage(handler: (client: DocumentsClient, message: Record<string, unknown>) => void): void {
    this.messageHandlers.push(handler);
  }

  /** Calls `handler` when a registered connection held by this process closes. */
  onClientClose(handler: (client: DocumentsClient) => void): void {
    this.closeHandlers.push(handler);
  }

  /**
   * Sends `frame` to every registered connection of the session, on every process. With an open
   * transaction as executor it goes out at commit and never on rollback (verification results do so).
   */
  async sendToSession(sessionId: string, frame: object, executor?: Executor): Promise<void> {
    await this.publish({ session: sessionId, frame }, executor);
  }

  /** Sends `frame` to one connection (DocumentsClient.id) of the session, whichever process holds it. */
  async sendToClient(sessionId: string, clientId: string, frame: object, executor?: Executor): Promise<void> {
    await this.publish({ session: sessionId, client: clientId, frame }, executor);
  }

  /** Registered connections of the session on this process. */
  clientCount(sessionId: string): number {
    return this.sessions.get(sessionId)?.size ?? 0;
  }

  async close(): Promise<void> {
    clearInterval(this.heartbeat);
    for (const ws of this.plain.keys()) ws.terminate();
    await new Promise<void>((resolve) => (this.wss ? this.wss.close(() => resolve()) : resolve()));
    await new Promise<void>((resolve) => (this.io ? this.io.close(() => resolve()) : resolve()));
    await this.fanout.close();
  }

  private async publish(delivery: Delivery, executor: Executor | undefined): Promise<void> {
    await this.fanout.publish(executor ?? this.db, JSON.stringify(delivery));
  }

  private acceptPlain(ws: WebSocket): void {
    const connection = Object.assign(
      this.open(
        (frame) => {
          if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(frame));
        },
        () => ws.terminate(),
      ),
      { alive: true },
    );
    this.plain.set(ws, connection);
    ws.on('pong', () => (connection.alive = true));
    // A frame over MAX_PAYLOAD_BYTES: ws closes the socket (1009) and reports it here.
    ws.on('error', (error) => this.logger.debug({ err: error }, 'documents socket error'));
    // binaryType is nodebuffer (the default): every frame, fragmented or not, comes as one Buffer.
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (data.length > MAX_FRAME_BYTES) return connection.send(errorFrame('frame_too_large'));
      if (isBinary) return connection.send(errorFrame('frame_invalid'));
      void this.receive(connection, parseFrame(data.toString()));
    });
    ws.on('close', () => {
      this.plain.delete(ws);
      this.drop(connection);
    });
  }

  /** A new connection, closed unless it registers within registerTimeoutMs. */
  private open(send: (frame: object) => void, close: () => void): Connection {
    const connection: Connection = {
      client: null,
      registering: false,
      closed: false,
      send,
      timer: setTimeout(() => {
        if (!connection.client) close();
      }, this.settings.registerTimeoutMs).unref(),
    };
    return connection;
  }

  private async receive(connection: Connection, message: unknown): Promise<void> {
    if (!isObject(message)) return connection.send(errorFrame('frame_invalid'));
    if (message.event === 'register') return this.register(connection, message.token);
    const client = connection.client;
    if (!client) return connection.send(errorFrame('not_registered'));
    for (const handler of this.messageHandlers) {
      try {
        handler(client, message);
      } catch (error) {
        this.logger.error({ err: error, sessionId: client.sessionId }, 'documents message handler failed');
      }
    }
  }

  private async register(connection: Connection, token: unknown): Promise<void> {
    if (connection.client || connection.registering) return connection.send(errorFrame('already_registered'));
    if (typeof token !== 'string' || !token) return connection.send(errorFrame('token_missing'));
    connection.registering = true;
    try {
      const { subject: sessionId } = await this.tokens.verify('session', token);
      if (connection.closed) return;
      connection.client = { id: randomUUID(), sessionId, send: connection.send };
      clearTimeout(connection.timer);
      let clients = this.sessions.get(sessionId);
      if (!clients) this.sessions.set(sessionId, (clients = new Map()));
      clients.set(connection.client.id, connection);
      connection.send({ event: 'registered', data: { session_id: sessionId } });
    } catch (error) {
      connection.send(errorFrame(error instanceof TokenVerificationError ? error.reason : 'token_invalid'));
    } finally {
      connection.registering = false;
    }
  }

  private drop(connection: Connection): void {
    connection.closed = true;
    clearTimeout(connection.timer);
    const client = connection.client;
    if (!client) return;
    connection.client = null;
    const clients = this.sessions.get(client.sessionId);
    clients?.delete(client.id);
    if (clients && !clients.size) this.sessions.delete(client.sessionId);
    for (const handler of this.closeHandlers) {
      try {
        handler(client);
      } catch (error) {
        this.logger.error({ err: error, sessionId: client.sessionId }, 'documents close handler failed');
      }
    }
  }

  /** Sends a published frame to the connections this process holds. */
  private deliver(delivery: Delivery): void {
    const clients = this.sessions.get(delivery.session);
    if (!clients) return;
    if (delivery.client) clients.get(delivery.client)?.send(delivery.frame);
    else for (const connection of clients.values()) connection.send(delivery.frame);
  }

  private beat(): void {
    for (const [ws, connection] of this.plain) {
      if (!connection.alive) {
        ws.terminate();
        continue;
      }
      connection.alive = false;
      ws.ping();
    }
  }
}

function errorFrame(reason: string): object {
  return { event: 'error', data: { reason, message: ERRORS[reason] ?? 'Registration failed.' } };
}

/** A JSON object: not an array, a Buffer or null. */
function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;
}

function parseFrame(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
