import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { permissionFor } from '../backoffice/declare.ts';
import { z } from '../../http/openapi.ts';
import { getRow } from '../backoffice/query.ts';
import type { BoundModel, Row } from '../backoffice/registry.ts';
import type { WriteOrigin } from '../backoffice/write.ts';
import { ObjectNotFound, PendingApprovalConflict, PermissionDenied, ValidationFailed } from '../backoffice/errors.ts';
import type { Principal } from '../staff/principal.ts';
import { findPolicy, openRequest, pendingRequestFor, PENDING_MESSAGE, refuseStale, registerApplier, type PolicyRow, type RequestRow } from '../approvals/service.ts';
import type { AdminSite } from '../backoffice/site.ts';
import { checkForm, requiredText } from '../../validation/form.ts';
import { MAX_ATTACHMENTS } from './attachments.ts';
import type { StoredAttachment } from '../kyc/storage.ts';

/**
 * Compliance decisions: a staff member's ruling on a scored record (an execution log, a financial
 * or a non-financial event). The decision row is append-only; the record takes the new decision
 * (and score, when one is given); a ruling that changes the outcome is written into the record's
 * execution history and delivered to the merchant's webhook.
 */

export const DECISION_TARGETS: Readonly<Record<string, string>> = {
  'engine.executionlog': 'executionlog',
  'transaction.financialevent': 'financialevent',
  'transaction.nonfinancialevent': 'nonfinancialevent',
};

const RECORD_TABLES: Readonly<Record<string, string>> = {
  customer: 'customers',
  financial: 'financial_transactions',
  non_financial: 'non_financial_events',
};

const TABLE_TARGETS: Readonly<Record<string, string>> = {
  financial_transactions: 'financial',
  non_financial_events: 'non_financial',
};

export interface DecisionInput {
  decision: 'ACCEPT' | 'REVIEW' | 'REJECT';
  description: string;
  /** null leaves the record's score as it is. */
  score: number | null;
  document_description: string;
}

const MAX_TEXT = 10_000;
const SCORE_FORMAT = 'Enter a number from 0 to 100 with at most 2 decimals.';

/** The decision form (JSON values, or the text of a multipart form); the OpenAPI document shows the same schema. */
export const DECISION_FORM = z.object({
  decision: z.enum(['ACCEPT', 'REVIEW', 'REJECT']),
  description: requiredText(MAX_TEXT),
  // Left out, the record keeps its score.
  score: z
    .union([z.number(), z.string()], { error: SCORE_FORMAT })
    .refine((value) => /^\d+(\.\d{1,2})?$/.test(String(value).trim()), { message: SCORE_FORMAT })
    .transform((value) => Number(String(value).trim()))
    .pipe(z.number().max(100))
    .optional()
    .openapi({ description: 'From 0 to 100 with at most 2 decimals: a number, or its text' }),
  document_description: z.string().max(MAX_TEXT).default(''),
});

/** Validates a decision body (JSON values or multipart text) through the one form check: errors keyed by field. */
export function cleanDecision(body: Record<string, unknown>): DecisionInput {
  const checked = checkForm(DECISION_FORM, body);
  if (!checked.ok) throw new ValidationFailed(checked.errors);
  return { ...checked.data, score: checked.data.score ?? null };
}

/** Change permission on the target plus engine.add_compliancedecision (the model itself is view-only for everyone). */
export function mayDecide(principal: Principal, model: Pick<BoundModel, 'appLabel' | 'model'>): boolean {
  return principal.has(permissionFor(model, 'change')) && principal.has('engine.add_compliancedecision');
}

/** The registered model of each record table a decision can rule on. */
const RULED_MODELS: Readonly<Record<string, string>> = {
  customer: 'customer.customer',
  financial: 'transaction.financialevent',
  non_financial: 'transaction.nonfinancialevent',
};

/** The record a decision on this target rules on: the event itself, or the record an execution log scored. */
async function ruledRecord(db: Knex | Knex.Transaction, model: BoundModel, row: Row, forUpdate = false): Promise<{ table: string; target: string; modelKey: string; row: Row } | null> {
  const target = model.table === 'execution_logs' ? String(row.target) : TABLE_TARGETS[model.table];
  const table = target ? RECORD_TABLES[target] : undefined;
  if (!table || !target) return null;
  const id = model.table === 'execution_logs' ? row.record_id : row.id;
  const query = db(table).where({ id }).first();
  if (forUpdate) query.forUpdate();
  const record = (await query) as Row | undefined;
  return record ? { table, target, modelKey: RULED_MODELS[target]!, row: record } : null;
}

/** What a decision may do once authorised: be written now, or wait for the approval the policy asks. */
export interface DecisionClearance {
  /** The policy that covers the decision (the door's model's, else the ruled record's), or null. */
  policy: PolicyRow | null;
  ruled: Awaited<ReturnType<typeof ruledRecord>>;
}

/**
 * The one check of a decision's effect, whatever door it came through (the record's page, its
 * execution log, a case closure, the assistant, the mobile API): the decision permission on the
 * door's model and on the record it rules on, no approval pending on either, and the decision
 * policy of either. A decision posted on an execution log changes the transaction it scored, so
 * the transaction's policy and pending lock hold there as well. Throws PermissionDenied or
 * PendingApprovalConflict; the caller decides what a covering policy means for its door.
 */
export async function clearDecision(trx: Knex.Transaction, site: AdminSite, principal: Principal, model: BoundModel, row: Row): Promise<DecisionClearance> {
  if (!mayDecide(principal, model)) throw new PermissionDenied();
  // Locked: decisions on one record through two doors are serialised, so both see each other's request.
  const ruled = await ruledRecord(trx, model, row, true);
  const ruledModel = ruled && ruled.modelKey !== model.key ? site.models.get(ruled.modelKey) : undefined;
  if (ruledModel && !mayDecide(principal, ruledModel)) throw new PermissionDenied(`A decision here changes the ${ruledModel.verboseName} it rules on: you need the decision permission on ${ruledModel.verboseNamePlural} too.`);
  if ((await pendingRequestFor(trx, model.key, String(row[model.pk]))) || (ruled && (await pendingDecisionOn(trx, ruled)))) throw new PendingApprovalConflict(PENDING_MESSAGE);
  const policy = (await findPolicy(trx, model.key, 'decision')) ?? (ruled && ruled.modelKey !== model.key ? await findPolicy(trx, ruled.modelKey, 'decision') : null);
  return { policy, ruled };
}

/**
 * Whether a request waits on the ruled record through any door: on the record itself, or on one of
 * the execution logs that scored it (pending requests are few; each log is read by its key).
 */
async function pendingDecisionOn(trx: Knex.Transaction, ruled: NonNullable<Awaited<ReturnType<typeof ruledRecord>>>): Promise<boolean> {
  const found = await trx('approval_requests as r')
    .where('r.status', 'pending')
    .where((clause) =>
      clause
        .where({ 'r.content_type': ruled.modelKey, 'r.object_id': String(ruled.row.id) })
        .orWhere((logs) =>
          logs.where('r.content_type', 'engine.executionlog').whereExists((exists) =>
            exists.select(trx.raw('1')).from('execution_logs as l').whereRaw('l.id::text = r.object_id').where({ 'l.record_id': ruled.row.id, 'l.target': ruled.target }),
          ),
        ),
    )
    .first('r.id');
  return found !== undefined;
}

export interface DecisionResult {
  decision: Row;
  target: { model: string; pk: string; decision: string | null; score: number | null };
}

export interface ApplyDecision {
  modelKey: string;
  pk: string;
  input: DecisionInput;
  actor: Principal;
  attachments: StoredAttachment[];
  /** Shared by every decision of one case closure. */
  batchId?: string | null;
  caseId?: string | null;
  approvalRequestId?: string | null;
  /** The checkers who approved it, named in the audit row. */
  checkers?: string[];
}

/**
 * Writes one decision inside the caller's transaction: the append-only row, the record's new
 * decision and score, and, when the outcome changed, an execution-log row in the record's history
 * and the merchant's notification job. Returns the row and the record's new state.
 */
export async function applyDecision(app: Pick<AppContext, 'backoffice' | 'jobs'>, trx: Knex.Transaction, decision: ApplyDecision): Promise<DecisionResult> {
  const [appLabel, modelName] = decision.modelKey.split('.') as [string, string];
  const model = app.backoffice.site.get(appLabel, modelName)!;
  const target = (await trx(model.table).where(model.pk, decision.pk).forUpdate().first()) as Row | undefined;
  if (!target) throw new ObjectNotFound(model, decision.pk);
  const ruled = await ruledRecord(trx, model, target, true);
  const current = ruled?.row ?? target;
  const originalScore = current.score === null || current.score === undefined ? null : Number(current.score);
  const originalDecision = (current.decision as string | null) ?? null;
  const newScore = decision.input.score ?? originalScore;
  const id = randomUUID();
  const [row] = (await trx('compliance_decisions')
    .insert({
      id,
      target_model: DECISION_TARGETS[decision.modelKey],
      target_id: decision.pk,
      decision: decision.input.decision,
      score: decision.input.score,
      original_score: originalScore,
      original_decision: originalDecision,
      description: decision.input.description,
      document_description: decision.input.document_description,
      attachments: JSON.stringify(decision.attachments),
      batch_id: decision.batchId ?? null,
      case_id: decision.caseId ?? null,
      actor_id: decision.actor.user.id,
      actor: decision.actor.user.username,
      approval_request_id: decision.approvalRequestId ?? null,
    })
    .returning('*')) as Row[];
  const changed = originalDecision !== decision.input.decision || (decision.input.score !== null && originalScore !== decision.input.score);
  if (ruled) {
    const updates: Row = { decision: decision.input.decision, updated_at: trx.fn.now(), updated_by: `staff:${decision.actor.user.username}` };
    if (decision.input.score !== null) updates.score = decision.input.score;
    if (changed) {
      // The ruling joins the record's execution history, with the context the rules saw for the record.
      const previous = current.log_id ? ((await trx('execution_logs').where({ id: current.log_id }).first('data_context', 'rule_version_set')) as Row | undefined) : undefined;
      const logId = randomUUID();
      await trx('execution_logs').insert({
        id: logId,
        target: ruled.target,
        record_id: current.id,
        record_ref: (current.transaction_ref ?? current.customer_ref ?? null) as string | null,
        score: newScore ?? 0,
        decision: decision.input.decision,
        matched_rules: '[]',
        rule_version_set: previous?.rule_version_set ?? null,
        rule_errors: '[]',
        data_context: JSON.stringify(previous?.data_context ?? { transaction: {}, customer: {}, aggregates: {}, event: {} }),
        duration_us: 0,
        actor: `staff:${decision.actor.user.username}`,
        compliance_decision_id: id,
      });
      updates.log_id = logId;
    }
    await trx(ruled.table).where({ id: current.id }).update(updates);
    if (changed && typeof current.created_by === 'string' && current.created_by.startsWith('merchant:')) await app.jobs.notifyDecision(trx, id);
  }
  await trx('admin_log_entries').insert({
    user_id: decision.actor.user.id,
    actor: decision.checkers?.length ? `${decision.actor.user.username} (approved by ${decision.checkers.join(', ')})` : decision.actor.user.username,
    action_flag: 1,
    content_type: 'engine.compliancedecision',
    object_id: id,
    object_repr: `${decision.input.decision} on ${decision.modelKey} ${decision.pk}`.slice(0, 200),
    change: JSON.stringify({ decision: [originalDecision, decision.input.decision], score: [originalScore, newScore] }),
    approval_request_id: decision.approvalRequestId ?? null,
  });
  return {
    decision: row!,
    target: { model: decision.modelKey, pk: decision.pk, decision: decision.input.decision, score: newScore },
  };
}

export type DecisionOutcome = ({ status: 'created' } & DecisionResult) | { status: 'pending'; approvalRequestId: string };

/**
 * The decision endpoint's work (web and mobile): permission, the record (404), validation, then
 * either an approval request (a policy covers decisions on the model; the files wait with it) or
 * the decision applied, in one transaction.
 */
export async function submitDecision(
  app: AppContext,
  model: BoundModel,
  principal: Principal,
  pk: string,
  input: DecisionInput,
  attachments: StoredAttachment[],
  origin: WriteOrigin,
): Promise<DecisionOutcome> {
  if (!DECISION_TARGETS[model.key]) throw new ObjectNotFound(model, pk);
  if (!mayDecide(principal, model)) throw new PermissionDenied();
  if (attachments.length > MAX_ATTACHMENTS) throw new ValidationFailed({ attachments: [{ message: `At most ${MAX_ATTACHMENTS} attachments.`, code: 'max_length' }] });
  return app.db.transaction(async (trx) => {
    const row = await getRow(trx, model, principal, pk, true);
    if (!row) throw new ObjectNotFound(model, pk);
    const { policy, ruled } = await clearDecision(trx, app.backoffice.site, principal, model, row);
    if (policy) {
      const current = ruled?.row ?? row;
      const requestId = await openRequest(trx, {
        policy,
        contentType: model.key,
        objectId: pk,
        objectRepr: model.repr(row),
        operation: 'decision',
        diff: {
          fields: [
            { name: 'decision', label: 'Decision', type: 'scalar', old: current.decision ?? null, new: input.decision },
            ...(input.score !== null ? [{ name: 'score', label: 'Score', type: 'scalar' as const, old: current.score ?? null, new: input.score }] : []),
            { name: 'description', label: 'Description', type: 'text', old: null, new: input.description },
            ...(input.document_description ? [{ name: 'document_description', label: 'Document description', type: 'text' as const, old: null, new: input.document_description }] : []),
          ],
          inline_blocks: [],
        },
        payload: { input, channel: origin.channel },
        principal,
        origin,
        attachments,
      });
      return { status: 'pending' as const, approvalRequestId: requestId };
    }
    return { status: 'created' as const, ...(await applyDecision(app, trx, { modelKey: model.key, pk, input, actor: principal, attachments })) };
  });
}

/** Approved decision requests are applied here, as the maker, with the request's files. */
export function installDecisionApplier(app: AppContext): void {
  registerApplier('decision', async (trx, request: RequestRow, maker, checkers) => {
    // The ruling was asked against the record's decision and score then: a newer score (a merchant
    // upsert re-scored it) or decision refuses the request rather than overwrite them.
    const [appLabel, modelName] = request.content_type.split('.') as [string, string];
    const model = app.backoffice.site.get(appLabel, modelName);
    const target = model ? ((await trx(model.table).where(model.pk, request.object_id!).forUpdate().first()) as Row | undefined) : undefined;
    if (model && target) {
      // The maker still needs the decision permission (the request left pending, so it locks nothing
      // now); clearDecision also locks the ruled record before its values are compared.
      const { ruled } = await clearDecision(trx, app.backoffice.site, maker, model, target);
      refuseStale(request.diff, ruled?.row ?? target, new Set(['decision', 'score']));
    }
    await applyDecision(app, trx, {
      modelKey: request.content_type,
      pk: request.object_id!,
      input: request.payload.input as DecisionInput,
      actor: maker,
      attachments: request.attachments,
      approvalRequestId: request.id,
      checkers,
    });
  });
}

/** The mark block of a target's detail: what the decision form offers this viewer. */
export async function markBlock(app: Pick<AppContext, 'db'>, model: BoundModel, row: Row, principal: Principal): Promise<Record<string, unknown>> {
  const ruled = await ruledRecord(app.db, model, row);
  const current = ruled?.row ?? row;
  const [policy, decided] = await Promise.all([
    findPolicy(app.db, model.key, 'decision'),
    app.db('compliance_decisions').where({ target_model: DECISION_TARGETS[model.key], target_id: String(row[model.pk]) }).first('id'),
  ]);
  return {
    allowed: mayDecide(principal, model),
    options: [
      { value: 'ACCEPT', label: 'Accept' },
      { value: 'REVIEW', label: 'Review' },
      { value: 'REJECT', label: 'Reject' },
    ],
    current: current.decision ?? null,
    score: current.score === null || current.score === undefined ? null : Number(current.score),
    score_enabled: true,
    needs_approval: policy !== null,
    max_attachments: MAX_ATTACHMENTS,
    has_decisions: Boolean(decided),
  };
}
