import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import type { Row } from '../backoffice/registry.ts';
import type { Principal } from '../staff/principal.ts';
import { ValidationFailed } from '../backoffice/errors.ts';
import { applyDecision, clearDecision } from './decisions.ts';

/** What closing a case needs beyond the write chain's transaction: set once by the composition root. */
let caseWork: Pick<AppContext, 'backoffice' | 'jobs'> | null = null;

export function installCaseClosure(app: Pick<AppContext, 'backoffice' | 'jobs'>): void {
  caseWork = app;
}

const TARGET_MODELS: Readonly<Record<string, string>> = {
  financial: 'transaction.financialevent',
  non_financial: 'transaction.nonfinancialevent',
};

/** The decisions a closure will write: one per alerted record, each cleared like a decision on its own page. */
export interface ClosureDecisions {
  decision: 'ACCEPT' | 'REJECT';
  records: { modelKey: string; pk: string }[];
}

function closing(before: Row | null, cleaned: Row): boolean {
  return cleaned.status === 'closed' && before !== null && before.status !== 'closed';
}

/**
 * The check of a closure's decisions, run before the case is written (beforeSave, so before the
 * approval hook: a change policy on cases cannot turn a closure whose decisions would be refused
 * into a request) and again when they are written. Each decision passes the same check as one made
 * on the record's own page (clearDecision): the closer needs the decision permission, no approval
 * may be pending on any alerted record, and where a decision policy covers one of them the closure
 * is refused with the reason (the officer decides those records one by one, each through its
 * approval, then closes the case without a clear decision): a closure never writes a decision a
 * policy holds back.
 */
export async function clearClosure(trx: Knex.Transaction, before: Row | null, cleaned: Row, principal: Principal): Promise<ClosureDecisions | null> {
  const decision = cleaned.clear_decision as 'ACCEPT' | 'REJECT' | null | undefined;
  if (!decision || !closing(before, cleaned)) return null;
  if (!caseWork) throw new Error('case closure is not installed (installCaseClosure)');
  const site = caseWork.backoffice.site;
  const alerted = (await trx('alerts')
    .where({ case_id: before!.id })
    .whereIn('target', Object.keys(TARGET_MODELS))
    .distinct('target', 'record_id')
    .orderBy('record_id')) as { target: string; record_id: string }[];
  const records: ClosureDecisions['records'] = [];
  const covered = new Set<string>();
  for (const alert of alerted) {
    const modelKey = TARGET_MODELS[alert.target]!;
    const model = site.models.get(modelKey)!;
    const row = (await trx(model.table).where({ id: alert.record_id }).first()) as Row | undefined;
    if (!row) continue;
    // Every record is checked (permission, pending lock) before a covering policy refuses the whole.
    const { policy } = await clearDecision(trx, site, principal, model, row);
    if (policy) covered.add(model.verboseNamePlural);
    records.push({ modelKey, pk: alert.record_id });
  }
  if (covered.size) {
    throw new ValidationFailed({
      clear_decision: [{
        message: `An approval policy covers decisions on ${[...covered].join(' and ')}: decide the alerted records one by one (each goes to approval), then close the case without a clear decision.`,
        code: 'approval_required',
      }],
    });
  }
  return { decision, records };
}

/**
 * Closing a case (inside the case's save, so all of it commits or none): its open alerts close,
 * and with a clear decision every alerted transaction gets one compliance decision, all of them
 * sharing one batch_id, each cleared again (clearClosure) as the case is written. The case row is
 * locked by the write chain, so a second closing racing this one finds the case closed and writes
 * nothing.
 */
export async function closeCase(trx: Knex.Transaction, before: Row, caseRow: Row, cleaned: Row, principal: Principal): Promise<void> {
  await trx('alerts').where({ case_id: caseRow.id, status: 'open' }).update({ status: 'closed' });
  const cleared = await clearClosure(trx, before, cleaned, principal);
  if (!cleared) return;
  const batchId = randomUUID();
  const score = cleaned.clear_score === undefined || cleaned.clear_score === null ? null : Number(cleaned.clear_score);
  const description = `Case closed: ${String(cleaned.rationale ?? '').trim()}`.slice(0, 10_000);
  for (const { modelKey, pk } of cleared.records) {
    await applyDecision(caseWork!, trx, {
      modelKey,
      pk,
      input: { decision: cleared.decision, score, description, document_description: '' },
      actor: principal,
      attachments: [],
      batchId,
      caseId: String(caseRow.id),
    });
  }
}
