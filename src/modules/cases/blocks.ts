import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { ruleNames } from './rule-contributions.ts';
import type { AdminSite, BlockDescription, DetailBlockProvider } from '../backoffice/site.ts';
import { mayName } from '../backoffice/access.ts';
import { getRow } from '../backoffice/query.ts';
import type { BoundModel, Row } from '../backoffice/registry.ts';
import type { Principal } from '../staff/principal.ts';
import { formatTimestamp } from '../../timestamps.ts';
import { decisionContextOf, decisionContextOfLog, viewableDecisionContext } from '../rules/decision-context.ts';
import { alertRecordModel } from './admin.ts';
import { DECISION_TARGETS, markBlock } from './decisions.ts';

/**
 * Case work's blocks on record details (the mobile detail and the web change page both carry
 * them): data_context on alerts and execution logs; matched_rules on alerts, execution logs and
 * the two event models; the mark block (the decision form's settings) and the earlier decisions
 * on the three models decisions are made on; and on an alert, the mark block of its record
 * (record_mark), so the alert's page takes the decision on the record it raised for.
 */

/** The newest decisions a detail lists with their attachments; the compliance decision list has every one. */
export const DECISIONS_SHOWN = 10;

const EVENT_TARGETS: Readonly<Record<string, string>> = {
  'transaction.financialevent': 'financial',
  'transaction.nonfinancialevent': 'non_financial',
};

export interface MatchedRule {
  code: string;
  /** The rule's name now (rules keep their code for ever); null when the rule is gone. */
  name: string | null;
  /** The version that matched. */
  version: number | null;
  /** What it added to the score. */
  score: number;
  /** The decision it forces, or null. */
  decision: string | null;
}

export interface MatchedRulesBlock {
  /** The execution log the rules' result comes from. */
  log_id: string;
  /** The log's total score and decision. */
  score: number;
  decision: string;
  scored_at: string;
  /** Who ran the scoring (the merchant's upsert, a replay; staff for a decision's log, which matched nothing). */
  actor: string;
  /** True for the log a compliance decision wrote: no rule ran, the ruling set the outcome. */
  by_decision: boolean;
  rules: MatchedRule[];
}

export interface EarlierDecision {
  id: string;
  decision: string;
  score: number | null;
  actor: string;
  description: string;
  document_description: string;
  created_at: string;
  attachments: { name: string; content_type: string; size: number }[];
}

export interface DecisionsBlock {
  total: number;
  /** The newest DECISIONS_SHOWN, newest first. */
  rows: EarlierDecision[];
}

const LOG_COLUMNS = ['id', 'score', 'decision', 'matched_rules', 'actor', 'created_at', 'compliance_decision_id'] as const;

/**
 * The matched rules of one execution log: each rule by code and name, with the score it
 * contributed and the decision it forces, in the order the engine matched them.
 */
async function matchedRulesOf(db: Knex, log: Row | undefined): Promise<MatchedRulesBlock | null> {
  if (!log) return null;
  const stored = typeof log.matched_rules === 'string' ? (JSON.parse(log.matched_rules) as unknown) : log.matched_rules;
  const matched = (Array.isArray(stored) ? stored : []).filter(
    (entry): entry is { code: unknown; version?: unknown; score?: unknown; decision?: unknown } => entry !== null && typeof entry === 'object' && typeof (entry as { code?: unknown }).code === 'string',
  );
  const codes = [...new Set(matched.map((entry) => String(entry.code)))];
  const names = await ruleNames(db, codes);
  return {
    log_id: String(log.id),
    score: Number(log.score),
    decision: String(log.decision),
    scored_at: formatTimestamp(log.created_at as Date),
    actor: String(log.actor),
    by_decision: log.compliance_decision_id !== null && log.compliance_decision_id !== undefined,
    rules: matched.map((entry) => ({
      code: String(entry.code),
      name: names.get(String(entry.code)) ?? null,
      version: typeof entry.version === 'number' ? entry.version : null,
      score: Number(entry.score ?? 0),
      decision: typeof entry.decision === 'string' ? entry.decision : null,
    })),
  };
}

/**
 * The log whose rules explain a record's outcome: the newest one the rules wrote for it. A
 * compliance decision's own log (it matched nothing) is passed over, so the rules stay in view
 * after a ruling.
 */
async function scoringLogOf(db: Knex, target: string, recordId: unknown): Promise<Row | undefined> {
  return (await db('execution_logs')
    .where({ target, record_id: recordId })
    .whereNull('compliance_decision_id')
    .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
    .first(...LOG_COLUMNS)) as Row | undefined;
}

async function matchedRulesBlock(db: Knex, model: BoundModel, row: Row): Promise<MatchedRulesBlock | null | undefined> {
  if (model.key === 'engine.executionlog') return matchedRulesOf(db, row);
  if (model.key === 'engine.alert') {
    if (typeof row.log_id !== 'string') return null;
    return matchedRulesOf(db, (await db('execution_logs').where({ id: row.log_id }).first(...LOG_COLUMNS)) as Row | undefined);
  }
  const target = Object.hasOwn(EVENT_TARGETS, model.key) ? EVENT_TARGETS[model.key] : undefined;
  return target ? matchedRulesOf(db, await scoringLogOf(db, target, row.id)) : undefined;
}

function attachmentsOf(value: unknown): EarlierDecision['attachments'] {
  const stored = typeof value === 'string' ? (JSON.parse(value) as unknown) : value;
  if (!Array.isArray(stored)) return [];
  return stored
    .filter((item): item is Row => item !== null && typeof item === 'object')
    .map((item) => ({ name: String(item.name ?? ''), content_type: String(item.content_type ?? ''), size: Number(item.size ?? 0) }));
}

/** The decisions made on one target (through its own door), newest first, with their attachments' names and sizes. */
async function decisionsOn(db: Knex, targetModel: string, targetId: string): Promise<DecisionsBlock> {
  const where = { target_model: targetModel, target_id: targetId };
  const [rows, total] = await Promise.all([
    db('compliance_decisions')
      .where(where)
      .orderBy([{ column: 'created_at', order: 'desc' }, { column: 'id', order: 'desc' }])
      .limit(DECISIONS_SHOWN)
      .select('id', 'decision', 'score', 'actor', 'description', 'document_description', 'created_at', 'attachments') as Promise<Row[]>,
    db('compliance_decisions').where(where).count<{ count: string }[]>('* as count').then((counted) => Number(counted[0]!.count)),
  ]);
  return {
    total,
    rows: rows.map((row) => ({
      id: String(row.id),
      decision: String(row.decision),
      score: row.score === null || row.score === undefined ? null : Number(row.score),
      actor: String(row.actor),
      description: String(row.description),
      document_description: String(row.document_description ?? ''),
      created_at: formatTimestamp(row.created_at as Date),
      attachments: attachmentsOf(row.attachments),
    })),
  };
}

/** The record an alert was raised for, when decisions are made on its model and the viewer may see it. */
async function alertRecord(db: Knex, site: AdminSite, principal: Principal, alert: Row): Promise<{ model: BoundModel; row: Row } | null> {
  const key = alertRecordModel(alert);
  const model = key && DECISION_TARGETS[key] ? site.models.get(key) : undefined;
  if (!model || !site.can(principal, model, 'view') || typeof alert.record_id !== 'string') return null;
  const row = await getRow(db, model, principal, alert.record_id);
  return row ? { model, row } : null;
}

const DESCRIPTIONS: readonly BlockDescription[] = [
  {
    name: 'data_context',
    label: 'Decision context',
    description: 'What the rules saw (alerts, execution logs): {transaction, customer, aggregates, event}, each a flat object of values (nested keys dotted: geo.lat).',
  },
  {
    name: 'matched_rules',
    label: 'Matched rules',
    description:
      'The rules that matched (alerts, execution logs, financial and non-financial events; for an event, its newest scoring by the rules): {log_id, score, decision, scored_at, actor, by_decision, rules: [{code, name, version, score (its contribution), decision (forced, or null)}]}, or null when no rule ran.',
  },
  {
    name: 'mark',
    label: 'Compliance decision',
    description: 'The decision form of this record: {allowed, options, current, score, needs_approval, max_attachments, has_decisions}; POST data/<app>/<model>/<pk>/decision/.',
  },
  {
    name: 'record_mark',
    label: 'Decision on the record',
    description: "An alert's record's decision form: the mark block plus {model, pk, repr}; POST data/<model as app/model>/<pk>/decision/. Absent when the record is not a decision model or not visible.",
  },
  {
    name: 'decisions',
    label: 'Earlier decisions',
    description: 'The compliance decisions on this record (on an alert: on its record), newest first: {total, rows: [{id, decision, score, actor, description, document_description, created_at, attachments: [{name, content_type, size}]}]}; only for viewers of compliance decisions.',
  },
];

/** Which of the blocks each model's detail carries. */
function blocksOf(modelKey: string): readonly string[] {
  if (modelKey === 'engine.alert') return ['data_context', 'matched_rules', 'record_mark', 'decisions'];
  if (modelKey === 'engine.executionlog') return ['data_context', 'matched_rules', 'mark', 'decisions'];
  return DECISION_TARGETS[modelKey] ? ['matched_rules', 'mark', 'decisions'] : [];
}

export const caseWorkBlocks: DetailBlockProvider = {
  models: ['engine.alert', ...Object.keys(DECISION_TARGETS)],
  describes: (model) => DESCRIPTIONS.filter((description) => blocksOf(model.key).includes(description.name)),
  async blocks({ db, site, model, row, principal }) {
    const blocks: Record<string, unknown> = {};
    const context = model.key === 'engine.alert' ? await decisionContextOfLog(db, row.log_id as string | null) : model.key === 'engine.executionlog' ? decisionContextOf(row.data_context) : undefined;
    if (context !== undefined) blocks.data_context = context && viewableDecisionContext(context, (key) => mayName(site, principal, key));
    const matched = await matchedRulesBlock(db, model, row);
    if (matched !== undefined) blocks.matched_rules = matched;
    const showDecisions = mayName(site, principal, 'engine.compliancedecision');
    if (DECISION_TARGETS[model.key]) {
      blocks.mark = await markBlock({ db } as Pick<AppContext, 'db'>, model, row, principal);
      if (showDecisions) blocks.decisions = await decisionsOn(db, DECISION_TARGETS[model.key]!, String(row[model.pk]));
    }
    if (model.key === 'engine.alert') {
      const record = await alertRecord(db, site, principal, row);
      if (record) {
        const pk = String(record.row[record.model.pk]);
        blocks.record_mark = { model: record.model.key, pk, repr: record.model.repr(record.row), ...(await markBlock({ db } as Pick<AppContext, 'db'>, record.model, record.row, principal)) };
        if (showDecisions) blocks.decisions = await decisionsOn(db, DECISION_TARGETS[record.model.key]!, pk);
      }
    }
    return blocks;
  },
};
