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
import type { TokenService } from './modules/merchant/tokens.ts';

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
  /** Stops what the context started (listeners, pools); the database is closed by its owner. */
  close(): Promise<void>;
}

/** Who made a write, recorded with it. */
export type Actor =
  | { type: 'merchant'; id: string }
  | { type: 'staff'; id: string }
  | { type: 'operator'; id: string }
  | { type: 'system'; id: string };
