import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import { openDatabase, type Database } from './db/database.ts';
import { createApp } from './http/app.ts';
import { createMetrics } from './http/metrics.ts';
import { createLogger, type Logger } from './logger.ts';
import { NotificationHub } from './db/notifications.ts';
import { JobQueue, QUEUES } from './jobs/queue.ts';
import { verifyArtifact } from './modules/kyc/pipeline.ts';
import { LocalFileStore } from './modules/kyc/storage.ts';
import { notifyFlow } from './modules/kyc/webhook.ts';
import { DocumentsChannel } from './realtime/documents.ts';
import { EventCache } from './modules/events/service.ts';
import { RuleCache } from './modules/rules/store.ts';
import { ScreeningService } from './modules/screening/service.ts';
import { createPools } from './pools.ts';
import { CredentialCache } from './modules/merchant/credential-cache.ts';
import { loadSigningKey, TokenService } from './modules/merchant/tokens.ts';

export interface RunningServer {
  context: AppContext;
  server: http.Server;
  url: string;
  /** Stops accepting, drains in-flight requests (up to `drainMs`), then closes the database. */
  close(drainMs?: number): Promise<void>;
}

/** Builds the context over an open database: the one place where the pieces are wired together. */
export async function buildContext(config: Config, db: Database['knex'], logger: Logger): Promise<AppContext> {
  const tokens = new TokenService(await loadSigningKey(db, config.jwtSecret));
  const notifications = new NotificationHub(db, logger);
  const pools = createPools(config);
  const jobs = await JobQueue.start(
    db,
    { jobTimeoutSeconds: config.jobTimeoutSeconds, maintenanceSeconds: config.jobMaintenanceSeconds, pollingSeconds: 0.5 },
    logger,
  );
  const documents = new DocumentsChannel(tokens, logger);
  const context: AppContext = {
    config,
    db,
    logger,
    metrics: createMetrics(),
    tokens,
    credentials: new CredentialCache(db, notifications),
    events: new EventCache(db, notifications),
    rules: new RuleCache(db, notifications),
    screening: await ScreeningService.create(config, db, pools, notifications),
    pools,
    jobs,
    files: new LocalFileStore(config.dataDir),
    documents,
    async close() {
      await jobs.stop();
      await documents.close();
      await notifications.stop();
      await pools.close();
    },
  };
  await notifications.start();
  // One more verification at a time than there are vision workers, so every worker has work while
  // another job reads files or writes results.
  await jobs.work<{ artifactId: string }>(QUEUES.verifyArtifact, (job) => verifyArtifact(context, job.data.artifactId, job.finalAttempt), config.visionWorkers + 1);
  await jobs.work<{ sessionId: string }>(QUEUES.notifyFlow, (job) => notifyFlow(context, job.data.sessionId, job.attempt));
  return context;
}

/** Opens the database, builds the context and app, and listens. */
export async function startServer(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<RunningServer> {
  const database = await openDatabase(config, (message) => logger.info(message));
  const context = await buildContext(config, database.knex, logger);
  const koa = createApp(context);
  const server = http.createServer(koa.callback());
  server.keepAliveTimeout = 65_000;
  await context.documents.attach(server, config.redisUrl);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? 'localhost' : host}:${address.port}`;
  logger.info({ url, database: database.description }, `Warden listening on ${url}`);

  let closing: Promise<void> | undefined;
  return {
    context,
    server,
    url,
    close(drainMs = 10_000) {
      closing ??= (async () => {
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        const timer = setTimeout(() => server.closeAllConnections(), drainMs);
        await drained;
        clearTimeout(timer);
        await context.close();
        await database.close();
      })();
      return closing;
    },
  };
}
