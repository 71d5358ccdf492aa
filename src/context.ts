import type { Knex } from 'knex';
import type { Config } from './config.ts';
import type { Metrics } from './http/metrics.ts';
import type { Logger } from './logger.ts';
import type { EventCache } from './modules/events/service.ts';
import type { CredentialCache } from './modules/merchant/credential-cache.ts';
import type { RuleCache } from './modules/rules/store.ts';
import type { ScreeningService } from './modules/screening/service.ts';
import type { Pools } from './pools.ts';
import type { JobQueue } from './jobs/queue.ts';
import type { FileStore } from './modules/kyc/storage.ts';
import type { DocumentsChannel } from './realtime/documents.ts';
import type { VideoCallSignalling } from './modules/videocall/signalling.ts';
import type { StaffLive } from './realtime/staff.ts';
import type { PushService } from './modules/push/service.ts';
import type { TokenService } from './auth/tokens.ts';
import type { WriteChain } from './modules/backoffice/write.ts';

/**
 * Everything a module needs, built once by main.ts (or by a test) and passed down. No module
 * reaches for a global instead.
 */
export interface AppContext {
  config: Config;
  db: Knex;
  logger: Logger;
  metrics: Metrics;
  tokens: TokenService;
  credentials: CredentialCache;
  events: EventCache;
  rules: RuleCache;
  screening: ScreeningService;
  pools: Pools;
  jobs: JobQueue;
  files: FileStore;
  documents: DocumentsChannel;
  /** The video call's signalling between the end user's page and the agent (issue 38). */
  videoCalls: VideoCallSignalling;
  /** The staff live socket and its cross-process fan-out. */
  live: StaffLive;
  /** The push providers configured (FCM, APNs); a test may swap in clients that trust its local servers. */
  push: PushService;
  /** The back-office registry bound to the database, and its one write chain. */
  backoffice: WriteChain;
  /**
   * The address this process's HTTP server listens on (http://127.0.0.1:PORT for a wildcard bind),
   * set once it listens (startServer, startTestApp); null in a process that serves no HTTP. The AI
   * gateway is sent here for the MCP server when neither WARDEN_MCP_URL nor WARDEN_PUBLIC_URL is set,
   * never to the address a request names in its Host header.
   */
  listenUrl: string | null;
  /** The current time for token and ticket lifetimes; unset means the system clock (tests set it, never sleep). */
  now?: () => Date;
  /** Stops what the context started (listeners, pools); the database is closed by its owner. */
  close(): Promise<void>;
}
