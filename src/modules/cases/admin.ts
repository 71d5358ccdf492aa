import { choices, DECISION_CHOICES, decisionTone, mayOperate } from '../backoffice/declare.ts';
import { PermissionDenied } from '../backoffice/errors.ts';
import type { FieldErrors, ModelRegistration, Row, Tone } from '../backoffice/registry.ts';
import { clearClosure, closeCase } from './closing.ts';
import { ALERT_ACTIONS, CASE_ACTIONS } from './queue.ts';

export const CASE_STATUSES = ['open', 'in_review', 'escalated', 'closed'] as const;
export const ACCOUNT_ACTIONS = ['none', 'restrict', 'freeze', 'close'] as const;
/** A change to any of these needs a rationale, kept in the case history. */
export const RATIONALE_FIELDS = ['status', 'flagged', 'account_action', 'postponed_until'] as const;

function caseTone(value: unknown): Tone | null {
  return value === 'open' ? 'info' : value === 'in_review' ? 'warning' : value === 'escalated' ? 'danger' : value === 'closed' ? 'neutral' : null;
}

/** The registered model of the record an alert's `target` names (record_id is its key). */
export const ALERT_RECORD_MODELS: Readonly<Record<string, string>> = {
  customer: 'customer.customer',
  financial: 'transaction.financialevent',
  non_financial: 'transaction.nonfinancialevent',
};

/** The model of an alert's record, or null for a target no model holds (an own key, never a prototype's). */
export function alertRecordModel(row: Row): string | null {
  const target = String(row.target);
  return Object.hasOwn(ALERT_RECORD_MODELS, target) ? ALERT_RECORD_MODELS[target]! : null;
}

export const alertAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'alert',
  table: 'alerts',
  verboseName: 'alert',
  repr: (row) => `${row.decision} ${row.target} ${row.record_ref ?? row.record_id}`,
  reprColumns: ['decision', 'target', 'record_ref', 'record_id'],
  // Sortable where an index of the alerts table serves the order (0026): record, score, time. A
  // joined column (the customer) is ordered in the other table, so every alert would be sorted; the
  // others are few-valued, and their filters serve them.
  columns: [
    { name: 'record_ref', label: 'Record' },
    { name: 'customer_id__customer_ref', label: 'Customer', sortable: false },
    { name: 'target', sortable: false },
    { name: 'kind', sortable: false },
    { name: 'score', kind: 'number' },
    { name: 'decision', tone: decisionTone, sortable: false },
    { name: 'status', tone: (value) => (value === 'open' ? 'warning' : 'neutral'), sortable: false },
    { name: 'created_at', label: 'Raised' },
  ],
  titleColumn: 'record_ref',
  statusColumn: 'decision',
  dateColumn: 'created_at',
  filters: [
    { type: 'choice', field: 'status' },
    { type: 'choice', field: 'decision' },
    { type: 'choice', field: 'kind' },
    { type: 'range', field: 'score' },
    { type: 'range', field: 'created_at', title: 'Raised' },
    // The case's assignee, read through the alert's case (an alert has none of its own).
    { type: 'assignee', field: 'case_id', title: 'Case assigned', via: { table: 'cases', column: 'assignee_id' } },
  ],
  searchFields: ['=record_ref'],
  ordering: ['-created_at'],
  fields: {
    case_id: { related: 'engine.watchlist', label: 'Case' },
    customer_id: { related: 'customer.customer', label: 'Customer' },
    decision: { choices: DECISION_CHOICES },
    status: { choices: choices(['open', 'closed']) },
    kind: { choices: choices(['rules', 'sanctions']) },
    target: { choices: choices(['customer', 'financial', 'non_financial']) },
    // One click from an alert to its record (a generic relation: the target names the model) and to the log that raised it.
    record_id: { label: 'Record', relatedModelOf: alertRecordModel },
    log_id: { related: 'engine.executionlog', label: 'Execution log' },
  },
  form: ['case_id', 'customer_id', 'target', 'record_id', 'record_ref', 'log_id', 'kind', 'score', 'decision', 'rule_codes', 'status', 'created_at'],
  readonly: ['case_id', 'customer_id', 'target', 'record_id', 'record_ref', 'log_id', 'kind', 'score', 'decision', 'rule_codes', 'created_at'],
  disabled: { add: true, delete: true },
  actions: ALERT_ACTIONS,
  menu: { group: 'Case work', icon: 'notifications_active' },
};

export const caseAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'watchlist',
  table: 'cases',
  verboseName: 'case',
  verboseNamePlural: 'cases',
  // The readable number (C-000123, migration 0024): lists, titles, notifications and the assistant name a case by it.
  repr: (row) => String(row.reference),
  reprColumns: ['reference'],
  columns: [
    { name: 'reference', label: 'Case' },
    { name: 'customer_id__customer_ref', label: 'Customer' },
    { name: 'status', tone: caseTone },
    { name: 'priority', kind: 'number' },
    { name: 'alert_count', label: 'Alerts', kind: 'number' },
    { name: 'flagged', kind: 'bool' },
    { name: 'account_action', label: 'Account action' },
    { name: 'assignee_id__username', label: 'Assignee' },
    { name: 'opened_at', label: 'Opened' },
  ],
  titleColumn: 'reference',
  statusColumn: 'status',
  dateColumn: 'opened_at',
  filters: [
    { type: 'choice', field: 'status' },
    { type: 'choice', field: 'flagged' },
    { type: 'choice', field: 'account_action', title: 'Account action' },
    { type: 'isnull', field: 'assignee_id', title: 'Assigned' },
    { type: 'assignee', field: 'assignee_id', title: 'Assignee' },
    { type: 'range', field: 'priority' },
  ],
  searchFields: ['^reference'],
  ordering: ['-priority', '-opened_at'],
  fields: {
    reference: { label: 'Case' },
    number: { type: 'integer' },
    customer_id: { related: 'customer.customer', label: 'Customer' },
    assignee_id: { related: 'auth.user', label: 'Assignee' },
    status: { choices: choices(CASE_STATUSES, { in_review: 'In review' }) },
    account_action: { choices: choices(ACCOUNT_ACTIONS) },
    flagged: { label: 'Flag' },
    postponed_until: { label: 'Postponed until' },
    rationale: { virtual: true, type: 'text', required: false, help: 'Required when the status, flag, account action or postponement changes.' },
    clear_decision: {
      virtual: true,
      type: 'choice',
      required: false,
      choices: choices(['ACCEPT', 'REJECT'], { ACCEPT: 'Accept', REJECT: 'Reject' }),
      label: 'Clear decision',
      help: 'When closing: the decision written on every alerted transaction (empty leaves them alone).',
    },
    clear_score: { virtual: true, type: 'decimal', required: false, label: 'Clear score', help: 'When closing with a clear decision: the score (0-100) given to the alerted transactions.' },
  },
  form: ['customer_id', 'status', 'flagged', 'account_action', 'postponed_until', 'assignee_id', 'rationale', 'clear_decision', 'clear_score', 'priority', 'alert_count', 'opened_at', 'closed_at'],
  fieldsets: [
    { title: null, fields: ['customer_id', 'status', 'flagged', 'account_action', 'postponed_until', 'assignee_id', 'rationale'] },
    { title: 'Closing', fields: ['clear_decision', 'clear_score'], description: 'Used only when the case is closed.' },
    { title: 'Alerts', fields: ['priority', 'alert_count', 'opened_at', 'closed_at'] },
  ],
  readonly: ['customer_id', 'priority', 'alert_count', 'opened_at', 'closed_at'],
  inlines: [
    { model: 'engine.alert', fk: 'case_id', ordering: '-created_at' },
    { model: 'engine.compliancedecision', fk: 'case_id', label: 'Compliance decisions', ordering: '-created_at' },
  ],
  disabled: { add: true, delete: true },
  // Take, assign, status, close with a clear decision, next case (cases/queue.ts).
  actions: CASE_ACTIONS,
  hooks: {
    clean(cleaned, before) {
      if (!before) return undefined;
      const changed = RATIONALE_FIELDS.filter((name) => cleaned[name] !== undefined && String(cleaned[name] ?? '') !== dateOrText(before[name]));
      if (changed.length && !String(cleaned.rationale ?? '').trim()) {
        return { rationale: [{ message: `A rationale is required to change ${changed.join(', ')}.`, code: 'required' }] };
      }
      return closingErrors(cleaned, before);
    },
    async beforeSave({ trx, values, before, cleaned, principal }) {
      // Before the approval hook: a closure whose decisions would be refused never becomes a request.
      await clearClosure(trx, before, cleaned, principal);
      if (values.status === 'closed' && before?.status !== 'closed') values.closed_at = new Date();
      if (values.status !== undefined && values.status !== 'closed') values.closed_at = null;
    },
    async afterSave({ trx, before, values, cleaned, principal, row }) {
      if (values.status === 'closed' && before && before.status !== 'closed') await closeCase(trx, before, row, cleaned, principal);
      const changes: Record<string, [unknown, unknown]> = {};
      for (const name of [...RATIONALE_FIELDS, 'assignee_id'] as const) {
        if (values[name] !== undefined && dateOrText(values[name]) !== dateOrText(before?.[name])) changes[name] = [before?.[name] ?? null, values[name] ?? null];
      }
      if (!Object.keys(changes).length) return;
      await trx('case_history').insert({
        case_id: row.id,
        user_id: principal.user.id,
        actor: principal.user.username,
        changes: JSON.stringify(changes),
        rationale: String(cleaned.rationale ?? ''),
      });
    },
  },
  menu: { group: 'Case work', icon: 'folder_shared' },
};

/** clear_decision and clear_score belong to the closing of a case, and the score to a decision. */
function closingErrors(cleaned: Row, before: Row): FieldErrors | undefined {
  const decided = cleaned.clear_decision !== undefined && cleaned.clear_decision !== null;
  const scored = cleaned.clear_score !== undefined && cleaned.clear_score !== null;
  if (!decided && !scored) return undefined;
  const closing = cleaned.status === 'closed' && before.status !== 'closed';
  if (!closing) {
    return { [decided ? 'clear_decision' : 'clear_score']: [{ message: before.status === 'closed' ? 'This case is already closed.' : 'Only used when the case is being closed.', code: 'invalid' }] };
  }
  if (scored && !decided) return { clear_score: [{ message: 'A clear score needs a clear decision.', code: 'invalid' }] };
  if (scored && (Number(cleaned.clear_score) < 0 || Number(cleaned.clear_score) > 100)) return { clear_score: [{ message: 'Ensure this value is between 0 and 100.', code: 'max_value' }] };
  return undefined;
}

/** Stored dates come back as Date objects; form values are YYYY-MM-DD text. */
function dateOrText(value: unknown): string {
  if (value instanceof Date) return value.toISOString().slice(0, 10);
  return String(value ?? '');
}

export const complianceDecisionAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'compliancedecision',
  table: 'compliance_decisions',
  verboseName: 'compliance decision',
  repr: (row) => `${row.decision} on ${row.target_model} ${String(row.target_id).slice(0, 8)}`,
  reprColumns: ['decision', 'target_model', 'target_id'],
  columns: [
    { name: 'target_model', label: 'Record type' },
    { name: 'decision', tone: decisionTone },
    { name: 'score', kind: 'number' },
    { name: 'original_score', kind: 'number' },
    { name: 'actor', label: 'Officer' },
    { name: 'created_at', label: 'Decided' },
  ],
  titleColumn: 'target_model',
  statusColumn: 'decision',
  dateColumn: 'created_at',
  filters: [{ type: 'choice', field: 'decision' }, { type: 'choice', field: 'target_model', title: 'Record type' }, { type: 'range', field: 'created_at', title: 'Decided' }],
  ordering: ['-created_at'],
  fields: {
    decision: { choices: DECISION_CHOICES },
    target_model: { choices: choices(['executionlog', 'financialevent', 'nonfinancialevent'], { executionlog: 'Execution log', financialevent: 'Financial event', nonfinancialevent: 'Non-financial event' }) },
    case_id: { related: 'engine.watchlist', label: 'Case' },
    actor_id: { related: 'auth.user', label: 'Officer' },
  },
  form: ['target_model', 'target_id', 'decision', 'score', 'original_score', 'original_decision', 'description', 'document_description', 'batch_id', 'case_id', 'actor_id', 'created_at'],
  readonly: ['target_model', 'target_id', 'decision', 'score', 'original_score', 'original_decision', 'description', 'document_description', 'batch_id', 'case_id', 'actor_id', 'created_at'],
  // Append-only for everyone, superusers included; the database refuses UPDATE and DELETE as well.
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Case work', icon: 'gavel' },
};

/**
 * Free-text notes on a case, written from the case page (or the mobile data API): append-only like
 * the history, so the timeline shows what was known when. Only someone who may view the case may
 * write on it; the author is whoever wrote, never a form value.
 */
export const caseNoteAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'casenote',
  table: 'case_notes',
  verboseName: 'case note',
  repr: (row) => `Note by ${String(row.author)}`,
  reprColumns: ['author'],
  columns: [
    { name: 'case_id__reference', label: 'Case' },
    { name: 'author' },
    { name: 'body', label: 'Note' },
    { name: 'created_at', label: 'Written' },
  ],
  titleColumn: 'body',
  dateColumn: 'created_at',
  filters: [{ type: 'range', field: 'created_at', title: 'Written' }],
  searchFields: ['body'],
  ordering: ['-created_at'],
  fields: {
    case_id: { related: 'engine.watchlist', label: 'Case' },
    author_id: { related: 'auth.user', label: 'Author' },
    body: { label: 'Note', type: 'text', maxLength: 10_000 },
  },
  form: ['case_id', 'body', 'author', 'created_at'],
  readonly: ['author', 'created_at'],
  disabled: { change: true, delete: true },
  hooks: {
    clean(cleaned) {
      if (cleaned.body !== undefined && !String(cleaned.body ?? '').trim()) return { body: [{ message: 'This field is required.', code: 'required' }] };
      return undefined;
    },
    beforeSave({ values, principal }) {
      if (!mayOperate(principal, caseAdmin, 'view')) throw new PermissionDenied('You may write notes only on cases you may view.');
      values.body = String(values.body).trim();
      values.author_id = principal.user.id;
      values.author = principal.user.username;
    },
  },
};
