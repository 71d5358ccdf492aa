import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import type { Row } from '../backoffice/registry.ts';
import type { Principal } from '../staff/principal.ts';
import { applyDecision } from './decisions.ts';

/** What closing a case needs beyond the write chain's transaction: set once by the composition root. */
let caseWork: Pick<AppContext, 'backoffice' | 'jobs'> | null = null;

export function installCaseClosure(app: Pick<AppContext, 'backoffice' | 'jobs'>): void {
  caseWork = app;
}

const TARGET_MODELS: Readonly<Record<string, string>> = {
  financial: 'transaction.financialevent',
  non_financial: 'transaction.nonfinancialevent',
};

/**
 * Closing a case (inside the case's save, so all of it commits or none): its open alerts close,
 * and with a clear decision every alerted transaction gets one compliance decision, all of them
 * sharing one batch_id. The case row is locked by the write chain, so a second closing racing this
 * one finds the case closed and writes nothing.
 */
export async function closeCase(trx: Knex.Transaction, caseRow: Row, cleaned: Row, principal: Principal): Promise<void> {
  await trx('alerts').where({ case_id: caseRow.id, status: 'open' }).update({ status: 'closed' });
  const decision = cleaned.clear_decision as 'ACCEPT' | 'REJECT' | null | undefined;
  if (!decision) return;
  if (!caseWork) throw new Error('case closure is not installed (installCaseClosure)');
  const alerted = (await trx('alerts')
    .where({ case_id: caseRow.id })
    .whereIn('target', Object.keys(TARGET_MODELS))
    .distinct('target', 'record_id')
    .orderBy('record_id')) as { target: string; record_id: string }[];
  const batchId = randomUUID();
  const score = cleaned.clear_score === undefined || cleaned.clear_score === null ? null : Number(cleaned.clear_score);
  const description = `Case closed: ${String(cleaned.rationale ?? '').trim()}`.slice(0, 10_000);
  for (const alert of alerted) {
    const exists = await trx(alert.target === 'financial' ? 'financial_transactions' : 'non_financial_events').where({ id: alert.record_id }).first('id');
    if (!exists) continue;
    await applyDecision(caseWork, trx, {
      modelKey: TARGET_MODELS[alert.target]!,
      pk: alert.record_id,
      input: { decision, score, description, document_description: '' },
      actor: principal,
      attachments: [],
      batchId,
      caseId: String(caseRow.id),
    });
  }
}
