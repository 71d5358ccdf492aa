import type { Knex } from 'knex';
import type pg from 'pg';
import type { Executor } from './knex.ts';
import type { Logger } from '../logger.ts';

/** Channels on which writers announce changes that per-process caches must drop. */
export const CHANNELS = {
  credentials: 'warden_credentials',
  rules: 'warden_rules',
  events: 'warden_events',
  sanctions: 'warden_sanctions',
  // payload: the id of a mobile device just revoked or deleted (live sockets of that device close);
  // revokeDevice announces it, and so does a trigger on mobile_devices (migration 0022) for any other writer
  mobileDevices: 'warden_mobile_devices',
  // payload: the id of a staff user whose active/staff/superuser flags, direct permissions, groups or
  // groups' permissions just changed, or who was deleted (triggers of migration 0022): live sockets reload the grants
  staffAccess: 'warden_staff_access',
  // payload: the id hash of a web admin session just ended (logout, idle, password change): its live sockets close
  webSessions: 'warden_web_sessions',
  // payload: `<topic>:<message>` or `<topic>#<spill id>` of a fan-out (src/realtime/fanout.ts: the documents socket)
  fanout: 'warden_fanout',
  // payload: {session_id, status} of a video_call_queue row just written (announced by its trigger)
  videoQueue: 'warden_video_queue',
  // payload: the name of a job queue a job was just sent to (its workers fetch at once)
  jobs: 'warden_jobs',
} as const;
export type Channel = (typeof CHANNELS)[keyof typeof CHANNELS];

/** Announces a change inside the writer's transaction; PostgreSQL delivers it at commit. */
export async function announce(executor: Executor, channel: Channel, payload = ''): Promise<void> {
  await executor.raw('select pg_notify(?, ?)', [channel, payload]);
}

/**
 * One value read from the database, kept until a change is announced on its channel or the LISTEN
 * connection is lost, and never while it is down. A read that an announcement overtook answers
 * its caller but is not kept: it may hold the rows of just before the change, which would
 * otherwise serve every later caller until the next change.
 */
export class AnnouncedValue<T> {
  private value: T | undefined;
  private invalidations = 0;

  constructor(
    private readonly hub: NotificationHub,
    channel: Channel,
    private readonly load: () => Promise<T>,
  ) {
    const invalidate = () => {
      this.invalidations++;
      this.value = undefined;
    };
    hub.subscribe(channel, invalidate);
    hub.onReset(invalidate);
  }

  async get(): Promise<T> {
    if (this.value !== undefined) return this.value;
    const invalidationsBefore = this.invalidations;
    const value = await this.load();
    if (this.hub.healthy && this.invalidations === invalidationsBefore) this.value = value;
    return value;
  }
}

/**
 * One LISTEN connection per process for every cache. Handlers get each payload; `onReset`
 * handlers run whenever the connection is lost, because notifications may have been missed then.
 * `healthy` is false while disconnected: caches must not keep entries in that state.
 */
export class NotificationHub {
  private readonly handlers = new Map<Channel, Array<(payload: string) => void>>();
  private readonly resetHandlers: Array<() => void> = [];
  private client: pg.Client | undefined;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;
  healthy = false;

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
  ) {}

  subscribe(channel: Channel, handler: (payload: string) => void): void {
    const list = this.handlers.get(channel) ?? [];
    list.push(handler);
    this.handlers.set(channel, list);
  }

  onReset(handler: () => void): void {
    this.resetHandlers.push(handler);
  }

  async start(): Promise<void> {
    const client = (await this.db.client.acquireRawConnection()) as pg.Client;
    client.on('notification', (message) => {
      for (const handler of this.handlers.get(message.channel as Channel) ?? []) handler(message.payload ?? '');
    });
    const lost = (error?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
      this.healthy = false;
      for (const handler of this.resetHandlers) handler();
      if (this.stopped) return;
      this.logger.warn({ err: error }, 'notification listener lost; reconnecting');
      this.retryTimer = setTimeout(() => this.start().catch((retryError) => this.logger.warn({ err: retryError }, 'listener reconnect failed')), 1000);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    for (const channel of Object.values(CHANNELS)) await client.query(`LISTEN ${channel}`);
    this.client = client;
    this.healthy = true;
    // Whatever changed while disconnected is unknown: start every cache afresh.
    for (const handler of this.resetHandlers) handler();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.healthy = false;
    await client?.end().catch(() => {});
  }
}
