import type { Logger } from '../logger.ts';
import type { MerchantCredential } from '../modules/merchant/models.ts';

/** What middleware leaves on ctx.state for the handlers after it. */
export interface RequestState {
  requestId: string;
  log: Logger;
  clientIp: string;
  credential?: MerchantCredential;
  tokenSessionId?: string;
}
