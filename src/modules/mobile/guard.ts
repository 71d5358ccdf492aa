import type { Context, Next } from 'koa';
import type { AppContext } from '../../context.ts';
import { loadSigningKey } from '../../auth/tokens.ts';
import { ForbiddenError, HttpError, UnauthorizedError } from '../../http/errors.ts';
import type { RequestState } from '../../http/state.ts';
import { staffUserExists } from '../staff/principal.ts';
import { ACCOUNT_INACTIVE, authenticateCaller, type Identity, type MobileCaller } from './identity.ts';
import { MobileTokens } from './tokens.ts';

/**
 * The guard of every authenticated mobile endpoint, apart from the routes that register them, so
 * that each module's mobile routes (case work, dashboard, reports ...) can use it without importing
 * the module that registers them.
 */

/** What requireDevice leaves on ctx.state for the mobile handlers after it. */
export interface MobileState extends RequestState {
  mobile: MobileCaller;
}

/** The identity layer of one app: its clock is the context's, so tests can move time. */
export function createIdentity(app: AppContext): Identity {
  let key: Promise<Uint8Array> | undefined;
  const signingKey = () =>
    (key ??= loadSigningKey(app.db, app.config.jwtSecret).catch((error: unknown) => {
      key = undefined;
      throw error;
    }));
  return { db: app.db, config: app.config, tokens: new MobileTokens(signingKey), now: () => app.now?.() ?? new Date() };
}

const READS = new Set(['GET', 'HEAD', 'OPTIONS']);

export const READ_ONLY_DEVICE = 'This device was paired with a review ticket: it is read-only, and no change can be made from it.';

/**
 * What a read-only device may still post: its own session and device housekeeping (logging out,
 * its push token, marking its user's notifications read), none of which changes a record.
 */
const DEVICE_HOUSEKEEPING: readonly RegExp[] = [
  /^\/api\/mobile\/auth\/logout\/$/,
  /^\/api\/mobile\/devices\/push-token\/?$/,
  /^\/api\/mobile\/notifications\/(read-all|[^/]+\/read)\/$/,
];

/** Whether a read-only device (paired with a review ticket) is refused this request (the OpenAPI document says so too). */
export function refusedOnReadOnlyDevice(method: string, path: string): boolean {
  return !READS.has(method.toUpperCase()) && !DEVICE_HOUSEKEEPING.some((pattern) => pattern.test(path));
}

/**
 * Guards a mobile endpoint: the Bearer token, its device and its user are checked (401 otherwise).
 * A device paired with a review ticket is read-only: every request but a read (GET) and the
 * device's housekeeping is refused with 403 (reason read_only_device), here for every endpoint.
 * A user deleted while the handler runs makes it fail (a write's foreign key to the gone row, a
 * principal that no longer loads): that failure is the 401 a request after the deletion gets.
 */
export function requireDevice(identity: Identity) {
  return async (ctx: Context, next: Next) => {
    const caller = await authenticateCaller(identity, ctx.get('authorization'));
    (ctx.state as MobileState).mobile = caller;
    if (caller.device.read_only && refusedOnReadOnlyDevice(ctx.method, ctx.path)) {
      throw new ForbiddenError(READ_ONLY_DEVICE, 'read_only_device');
    }
    try {
      await next();
    } catch (error) {
      if (!(error instanceof HttpError) && !(await staffUserExists(identity.db, caller.principal.user.id))) throw new UnauthorizedError(ACCOUNT_INACTIVE, 'account_inactive');
      throw error;
    }
  };
}
