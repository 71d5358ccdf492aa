import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from './config.ts';
import type { AppContext } from './context.ts';
import { openDatabase, type Database } from './db/database.ts';
import { createApp } from './app/http.ts';
import { createMetrics } from './http/metrics.ts';
import { createLogger, type Logger } from './logger.ts';
import { NotificationHub } from './db/notifications.ts';
import { JobQueue, QUEUES } from './jobs/queue.ts';
import { verifyArtifact } from './modules/kyc/pipeline.ts';
import { sweepTemporaryUploads } from './http/multipart.ts';
import { LocalFileStore } from './modules/kyc/storage.ts';
import { notifyFlow } from './modules/kyc/webhook.ts';
import { DocumentsChannel } from './realtime/documents.ts';
import { EventCache } from './modules/events/service.ts';
import { RuleCache } from './modules/rules/store.ts';
import { ScreeningService } from './modules/screening/service.ts';
import { createPools } from './pools.ts';
import { bindAdminSite } from './app/registrations.ts';
import { installCaseClosure } from './modules/cases/closing.ts';
import { installDecisionApplier } from './modules/cases/decisions.ts';
import { notifyDecision } from './modules/cases/webhook.ts';
import { attachReplayEvidence } from './modules/approvals/replay.ts';
import { createApprovalHook } from './modules/approvals/service.ts';
import { StaffLive } from './realtime/staff.ts';
import { VideoCallSignalling } from './modules/videocall/signalling.ts';
import { describeIceServers } from './modules/videocall/ice.ts';
import { deliverPush } from './modules/push/delivery.ts';
import { PushService } from './modules/push/service.ts';
import { bindNotifications } from './modules/notifications/service.ts';
import { runReport } from './modules/reports/service.ts';
import { runReview } from './modules/ai/review.ts';
import { runAssistantTurn, sweepConversations } from './modules/assistant/service.ts';
import { createIdentity } from './modules/mobile/guard.ts';
import { CredentialCache } from './modules/merchant/credential-cache.ts';
import { loadSigningKey, TokenService } from './auth/tokens.ts';
import { retryOnConflict } from './db/knex.ts';
import { upsertHitsOfCustomers } from './modules/screening/hits.ts';

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
    { jobTimeoutSeconds: config.jobTimeoutSeconds, maintenanceSeconds: config.jobMaintenanceSeconds, pollingSeconds: 2 },
    logger,
    notifications,
  );
  const documents = new DocumentsChannel(db, notifications, tokens, logger);
  // Bound before anything listens: a registration that refers to a missing field stops start-up here.
  const site = await bindAdminSite(db);
  const live = new StaffLive(db, site, notifications, logger, config.redisUrl, { webSessionIdleSeconds: config.adminSessionIdleSeconds });
  const push = PushService.fromConfig(config);
  bindNotifications(db, { live, jobs });
  const videoCalls = new VideoCallSignalling(db, config, logger);
  videoCalls.attach(documents, live, notifications);
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
    videoCalls,
    live,
    push,
    backoffice: { site, db, approvalHook: null },
    listenUrl: null,
    async close() {
      clearInterval(daily);
      await jobs.stop();
      videoCalls.close();
      await documents.close();
      await live.close();
      context.push.close();
      await notifications.stop();
      await pools.close();
    },
  };
  await notifications.start();
  // One more verification at a time than there are vision workers, so every worker has work while
  // another job reads files or writes results.
  await jobs.work<{ artifactId: string }>(QUEUES.verifyArtifact, (job) => verifyArtifact(context, job.data.artifactId, job.finalAttempt), config.visionWorkers + 1);
  await jobs.work<{ sessionId: string }>(QUEUES.notifyFlow, (job) => notifyFlow(context, job.data.sessionId, job.attempt));
  live.useIdentity(createIdentity(context));
  await jobs.work<{ notificationId: string; deviceId: string }>(QUEUES.sendPush, async (job) => {
    await deliverPush(context, job.data.notificationId, job.data.deviceId);
  }, 2);
  await jobs.work<{ resultId: number }>(QUEUES.runReport, (job) => runReport(context, job.data.resultId, job.finalAttempt));
  await jobs.work<{ customerIds: string[] }>(QUEUES.screeningHits, (job) => retryOnConflict(() => upsertHitsOfCustomers(context.db, job.data.customerIds)));
  await jobs.work<{ reviewId: string; mcpUrl: string }>(QUEUES.aiReview, (job) => runReview(context, job.data.reviewId, job.data.mcpUrl), 2);
  await jobs.work<{ conversationId: string; mcpUrl: string; answer: Parameters<typeof runAssistantTurn>[3] }>(QUEUES.assistantTurn, (job) =>
    runAssistantTurn(context, job.data.conversationId, job.data.mcpUrl, job.data.answer), 2);
  // Assistant retention: conversations past WARDEN_ASSISTANT_RETENTION_DAYS go once a day (and at start).
  const sweep = () => void sweepConversations(context).catch((error: unknown) => logger.error({ err: error }, 'assistant retention sweep failed'));
  sweep();
  const daily = setInterval(sweep, 86_400_000);
  daily.unref();
  // Case work: the write chain's approval hook (a rule change also queues its replay evidence), the
  // applier of approved decisions, case closure, and their two job workers.
  context.backoffice.approvalHook = createApprovalHook((model) =>
    model.key === 'engine.rule' ? (trx, requestId) => jobs.replayRuleChange(trx, requestId) : null,
  );
  installDecisionApplier(context);
  installCaseClosure(context);
  await jobs.work<{ decisionId: string }>(QUEUES.notifyDecision, (job) => notifyDecision(context, job.data.decisionId, job.attempt));
  await jobs.work<{ requestId: string }>(QUEUES.replayRuleChange, (job) => attachReplayEvidence(context, job.data.requestId, job.finalAttempt));
  return context;
}

/**
 * How long an idle keep-alive connection stays open: longer than the idle timeouts of load
 * balancers and HTTP clients (60 s is common), so that they close a connection first and never
 * send a request on one the service is closing at that moment (Node's default is 5 s).
 */
export const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Opens the database, builds the context and app, and listens. */
export async function startServer(config: Config, logger: Logger = createLogger(config.logLevel)): Promise<RunningServer> {
  const database = await openDatabase(config, (message) => logger.info(message));
  const context = await buildContext(config, database.knex, logger);
  const swept = await sweepTemporaryUploads(context.files.temporaryDirectory());
  if (swept) logger.info({ swept }, 'removed temporary upload files left by a stopped process');
  const koa = createApp(context);
  const server = http.createServer(koa.callback());
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  await context.documents.attach(server, config.redisUrl);
  await context.live.attach(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' || host === '[::]' ? 'localhost' : host}:${address.port}`;
  // Where the AI gateway reaches the MCP server by default: loopback for a wildcard bind (a bind to
  // :: takes IPv4 too), so it matches the gateway's default WARDEN_GATEWAY_MCP_ORIGIN.
  context.listenUrl = `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`;
  logger.info({ url, database: database.description }, `Warden listening on ${url}`);
  logger.info(describeIceServers(config));

  let closing: Promise<void> | undefined;
  return {
    context,
    server,
    url,
    close(drainMs = 10_000) {
      closing ??= (async () => {
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeIdleConnections();
        // After drainMs the HTTP connections are closed; upgraded ones (the websockets) are not the
        // HTTP server's to close and would hold `drained` for as long as a client stays: their
        // channels end them in context.close, so the wait for them is bounded too.
        let timer: NodeJS.Timeout | undefined;
        const deadline = new Promise<void>((resolve) => {
          timer = setTimeout(() => {
            server.closeAllConnections();
            resolve();
          }, drainMs);
        });
        await Promise.race([drained, deadline]);
        clearTimeout(timer);
        await context.close();
        await database.close();
      })();
      return closing;
    },
  };
}
