import type { Knex } from 'knex';
import PgBoss from 'pg-boss';
import type { Logger } from '../logger.ts';
import { announce, CHANNELS, type NotificationHub } from '../db/notifications.ts';
import { runStatement, type Connection } from '../db/knex.ts';

export const QUEUES = {
  verifyArtifact: 'verify-artifact',
  notifyFlow: 'notify-flow',
  notifyDecision: 'notify-decision',
  replayRuleChange: 'replay-rule-change',
  sendPush: 'send-push',
  runReport: 'run-report',
  aiReview: 'ai-review',
  assistantTurn: 'assistant-turn',
  screeningHits: 'screening-hits',
} as const;

export interface QueueSettings {
  /** Seconds a job may run before it is taken as lost and retried (a kill -9 leaves jobs active). */
  jobTimeoutSeconds: number;
  /** How often expired jobs are looked for. */
  maintenanceSeconds: number;
  /**
   * How often this process looks for jobs that no NOTIFY announced: retries whose delay has
   * passed, and anything sent while its listener was reconnecting.
   */
  pollingSeconds: number;
}

type Executor = { executeSql(text: string, values: unknown[]): Promise<{ rows: unknown[] }> };

/** pg-boss speaks `$1` placeholders to a pg client; hand it knex's connections directly. */
function poolExecutor(db: Knex): Executor {
  return {
    async executeSql(text, values) {
      const connection = (await db.client.acquireConnection()) as Connection;
      try {
        return await runStatement(connection, { text, values });
      } catch (error) {
        // pg-boss sends whole `BEGIN; ...; COMMIT` scripts: one that fails midway leaves its
        // connection inside an aborted transaction, which must not go back to the pool like that.
        await runStatement(connection, 'ROLLBACK').catch(() => {});
        throw error;
      } finally {
        await db.client.releaseConnection(connection);
      }
    },
  };
}

/** Inside a knex transaction the client hands out the transaction's own connection. */
function transactionExecutor(trx: Knex.Transaction): Executor {
  return {
    async executeSql(text, values) {
      const connection = (await trx.client.acquireConnection()) as Connection;
      return runStatement(connection, { text, values });
    },
  };
}

/** pg-boss's schema: its tables, which the process's poll reads too. */
const SCHEMA = 'pgboss';

/** How often a worker fetches on its own, should the process's poll (JobQueue.poll) keep failing. */
const WORKER_BACKSTOP_SECONDS = 60;

/** Any fixed key: it only has to be the same in every Warden process sharing the database. */
const QUEUE_CREATION_LOCK = 7_302_451_118;

/**
 * Two processes starting together would both create the queues' partition tables, and PostgreSQL
 * answers one of them with a deadlock. A session advisory lock held on one connection while the
 * queues are created makes the second process wait and then find them made.
 */
async function withStartupLock(db: Knex, work: () => Promise<void>): Promise<void> {
  const connection = (await db.client.acquireConnection()) as Connection;
  try {
    await runStatement(connection, { text: 'SELECT pg_advisory_lock($1)', values: [QUEUE_CREATION_LOCK] });
    try {
      await work();
    } finally {
      await runStatement(connection, { text: 'SELECT pg_advisory_unlock($1)', values: [QUEUE_CREATION_LOCK] });
    }
  } finally {
    await db.client.releaseConnection(connection);
  }
}

export interface JobHandlerContext<T> {
  data: T;
  /** 1 for the first try. */
  attempt: number;
  /** True on the last attempt: a handler then records a failure result instead of throwing. */
  finalAttempt: boolean;
}

/**
 * Durable jobs in PostgreSQL (pg-boss, schema `pgboss`) on the service's own connection pool.
 * Jobs are sent inside the caller's transaction, so an upload is confirmed only once its job is
 * committed with it; jobs survive a kill and are picked up (or, if they were running, retried
 * after `jobTimeoutSeconds`) when a process starts.
 *
 * A job sent announces its queue on the jobs channel (delivered at commit, to every process), and
 * the workers of that queue fetch at once; a worker that finished a job fetches again at once, so a
 * burst drains without waiting. Polling is only the fallback: every `pollingSeconds` one statement
 * per process asks which of its queues hold a job ready, and wakes only their workers. Ten workers
 * polling twice a second were a steady load of database round trips that, on two cores, showed in
 * the tail latency of unrelated requests (bench/RESULTS.md, mobile identity); polling every two
 * seconds each, started together, they still fetched in one burst of eleven statements every two
 * seconds, which a 1000-record batch caught now and then as 10-20 ms of PostgreSQL's time.
 */
export class JobQueue {
  private readonly boss: PgBoss;
  /** pg-boss worker ids by queue name, for waking them. */
  private readonly workers = new Map<string, string[]>();
  private readonly poller: NodeJS.Timeout;
  private polling = false;
  private stopped = false;

  private constructor(
    boss: PgBoss,
    private readonly db: Knex,
    private readonly settings: QueueSettings,
    private readonly logger: Logger,
    hub?: NotificationHub,
  ) {
    this.boss = boss;
    hub?.subscribe(CHANNELS.jobs, (name) => this.wake(name));
    // Announcements may have been missed while the listener was away: every worker looks once.
    hub?.onReset(() => {
      for (const name of this.workers.keys()) this.wake(name);
    });
    this.poller = setInterval(() => void this.poll(), settings.pollingSeconds * 1000);
    this.poller.unref();
  }

  /** Wakes the workers of the queues that hold a job ready (pg-boss's own fetch condition). */
  private async poll(): Promise<void> {
    if (this.polling || this.workers.size === 0) return;
    this.polling = true;
    try {
      const { rows } = (await this.db.raw(`select distinct name from ${SCHEMA}.job where name = any(?) and state < 'active' and start_after < now()`, [
        [...this.workers.keys()],
      ])) as { rows: Array<{ name: string }> };
      for (const { name } of rows) this.wake(name);
    } catch (error) {
      // A look still running when the queue stops fails with the pool: nothing to report then.
      if (!this.stopped) this.logger.warn({ err: error }, 'looking for ready jobs failed; the next look tries again');
    } finally {
      this.polling = false;
    }
  }

  static async start(db: Knex, settings: QueueSettings, logger: Logger, hub?: NotificationHub): Promise<JobQueue> {
    const boss = new PgBoss({
      db: poolExecutor(db),
      schema: SCHEMA,
      maintenanceIntervalSeconds: settings.maintenanceSeconds,
      monitorStateIntervalSeconds: 60,
      schedule: false,
    });
    boss.on('error', (error) => logger.error({ err: error }, 'job queue error'));
    await boss.start();
    await withStartupLock(db, async () => {
      for (const name of Object.values(QUEUES)) {
        await boss.createQueue(name, {
          name,
          retryLimit: 4,
          retryDelay: 2,
          retryBackoff: true,
          expireInSeconds: settings.jobTimeoutSeconds,
        });
      }
    });
    return new JobQueue(boss, db, settings, logger, hub);
  }

  private wake(name: string): void {
    for (const id of this.workers.get(name) ?? []) this.boss.notifyWorker(id);
  }

  /** Sends one job in the caller's transaction and announces its queue, so the workers fetch at once. */
  private async send(trx: Knex.Transaction, name: string, data: object, options: PgBoss.SendOptions = {}): Promise<string | null> {
    const id = await this.boss.send(name, data, { ...options, db: transactionExecutor(trx) });
    await announce(trx, CHANNELS.jobs, name);
    return id;
  }

  /** A verification now, or `startAfterSeconds` from now (a selfie's wait for its document ends so). */
  async enqueueVerification(trx: Knex.Transaction, artifactId: string, startAfterSeconds?: number): Promise<void> {
    await this.send(trx, QUEUES.verifyArtifact, { artifactId }, startAfterSeconds ? { startAfter: startAfterSeconds } : {});
  }

  async notifyFlow(trx: Knex.Transaction, sessionId: string): Promise<void> {
    await this.send(trx, QUEUES.notifyFlow, { sessionId }, { retryLimit: 8 });
  }

  /** A compliance decision that changed a record's outcome, for the merchant's webhook (retried like flow notifications). */
  async notifyDecision(trx: Knex.Transaction, decisionId: string): Promise<void> {
    await this.send(trx, QUEUES.notifyDecision, { decisionId }, { retryLimit: 8 });
  }

  /** The replay evidence of a rule change waiting for approval. */
  async replayRuleChange(trx: Knex.Transaction, requestId: string): Promise<void> {
    await this.send(trx, QUEUES.replayRuleChange, { requestId }, { retryLimit: 2 });
  }

  /** One push job per notification and device, so a provider's retry never resends to the others. */
  async sendPush(trx: Knex.Transaction, deliveries: { notificationId: string; deviceId: string }[]): Promise<void> {
    if (!deliveries.length) return;
    await this.boss.insert(
      deliveries.map((data) => ({ name: QUEUES.sendPush, data, retryLimit: 5, retryDelay: 1, retryBackoff: true, expireInSeconds: 60 })),
      { db: transactionExecutor(trx) },
    );
    await announce(trx, CHANNELS.jobs, QUEUES.sendPush);
  }

  /** The screening hits of a large customer batch's matched customers, written from their stored matches (screening/hits.ts). */
  async writeScreeningHits(trx: Knex.Transaction, customerIds: readonly string[]): Promise<void> {
    await this.send(trx, QUEUES.screeningHits, { customerIds }, { retryLimit: 5, retryDelay: 1, retryBackoff: true });
  }

  /** A report run; a failing report records its error on the last attempt instead of throwing. */
  async runReport(trx: Knex.Transaction, resultId: number): Promise<void> {
    await this.send(trx, QUEUES.runReport, { resultId }, { retryLimit: 1 });
  }

  /**
   * AI work (issue 14): a case review or an assistant turn. Not retried by the queue: the gateway
   * already retries a malformed answer once, and a second model call would bill twice; a failure is
   * stored with its reason by the handler.
   */
  async runAi(trx: Knex.Transaction, name: typeof QUEUES.aiReview | typeof QUEUES.assistantTurn, data: object): Promise<string | null> {
    return this.send(trx, name, data, { retryLimit: 0 });
  }

  /**
   * Runs `handler` for each job, `concurrency` at a time per queue and process. A throw retries
   * the job with backoff until its retry limit; the last attempt is flagged so the handler can
   * record a definite failure instead of losing the job.
   */
  async work<T extends object>(name: string, handler: (job: JobHandlerContext<T>) => Promise<void>, concurrency = 1): Promise<void> {
    // pg-boss 10 has no per-worker concurrency: each registered worker fetches one job at a time.
    for (let n = 0; n < concurrency; n++) await this.workOne(name, handler);
  }

  private async workOne<T extends object>(name: string, handler: (job: JobHandlerContext<T>) => Promise<void>): Promise<void> {
    let id: string | undefined;
    id = await this.boss.work<T>(
      name,
      // The process's poll wakes a worker when its queue holds a job; its own polling is only a backstop.
      { includeMetadata: true, batchSize: 1, pollingIntervalSeconds: Math.max(WORKER_BACKSTOP_SECONDS, this.settings.pollingSeconds) },
      async (jobs) => {
        // Whatever happens to this job, the worker fetches again at once rather than after the polling interval.
        if (id) this.boss.notifyWorker(id);
        for (const job of jobs) {
          await handler({ data: job.data, attempt: job.retryCount + 1, finalAttempt: job.retryCount >= job.retryLimit }).catch((error) => {
            this.logger.warn({ err: error, queue: name, job: job.id, attempt: job.retryCount }, 'job failed; it will be retried');
            throw error;
          });
        }
      },
    );
    this.workers.set(name, [...(this.workers.get(name) ?? []), id]);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.poller);
    await this.boss.stop({ graceful: true, wait: true, timeout: 10_000 });
  }
}
