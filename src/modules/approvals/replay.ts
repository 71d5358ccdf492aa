import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { compileRuleSet } from '../rules/compiler.ts';
import type { Decision, EvaluationInput, RuleDefinition } from '../rules/definitions.ts';
import { evaluateRecords, type Thresholds } from '../rules/evaluate.ts';
import { decisionContextOf } from '../rules/decision-context.ts';
import type { Row } from '../backoffice/registry.ts';
import type { RequestRow } from './service.ts';

/**
 * The evidence of a rule change: the stored financial events of the last days replayed through the
 * rule set in force and the proposed one. Each event is replayed on the context its execution log
 * stored (what the rules saw when it was scored: the record, its customer, the aggregates and the
 * event), so the two rule sets read the same input and every difference is the change's.
 */

const DECISIONS: readonly Decision[] = ['ACCEPT', 'REVIEW', 'REJECT'];
const EXAMPLES = 20;
const CHUNK = 5000;

export interface ReplayEvidence {
  window: { from: string; to: string; days: number };
  events: number;
  changed: number;
  /** current decision -> proposed decision -> records */
  outcomes: Record<Decision, Record<Decision, number>>;
  alerts_added: number;
  alerts_removed: number;
  examples: Array<{ record_id: string; transaction_ref: string; current: { decision: Decision; score: number }; proposed: { decision: Decision; score: number } }>;
  duration_ms: number;
}

/**
 * The flat key/value sets of a stored context back into the nested values the rules' `var`
 * paths read (`geo.lat`, `tags.0`): keys with numeric segments become arrays again.
 */
export function unflatten(flat: Record<string, unknown>): Record<string, unknown> {
  const root: Record<string, unknown> = {};
  // Only the values rebuilt from dotted keys can hold arrays again; flat keys are copied as they are.
  let nested: Set<string> | null = null;
  for (const key in flat) {
    const value = flat[key];
    const dot = key.indexOf('.');
    if (dot < 0) {
      root[key] = value;
      continue;
    }
    const parts = key.split('.');
    (nested ??= new Set()).add(parts[0]!);
    let node: Record<string, unknown> = root;
    for (let i = 0; i < parts.length - 1; i++) {
      const part = parts[i]!;
      const next = node[part];
      if (next === null || typeof next !== 'object') node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[parts[parts.length - 1]!] = value;
  }
  if (nested) for (const key of nested) root[key] = arraysRestored(root[key]);
  return root;
}

function arraysRestored(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  const entries = Object.entries(value as Record<string, unknown>);
  const restored = entries.map(([key, child]) => [key, arraysRestored(child)] as const);
  if (entries.length > 0 && entries.every(([key], index) => key === String(index))) return restored.map(([, child]) => child);
  return Object.fromEntries(restored);
}

/** The rule input of a stored financial event, from its execution log's context. */
export function replayInput(stored: unknown): EvaluationInput {
  const context = decisionContextOf(stored);
  const event = context.event;
  return {
    target: 'financial',
    record: unflatten(context.transaction),
    customer: Object.keys(context.customer).length ? unflatten(context.customer) : null,
    event: typeof event.slug === 'string' ? { slug: event.slug, name: String(event.name ?? ''), type: Number(event.type ?? 1) } : null,
    aggregates: context.aggregates as Record<string, number | null>,
  };
}

function emptyMatrix(): Record<Decision, Record<Decision, number>> {
  return Object.fromEntries(DECISIONS.map((from) => [from, Object.fromEntries(DECISIONS.map((to) => [to, 0]))])) as Record<Decision, Record<Decision, number>>;
}

const alerting = (decision: Decision) => decision !== 'ACCEPT';

/**
 * Replays the financial events whose event_date falls in the window, in chunks read by keyset
 * (event_date, id), through both rule sets compiled once. The reads are one transaction, so that
 * they alone run without PostgreSQL's parallel workers: a Gather Merge over the event_date index
 * made each chunk's read three times as slow on two cores, where the workers compete with this
 * process (a 100,000-event replay took 10-12 s with them, 5.8-6.2 s without; bench/RESULTS.md).
 */
export async function replay(
  db: Knex,
  current: readonly RuleDefinition[],
  proposed: readonly RuleDefinition[],
  thresholds: Thresholds,
  window: { from: Date; to: Date; days: number },
): Promise<ReplayEvidence> {
  return db.transaction(async (trx) => {
    await trx.raw('set local max_parallel_workers_per_gather = 0');
    return replayWithin(trx, current, proposed, thresholds, window);
  });
}

async function replayWithin(
  db: Knex.Transaction,
  current: readonly RuleDefinition[],
  proposed: readonly RuleDefinition[],
  thresholds: Thresholds,
  window: { from: Date; to: Date; days: number },
): Promise<ReplayEvidence> {
  const started = performance.now();
  const currentSet = compileRuleSet(current);
  const proposedSet = compileRuleSet(proposed);
  const evidence: ReplayEvidence = {
    window: { from: window.from.toISOString().slice(0, 19), to: window.to.toISOString().slice(0, 19), days: window.days },
    events: 0,
    changed: 0,
    outcomes: emptyMatrix(),
    alerts_added: 0,
    alerts_removed: 0,
    examples: [],
    duration_ms: 0,
  };
  const chunk = (after: { event_date: Date; id: string } | null) => {
    const query = db('financial_transactions as f')
      .join('execution_logs as l', 'l.id', 'f.log_id')
      .where('f.event_date', '>=', window.from)
      .where('f.event_date', '<', window.to)
      .orderBy([{ column: 'f.event_date' }, { column: 'f.id' }])
      .limit(CHUNK)
      .select('f.id', 'f.transaction_ref', 'f.event_date', 'l.data_context');
    if (after) query.whereRaw('(f.event_date, f.id) > (?, ?)', [after.event_date, after.id]);
    return query as Promise<Array<{ id: string; transaction_ref: string; event_date: Date; data_context: unknown }>>;
  };
  let pending = chunk(null);
  for (;;) {
    const rows = await pending;
    if (rows.length === 0) break;
    const last = rows[rows.length - 1]!;
    // The next chunk is read by PostgreSQL while this one is evaluated here (and waiting for it gives other requests the event loop).
    pending = rows.length < CHUNK ? Promise.resolve([]) : chunk({ event_date: last.event_date, id: last.id });
    const inputs = rows.map((row) => replayInput(row.data_context));
    const before = evaluateRecords(currentSet, inputs, thresholds);
    const now = evaluateRecords(proposedSet, inputs, thresholds);
    for (let i = 0; i < rows.length; i++) {
      const from = before[i]!;
      const to = now[i]!;
      evidence.outcomes[from.decision][to.decision] += 1;
      if (from.decision !== to.decision || from.score !== to.score) {
        evidence.changed += 1;
        if (evidence.examples.length < EXAMPLES) {
          evidence.examples.push({
            record_id: rows[i]!.id,
            transaction_ref: rows[i]!.transaction_ref,
            current: { decision: from.decision, score: from.score },
            proposed: { decision: to.decision, score: to.score },
          });
        }
      }
      if (!alerting(from.decision) && alerting(to.decision)) evidence.alerts_added += 1;
      if (alerting(from.decision) && !alerting(to.decision)) evidence.alerts_removed += 1;
    }
    evidence.events += rows.length;
  }
  evidence.duration_ms = Math.round(performance.now() - started);
  return evidence;
}

/** The rule set the request would leave in force: the active rules with the proposed one added, changed or removed. */
export function proposedRules(active: readonly RuleDefinition[], request: Pick<RequestRow, 'operation' | 'object_id' | 'payload'>, stored: Row | null): RuleDefinition[] {
  const input = (request.payload.input ?? {}) as Record<string, unknown>;
  const code = request.object_id ?? String(input.code ?? '');
  const others = active.filter((rule) => rule.code !== code);
  if (request.operation === 'delete') return others;
  const merged = { ...(stored ?? {}), ...input } as Record<string, unknown>;
  if (merged.active === false) return others;
  const rule: RuleDefinition = {
    code,
    name: String(merged.name ?? code),
    target: merged.target as RuleDefinition['target'],
    event_slugs: (merged.event_slugs as string[] | undefined) ?? [],
    expression: merged.expression as RuleDefinition['expression'],
    score: Number(merged.score ?? 0),
    decision: (merged.decision as Decision | null | undefined) ?? null,
    active: true,
    // A new version, so the compile cache never confuses it with the rule in force.
    version: Number(stored?.version ?? 0) + 1,
  };
  return [...others, rule];
}

/**
 * The replay-rule-change job: computes the evidence of a pending rule change and attaches it to
 * the request; a replay that keeps failing is recorded as failed so checkers are not held.
 */
export async function attachReplayEvidence(app: AppContext, requestId: string, finalAttempt: boolean): Promise<void> {
  const request = (await app.db('approval_requests').where({ id: requestId }).first()) as RequestRow | undefined;
  if (!request || request.status !== 'pending') return;
  await app.db('approval_requests').where({ id: requestId }).update({ evidence_status: 'running' });
  try {
    const active = await app.rules.active();
    const stored = request.object_id ? (((await app.db('rules').where({ code: request.object_id }).first()) as Row | undefined) ?? null) : null;
    const to = app.now?.() ?? new Date();
    const from = new Date(to.getTime() - app.config.replayDays * 86_400_000);
    const evidence = await replay(app.db, active, proposedRules(active, request, stored), app.config.thresholds, { from, to, days: app.config.replayDays });
    await app.db('approval_requests').where({ id: requestId }).update({ evidence: JSON.stringify(evidence), evidence_status: 'done' });
  } catch (error) {
    if (!finalAttempt) {
      await app.db('approval_requests').where({ id: requestId }).update({ evidence_status: 'queued' });
      throw error;
    }
    await app.db('approval_requests').where({ id: requestId }).update({ evidence: JSON.stringify({ error: (error as Error).message }), evidence_status: 'failed' });
  }
}
