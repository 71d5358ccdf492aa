import fs from 'node:fs';
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';
import { label } from '../backoffice/declare.ts';
import { getRow } from '../backoffice/query.ts';
import type { DetailBlockProvider, DetailSectionProps } from '../backoffice/site.ts';
import { adminState, forbidden, homeCrumbs, notFound, objectUrl, renderPage } from '../backoffice/web/common.tsx';
import { resultPayload } from './service.ts';

/**
 * Report results on the web, as the mobile API reads them (reports/results/<pk>/ and its csv/):
 * the rows page by page and the CSV file, for the same viewers (the result registration's scope:
 * its requester while they may still run its kind, and superusers). The result's change page
 * shows the first page (the `report_rows` block); the rest is on /admin/report/reportresult/<pk>/rows/.
 */

const RESULT_MODEL = 'report.reportresult';
export const WEB_ROWS_PAGE = 50;

type Payload = NonNullable<Awaited<ReturnType<typeof resultPayload>>>;

/** The first page of a result's rows on its change page; the block is web-only (mobile reads reports/results/<pk>/). */
export const reportResultBlocks: DetailBlockProvider = {
  models: [RESULT_MODEL],
  describes: [{ name: 'report_rows', label: 'Rows', description: 'The first page of the rows (as reports/results/<pk>/ answers them) with the CSV address.' }],
  async blocks({ db, row }) {
    return { report_rows: await resultPayload(db, Number(row.id), 1, WEB_ROWS_PAGE) };
  },
};

function RowsTable({ payload }: { payload: Payload }) {
  const { columns, rows } = payload.rows;
  if (!rows.length) return <p>{payload.status === 'done' ? 'This result has no rows.' : `No rows: the result is ${payload.status_display.toLowerCase()}.`}</p>;
  return (
    <div class="results-wrapper">
      <table class="results report-rows">
        <thead>
          <tr>
            {columns.map((column) => (
              <th scope="col" key={column}>
                {label(column)}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {(rows as unknown[][]).map((row, index) => (
            <tr key={index}>
              {row.map((cell, column) => (
                <td key={column}>{cell === null || cell === undefined ? '—' : String(cell)}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function rowsUrl(pk: string | number, page?: number): string {
  return `/admin/report/reportresult/${pk}/rows/${page ? `?page=${page}` : ''}`;
}

/** The rows section of a result's change page (below the form). */
export function ReportRowsSection({ model, pk, blocks }: DetailSectionProps) {
  const payload = blocks.report_rows as Payload | null | undefined;
  if (model.key !== RESULT_MODEL || !payload) return null;
  const { total, has_more } = payload.rows;
  return (
    <section class="module report-result-rows" aria-labelledby="report-rows-title">
      <h2 id="report-rows-title">Rows</h2>
      {payload.rows.error && <p class="errornote">{payload.rows.error}</p>}
      <p>
        {total} row{total === 1 ? '' : 's'}
        {has_more && (
          <>
            , the first {WEB_ROWS_PAGE} shown: <a href={rowsUrl(pk, 2)}>next page</a>
          </>
        )}
        {payload.has_file && (
          <>
            {' '}
            · <a href={`/admin/report/reportresult/${pk}/csv/`}>Download CSV</a>
          </>
        )}
      </p>
      <RowsTable payload={payload} />
    </section>
  );
}

/** The result a path names, for a viewer who may view results and this one (the registration's scope): 403, or 404 like a missing one. */
async function visibleResult(ctx: Context, app: AppContext) {
  const site = app.backoffice.site;
  const model = site.models.get(RESULT_MODEL)!;
  const principal = adminState(ctx).principal;
  if (!site.can(principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
  const pk = ctx.params.pk!;
  const row = /^\d{1,9}$/.test(pk) ? await getRow(app.db, model, principal, pk) : undefined;
  if (!row) notFound(model, pk);
  return { model, row };
}

/** The web pages of results (behind the admin shell): the rows page by page, and the CSV file. */
export function registerReportPages(router: Router, app: AppContext): void {
  router.get('/admin/report/reportresult/:pk/rows/', async (ctx) => {
    const { model, row } = await visibleResult(ctx, app);
    const raw = ctx.query.page;
    if (raw !== undefined && (typeof raw !== 'string' || !/^\d{1,6}$/.test(raw) || Number(raw) < 1)) {
      ctx.status = 400;
      await renderPage(ctx, app, 400, 'Bad page', homeCrumbs(model, { label: model.repr(row), href: objectUrl(model, row.id) }), <p class="errornote">page must be a whole number from 1.</p>);
      return;
    }
    const page = raw === undefined ? 1 : Number(raw);
    const payload = (await resultPayload(app.db, Number(row.id), page, WEB_ROWS_PAGE))!;
    const pages = Math.max(1, Math.ceil(payload.rows.total / WEB_ROWS_PAGE));
    const title = `${payload.title}: rows`;
    await renderPage(
      ctx,
      app,
      200,
      title,
      homeCrumbs(model, { label: model.repr(row), href: objectUrl(model, row.id) }, { label: 'Rows' }),
      <>
        <h1>{title}</h1>
        <p>
          Page {page} of {pages} ({payload.rows.total} rows).{payload.has_file && <> <a href={`/admin/report/reportresult/${row.id}/csv/`}>Download CSV</a></>}
        </p>
        <RowsTable payload={payload} />
        <nav class="paginator" aria-label="Result pages">
          {page > 1 && <a href={rowsUrl(String(row.id), page - 1)}>Previous</a>} {page < pages && <a href={rowsUrl(String(row.id), page + 1)}>Next</a>}
        </nav>
      </>,
    );
  });

  router.get('/admin/report/reportresult/:pk/csv/', async (ctx) => {
    const { row } = await visibleResult(ctx, app);
    const file = row.status === 'done' ? (row.file_path as string | null) : null;
    if (!file || !fs.existsSync(file)) notFound(app.backoffice.site.models.get(RESULT_MODEL)!, String(row.id));
    ctx.type = 'text/csv; charset=utf-8';
    ctx.attachment(`report-result-${String(row.id)}.csv`);
    ctx.body = fs.createReadStream(file);
  });
}
