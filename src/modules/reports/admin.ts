import { choices } from '../backoffice/declare.ts';
import type { FieldErrors, ModelRegistration, Tone } from '../backoffice/registry.ts';
import { PermissionDenied, ValidationFailed } from '../backoffice/errors.ts';
import { describeModel, isSuperuser, modelsDenied, ReportKindForbidden, runnableKinds } from './access.ts';
import { REPORT_KINDS, reportKind, resolveParameters } from './kinds.ts';
import { queueReportRun, TooManyReportRuns } from './service.ts';

const KIND_NAMES = [...REPORT_KINDS.keys()];

function resultTone(value: unknown): Tone | null {
  return value === 'done' ? 'success' : value === 'failed' ? 'danger' : value === 'running' ? 'info' : 'neutral';
}

export const reportAdmin: ModelRegistration = {
  appLabel: 'report',
  model: 'report',
  table: 'reports',
  verboseName: 'report',
  repr: (row) => String(row.name),
  reprColumns: ['name'],
  columns: [{ name: 'name' }, { name: 'kind' }, { name: 'updated_at', label: 'Updated' }],
  titleColumn: 'name',
  dateColumn: 'updated_at',
  filters: [{ type: 'choice', field: 'kind' }],
  searchFields: ['name'],
  ordering: ['name'],
  fields: {
    kind: {
      choices: choices(KIND_NAMES, Object.fromEntries(KIND_NAMES.map((name) => [name, REPORT_KINDS.get(name)!.label]))),
    },
    created_by_id: { related: 'auth.user', label: 'Created by' },
    parameters: {
      help: `A JSON object of the kind's parameters; missing ones take their defaults. ${KIND_NAMES.map(
        (name) => `${name}: ${Object.entries(REPORT_KINDS.get(name)!.parameters).map(([parameter, spec]) => `${parameter} (${spec.help}, default ${spec.default ?? 'none'})`).join(', ')}`,
      ).join('; ')}.`,
    },
  },
  form: ['name', 'description', 'kind', 'parameters', 'created_by_id', 'created_at', 'updated_at'],
  readonly: ['created_by_id', 'created_at', 'updated_at'],
  inlines: [{ model: 'report.reportresult', fk: 'report_id', label: 'Results', ordering: '-created_at' }],
  actions: [
    {
      name: 'run',
      label: 'Run selected reports',
      permission: 'view',
      async run({ db, principal }, rows) {
        // All or nothing: a refused run rolls the whole selection back.
        try {
          for (const row of rows) await queueReportRun(db, Number(row.id), principal);
        } catch (error) {
          if (error instanceof ReportKindForbidden) throw new PermissionDenied(error.message);
          if (error instanceof TooManyReportRuns) throw new ValidationFailed({ action: [{ message: error.message, code: 'too_many_running' }] });
          throw error;
        }
        return `Queued ${rows.length} report run(s); you will be notified when each finishes.`;
      },
    },
  ],
  hooks: {
    clean(cleaned, _before, principal): FieldErrors | undefined {
      const parameters = cleaned.parameters;
      if (parameters !== undefined && parameters !== null && (typeof parameters !== 'object' || Array.isArray(parameters))) {
        return { parameters: [{ message: 'Enter a JSON object.', code: 'invalid' }] };
      }
      const kind = reportKind(cleaned.kind);
      if (kind) {
        // A report of a kind its author could not run would show them nothing but a refusal.
        const [denied] = modelsDenied(principal, kind);
        if (denied) return { kind: [{ message: `This kind reads ${describeModel(denied)}, which you do not have permission to view.`, code: 'permission_denied' }] };
        const { errors } = resolveParameters(cleaned.kind as string, parameters ?? {});
        if (errors.length) return { parameters: errors.map((message) => ({ message, code: 'invalid' })) };
      }
    },
    beforeSave({ values, before, principal }) {
      if (!before) values.created_by_id = principal.user.id;
    },
  },
  // Offered only the reports of kinds the user may run (view on every model the kind reads):
  // in every list, detail, form, action and autocomplete of the web admin, mobile API and MCP.
  scope(query, principal, alias) {
    if (isSuperuser(principal)) return;
    query.whereIn(`${alias}.kind`, runnableKinds(principal));
  },
  menu: { group: 'Reports', icon: 'summarize' },
};

export const reportResultAdmin: ModelRegistration = {
  appLabel: 'report',
  model: 'reportresult',
  table: 'report_results',
  verboseName: 'report result',
  repr: (row) => `Result ${row.id}`,
  reprColumns: ['id'],
  columns: [
    { name: 'report_id__name', label: 'Report' },
    { name: 'status', tone: resultTone },
    { name: 'row_count', label: 'Rows', kind: 'number' },
    { name: 'started_at', label: 'Started' },
    { name: 'completed_at', label: 'Completed' },
  ],
  titleColumn: 'report_id__name',
  statusColumn: 'status',
  dateColumn: 'completed_at',
  filters: [{ type: 'choice', field: 'status' }],
  ordering: ['-created_at'],
  fields: {
    report_id: { related: 'report.report', label: 'Report' },
    requested_by_id: { related: 'auth.user', label: 'Requested by' },
    status: { choices: choices(['queued', 'running', 'done', 'failed']) },
    rows: { hidden: true },
    file_path: { hidden: true },
  },
  form: ['report_id', 'status', 'started_at', 'completed_at', 'row_count', 'error_message', 'requested_by_id', 'created_at'],
  readonly: ['report_id', 'status', 'started_at', 'completed_at', 'row_count', 'error_message', 'requested_by_id', 'created_at'],
  disabled: { add: true, change: true, delete: true },
  /**
   * A result is read by the user who requested it, while they may still run its report's kind
   * (view on every model it reads; losing one ends access to what was stored from it), and by
   * superusers. Holding the same permissions is not enough to read a colleague's result: it
   * holds rows computed with the requester's permissions and scopes at run time, and anyone who
   * may run the kind can run it themselves. Applied to every query of results (list, detail,
   * inline on the report, the mobile reports/results/<pk>/ header, rows and CSV, MCP tools).
   */
  scope(query, principal, alias) {
    if (isSuperuser(principal)) return;
    query
      .where(`${alias}.requested_by_id`, principal.user.id)
      .whereIn(`${alias}.report_id`, (reports) => reports.select('id').from('reports').whereIn('kind', runnableKinds(principal)));
  },
  menu: { group: 'Reports', icon: 'table_view' },
};
