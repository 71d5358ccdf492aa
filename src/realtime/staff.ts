import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { Knex } from 'knex';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Executor } from '../db/knex.ts';
import { CHANNELS, type NotificationHub } from '../db/notifications.ts';
import { Fanout } from './fanout.ts';
import type { Logger } from '../logger.ts';
import type { AdminSite } from '../modules/backoffice/site.ts';
import { WEBSOCKET_PATH } from '../modules/mobile/constants.ts';
import { resolveSession, SESSION_COOKIE } from '../modules/backoffice/web/session.ts';
import { DEVICE_REVOKED_CHANNEL } from '../modules/mobile/devices.ts';
import { authenticateCaller, type Identity } from '../modules/mobile/identity.ts';
import { isEligibleForMobile } from '../modules/mobile/tickets.ts';
import { loadPrincipalWith, type Principal } from '../modules/staff/principal.ts';
import { offerCalls, SESSION_MODEL } from '../modules/videocall/queue.ts';
import type { LiveMessage, LivePublisher } from './live-message.ts';

/** A module's handler of one type of frame from signed-in sockets. */
export type UserMessageHandler = (userId: string, payload: unknown, reply: (frame: object) => void) => void;

/** What travels between processes: the message plus the ids every recipient sees alike. */
interface Envelope {
  correlation_id: string;
  timestamp: number;
  message: LiveMessage;
}

/** A broadcast waiting for its user's grants to be reloaded: the frame's tail (all but client_id) and its model. */
interface HeldMessage {
  model: string | null;
  tail: string;
}

/**
 * One user's grants as this process's sockets apply them, shared by the user's sockets: read at
 * login, read again when a change to the user is announced (never per message), dropped with the
 * user's last socket.
 */
interface UserAccess {
  userId: string;
  sockets: Set<WebSocket>;
  /** app_label.model of every model the user may view now. */
  models: ReadonlySet<string>;
  /**
   * Set while an announced change is being read: messages for the user wait here, in order, and go
   * out filtered by the grants read (or not at all when the account is gone).
   */
  held: HeldMessage[] | null;
  loading: boolean;
  /** Another change was announced while loading: the read may predate it and is done again. */
  again: boolean;
}

interface SocketState {
  /** The socket session token given at login; it is the broadcasts' client_id. */
  clientId: string | null;
  access: UserAccess | null;
  deviceId: string | null;
  /** The web admin session (its id hash) a socket of the web admin logged in with; null for a device's. */
  webSession: string | null;
  alive: boolean;
  openedAt: number;
}

export interface LiveSettings {
  /** How often every socket is pinged; a socket that did not answer the previous ping is closed. */
  heartbeatMs: number;
  /** A socket that has not logged in this long after opening is closed. */
  loginTimeoutMs: number;
  /** The web admin's session idle timeout: a web socket's session idle this long is over (the socket does not keep it alive). */
  webSessionIdleSeconds: number;
}

const DEFAULT_SETTINGS: LiveSettings = { heartbeatMs: 30_000, loginTimeoutMs: 60_000, webSessionIdleSeconds: 3600 };
/** The web admin's own door to the live channel: same messages, signed in by the admin session cookie. */
export const WEB_LIVE_PATH = '/admin/live/';
/** Close code for a socket whose device was revoked (application range 4000-4999). */
export const CLOSE_DEVICE_REVOKED = 4001;
/** Close code for a socket whose user was deactivated, lost staff status or was deleted. */
export const CLOSE_ACCOUNT_INACTIVE = 4003;
/** Close code for a web admin socket whose session ended (logout, idle timeout, password change). */
export const CLOSE_SESSION_ENDED = 4004;
/** Messages kept per user while its grants are reloaded; beyond it the oldest go (refresh triggers: the client re-reads lists anyway). */
const MAX_HELD = 1000;
/** A reload the database refused is tried again after this long, doubling up to RELOAD_RETRY_MAX_MS. */
const RELOAD_RETRY_MS = 500;
const RELOAD_RETRY_MAX_MS = 15_000;
/** Which of the sockets' devices (ids in $2) still belong to the user and are not revoked, read with the principal. */
const LIVE_DEVICES_SQL = 'array(select d.id::text from mobile_devices d where d.id = any($2::uuid[]) and d.user_id = u.id and d.revoked_at is null)';

/**
 * The staff live socket (the spec's Events): a plain WebSocket at WEBSOCKET_PATH, JSON text frames.
 * A client logs in with its mobile access token; after that it receives broadcasts meant for
 * everyone or for its user, filtered by the models it may view. It is a refresh trigger: payloads
 * name what changed, the data is read from REST.
 *
 * Messages go to every process through the fan-out (./fanout.ts, topic `live`): PostgreSQL NOTIFY
 * inside the writer's transaction, so they go out only at commit, a big one spilled to a table;
 * with REDIS_URL set, Redis pub/sub after the writer's commit. Each process delivers them to its
 * own sockets.
 *
 * Every message is checked against the user's current state, not the state at login: triggers
 * (migration 0022) announce on warden_staff_access any change to a user's flags, permissions,
 * groups or groups' permissions, whoever made it, and on warden_mobile_devices any revocation.
 * The user's grants are then read again once (messages for them wait meanwhile) and applied to
 * every later message; a deactivated, no longer staff or deleted user's sockets get login_failed
 * and are closed (CLOSE_ACCOUNT_INACTIVE), a revoked device's are closed (CLOSE_DEVICE_REVOKED).
 * Delivering a message reads nothing from the database.
 */
export class StaffLive implements LivePublisher {
  private wss: WebSocketServer | undefined;
  private identity: Identity | undefined;
  private readonly loggedIn = new Set<WebSocket>();
  private readonly states = new WeakMap<WebSocket, SocketState>();
  private readonly byDevice = new Map<string, Set<WebSocket>>();
  private readonly byWebSession = new Map<string, Set<WebSocket>>();
  private readonly users = new Map<string, UserAccess>();
  /** Counts announced access changes (and listener resets): a login that saw it move checks again. */
  private accessChanges = 0;
  private closed = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly fanout: Fanout;
  private readonly settings: LiveSettings;

  constructor(
    private readonly db: Knex,
    private readonly site: AdminSite,
    private readonly hub: NotificationHub,
    private readonly logger: Logger,
    private readonly redisUrl: string | undefined,
    settings: Partial<LiveSettings> = {},
  ) {
    this.settings = { ...DEFAULT_SETTINGS, ...settings };
    hub.subscribe(DEVICE_REVOKED_CHANNEL, (deviceId) => {
      this.accessChanges++;
      this.closeDevice(deviceId);
    });
    hub.subscribe(CHANNELS.staffAccess, (userId) => this.onAccessChange(userId));
    hub.subscribe(CHANNELS.webSessions, (idHash) => this.closeWebSession(idHash));
    // While the listener was down announcements may have been missed: every user's grants are read again.
    if (typeof hub.onReset === 'function') hub.onReset(() => this.recheckAll());
    this.fanout = new Fanout(db, hub, logger, 'live');
    this.fanout.onMessage((payload) => this.deliverPayload(payload));
    // Every process hears the queue's trigger, so each delivers to its own sockets (no re-publish).
    hub.subscribe(CHANNELS.videoQueue, (payload) => this.onVideoQueue(payload));
    // Lists refresh when a registered model's record changes through the write chain.
    site.changeListeners.push((change) => {
      this.publish(this.db, {
        to: 'mainstream',
        type: 'recordChange',
        model: change.model,
        data: { model: change.model, pk: change.pk, operation: change.operation },
      }).catch((error) => this.logger.warn({ err: error }, 'live record change not published'));
    });
  }

  private readonly messageHandlers = new Map<string, UserMessageHandler>();
  private readonly goneHandlers: ((userId: string) => void)[] = [];

  /**
   * Frames of `type` from signed-in sockets go to `handler` with the user and the frame's payload
   * (the video call's `signal`); `reply` answers on the same socket. Other types stay ignored.
   */
  handleMessages(type: string, handler: UserMessageHandler): void {
    this.messageHandlers.set(type, handler);
  }

  /** Called when a user's last socket on this process goes (it may come back: a page reload). */
  onUserGone(handler: (userId: string) => void): void {
    this.goneHandlers.push(handler);
  }

  /** Whether the user has a signed-in socket on this process. */
  isConnected(userId: string): boolean {
    return this.users.has(userId);
  }

  /** The mobile identity layer that checks socket logins (the same checks as HTTP). */
  useIdentity(identity: Identity): void {
    this.identity = identity;
  }

  /** Takes over upgrade requests for WEBSOCKET_PATH on the HTTP server; other paths are left to socket.io. */
  async attach(server: http.Server): Promise<void> {
    await this.fanout.start(this.redisUrl);
    this.wss = new WebSocketServer({ noServer: true, maxPayload: 64 * 1024, perMessageDeflate: false });
    server.on('upgrade', (request: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      const path = (request.url ?? '').split('?')[0]!;
      if (path === WEB_LIVE_PATH) {
        void this.upgradeWeb(request, socket, head);
        return;
      }
      if (path !== WEBSOCKET_PATH && path !== WEBSOCKET_PATH.slice(0, -1)) return;
      this.wss!.handleUpgrade(request, socket, head, (ws) => this.accept(ws));
    });
    this.heartbeat = setInterval(() => this.beat(), this.settings.heartbeatMs);
    this.heartbeat.unref();
  }

  /** How many sockets are logged in on this process (for tests and the benchmark). */
  get loggedInCount(): number {
    return this.loggedIn.size;
  }

  /**
   * Publishes a message to every process. With an open transaction as executor, PostgreSQL sends
   * it at commit (and drops it on rollback); with Redis it is published once the transaction commits.
   */
  async publish(executor: Executor, message: LiveMessage): Promise<void> {
    const envelope: Envelope = { correlation_id: randomUUID(), timestamp: Date.now(), message };
    // A message too big for NOTIFY (a call's SDP) is carried whole: the fan-out spills it to a table.
    await this.fanout.publish(executor, JSON.stringify(envelope));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    await this.offering;
    for (const ws of this.wss?.clients ?? []) ws.terminate();
    await new Promise<void>((resolve) => (this.wss ? this.wss.close(() => resolve()) : resolve()));
    await this.fanout.close();
  }

  /**
   * The web admin's socket: the browser sends the session cookie with the upgrade, so the socket is
   * signed in as the page is, without a token. Another site's page could open it with the user's
   * cookie too (cross-site WebSocket hijacking), so the upgrade must come from this site (Origin
   * naming the Host); otherwise, or without a live session, it is refused before any frame.
   */
  private async upgradeWeb(request: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const refuse = (status: string) => {
      socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    try {
      if (!sameSite(request)) return refuse('403 Forbidden');
      const changesBefore = this.accessChanges;
      const cookie = cookieValue(request.headers.cookie, SESSION_COOKIE);
      const resolved = cookie ? await resolveSession(this.db, cookie, this.settings.webSessionIdleSeconds) : null;
      if (!resolved || !isEligibleForMobile(resolved.principal.user)) return refuse('401 Unauthorized');
      if (socket.destroyed) return;
      this.wss!.handleUpgrade(request, socket, head, (ws) => {
        const state = this.accept(ws);
        this.logIn(ws, state, resolved.principal, { deviceId: null, webSession: resolved.session.idHash }, changesBefore);
      });
    } catch (error) {
      this.logger.warn({ err: error }, 'web live socket refused');
      refuse('503 Service Unavailable');
    }
  }

  private accept(ws: WebSocket): SocketState {
    const state: SocketState = { clientId: null, access: null, deviceId: null, webSession: null, alive: true, openedAt: Date.now() };
    this.states.set(ws, state);
    ws.on('pong', () => {
      state.alive = true;
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      void this.onMessage(ws, state, data.toString());
    });
    ws.on('close', () => this.forget(ws, state));
    ws.on('error', () => ws.terminate());
    return state;
  }

  private async onMessage(ws: WebSocket, state: SocketState, text: string): Promise<void> {
    let message: { type?: unknown; payload?: { token?: unknown } } | null;
    try {
      message = JSON.parse(text);
    } catch {
      return;
    }
    if (!message || typeof message !== 'object') return;
    // Besides login, only the types a module handles mean anything, and only once signed in.
    if (message.type !== 'login') {
      const handler = typeof message.type === 'string' ? this.messageHandlers.get(message.type) : undefined;
      if (handler && state.access && state.clientId) {
        handler(state.access.userId, message.payload, (frame) => {
          if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(frame));
        });
      }
      return;
    }
    const token = message.payload && typeof message.payload === 'object' ? message.payload.token : undefined;
    try {
      if (typeof token !== 'string' || !token || !this.identity) throw new Error('login refused');
      // a web admin socket is signed in by its session, once
      if (state.webSession) return;
      const changesBefore = this.accessChanges;
      const { principal, device } = await authenticateCaller(this.identity, `Bearer ${token}`);
      if (ws.readyState !== ws.OPEN) return;
      this.logIn(ws, state, principal, { deviceId: device.id, webSession: null }, changesBefore);
    } catch (error) {
      // Expired token, revoked device, inactive user or a database error: all look the same to the client.
      this.logger.debug({ err: error }, 'live socket login refused');
      // A failed re-login ends the earlier session on this socket: its token no longer holds.
      this.forget(ws, state);
      if (ws.readyState === ws.OPEN) ws.send('{"type":"login_failed"}');
    }
  }

  /** Signs a socket in as `principal` (after a device token's checks, or the web session's). */
  private logIn(ws: WebSocket, state: SocketState, principal: Principal, signedIn: { deviceId: string | null; webSession: string | null }, changesBefore = this.accessChanges): void {
    this.forget(ws, state);
    const models = this.modelsOf(principal);
    let access = this.users.get(principal.user.id);
    if (!access) {
      access = { userId: principal.user.id, sockets: new Set(), models, held: null, loading: false, again: false };
      this.users.set(access.userId, access);
    } else if (!access.held) {
      // read just now, so at least as new as what the user's other sockets use
      access.models = models;
    }
    access.sockets.add(ws);
    state.clientId = randomUUID();
    state.access = access;
    state.deviceId = signedIn.deviceId;
    state.webSession = signedIn.webSession;
    this.loggedIn.add(ws);
    const [index, key] = signedIn.deviceId ? [this.byDevice, signedIn.deviceId] : [this.byWebSession, signedIn.webSession!];
    let sockets = index.get(key);
    if (!sockets) index.set(key, (sockets = new Set()));
    sockets.add(ws);
    ws.send(JSON.stringify({ type: 'login', token: state.clientId, permissions: [...models].sort() }));
    // A change announced while the checks ran may have come before or after their read: read again.
    if (this.accessChanges !== changesBefore) this.recheck(access);
  }

  private forget(ws: WebSocket, state: SocketState): void {
    this.loggedIn.delete(ws);
    if (state.deviceId) {
      const sockets = this.byDevice.get(state.deviceId);
      sockets?.delete(ws);
      if (sockets && !sockets.size) this.byDevice.delete(state.deviceId);
    }
    if (state.webSession) {
      const sockets = this.byWebSession.get(state.webSession);
      sockets?.delete(ws);
      if (sockets && !sockets.size) this.byWebSession.delete(state.webSession);
    }
    const access = state.access;
    if (access) {
      access.sockets.delete(ws);
      if (!access.sockets.size && this.users.get(access.userId) === access) {
        this.users.delete(access.userId);
        for (const handler of this.goneHandlers) handler(access.userId);
      }
    }
    state.clientId = state.deviceId = state.webSession = null;
    state.access = null;
  }

  private modelsOf(principal: Principal): ReadonlySet<string> {
    return new Set(this.site.visibleModels(principal).map((model) => model.key));
  }

  /** Ends a socket's session at once (nothing more is sent to it) and closes it with `code`. */
  private end(ws: WebSocket, code: number, reason: string, frame?: string): void {
    const state = this.states.get(ws);
    if (state) this.forget(ws, state);
    if (frame && ws.readyState === ws.OPEN) ws.send(frame);
    ws.close(code, reason);
  }

  private closeDevice(deviceId: string): void {
    for (const ws of [...(this.byDevice.get(deviceId) ?? [])]) this.end(ws, CLOSE_DEVICE_REVOKED, 'device revoked');
  }

  private closeWebSession(idHash: string): void {
    for (const ws of [...(this.byWebSession.get(idHash) ?? [])]) this.end(ws, CLOSE_SESSION_ENDED, 'session ended');
  }

  /**
   * Web sessions end without an announcement when they go idle or the password changes (the pages
   * find out at their next request): at each heartbeat the sockets' sessions are checked (one
   * statement for all of this process's) and the ended ones' sockets closed.
   */
  private async checkWebSessions(): Promise<void> {
    const idHashes = [...this.byWebSession.keys()];
    if (!idHashes.length) return;
    const { rows } = (await this.db.raw(
      `select s.id_hash from staff_web_sessions s join staff_users u on u.id = s.user_id
       where s.id_hash = any(?) and u.is_active and s.last_seen_at >= now() - make_interval(secs => ?)
         and not coalesce(u.password_changed_at > s.created_at, false)`,
      [idHashes, this.settings.webSessionIdleSeconds],
    )) as { rows: { id_hash: string }[] };
    const live = new Set(rows.map((row) => row.id_hash));
    for (const idHash of idHashes) if (!live.has(idHash)) this.closeWebSession(idHash);
  }

  private onAccessChange(userId: string): void {
    this.accessChanges++;
    const access = this.users.get(userId);
    if (access) this.recheck(access);
  }

  private recheckAll(): void {
    this.accessChanges++;
    for (const access of this.users.values()) this.recheck(access);
  }

  /** Holds the user's messages from now on and reads their grants again. */
  private recheck(access: UserAccess): void {
    access.held ??= [];
    void this.reload(access);
  }

  /**
   * Reads the user's principal and which of their sockets' devices still stand (one statement),
   * then applies it: the held messages go out filtered by the new grants, or the sockets close.
   * One read at a time per user; a change announced during a read makes it read again.
   */
  private async reload(access: UserAccess): Promise<void> {
    if (access.loading) {
      access.again = true;
      return;
    }
    access.loading = true;
    let retryMs = RELOAD_RETRY_MS;
    try {
      for (;;) {
        access.again = false;
        const deviceIds = [...new Set([...access.sockets].map((ws) => this.states.get(ws)?.deviceId).filter((id): id is string => Boolean(id)))];
        let loaded: { principal: Principal; extra: { devices: string[] } } | null;
        try {
          loaded = await loadPrincipalWith<{ devices: string[] }>(this.db, access.userId, { devices: LIVE_DEVICES_SQL }, [deviceIds]);
        } catch (error) {
          this.logger.warn({ err: error, userId: access.userId }, 'live socket grants not reloaded; retrying');
          await new Promise((resolve) => setTimeout(resolve, retryMs).unref());
          retryMs = Math.min(retryMs * 2, RELOAD_RETRY_MAX_MS);
          if (this.closed || this.users.get(access.userId) !== access) return;
          continue;
        }
        // every socket of the user went meanwhile: nothing to apply
        if (this.closed || this.users.get(access.userId) !== access) return;
        if (access.again) continue;
        this.apply(access, loaded);
        return;
      }
    } finally {
      access.loading = false;
    }
  }

  private apply(access: UserAccess, loaded: { principal: Principal; extra: { devices: string[] } } | null): void {
    const principal = loaded?.principal;
    if (!principal || !isEligibleForMobile(principal.user)) {
      // the spec's refusal frame (no reason, as for a refused login), then the close
      for (const ws of [...access.sockets]) this.end(ws, CLOSE_ACCOUNT_INACTIVE, 'account inactive', '{"type":"login_failed"}');
      access.held = null;
      return;
    }
    const standing = new Set(loaded!.extra.devices);
    for (const ws of [...access.sockets]) {
      const deviceId = this.states.get(ws)?.deviceId;
      if (deviceId && !standing.has(deviceId)) this.end(ws, CLOSE_DEVICE_REVOKED, 'device revoked');
    }
    access.models = this.modelsOf(principal);
    const held = access.held ?? [];
    access.held = null;
    for (const message of held) this.sendToUser(access, message);
  }

  private sendToUser(access: UserAccess, message: HeldMessage): void {
    if (message.model && !access.models.has(message.model)) return;
    for (const ws of access.sockets) {
      const state = this.states.get(ws);
      if (state?.clientId) ws.send(`{"event":"broadcast","client_id":"${state.clientId}${message.tail}`);
    }
  }

  private offering: Promise<void> | undefined;
  private offerAgain = false;

  private onVideoQueue(payload: string): void {
    let data: Record<string, unknown>;
    try {
      data = JSON.parse(payload) as Record<string, unknown>;
    } catch {
      return;
    }
    this.deliver({ correlation_id: randomUUID(), timestamp: Date.now(), message: { to: 'mainstream', type: 'videoCallQueue', model: SESSION_MODEL, data } });
    if (data.status === 'waiting') this.scheduleOffers();
  }

  /** One offer round at a time per process; changes during a round ask for one more. */
  private scheduleOffers(): void {
    if (this.offering) {
      this.offerAgain = true;
      return;
    }
    this.offering = offerCalls(this.db)
      .then(() => undefined)
      .catch((error) => this.logger.warn({ err: error }, 'video-call offer round failed'))
      .finally(() => {
        this.offering = undefined;
        if (this.offerAgain) {
          this.offerAgain = false;
          this.scheduleOffers();
        }
      });
  }

  private deliverPayload(payload: string): void {
    let envelope: Envelope;
    try {
      envelope = JSON.parse(payload) as Envelope;
    } catch {
      this.logger.warn('unreadable live message dropped');
      return;
    }
    this.deliver(envelope);
  }

  /** Sends to this process's sockets; the frame is serialised once, each socket only adds its client_id. */
  private deliver(envelope: Envelope): void {
    const { message } = envelope;
    const tail = `","timestamp":${envelope.timestamp},"correlation_id":${JSON.stringify(envelope.correlation_id)},"data":${JSON.stringify({
      to: message.to,
      type: message.type,
      model: message.model ?? null,
      data: message.data,
    })}}`;
    let held: HeldMessage | undefined;
    for (const ws of this.loggedIn) {
      const state = this.states.get(ws)!;
      const access = state.access!;
      if (message.to !== 'mainstream' && message.to !== access.userId) continue;
      if (access.held) {
        // the user's grants are being read again: the message waits for them (once per user)
        held ??= { model: message.model ?? null, tail };
        if (access.held.at(-1) !== held) {
          if (access.held.length >= MAX_HELD) access.held.shift();
          access.held.push(held);
        }
        continue;
      }
      if (message.model && !access.models.has(message.model)) continue;
      ws.send(`{"event":"broadcast","client_id":"${state.clientId}${tail}`);
    }
  }

  private beat(): void {
    const now = Date.now();
    for (const ws of this.wss?.clients ?? []) {
      const state = this.states.get(ws);
      if (!state) continue;
      if (!state.alive || (!state.clientId && now - state.openedAt > this.settings.loginTimeoutMs)) {
        ws.terminate();
        continue;
      }
      state.alive = false;
      ws.ping();
    }
    this.checkWebSessions().catch((error) => this.logger.warn({ err: error }, 'web live sessions not checked'));
  }
}

/** Whether an upgrade comes from a page of this site: its Origin names the host it was sent to. */
function sameSite(request: http.IncomingMessage): boolean {
  const origin = request.headers.origin;
  if (!origin || !request.headers.host) return false;
  try {
    return new URL(origin).host === request.headers.host;
  } catch {
    return false;
  }
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const [key, ...value] = part.trim().split('=');
    if (key === name) return value.join('=') || null;
  }
  return null;
}
