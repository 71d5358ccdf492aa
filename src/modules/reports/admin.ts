import { choices } from '../backoffice/declare.ts';
import type { ModelRegistration, Tone } from '../backoffice/registry.ts';
import { REPORT_KINDS, resolveParameters } from './kinds.ts';
import { queueReportRun } from './service.ts';

const KIND_NAMES = Object.keys(REPORT_KINDS);

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
      choices: choices(KIND_NAMES, Object.fromEntries(KIND_NAMES.map((name) => [name, REPORT_KINDS[name]!.label]))),
    },
    created_by_id: { related: 'auth.user', label: 'Created by' },
    parameters: {
      help: `A JSON object of the kind's parameters; missing ones take their defaults. ${KIND_NAMES.map(
        (name) => `${name}: ${Object.entries(REPORT_KINDS[name]!.parameters).map(([parameter, spec]) => `${parameter} (${spec.help}, default ${spec.default ?? 'none'})`).join(', ')}`,
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
        for (const row of rows) await queueReportRun(db, Number(row.id), principal.user.id);
        return `Queued ${rows.length} report run(s); you will be notified when each finishes.`;
      },
    },
  ],
  hooks: {
    clean(cleaned) {
      const parameters = cleaned.parameters;
      if (parameters !== undefined && parameters !== null && (typeof parameters !== 'object' || Array.isArray(parameters))) {
        return { parameters: [{ message: 'Enter a JSON object.', code: 'invalid' }] };
      }
      if (typeof cleaned.kind === 'string' && REPORT_KINDS[cleaned.kind]) {
        const { errors } = resolveParameters(cleaned.kind, parameters ?? {});
        if (errors.length) return { parameters: errors.map((message) => ({ message, code: 'invalid' })) };
      }
    },
    beforeSave({ values, before, principal }) {
      if (!before) values.created_by_id = principal.user.id;
    },
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
  menu: { group: 'Reports', icon: 'table_view' },
};
