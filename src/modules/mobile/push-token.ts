import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { recordAudit } from '../../audit.ts';
import { respond } from '../../http/envelope.ts';
import { readJsonObject } from '../../http/json-body.ts';
import { envelopeResponse, z } from '../../http/openapi.ts';
import { IDENTITY_BODY_LIMIT_BYTES } from './constants.ts';
import { invalidChoice, validateForm, validationFailed } from '../../validation/form.ts';
import { documentRoutes } from './parameters.ts';
import { PUSH_IDENTITY } from './account.ts';
import type { MobileState } from './guard.ts';
import { acceptedProvider, pushIdentity } from '../push/service.ts';

/** FCM registration tokens run to about 200 characters, APNs device tokens to 64 hex digits (more in future, Apple says). */
const MAX_TOKEN_LENGTH = 4096;

/** The provider is checked against what this installation pushes through once the form is valid. */
const PUSH_TOKEN_FORM = z.object({ token: z.string().max(MAX_TOKEN_LENGTH), provider: z.string().max(20) });
const REGISTERED = z.object({ device_id: z.string(), provider: z.string(), push_enabled: z.literal(true), push: PUSH_IDENTITY });
const DELETED = z.object({ device_id: z.string(), push_enabled: z.literal(false) });

function caller(ctx: Context) {
  return (ctx.state as MobileState).mobile;
}

/** devices/push-token: the calling device's push identity (POST registers and turns push on, DELETE drops it). */
export function registerPushRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string, docs: OpenAPIRegistry): void {
  // The spec writes this path without a slash; the app adds one to every /api/ path, so both reach it.
  {
    const route = 'devices/push-token/';
    router.post(path(route), authenticated, async (ctx) => {
      const form = validateForm(PUSH_TOKEN_FORM, await readJsonObject(ctx, IDENTITY_BODY_LIMIT_BYTES));
      const provider = acceptedProvider(app.config, form.provider);
      if (!provider) throw validationFailed({ provider: [invalidChoice(form.provider)] });
      const { device, principal } = caller(ctx);
      await app.db.transaction(async (trx) => {
        // The same phone paired again (a reinstall) keeps its token: only the newest device holds it.
        await trx('mobile_devices').where({ push_token: form.token, push_provider: provider }).whereNot({ id: device.id }).update({ push_token: null, push_enabled: false });
        await trx('mobile_devices').where({ id: device.id }).update({ push_provider: provider, push_token: form.token, push_enabled: true });
        await recordAudit(trx, { type: 'staff', id: principal.user.id }, 'mobile_device.push_token', 'mobile_device', device.id, { provider });
      });
      respond(ctx, 'Push token registered.', { device_id: device.id, provider, push_enabled: true, push: pushIdentity(app.config) } satisfies z.infer<typeof REGISTERED>);
    });

    router.delete(path(route), authenticated, async (ctx) => {
      const { device, principal } = caller(ctx);
      await app.db.transaction(async (trx) => {
        await trx('mobile_devices').where({ id: device.id }).update({ push_token: null, push_enabled: false });
        await recordAudit(trx, { type: 'staff', id: principal.user.id }, 'mobile_device.push_token_delete', 'mobile_device', device.id, {});
      });
      respond(ctx, 'Push token deleted.', { device_id: device.id, push_enabled: false } satisfies z.infer<typeof DELETED>);
    });
  }

  documentRoutes(docs, path, [
    ['post', 'devices/push-token', "Register this device's push token (provider: the push field's provider; gcm is read as fcm)", PUSH_TOKEN_FORM, { 200: envelopeResponse('Registered', REGISTERED) }, {
      400: 'Malformed JSON, missing token, or a provider this installation does not push through (data.errors)',
    }],
    ['delete', 'devices/push-token', "Delete this device's push token (push off)", null, { 200: envelopeResponse('Deleted', DELETED) }, {}],
  ]);
}
