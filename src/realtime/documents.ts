import type http from 'node:http';
import { createAdapter } from '@socket.io/redis-streams-adapter';
import { createClient, type RedisClientType } from 'redis';
import { Server, type Socket } from 'socket.io';
import type { Logger } from '../logger.ts';
import { TokenVerificationError, type TokenService } from '../auth/tokens.ts';

export const DOCUMENTS_NAMESPACE = '/documents';

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

const REGISTER_ERRORS: Record<string, string> = {
  token_missing: 'Send {"event": "register", "token": "<endpoint_token>"}.',
  token_invalid: 'The token is malformed or its signature is wrong.',
  token_expired: 'The token has expired; open a new session.',
  token_wrong_audience: 'Only a session endpoint_token can register.',
};

/**
 * The documents websocket (socket.io, namespace /documents). A client registers by sending
 * `{event: "register", token}` as a socket.io message (`socket.send(...)`) or as a `register`
 * event; it then receives the results of its own session only, as `message` events. With
 * REDIS_URL set, results reach clients connected to any node through the Redis streams adapter.
 */
export class DocumentsChannel {
  private io: Server | undefined;
  private redis: RedisClientType | undefined;

  constructor(
    private readonly tokens: TokenService,
    private readonly logger: Logger,
  ) {}

  async attach(server: http.Server, redisUrl: string | undefined): Promise<void> {
    const options: ConstructorParameters<typeof Server>[1] = { serveClient: false, cors: { origin: true } };
    if (redisUrl) {
      this.redis = createClient({ url: redisUrl }) as RedisClientType;
      this.redis.on('error', (error) => this.logger.warn({ err: error }, 'redis error'));
      await this.redis.connect();
      options.adapter = createAdapter(this.redis);
    }
    this.io = new Server(server, options);
    this.io.of(DOCUMENTS_NAMESPACE).on('connection', (socket) => {
      const register = (payload: unknown) => void this.register(socket, payload);
      socket.on('message', register);
      socket.on('register', (payload: unknown) => register({ event: 'register', ...(payload as object) }));
    });
  }

  private async register(socket: Socket, payload: unknown): Promise<void> {
    const message = typeof payload === 'string' ? safeParse(payload) : payload;
    const fields = (message ?? {}) as { event?: unknown; token?: unknown };
    if (fields.event !== 'register') return;
    try {
      if (typeof fields.token !== 'string' || !fields.token) throw new TokenVerificationError('token_invalid');
      const verified = await this.tokens.verify('session', fields.token);
      await socket.join(roomOf(verified.subject));
      socket.emit('message', { event: 'registered', data: { session_id: verified.subject } });
    } catch (error) {
      const reason = error instanceof TokenVerificationError ? error.reason : 'token_invalid';
      socket.emit('message', { event: 'error', data: { reason, message: REGISTER_ERRORS[reason] ?? 'Registration failed.' } });
    }
  }

  /** Sends a result to the clients registered for its session, on this node and (with Redis) every other. */
  emit(message: ResultMessage): void {
    this.io?.of(DOCUMENTS_NAMESPACE).to(roomOf(message.data.to)).emit('message', message);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => (this.io ? this.io.close(() => resolve()) : resolve()));
    await this.redis?.quit().catch(() => {});
  }
}

function roomOf(sessionId: string): string {
  return `session:${sessionId}`;
}

function safeParse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
