import { activeTone, choices } from '../backoffice/declare.ts';
import type { FieldErrors, ModelRegistration, Tone } from '../backoffice/registry.ts';
import { FlowInputError, validateNotifyUrl } from './flows.ts';

function sessionTone(value: unknown): Tone | null {
  return value === 'open' ? 'info' : value === 'completed' ? 'success' : value === 'failed' ? 'danger' : 'neutral';
}

export const flowAdmin: ModelRegistration = {
  appLabel: 'document',
  model: 'flow',
  table: 'verification_flows',
  pk: 'code',
  verboseName: 'verification flow',
  repr: (row) => `${row.name} (${row.code})`,
  reprColumns: ['code', 'name'],
  columns: [
    { name: 'code' },
    { name: 'name' },
    { name: 'active', kind: 'bool', tone: activeTone },
    { name: 'is_default', label: 'Default', kind: 'bool' },
    { name: 'requires_video_call', label: 'Video call', kind: 'bool' },
    { name: 'updated_at', label: 'Updated' },
  ],
  titleColumn: 'name',
  dateColumn: 'updated_at',
  filters: [{ type: 'choice', field: 'active' }, { type: 'choice', field: 'requires_video_call', title: 'Video call' }],
  searchFields: ['^code', 'name'],
  ordering: ['code'],
  fields: {
    notify_secret: { hidden: true },
    required_artifact_types: { label: 'Required artifacts', help: 'A JSON list of artifact types (doc_mrz, doc_front, selfie, ...).' },
  },
  form: ['code', 'name', 'active', 'required_artifact_types', 'requires_video_call', 'notify_url', 'is_default'],
  readonly: [],
  inlines: [{ model: 'document.documentverificationsession', fk: 'flow_code', label: 'Sessions', ordering: '-created_at' }],
  hooks: {
    clean(cleaned, before): FieldErrors | undefined {
      const types = cleaned.required_artifact_types;
      if (types !== undefined && (!Array.isArray(types) || !types.length || !types.every((type) => typeof type === 'string' && /^[a-z_]{2,40}$/.test(type)))) {
        return { required_artifact_types: [{ message: 'Enter a non-empty JSON list of artifact types.', code: 'invalid' }] };
      }
      const notifyUrl = cleaned.notify_url;
      // https to a public address only (src/net/outbound.ts); this form does not see WARDEN_OUTBOUND_ALLOW, so an
      // address only it allows is set with `warden flow define --notify` and left unchanged here.
      if (typeof notifyUrl === 'string' && notifyUrl && notifyUrl !== before?.notify_url) {
        try {
          validateNotifyUrl(notifyUrl);
        } catch (error) {
          if (!(error instanceof FlowInputError)) throw error;
          return { notify_url: [{ message: `Enter an https:// address on the public internet: ${error.message.replace(/^--notify: /, '')}`, code: 'invalid' }] };
        }
      }
    },
  },
  menu: { group: 'Identity verification', icon: 'account_tree' },
};

export const verificationSessionAdmin: ModelRegistration = {
  appLabel: 'document',
  model: 'documentverificationsession',
  table: 'verification_sessions',
  verboseName: 'verification session',
  repr: (row) => `${row.customer_ref} / ${row.flow_code} #${row.attempt_no}`,
  reprColumns: ['customer_ref', 'flow_code', 'attempt_no'],
  columns: [
    { name: 'customer_ref', label: 'Customer' },
    { name: 'flow_code', label: 'Flow' },
    { name: 'status', tone: sessionTone },
    { name: 'attempt_no', label: 'Attempt', kind: 'number' },
    { name: 'requires_video_call', label: 'Video call', kind: 'bool' },
    { name: 'created_at', label: 'Opened' },
  ],
  titleColumn: 'customer_ref',
  statusColumn: 'status',
  dateColumn: 'created_at',
  filters: [{ type: 'choice', field: 'status' }, { type: 'choice', field: 'requires_video_call', title: 'Video call' }, { type: 'range', field: 'created_at', title: 'Opened' }],
  searchFields: ['^customer_ref', '=id'],
  ordering: ['-created_at'],
  fields: {
    flow_code: { related: 'document.flow', label: 'Flow' },
    status: { choices: choices(['open', 'completed', 'reported', 'failed']) },
    videocall_token: { hidden: true },
  },
  form: ['customer_ref', 'flow_code', 'status', 'attempt_no', 'required_artifact_types', 'pending_artifact_types', 'succeeded_artifact_types', 'requires_video_call',
    'mrz_data', 'device_id', 'ip_address', 'user_agent', 'checklist', 'closed_by', 'closed_at', 'created_at'],
  readonly: ['customer_ref', 'flow_code', 'status', 'attempt_no', 'required_artifact_types', 'pending_artifact_types', 'succeeded_artifact_types', 'requires_video_call',
    'mrz_data', 'device_id', 'ip_address', 'user_agent', 'checklist', 'closed_by', 'closed_at', 'created_at'],
  inlines: [{ model: 'document.artifact', fk: 'session_id', label: 'Artifacts', ordering: 'created_at' }],
  // Sessions move through the integration API and the verification pipeline, not by hand.
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Identity verification', icon: 'badge' },
};

export const artifactAdmin: ModelRegistration = {
  appLabel: 'document',
  model: 'artifact',
  table: 'verification_artifacts',
  verboseName: 'artifact',
  repr: (row) => `${row.artifact_type} ${String(row.sha256).slice(0, 12)}`,
  reprColumns: ['artifact_type', 'sha256'],
  columns: [
    { name: 'artifact_type', label: 'Type' },
    { name: 'session_id__customer_ref', label: 'Customer' },
    { name: 'content_type', label: 'Content type' },
    { name: 'size', kind: 'number' },
    { name: 'created_at', label: 'Uploaded' },
  ],
  titleColumn: 'artifact_type',
  dateColumn: 'created_at',
  filters: [{ type: 'range', field: 'created_at', title: 'Uploaded' }],
  searchFields: ['=sha256', '=session_id'],
  ordering: ['-created_at'],
  fields: {
    session_id: { related: 'document.documentverificationsession', label: 'Session' },
    path: { hidden: true },
  },
  form: ['session_id', 'artifact_type', 'content_type', 'size', 'sha256', 'extra_data', 'created_at'],
  readonly: ['session_id', 'artifact_type', 'content_type', 'size', 'sha256', 'extra_data', 'created_at'],
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Identity verification', icon: 'description' },
};
