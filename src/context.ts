import type { Knex } from 'knex';
import type { Config } from './config.ts';
import type { Metrics } from './http/metrics.ts';
import type { Logger } from './logger.ts';
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
}

/** Who made a write, recorded with it. */
export type Actor =
  | { type: 'merchant'; id: string }
  | { type: 'staff'; id: string }
  | { type: 'operator'; id: string }
  | { type: 'system'; id: string };
