import type { Context } from 'koa';
import type { AppContext } from '../../../context.ts';
import { BadRequestError, ForbiddenError } from '../../../http/errors.ts';
import { z } from '../../../http/openapi.ts';
import { validateBody } from '../../../validation/request.ts';
import { relationOptions } from '../autocomplete.ts';
import { QueryError } from '../query.ts';
import { PermissionDenied } from '../errors.ts';
import { adminState, modelFromParams } from './common.tsx';

const QUERY = z.object({
  field: z.string().max(100),
  q: z.string().max(200).default(''),
  p: z.coerce.number().int().min(1).max(1_000_000).default(1),
});

/**
 * GET /admin/<app>/<model>/autocomplete/?field=&q=&p=: the options of a relation field as JSON,
 * {results: [{value, text}], more, page}, 20 a page, for the form's search box
 * (static/admin.js). The same check as the mobile API's autocomplete/; a refusal is the admin's
 * HTML error page with its status.
 */
export async function showAutocomplete(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const query = validateBody(QUERY, { ...ctx.query });
  try {
    const { options } = await relationOptions(app.backoffice.site, app.db, adminState(ctx).principal, model, query.field, query.q, query.p);
    ctx.body = options;
  } catch (error) {
    if (error instanceof PermissionDenied) throw new ForbiddenError(error.message);
    if (error instanceof QueryError) throw new BadRequestError(error.message);
    throw error;
  }
}
