import type { Logger } from '../logger.ts';

/** What middleware leaves on ctx.state for the handlers after it. */
export interface RequestState {
  requestId: string;
  log: Logger;
  clientIp: string;
  /** The merchant credential a Bearer token authenticated (set by the merchant module's guard). */
  credential?: { id: string; client: string };
  tokenSessionId?: string;
}
