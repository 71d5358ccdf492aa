import { decisionContextOf, viewableDecisionContext } from './decision-context.ts';
import { announce, CHANNELS } from '../../db/notifications.ts';
import { activeTone, choices, DECISION_CHOICES, decisionTone } from '../backoffice/declare.ts';
import type { FieldErrors, ModelRegistration, Row } from '../backoffice/registry.ts';
import { RULE_TARGETS, ruleInputSchema } from './definitions.ts';

/** What changes a rule's behaviour bumps its version, as `warden rules load` does. */
const BEHAVIOUR = ['target', 'event_slugs', 'expression', 'score', 'decision'] as const;

function ruleCandidate(cleaned: Row, before: Row | null): Record<string, unknown> {
  const pick = (name: string) => (cleaned[name] !== undefined ? cleaned[name] : before?.[name]);
  return {
    code: pick('code'),
    name: pick('name'),
    ...(pick('description') ? { description: pick('description') } : {}),
    target: pick('target'),
    event_slugs: pick('event_slugs') ?? [],
    expression: pick('expression'),
    score: pick('score') === undefined || pick('score') === null ? undefined : Number(pick('score')),
    decision: pick('decision') ?? null,
    active: pick('active') ?? true,
  };
}

export const ruleAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'rule',
  table: 'rules',
  pk: 'code',
  verboseName: 'rule',
  repr: (row) => `${row.code}: ${row.name}`,
  reprColumns: ['code', 'name'],
  columns: [
    { name: 'code' },
    { name: 'name' },
    { name: 'target' },
    { name: 'score', kind: 'number' },
    { name: 'decision', tone: decisionTone },
    { name: 'active', kind: 'bool', tone: activeTone },
    { name: 'version', kind: 'number' },
    { name: 'updated_at', label: 'Updated' },
  ],
  titleColumn: 'name',
  statusColumn: 'decision',
  dateColumn: 'updated_at',
  filters: [{ type: 'choice', field: 'target' }, { type: 'choice', field: 'active' }, { type: 'choice', field: 'decision' }],
  searchFields: ['^code', 'name'],
  ordering: ['code'],
  fields: {
    target: { choices: choices(RULE_TARGETS) },
    decision: { choices: DECISION_CHOICES, required: false },
    event_slugs: { label: 'Events', help: 'A JSON list of event slugs; empty means every event of the target.' },
    expression: { help: 'A JsonLogic expression over the record, customer and aggregates.' },
  },
  form: ['code', 'name', 'description', 'target', 'event_slugs', 'expression', 'score', 'decision', 'active', 'version', 'updated_by', 'updated_at'],
  fieldsets: [
    { title: null, fields: ['code', 'name', 'description', 'target', 'event_slugs', 'active'] },
    { title: 'Logic', fields: ['expression', 'score', 'decision'] },
    { title: 'Versions', fields: ['version', 'updated_by', 'updated_at'], classes: ['collapse'] },
  ],
  readonly: ['version', 'updated_by', 'updated_at'],
  hooks: {
    clean(cleaned, before) {
      if (before && cleaned.code !== undefined && cleaned.code !== before.code) {
        return { code: [{ message: 'The code of a rule cannot change: execution logs refer to it.', code: 'immutable' }] };
      }
      // The same schema as rule files, so a rule saved here compiles exactly like a loaded one.
      const parsed = ruleInputSchema.safeParse(ruleCandidate(cleaned, before));
      if (parsed.success) return undefined;
      const errors: FieldErrors = {};
      for (const issue of parsed.error.issues) {
        const field = String(issue.path[0] ?? '__all__');
        (errors[field] ??= []).push({ message: issue.path.length > 1 ? `${issue.path.slice(1).join('.')}: ${issue.message}` : issue.message, code: 'invalid' });
      }
      return errors;
    },
    beforeSave({ values, before, principal }) {
      values.updated_by = `staff:${principal.user.username}`;
      if (!before) {
        values.version = 1;
        return;
      }
      const changed = BEHAVIOUR.some((name) => values[name] !== undefined && JSON.stringify(normalise(values[name])) !== JSON.stringify(normalise(before[name])));
      if (changed) values.version = Number(before.version) + 1;
    },
    async afterSave({ trx }) {
      await announce(trx, CHANNELS.rules);
    },
  },
  menu: { group: 'Rules', icon: 'rule' },
};

/** Values as the database returns them, to compare a submitted value with the stored one. */
function normalise(value: unknown): unknown {
  if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value)) return Number(value);
  if (typeof value === 'string' && (value.startsWith('{') || value.startsWith('['))) {
    try {
      return JSON.parse(value);
    } catch {
      return value;
    }
  }
  return value;
}

export const executionLogAdmin: ModelRegistration = {
  appLabel: 'engine',
  model: 'executionlog',
  table: 'execution_logs',
  verboseName: 'execution log',
  repr: (row) => `${row.target} ${row.record_ref ?? row.record_id}: ${row.decision}`,
  reprColumns: ['target', 'record_ref', 'record_id', 'decision'],
  // Sortable where an index serves the order (0026): record, score, time. Target and decision are
  // few-valued (filters serve them); duration is not worth an index written by every scoring.
  columns: [
    { name: 'record_ref', label: 'Record' },
    { name: 'target', sortable: false },
    { name: 'score', kind: 'number' },
    { name: 'decision', tone: decisionTone, sortable: false },
    { name: 'duration_us', label: 'Duration (µs)', kind: 'number', sortable: false },
    { name: 'created_at', label: 'Scored' },
  ],
  titleColumn: 'record_ref',
  statusColumn: 'decision',
  dateColumn: 'created_at',
  filters: [
    { type: 'choice', field: 'target' },
    { type: 'choice', field: 'decision' },
    { type: 'range', field: 'score' },
    { type: 'range', field: 'created_at', title: 'Scored' },
  ],
  searchFields: ['=record_ref'],
  ordering: ['-created_at'],
  fields: {
    target: { choices: choices(RULE_TARGETS) },
    decision: { choices: DECISION_CHOICES },
    // Read whole by the MCP tools and inline rows: its customer section only for customer viewers.
    data_context: { redact: (value, mayView) => viewableDecisionContext(decisionContextOf(value), mayView) },
  },
  form: ['target', 'record_id', 'record_ref', 'score', 'decision', 'matched_rules', 'rule_errors', 'duration_us', 'actor', 'created_at'],
  readonly: ['target', 'record_id', 'record_ref', 'score', 'decision', 'matched_rules', 'rule_errors', 'duration_us', 'actor', 'created_at'],
  inlines: [{ model: 'engine.compliancedecision', fk: 'target_id', label: 'Compliance decisions', ordering: '-created_at' }],
  disabled: { add: true, change: true, delete: true },
  menu: { group: 'Monitoring', icon: 'history' },
};
