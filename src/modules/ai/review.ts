import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { ForbiddenError, HttpError } from '../../http/errors.ts';
import { anyObject, z } from '../../http/openapi.ts';
import { QUEUES } from '../../jobs/queue.ts';
import { getRow, validPk } from '../backoffice/query.ts';
import type { BoundModel, Row } from '../backoffice/registry.ts';
import type { AdminSite } from '../backoffice/site.ts';
import { notify } from '../notifications/service.ts';
import type { Principal } from '../staff/principal.ts';
import type { ReviewResult } from '../../gateway/model.ts';
import { REQUIRED, validateForm } from '../../validation/form.ts';
import { delegate, reserveAiJob } from './delegation.ts';
import { callGateway, GatewayError, pingGateway } from './gateway-client.ts';
import { CASE_MODELS, panelAddress } from './mcp-server.ts';

interface ReviewRow {
  id: string;
  model_key: string;
  object_pk: string;
  status: 'queued' | 'running' | 'done' | 'failed';
  error: string | null;
  topic: { subject: string; typologies: string[] } | null;
  warnings: string[];
  result: Omit<ReviewResult, 'topic' | 'references' | 'knowledge_cited'> | null;
  references: Reference[];
  requested_by: string | null;
}

interface Reference {
  type: 'record' | 'knowledge';
  model: string | null;
  pk: string;
  why: string;
  relied_on: boolean;
  address: string | null;
  note?: string;
}

interface FeedbackRow {
  verdict: string;
  note: string;
  to_knowledge: boolean;
  delivered: boolean;
  error: string | null;
}

const DECISIONS: Record<string, { label: string; tone: string }> = {
  ACCEPT: { label: 'Accept', tone: 'success' },
  REJECT: { label: 'Reject', tone: 'danger' },
  ESCALATE: { label: 'Escalate', tone: 'warning' },
};

/** How a reviewed decision reads: the gateway's text is looked up as an own key only. */
function decisionShown(decision: string): { label: string; tone: string } | undefined {
  return Object.hasOwn(DECISIONS, decision) ? DECISIONS[decision] : undefined;
}

const KNOWLEDGE_NOTES = 5;
const MAX_NOTE = 10_000;

/** A verdict with its note, or {resend: true} to deliver the one given again; the OpenAPI document shows the same schema. */
export const FEEDBACK_FORM = z
  .object({
    resend: z.boolean().default(false),
    verdict: z.enum(['agree', 'partial', 'disagree']).optional(),
    note: z.string().max(MAX_NOTE).default(''),
    to_knowledge: z.boolean().default(false),
  })
  .superRefine((form, context) => {
    if (form.resend) return;
    if (!form.verdict) context.addIssue({ code: 'custom', path: ['verdict'], message: REQUIRED.message, params: { code: REQUIRED.code } });
    if (form.to_knowledge && !form.note.trim()) {
      context.addIssue({ code: 'custom', path: ['note'], message: 'A note is required when it goes to the knowledge base.', params: { code: 'required' } });
    }
  });

function confidenceTone(confidence: number): string {
  return confidence >= 80 ? 'success' : confidence >= 50 ? 'warning' : 'danger';
}

/** The case a request names: a case model the caller may view (404 otherwise, so no existence leaks). */
export async function caseFor(app: AppContext, model: BoundModel, principal: Principal, pk: string): Promise<Row> {
  if (!CASE_MODELS.has(model.key)) throw new HttpError(404, `${model.key} has no AI review (not a case model).`, 'not_a_case_model');
  if (!app.backoffice.site.can(principal, model, 'view')) throw new ForbiddenError(`You do not have permission to view ${model.verboseNamePlural}.`, 'permission_denied');
  const row = validPk(model, pk) ? await getRow(app.db, model, principal, pk) : undefined;
  if (!row) throw new HttpError(404, `No ${model.verboseName} ${pk.slice(0, 100)}.`, 'not_found');
  return row;
}

async function latestReview(db: Knex, model: BoundModel, pk: string): Promise<ReviewRow | undefined> {
  return db('ai_reviews').where({ model_key: model.key, object_pk: pk }).orderBy('created_at', 'desc').first() as Promise<ReviewRow | undefined>;
}

/** The spec's AI block of a case. */
export async function aiBlock(app: AppContext, model: BoundModel, principal: Principal, row: Row): Promise<z.infer<typeof AI_BLOCK>> {
  return storedAiBlock(app.db, app.backoffice.site, Boolean(app.config.ai.gatewayUrl), model, principal, row);
}

/**
 * The AI block read from the stored reviews alone: no gateway is needed to show it, only to run a
 * review (`gatewayInstalled` false: can_run is false). The case detail carries it as a block.
 */
/** The AI block as the ai/ endpoints answer it, for the OpenAPI document (storedAiBlock builds it). */
export const AI_BLOCK = z.object({
  status: z.string(),
  in_flight: z.boolean(),
  can_run: z.boolean(),
  can_feedback: z.boolean(),
  topic: z.object({ subject: z.string(), typologies: z.array(z.string()) }).nullable(),
  warnings: z.array(z.string()),
  result: anyObject.nullable(),
  references: z.array(z.unknown()),
  feedback: anyObject.nullable(),
  legacy: z.null(),
});

export async function storedAiBlock(db: Knex, site: AdminSite, gatewayInstalled: boolean, model: BoundModel, principal: Principal, row: Row): Promise<z.infer<typeof AI_BLOCK>> {
  const pk = String(row[model.pk]);
  const review = await latestReview(db, model, pk);
  const feedback = review ? ((await db('ai_feedback').where('review_id', review.id).first()) as FeedbackRow | undefined) : undefined;
  const inFlight = review?.status === 'queued' || review?.status === 'running';
  const result = review?.result;
  return {
    status: review?.status ?? 'empty',
    in_flight: inFlight,
    can_run: gatewayInstalled && row.status !== 'closed' && !inFlight && site.can(principal, model, 'view'),
    can_feedback: review?.status === 'done' && !feedback,
    topic: review?.topic ?? null,
    warnings: review ? [...review.warnings, ...(review.status === 'failed' && review.error ? [review.error] : [])] : [],
    result: result
      ? {
          decision: result.decision,
          decision_label: decisionShown(result.decision)?.label ?? result.decision,
          decision_tone: decisionShown(result.decision)?.tone ?? 'info',
          confidence: result.confidence,
          confidence_tone: confidenceTone(result.confidence),
          str_required: result.str_required,
          reasoning: result.reasoning,
          recommended_actions: result.recommended_actions,
          rule_proposal: result.rule_proposal,
          knowledge_gaps: result.knowledge_gaps,
        }
      : null,
    references: review?.references ?? [],
    feedback: feedback
      ? { verdict: feedback.verdict, note: feedback.note, to_knowledge: feedback.to_knowledge, delivered: feedback.delivered, error: feedback.error, draft: null }
      : null,
    // Reviews were never stored in another format here: there is no older report to show.
    legacy: null,
  };
}

/** POST ai/run/: 503 without a gateway, 403 on a closed case, 409 while one is in flight, 429 at the user's AI job limit; queues the job. */
export async function startReview(app: AppContext, model: BoundModel, principal: Principal, row: Row, mcpUrl: string): Promise<string> {
  if (!app.config.ai.gatewayUrl) throw new HttpError(503, 'The AI gateway is not installed (WARDEN_GATEWAY_URL is not set).', 'gateway_not_installed');
  if (row.status === 'closed') throw new ForbiddenError('The case is closed: no AI review is run on a closed case.', 'case_closed');
  await pingGateway(app.config);
  const pk = String(row[model.pk]);
  try {
    return await app.db.transaction(async (trx) => {
      await reserveAiJob(trx, principal.user.id);
      const [review] = (await trx('ai_reviews').insert({ model_key: model.key, object_pk: pk, requested_by: principal.user.id }).returning('id')) as { id: string }[];
      await app.jobs.runAi(trx, QUEUES.aiReview, { reviewId: review!.id, mcpUrl });
      return review!.id;
    });
  } catch (error) {
    // The partial unique index: another request queued one first.
    if ((error as { constraint?: string }).constraint === 'ai_reviews_one_in_flight') throw new HttpError(409, 'A review of this case is already in flight.', 'review_in_flight');
    throw error;
  }
}

/** Knowledge notes that match the case's alerts (rule codes, kinds, decisions), best first. */
async function knowledgeFor(db: Knex, pk: string): Promise<{ id: string; note: string }[]> {
  const alerts = (await db('alerts').where('case_id', pk).select('kind', 'decision', 'rule_codes', 'record_ref').limit(200)) as Row[];
  const words = new Set<string>();
  for (const alert of alerts) {
    for (const value of [alert.kind, alert.decision, alert.record_ref, ...((alert.rule_codes as string[]) ?? [])]) {
      for (const word of String(value ?? '').toLowerCase().split(/[^a-z0-9]+/)) if (word.length >= 3) words.add(word);
    }
  }
  if (!words.size) return [];
  const query = [...words].slice(0, 40).join(' | ');
  const rows = (await db('ai_feedback')
    .where('to_knowledge', true)
    .whereRaw(`search @@ to_tsquery('english', ?)`, [query])
    .orderByRaw(`ts_rank(search, to_tsquery('english', ?)) desc`, [query])
    .limit(KNOWLEDGE_NOTES)
    .select('review_id', 'note')) as { review_id: string; note: string }[];
  return rows.map((row) => ({ id: row.review_id, note: row.note }));
}

/** The ai-review job: delegate, let the gateway read the case through MCP and ask the model, store the result or the reason it failed. */
export async function runReview(app: AppContext, reviewId: string, mcpUrl: string): Promise<void> {
  const review = (await app.db('ai_reviews').where({ id: reviewId, status: 'queued' }).update({ status: 'running' }).returning('*')) as ReviewRow[];
  const current = review[0];
  if (!current) return;
  const site = app.backoffice.site;
  const model = site.models.get(current.model_key)!;
  let stored: Partial<ReviewRow> & { status: 'done' | 'failed' };
  try {
    if (!current.requested_by) throw new GatewayError('The user who asked for the review no longer exists.');
    const { token } = await delegate(app.db, current.requested_by, app.config.ai.delegationSeconds, app.now?.() ?? new Date());
    const knowledge = await knowledgeFor(app.db, current.object_pk);
    const answer = await callGateway<{ result: ReviewResult }>(app.config, '/v1/review', { mcp: { url: mcpUrl, token }, model: current.model_key, pk: current.object_pk, knowledge });
    const { topic, references, knowledge_cited: cited, ...result } = answer.result;
    const warnings: string[] = [];
    const refs: Reference[] = [];
    for (const reference of references) {
      const target = site.models.get(reference.model);
      if (!target) {
        warnings.push(`The model cited ${reference.model} ${reference.pk}, which is not a registered model.`);
        continue;
      }
      refs.push({ type: 'record', model: target.key, pk: reference.pk, why: reference.why, relied_on: reference.relied_on, address: panelAddress(target, reference.pk) });
    }
    const notes = new Map(knowledge.map((note) => [note.id, note.note]));
    for (const id of cited) {
      if (notes.has(id)) refs.push({ type: 'knowledge', model: null, pk: id, why: 'Knowledge base note', relied_on: true, address: null, note: notes.get(id)! });
      else warnings.push(`The model cited knowledge note ${id}, which it was not given.`);
    }
    refs.sort((a, b) => Number(b.relied_on) - Number(a.relied_on));
    stored = { status: 'done', topic, result, references: refs, warnings };
  } catch (error) {
    if (!(error instanceof GatewayError)) app.logger.error({ err: error, reviewId }, 'AI review failed');
    stored = { status: 'failed', error: (error as Error).message };
  }
  await app.db.transaction(async (trx) => {
    await trx('ai_reviews')
      .where('id', reviewId)
      .update({
        status: stored.status,
        error: stored.error ?? null,
        topic: stored.topic ? JSON.stringify(stored.topic) : null,
        result: stored.result ? JSON.stringify(stored.result) : null,
        references: JSON.stringify(stored.references ?? []),
        warnings: JSON.stringify(stored.warnings ?? []),
        completed_at: trx.fn.now(),
      });
    // The case owner hears of it (the assignee, else whoever asked), in the app and on the live socket.
    const caseRow = (await trx(model.table).where(model.pk, current.object_pk).first('assignee_id')) as { assignee_id: string | null } | undefined;
    const owner = caseRow?.assignee_id ?? current.requested_by;
    if (owner) {
      await notify(trx, {
        userIds: [owner],
        kind: 'ai_review_done',
        title: stored.status === 'done' ? `AI review of ${model.verboseName} ${current.object_pk.slice(0, 8)} is done` : `AI review of ${model.verboseName} ${current.object_pk.slice(0, 8)} failed`,
        body: stored.status === 'done' ? '' : (stored.error ?? ''),
        target: { model: model.key, pk: current.object_pk },
      });
    }
  });
}

/**
 * Whether a note reached where it goes, kept on the feedback row: a verdict and plain note belong
 * to the review they are stored with; a to_knowledge note must also be findable by the knowledge
 * search of later reviews, which a note of stop words alone never is.
 */
async function deliver(db: Knex, reviewId: string): Promise<void> {
  const row = (await db('ai_feedback').where('review_id', reviewId).first('to_knowledge', db.raw(`length(search) > 0 as searchable`))) as { to_knowledge: boolean; searchable: boolean };
  const delivered = !row.to_knowledge || row.searchable;
  await db('ai_feedback')
    .where('review_id', reviewId)
    .update({ delivered, error: delivered ? null : 'The note has no words the knowledge search indexes (stop words only): later reviews cannot find it.' });
}

/** POST ai/feedback/: a verdict and note on the latest done review (409 for a second), or {resend: true} to deliver it again. */
export async function giveFeedback(app: AppContext, model: BoundModel, principal: Principal, row: Row, body: Record<string, unknown>): Promise<void> {
  const review = await latestReview(app.db, model, String(row[model.pk]));
  if (!review || review.status !== 'done') throw new HttpError(409, 'There is no finished review to give feedback on.', 'no_review');
  const form = validateForm(FEEDBACK_FORM, body);
  const existing = (await app.db('ai_feedback').where('review_id', review.id).first()) as FeedbackRow | undefined;
  if (form.resend) {
    if (!existing) throw new HttpError(409, 'There is no feedback to resend.', 'no_feedback');
    await deliver(app.db, review.id);
    return;
  }
  if (existing) throw new HttpError(409, 'A note already exists for this review.', 'feedback_exists');
  const inserted = await app.db('ai_feedback')
    .insert({ review_id: review.id, verdict: form.verdict, note: form.note.trim(), to_knowledge: form.to_knowledge, author_id: principal.user.id })
    .onConflict('review_id')
    .ignore()
    .returning('review_id');
  if (!inserted.length) throw new HttpError(409, 'A note already exists for this review.', 'feedback_exists');
  await deliver(app.db, review.id);
}
