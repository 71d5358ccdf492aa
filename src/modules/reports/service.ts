import fs from 'node:fs/promises';
import path from 'node:path';
import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { recordAudit } from '../../audit.ts';
import { z } from '../../http/openapi.ts';
import { formatTimestamp } from '../../timestamps.ts';
import { boundJobs, notify } from '../notifications/service.ts';
import { loadPrincipal, type Principal } from '../staff/principal.ts';
import { TooManyRequestsError } from '../../http/errors.ts';
import { assertMayRun, describeModel, modelSource, modelsDenied } from './access.ts';
import { reportKind, resolveParameters } from './kinds.ts';

/** Rows kept per result (stored and in the CSV file); a report that would list more is cut here and says so. */
export const REPORT_MAX_ROWS = 100_000;
/** A report query running longer than this is cancelled by PostgreSQL and the result records the error. */
const REPORT_STATEMENT_TIMEOUT_MS = 120_000;

export const STATUS_DISPLAY: Record<string, string> = { queued: 'Queued', running: 'Running', done: 'Done', failed: 'Failed' };
export const STATUS_TONE: Record<string, string> = { queued: 'neutral', running: 'info', done: 'success', failed: 'danger' };

export class ReportNotFound extends Error {}

/**
 * How many runs one user may have queued or running at once. A run holds a worker (one report at
 * a time per process) for up to REPORT_STATEMENT_TIMEOUT_MS and can store 100,000 rows: without a
 * limit one user could queue a hundred and hold every other user's reports behind them. Three
 * lets an analyst start a few reports side by side.
 */
export const REPORT_MAX_ACTIVE_RUNS = 3;
/** Seconds a refused client is told to wait (Retry-After): about what a typical run takes. */
export const REPORT_RETRY_AFTER_SECONDS = 30;
/**
 * A run queued or running for longer than this is one the worker lost (a process killed twice
 * mid-run leaves it "running"): it no longer holds one of the user's places, so a lost run cannot
 * lock a user out for good. Far above the statement timeout and any ordinary queue wait.
 */
const REPORT_RUN_ABANDONED_AFTER = '1 hour';

/** The user already has REPORT_MAX_ACTIVE_RUNS runs queued or running: 429, with Retry-After. */
export class TooManyReportRuns extends TooManyRequestsError {
  constructor(active: number) {
    super(
      `You have ${active} report run(s) queued or running; at most ${REPORT_MAX_ACTIVE_RUNS} at once. Try again when one has finished.`,
      'too_many_running',
      REPORT_RETRY_AFTER_SECONDS,
      { limit: REPORT_MAX_ACTIVE_RUNS },
    );
  }
}

/**
 * Queues a run of a report in the caller's transaction: a report_results row (queued) and its
 * run-report job, committed together. Returns the result's id. Throws ReportKindForbidden (403)
 * when the principal may not view a model the report's kind reads, and TooManyReportRuns (429)
 * when they already have REPORT_MAX_ACTIVE_RUNS runs queued or running. The count and the insert
 * happen under a transaction-scoped advisory lock per user, so concurrent requests of one user
 * are counted one after another (READ COMMITTED alone would let each see the same count).
 */
export async function queueReportRun(trx: Knex.Transaction, reportId: number, principal: Principal): Promise<number> {
  const report = (await trx('reports').where({ id: reportId }).first('id', 'kind')) as { id: number; kind: string } | undefined;
  if (!report) throw new ReportNotFound(`No report ${reportId}.`);
  assertMayRun(principal, report.kind);
  const userId = principal.user.id;
  await trx.raw('select pg_advisory_xact_lock(hashtext(?))', [`report_runs:${userId}`]);
  const active = (await trx('report_results')
    .where({ requested_by_id: userId })
    .whereIn('status', ['queued', 'running'])
    .where('created_at', '>', trx.raw(`now() - interval '${REPORT_RUN_ABANDONED_AFTER}'`))
    .count({ count: '*' })
    .first()) as { count: string | number };
  if (Number(active.count) >= REPORT_MAX_ACTIVE_RUNS) throw new TooManyReportRuns(Number(active.count));
  const [row] = (await trx('report_results').insert({ report_id: reportId, status: 'queued', requested_by_id: userId }).returning('id')) as { id: number }[];
  await recordAudit(trx, { type: 'staff', id: userId }, 'report.run', 'report', String(reportId), { result_id: row!.id });
  const jobs = boundJobs(trx);
  if (!jobs) throw new Error('no job queue is bound to this database');
  await jobs.runReport(trx, row!.id);
  return row!.id;
}

/**
 * The run-report job. Every failure (bad stored parameters, a query error, a timeout, the file
 * system) is written to the result as its error and the job completes: a failing report never
 * takes the worker down or loops in retries. The requester is notified either way.
 */
export async function runReport(app: Pick<AppContext, 'db' | 'config' | 'logger'>, resultId: number, _finalAttempt = true): Promise<void> {
  const claimed = (await app.db('report_results').where({ id: resultId }).whereIn('status', ['queued', 'running']).update({ status: 'running', started_at: new Date(), error_message: null }).returning(['id', 'report_id', 'requested_by_id'])) as {
    id: number;
    report_id: number;
    requested_by_id: string | null;
  }[];
  if (!claimed.length) return;
  const result = claimed[0]!;
  const report = (await app.db('reports').where({ id: result.report_id }).first()) as { id: number; name: string; kind: string; parameters: unknown } | undefined;
  let outcome: { status: 'done'; rowCount: number } | { status: 'failed'; error: string };
  try {
    if (!report) throw new Error('The report was deleted before it ran.');
    const kind = reportKind(report.kind);
    if (!kind) throw new Error(`Unknown report kind ${report.kind}.`);
    const { values, errors } = resolveParameters(report.kind, report.parameters);
    if (errors.length) throw new Error(`Invalid parameters: ${errors.join(' ')}`);
    // The rows are what the requester may see now, not when the run was queued: their permissions
    // are read again here, and each model is read through its scope for them.
    const principal = result.requested_by_id ? await loadPrincipal(app.db, result.requested_by_id) : null;
    if (!principal) throw new Error('The user who requested this run no longer exists; reports run with their requester\'s permissions.');
    const denied = modelsDenied(principal, kind);
    if (denied.length) throw new Error(`The requester may not view ${denied.map(describeModel).join(', ')}; the report was not run.`);
    const rows = await app.db.transaction(
      async (trx) => {
        await trx.raw(`set local statement_timeout = ${REPORT_STATEMENT_TIMEOUT_MS}`);
        return (await kind.query({ from: modelSource(trx, kind, principal), db: trx }, values, REPORT_MAX_ROWS)) as Record<string, unknown>[];
      },
      { readOnly: true },
    );
    const table = rows.map((row) => kind.columns.map((column) => cell(row[column])));
    const file = path.join(app.config.dataDir, 'reports', `result-${resultId}.csv`);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, toCsv(kind.columns, table));
    await app.db('report_results')
      .where({ id: resultId })
      .update({ status: 'done', completed_at: new Date(), row_count: table.length, columns: JSON.stringify(kind.columns), rows: JSON.stringify(table), file_path: file });
    outcome = { status: 'done', rowCount: table.length };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    app.logger.warn({ err: error, result: resultId }, 'report failed');
    await app.db('report_results').where({ id: resultId }).update({ status: 'failed', completed_at: new Date(), error_message: message.slice(0, 2000) });
    outcome = { status: 'failed', error: message };
  }
  if (result.requested_by_id) {
    await app.db.transaction(async (trx) => {
      await notify(trx, {
        userIds: [result.requested_by_id!],
        kind: 'report_done',
        title: outcome.status === 'done' ? `Report ready: ${report?.name ?? result.report_id}` : `Report failed: ${report?.name ?? result.report_id}`,
        body: outcome.status === 'done' ? `${outcome.rowCount} row(s).` : outcome.error.slice(0, 300),
        target: { model: 'report.reportresult', pk: String(resultId) },
      });
    });
  }
}

/** Stored cells are JSON scalars: dates in the spec's form, decimals as the text PostgreSQL gave. */
function cell(value: unknown): string | number | boolean | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return formatTimestamp(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'string') return value;
  return JSON.stringify(value);
}

/** RFC 4180 CSV; cells that a spreadsheet would run as a formula are prefixed with a quote (CSV injection). */
export function toCsv(columns: string[], rows: (string | number | boolean | null)[][]): string {
  const field = (value: string | number | boolean | null) => {
    let text = value === null ? '' : String(value);
    if (/^[=+\-@\t\r]/.test(text) && typeof value === 'string') text = `'${text}`;
    return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  return [columns, ...rows].map((row) => row.map(field).join(',')).join('\r\n') + '\r\n';
}

interface ResultRow {
  id: number;
  status: string;
  started_at: Date | null;
  completed_at: Date | null;
  row_count: number | null;
  error_message: string | null;
  columns: string[] | null;
  file_path: string | null;
  report_id: number;
  report_name: string;
  report_description: string;
}

/** The spec's Report result shape, for the OpenAPI document. */
export const RESULT_PAYLOAD = z.object({
  id: z.number().int(),
  title: z.string(),
  status: z.string(),
  status_display: z.string(),
  tone: z.string(),
  started_at: z.string().nullable(),
  completed_at: z.string().nullable(),
  duration_seconds: z.number().nullable(),
  row_count: z.number().int().nullable(),
  error_message: z.string().nullable(),
  has_file: z.boolean(),
  report: z.object({ id: z.number().int(), name: z.string(), description: z.string() }),
  rows: z.object({
    columns: z.array(z.string()),
    rows: z.array(z.unknown()),
    page: z.number().int(),
    page_size: z.number().int(),
    total: z.number().int(),
    has_more: z.boolean(),
    error: z.string().nullable(),
  }),
});

/** reports/results/<pk>/: the header and one page of rows, in the spec's Report result shape. */
export async function resultPayload(db: Knex, resultId: number, page: number, pageSize: number): Promise<z.infer<typeof RESULT_PAYLOAD> | null> {
  const result = (await db('report_results as r')
    .join('reports as p', 'p.id', 'r.report_id')
    .where('r.id', resultId)
    .first('r.id', 'r.status', 'r.started_at', 'r.completed_at', 'r.row_count', 'r.error_message', 'r.columns', 'r.file_path', 'p.id as report_id', 'p.name as report_name', 'p.description as report_description')) as
    | ResultRow
    | undefined;
  if (!result) return null;
  const offset = (page - 1) * pageSize;
  const pageRows = result.status === 'done'
    ? (((await db.raw(
        `select coalesce(jsonb_agg(e.value order by e.ordinality), '[]'::jsonb) as rows
         from report_results r, jsonb_array_elements(r.rows) with ordinality e where r.id = ? and e.ordinality > ? and e.ordinality <= ?`,
        [resultId, offset, offset + pageSize],
      )) as { rows: { rows: unknown[] }[] }).rows[0]?.rows ?? [])
    : [];
  const total = result.row_count ?? 0;
  const duration = result.started_at && result.completed_at ? Math.round((result.completed_at.getTime() - result.started_at.getTime()) / 10) / 100 : null;
  return {
    id: result.id,
    title: `${result.report_name}${result.completed_at ? ` (${formatTimestamp(result.completed_at)})` : ''}`,
    status: result.status,
    status_display: Object.hasOwn(STATUS_DISPLAY, result.status) ? STATUS_DISPLAY[result.status]! : result.status,
    tone: Object.hasOwn(STATUS_TONE, result.status) ? STATUS_TONE[result.status]! : 'neutral',
    started_at: formatTimestamp(result.started_at),
    completed_at: formatTimestamp(result.completed_at),
    duration_seconds: duration,
    row_count: result.row_count,
    error_message: result.error_message,
    has_file: Boolean(result.file_path) && result.status === 'done',
    report: { id: result.report_id, name: result.report_name, description: result.report_description },
    rows: {
      columns: result.columns ?? [],
      rows: pageRows,
      page,
      page_size: pageSize,
      total,
      has_more: offset + pageSize < total,
      error: result.status === 'failed' ? result.error_message : null,
    },
  };
}
