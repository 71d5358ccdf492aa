import fs from 'node:fs';
import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { ForbiddenError, HttpError } from '../../http/errors.ts';
import { envelopeResponse, z } from '../../http/openapi.ts';
import { scopedQuery } from '../backoffice/query.ts';
import { acceptOnly, documentRoutes, positiveInteger } from '../mobile/parameters.ts';
import type { MobileState } from '../mobile/guard.ts';
import { queueReportRun, REPORT_MAX_ACTIVE_RUNS, RESULT_PAYLOAD, resultPayload } from './service.ts';

const RESULT_PAGE_SIZE = 50;
const RESULT_MAX_PAGE_SIZE = 200;
const QUEUED = z.object({ result_id: z.number().int(), status: z.literal('queued'), result_url: z.string() });

function principalOf(ctx: Context) {
  return (ctx.state as MobileState).mobile.principal;
}

function requireView(app: AppContext, ctx: Context, model: 'report' | 'reportresult') {
  const site = app.backoffice.site;
  const bound = site.get('report', model)!;
  if (!site.can(principalOf(ctx), bound, 'view')) throw new ForbiddenError(`You do not have permission to view ${bound.verboseNamePlural}.`, 'permission_denied');
  return bound;
}

function numericPk(value: string, what: string): number {
  if (!/^\d{1,9}$/.test(value)) throw new HttpError(404, `${what} not found.`, 'not_found');
  return Number(value);
}

/**
 * reports/: a result's header and rows page by page, its CSV file, and starting a run. A result
 * is read here, not through the generic data API: data/report/reportresult/<pk>/ answers 404.
 */
export function registerReportRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string, docs: OpenAPIRegistry): void {
  // A result is found through its registration's scope (the requester's own, or any for a
  // superuser: reports/admin.ts); another user's answers 404 like a missing one.
  router.get(path('reports/results/:pk/'), authenticated, async (ctx) => {
    const model = requireView(app, ctx, 'reportresult');
    acceptOnly(ctx, ['page', 'page_size']);
    const page = positiveInteger(ctx, 'page', 1, 1_000_000);
    const pageSize = positiveInteger(ctx, 'page_size', RESULT_PAGE_SIZE, RESULT_MAX_PAGE_SIZE);
    const resultId = numericPk(ctx.params.pk!, 'Report result');
    const visible = await scopedQuery(app.db, model, principalOf(ctx)).where('t.id', resultId).first('t.id');
    const payload = visible ? await resultPayload(app.db, resultId, page, pageSize) : null;
    if (!payload) throw new HttpError(404, 'Report result not found.', 'not_found');
    respond(ctx, `${payload.status_display}.`, payload);
  });

  router.get(path('reports/results/:pk/csv/'), authenticated, async (ctx) => {
    const model = requireView(app, ctx, 'reportresult');
    const row = (await scopedQuery(app.db, model, principalOf(ctx))
      .where({ 't.id': numericPk(ctx.params.pk!, 'Report result'), 't.status': 'done' })
      .first('t.id', 't.file_path')) as { id: number; file_path: string | null } | undefined;
    if (!row?.file_path || !fs.existsSync(row.file_path)) throw new HttpError(404, 'This result has no file.', 'not_found');
    ctx.type = 'text/csv; charset=utf-8';
    ctx.attachment(`report-result-${row.id}.csv`);
    ctx.body = fs.createReadStream(row.file_path);
  });

  router.post(path('reports/:pk/run/'), authenticated, async (ctx) => {
    requireView(app, ctx, 'report');
    const reportId = numericPk(ctx.params.pk!, 'Report');
    const principal = principalOf(ctx);
    // Found whatever its kind, so that a report of a kind the user may not run answers 403
    // naming the model it reads (queueReportRun checks it) rather than a bare 404.
    const exists = await app.db('reports').where({ id: reportId }).first('id');
    if (!exists) throw new HttpError(404, 'Report not found.', 'not_found');
    const resultId = await app.db.transaction((trx) => queueReportRun(trx, reportId, principal));
    respond(ctx, 'Report queued.', { result_id: resultId, status: 'queued', result_url: path(`reports/results/${resultId}/`) } satisfies z.infer<typeof QUEUED>, 202);
  });

  router.all(path('data/report/reportresult/:pk/'), authenticated, async (ctx, next) => {
    // The generic autocomplete endpoint of the model is not a result's detail.
    if (ctx.params.pk === 'autocomplete') return next();
    throw new HttpError(404, 'Report results are read at reports/results/<pk>/.', 'not_found');
  });

  documentRoutes(docs, path, [
    ['get', 'reports/results/{pk}/', 'A report result: header and one page of rows (page, page_size up to 200)', null, { 200: envelopeResponse('The result', RESULT_PAYLOAD) }, {
      400: 'Unknown parameter, or page or page_size not a whole number in range',
      403: 'No view permission on report results',
      404: 'No such result of yours (superusers read every result)',
    }],
    ['get', 'reports/results/{pk}/csv/', "A finished result's CSV file", null, {
      200: { description: 'The CSV file (an attachment)', content: { 'text/csv': { schema: z.string() } } },
    }, { 403: 'No view permission on report results', 404: 'No such result of yours, or it has no file' }],
    [
      'post',
      'reports/{pk}/run/',
      `Start a run of a report (202 with result_id; the requester is notified when it ends). At most ${REPORT_MAX_ACTIVE_RUNS} runs per user queued or running at once`,
      null,
      { 202: envelopeResponse('Queued', QUEUED) },
      {
        403: 'No view permission on reports, or on a model the report reads (named in data.model)',
        404: 'No such report',
        429: `${REPORT_MAX_ACTIVE_RUNS} runs of yours are already queued or running (reason too_many_running, Retry-After)`,
      },
    ],
  ]);
}
