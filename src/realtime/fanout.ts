import type { Knex } from 'knex';
import { createClient, type RedisClientType } from 'redis';
import type { Executor } from '../db/knex.ts';
import { announce, CHANNELS, type Channel, type NotificationHub } from '../db/notifications.ts';
import type { Logger } from '../logger.ts';

/** The NOTIFY channel every fan-out shares (topics tell them apart). */
const FANOUT_CHANNEL: Channel = CHANNELS.fanout;
/** PostgreSQL refuses NOTIFY payloads of 8000 bytes or more; bigger ones are spilled (leaving room for the topic). */
const MAX_NOTIFY_BYTES = 7900;
/** How long a spilled payload is kept: every process has read it long before. */
const SPILL_KEEP_SECONDS = 60;

/**
 * Text messages of one topic to every process of the service, each delivering them to its own
 * connections (src/realtime/documents.ts; the staff socket can move onto it).
 *
 * Without Redis it is PostgreSQL NOTIFY on FANOUT_CHANNEL, `<topic>:<payload>`: published with a
 * transaction as executor it goes out at commit and never on rollback. A payload too big for
 * NOTIFY is written to realtime_spill (migration 0027) with the same executor and `<topic>#<id>`
 * is notified instead; every process reads the row, and rows go a minute after they were written.
 * With REDIS_URL it is Redis pub/sub on `warden:fanout:<topic>` (no size limit), published once
 * the writer's transaction has committed. Each process hands payloads on in the order it heard them.
 */
export class Fanout {
  private handler: ((payload: string) => void) | undefined;
  private publisher: RedisClientType | undefined;
  private subscriber: RedisClientType | undefined;
  /** Deliveries in order: a spilled payload being read holds back the ones heard after it. */
  private delivering: Promise<void> = Promise.resolve();
  private purgeTimer: NodeJS.Timeout | undefined;
  private lastSpillAt = 0;
  private closed = false;

  constructor(
    private readonly db: Knex,
    hub: NotificationHub,
    private readonly logger: Logger,
    private readonly topic: string,
  ) {
    if (!/^[a-z0-9_.-]+$/.test(topic)) throw new Error(`fan-out topic "${topic}": letters, digits, _ . - only`);
    hub.subscribe(FANOUT_CHANNEL, (text) => this.heard(text));
  }

  /** Connects to Redis when a URL is given (otherwise PostgreSQL carries the messages); spill rows a stopped process left are purged. */
  async start(redisUrl: string | undefined): Promise<void> {
    if (redisUrl) {
      this.publisher = createClient({ url: redisUrl }) as RedisClientType;
      this.publisher.on('error', (error) => this.logger.warn({ err: error, topic: this.topic }, 'redis error (fan-out publisher)'));
      this.subscriber = this.publisher.duplicate();
      this.subscriber.on('error', (error) => this.logger.warn({ err: error, topic: this.topic }, 'redis error (fan-out subscriber)'));
      await Promise.all([this.publisher.connect(), this.subscriber.connect()]);
      await this.subscriber.subscribe(this.redisChannel, (payload) => this.deliver(async () => payload));
    }
    await this.purge();
  }

  /** The one receiver of this topic's payloads on this process. */
  onMessage(handler: (payload: string) => void): void {
    this.handler = handler;
  }

  /** Sends `payload` to every process; inside a transaction it leaves at commit (see the class). */
  async publish(executor: Executor, payload: string): Promise<void> {
    const publisher = this.publisher;
    if (publisher) {
      const send = () => publisher.publish(this.redisChannel, payload).then(() => undefined);
      const transaction = executor as Knex.Transaction;
      if (transaction.isTransaction) {
        transaction.executionPromise.then(send, () => undefined).catch((error) => this.logger.warn({ err: error, topic: this.topic }, 'fan-out message not published'));
        return;
      }
      await send();
      return;
    }
    const inline = `${this.topic}:${payload}`;
    if (Buffer.byteLength(inline) < MAX_NOTIFY_BYTES) {
      await announce(executor, FANOUT_CHANNEL, inline);
      return;
    }
    const { rows } = (await executor.raw('insert into realtime_spill (payload) values (?) returning id', [payload])) as { rows: { id: string }[] };
    await announce(executor, FANOUT_CHANNEL, `${this.topic}#${rows[0]!.id}`);
    this.lastSpillAt = Date.now();
    this.schedulePurge();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.purgeTimer);
    this.purgeTimer = undefined;
    await this.subscriber?.quit().catch(() => {});
    await this.publisher?.quit().catch(() => {});
    await this.delivering;
  }

  private get redisChannel(): string {
    return `warden:fanout:${this.topic}`;
  }

  private heard(text: string): void {
    const at = this.topic.length;
    if (!text.startsWith(this.topic) || (text[at] !== ':' && text[at] !== '#')) return;
    const body = text.slice(at + 1);
    if (text[at] === ':') {
      this.deliver(async () => body);
      return;
    }
    this.deliver(async () => {
      const row = (await this.db('realtime_spill').where({ id: body }).first('payload')) as { payload: string } | undefined;
      if (!row) this.logger.warn({ topic: this.topic, id: body }, 'spilled fan-out message already purged; dropped');
      return row?.payload;
    });
  }

  private deliver(read: () => Promise<string | undefined>): void {
    this.delivering = this.delivering
      .then(read)
      .then((payload) => {
        if (payload !== undefined) this.handler?.(payload);
      })
      .catch((error) => this.logger.warn({ err: error, topic: this.topic }, 'fan-out message not delivered'));
  }

  /** Deletes spill rows older than SPILL_KEEP_SECONDS; again a minute later while this process keeps spilling. */
  private async purge(): Promise<void> {
    this.purgeTimer = undefined;
    await this.db
      .raw('delete from realtime_spill where created_at < clock_timestamp() - make_interval(secs => ?)', [SPILL_KEEP_SECONDS])
      .catch((error) => this.logger.warn({ err: error }, 'fan-out spill rows not purged; the next purge tries again'));
    if (Date.now() - this.lastSpillAt <= SPILL_KEEP_SECONDS * 1000) this.schedulePurge();
  }

  private schedulePurge(): void {
    if (this.closed) return;
    this.purgeTimer ??= setTimeout(() => void this.purge(), (SPILL_KEEP_SECONDS + 1) * 1000).unref();
  }
}
