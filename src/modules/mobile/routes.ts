import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { readJsonObject } from '../../http/json-body.ts';
import { envelopeResponse, errorResponses, z } from '../../http/openapi.ts';
import { validateForm, validationFailed } from '../../validation/form.ts';
import {
  AVAILABILITY_FORM,
  changeOwnPassword,
  PAIRING,
  pairingUser,
  PASSWORD_FORM,
  preferences,
  PREFERENCES,
  PREFERENCES_FORM,
  pushIdentity,
  SESSION_INFO,
  SESSION_USER,
  sessionInfo,
  sessionReads,
  type SessionReads,
  sessionUser,
  setVideoCallAvailability,
  TOKENS,
  updatePreferences,
  websocketUrl,
} from './account.ts';
import { IDENTITY_BODY_LIMIT_BYTES, MOBILE_PREFIX, PLATFORMS } from './constants.ts';
import { createIdentity, requireDevice, type MobileState } from './guard.ts';
import { deviceGuardErrors } from './parameters.ts';
import { authenticateCaller, logoutDevice, pairDevice, refreshDevice, type MobileCaller } from './identity.ts';

const PAIRING_FORM = z.object({
  ticket: z.string().max(200),
  device_name: z.string().max(100),
  platform: z.enum(PLATFORMS),
  app_version: z.string().max(50).optional(),
});

const REFRESH_FORM = z.object({
  device_id: z.string().max(64),
  refresh_token: z.string().max(200),
});

function caller(ctx: Context): MobileCaller {
  return (ctx.state as MobileState).mobile;
}

async function body(ctx: Context): Promise<Record<string, unknown>> {
  return readJsonObject(ctx, IDENTITY_BODY_LIMIT_BYTES);
}

/** A path under /api/mobile/. */
export function mobilePath(relative: string): string {
  return `${MOBILE_PREFIX}${relative}`;
}

/**
 * The mobile API's identity layer: pairing, refresh, logout and me/. The modules' mobile routes
 * register beside it (the composition root mounts them, the generic data routes last).
 */
export function registerMobileRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  const identity = createIdentity(app);
  const authenticated = requireDevice(identity);
  const path = mobilePath;

  router.post(path('auth/qr/'), async (ctx) => {
    const form = validateForm(PAIRING_FORM, await body(ctx));
    const { tokens, principal } = await pairDevice(identity, {
      ticket: form.ticket,
      deviceName: form.device_name,
      platform: form.platform,
      appVersion: form.app_version ?? '',
    });
    respond(ctx, 'Device paired.', {
      ...tokens,
      websocket_url: websocketUrl(app.config),
      push: pushIdentity(app.config),
      user: pairingUser(principal),
    } satisfies z.infer<typeof PAIRING>);
  });

  router.post(path('auth/refresh/'), async (ctx) => {
    const form = validateForm(REFRESH_FORM, await body(ctx));
    const tokens = await refreshDevice(identity, form.device_id, form.refresh_token);
    respond(ctx, 'Tokens refreshed.', { ...tokens, websocket_url: websocketUrl(app.config), push: pushIdentity(app.config) } satisfies z.infer<typeof TOKENS>);
  });

  router.post(path('auth/logout/'), authenticated, async (ctx) => {
    await logoutDevice(identity, caller(ctx));
    respond(ctx, 'The device is logged out.', {});
  });

  // The guard's checks and the session info's reads are one statement (me/ is on a 5 ms budget);
  // the route reads nothing else and writes nothing, so it needs none of the guard's other work.
  router.get(path('me/'), async (ctx) => {
    const session = await authenticateCaller<SessionReads>(identity, ctx.get('authorization'), { extra: sessionReads() });
    respond(ctx, 'Session info.', sessionInfo(app.config, app.backoffice.site, session));
  });

  router.get(path('me/preferences/'), authenticated, async (ctx) => {
    respond(ctx, 'Preferences.', preferences(caller(ctx).principal));
  });

  router.patch(path('me/preferences/'), authenticated, async (ctx) => {
    const principal = await updatePreferences(identity, caller(ctx), await body(ctx));
    respond(ctx, 'Preferences updated.', sessionUser(principal));
  });

  router.post(path('me/video-call-availability/'), authenticated, async (ctx) => {
    const principal = await setVideoCallAvailability(identity, caller(ctx), await body(ctx));
    respond(ctx, `Availability set to ${principal.agent!.status}.`, sessionUser(principal));
  });

  router.post(path('me/password/'), authenticated, async (ctx) => {
    const result = await changeOwnPassword(identity, caller(ctx), await body(ctx));
    if (!result.ok) throw validationFailed(result.errors);
    respond(ctx, 'Password changed.', sessionUser(result.principal));
  });

  documentIdentityRoutes(docs, path);
}

function documentIdentityRoutes(docs: OpenAPIRegistry, path: (relative: string) => string): void {
  const json = (schema: z.ZodType) => ({ body: { content: { 'application/json': { schema } } } });
  const endpoints: [method: 'get' | 'post' | 'patch', relative: string, summary: string, request: z.ZodType | null, answer: z.ZodType, errors: Record<number, string>][] = [
    ['post', 'auth/qr/', 'Pair a device with a login or review ticket', PAIRING_FORM, PAIRING, {
      400: 'Malformed JSON or invalid fields (data.errors)',
      401: 'QR ticket is invalid, expired or already used.',
      403: 'User account is not eligible for mobile access',
    }],
    ['post', 'auth/refresh/', 'Rotate the refresh token and get a new access token', REFRESH_FORM, TOKENS, {
      400: 'Malformed JSON or invalid fields (data.errors)',
      401: 'Refresh token invalid, expired or already rotated (reuse revokes the device)',
    }],
    ['post', 'auth/logout/', 'Revoke this device', null, z.object({}), {}],
    ['get', 'me/', 'Session info', null, SESSION_INFO, {}],
    ['get', 'me/preferences/', 'Language and timezone with their valid choices', null, PREFERENCES, {}],
    ['patch', 'me/preferences/', 'Change language or timezone', PREFERENCES_FORM, SESSION_USER, { 400: 'Invalid choice (data.errors)' }],
    ['post', 'me/video-call-availability/', 'Set video-call availability', AVAILABILITY_FORM, SESSION_USER, {
      400: 'available missing or not a boolean', 403: 'Not a video-call agent', 409: 'A call is in progress',
    }],
    ['post', 'me/password/', 'Change the password (web sessions end, this device stays)', PASSWORD_FORM, SESSION_USER, {
      400: 'Validation failed. (data.errors)', 429: 'Too many wrong old passwords (rate_limited, data.retry_after)',
    }],
  ];
  for (const [method, relative, summary, request, answer, errors] of endpoints) {
    // Pairing and refresh are how a device gets its token; the rest go through the device guard.
    const bearer = !relative.startsWith('auth/qr') && !relative.startsWith('auth/refresh');
    docs.registerPath({
      method,
      path: path(relative),
      summary,
      tags: ['mobile'],
      ...(bearer ? { security: [{ bearer: [] }] } : {}),
      ...(request ? { request: json(request) } : {}),
      responses: { 200: envelopeResponse('Success', answer), ...errorResponses(bearer ? deviceGuardErrors(method, path(relative)) : {}, errors) },
    });
  }
}
