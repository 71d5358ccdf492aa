import type { Knex } from 'knex';
import { choices } from '../backoffice/declare.ts';
import type { ModelRegistration, Row, Tone } from '../backoffice/registry.ts';
import type { Principal } from '../staff/principal.ts';
import { ACTION_LABELS, annotateRequests, type ActionCode } from './service.ts';

export const APPROVAL_OPERATIONS = ['add', 'change', 'delete', 'decision'] as const;

function requestTone(value: unknown): Tone | null {
  return value === 'pending' ? 'warning' : value === 'approved' ? 'success' : value === 'rejected' ? 'danger' : 'neutral';
}

export const approvalPolicyAdmin: ModelRegistration = {
  appLabel: 'approval',
  model: 'approvalpolicy',
  table: 'approval_policies',
  verboseName: 'approval policy',
  verboseNamePlural: 'approval policies',
  repr: (row) => `${row.content_type} ${row.operation}`,
  reprColumns: ['content_type', 'operation'],
  columns: [
    { name: 'content_type', label: 'Model' },
    { name: 'operation' },
    { name: 'stages', kind: 'number' },
    { name: 'signatures_per_stage', label: 'Signatures per stage', kind: 'number' },
    { name: 'signer_group_id__name', label: 'Signer group' },
    { name: 'active', kind: 'bool' },
  ],
  titleColumn: 'content_type',
  filters: [{ type: 'choice', field: 'operation' }, { type: 'choice', field: 'active' }],
  searchFields: ['^content_type'],
  ordering: ['content_type', 'operation'],
  fields: {
    operation: { choices: choices(APPROVAL_OPERATIONS) },
    signer_group_id: { related: 'auth.group', label: 'Signer group' },
    content_type: { label: 'Model', help: 'app_label.model, for example engine.rule.' },
  },
  form: ['content_type', 'operation', 'stages', 'signatures_per_stage', 'signer_group_id', 'signer_permission', 'active'],
  hooks: {
    clean(cleaned) {
      for (const name of ['stages', 'signatures_per_stage'] as const) {
        const value = cleaned[name];
        if (value !== undefined && (typeof value !== 'number' || value < 1 || value > 10)) return { [name]: [{ message: 'Between 1 and 10.', code: 'invalid' }] };
      }
      if (typeof cleaned.content_type === 'string' && !/^[a-z]+\.[a-z]+$/.test(cleaned.content_type)) {
        return { content_type: [{ message: 'Enter app_label.model, for example engine.rule.', code: 'invalid' }] };
      }
    },
  },
  menu: { group: 'Approvals', icon: 'rule_settings' },
};

/** The action badge: what asks for the viewer's attention stands out. */
const ACTION_TONES: Record<ActionCode, Tone> = {
  review: 'warning',
  withdraw: 'info',
  signed: 'success',
  forwarded: 'success',
  waiting_stage: 'info',
  not_authorized: 'neutral',
  processed: 'neutral',
};

const requestColumns = [
  { name: 'object_repr', label: 'Record' },
  { name: 'target_model', label: 'Model' },
  { name: 'operation' },
  { name: 'action', tone: (value: unknown) => ACTION_TONES[value as ActionCode] ?? null },
  { name: 'status', tone: requestTone },
  { name: 'stage', kind: 'number' as const },
  { name: 'maker' },
  { name: 'created_at', label: 'Submitted' },
];

const requestBase = {
  table: 'approval_requests',
  repr: (row: Row) => `${row.operation} ${row.content_type} ${row.object_repr}`.trim(),
  reprColumns: ['operation', 'content_type', 'object_repr'],
  columns: requestColumns,
  titleColumn: 'object_repr',
  statusColumn: 'status',
  dateColumn: 'created_at',
  ordering: ['-created_at'],
  fields: {
    policy_id: { related: 'approval.approvalpolicy', label: 'Policy' },
    maker_id: { related: 'auth.user', label: 'Maker' },
    status: { choices: choices(['pending', 'approved', 'rejected', 'withdrawn']) },
    operation: { choices: choices(APPROVAL_OPERATIONS) },
    payload: { hidden: true },
    object_id: { label: 'Record', relatedModelOf: (row: Row) => String(row.content_type) },
    // The card of a request as the viewer sees it (annotateRequests): their action, the target model's name.
    action: { computed: true, label: 'Action', choices: Object.entries(ACTION_LABELS).map(([value, label]) => ({ value, label })) },
    target_model: { computed: true, label: 'Model' },
  },
  annotate: annotateRequests,
  form: ['content_type', 'object_id', 'object_repr', 'operation', 'status', 'stage', 'stages', 'signatures_required', 'maker_id', 'reason', 'diff', 'evidence', 'mcp_origin', 'created_at', 'processed_at'],
  readonly: ['content_type', 'object_id', 'object_repr', 'operation', 'status', 'stage', 'stages', 'signatures_required', 'maker_id', 'reason', 'diff', 'evidence', 'mcp_origin', 'created_at', 'processed_at'],
  disabled: { add: true, change: true, delete: true },
} satisfies Partial<ModelRegistration>;

export const approvalRequestAdmin: ModelRegistration = {
  ...requestBase,
  appLabel: 'approval',
  model: 'approvalrequest',
  verboseName: 'approval request',
  filters: [{ type: 'choice', field: 'status' }, { type: 'choice', field: 'operation' }, { type: 'range', field: 'created_at', title: 'Submitted' }],
  searchFields: ['^content_type', 'object_repr'],
  menu: { group: 'Approvals', icon: 'fact_check' },
};

/**
 * The requests this user may act on: pending, not their own, and signable by them as maySign decides
 * (a member of the policy's signer group, or holding its signer permission, or, where the policy
 * names neither, the permission to make the change; a superuser signs anything).
 */
function actionable(query: Knex.QueryBuilder, principal: Principal, alias: string): void {
  query.where(`${alias}.status`, 'pending').whereNot(`${alias}.maker_id`, principal.user.id);
  if (principal.user.is_superuser) return;
  query.whereExists(function signable(this: Knex.QueryBuilder) {
    this.select(1)
      .from('approval_policies as p')
      .whereRaw(`p.id = ${alias}.policy_id`)
      .where((clause) => {
        clause.whereIn('p.signer_group_id', function groups(this: Knex.QueryBuilder) {
          this.select('group_id').from('staff_user_groups').where('user_id', principal.user.id);
        });
        const held = [...principal.granted];
        if (!held.length) return;
        clause.orWhereIn('p.signer_permission', held);
        // A policy naming neither: whoever may make the change signs it (permissionFor's codename; a decision needs change).
        clause.orWhere((open) =>
          open
            .whereNull('p.signer_group_id')
            .whereNull('p.signer_permission')
            .whereRaw(
              `split_part(${alias}.content_type, '.', 1) || '.' || (case when ${alias}.operation = 'decision' then 'change' else ${alias}.operation end) || '_' || split_part(${alias}.content_type, '.', 2) = any(?::text[])`,
              [held],
            ),
        );
      });
  });
}

export const pendingApprovalRequestAdmin: ModelRegistration = {
  ...requestBase,
  appLabel: 'approval',
  model: 'pendingapprovalrequest',
  proxyOf: 'approval.approvalrequest',
  verboseName: 'pending approval request',
  filters: [{ type: 'choice', field: 'operation' }],
  searchFields: ['object_repr'],
  // Every row here is pending: what the viewer can do with it is the badge its card shows.
  statusColumn: 'action',
  scope: actionable,
  menu: { group: 'Approvals', icon: 'pending_actions' },
};
