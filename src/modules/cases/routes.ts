import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { HttpError } from '../../http/errors.ts';
import { readJsonObject } from '../../http/json-body.ts';
import { anyObject, envelopeResponse, errorResponses, z } from '../../http/openapi.ts';
import { getRow } from '../backoffice/query.ts';
import type { BoundModel } from '../backoffice/registry.ts';
import type { WriteOrigin } from '../backoffice/write.ts';
import { ObjectNotFound, PermissionDenied, ValidationFailed } from '../backoffice/errors.ts';
import { MOBILE_PREFIX } from '../mobile/constants.ts';
import { MESSAGES } from '../mobile/data.ts';
import { checkForm } from '../../validation/form.ts';
import { createIdentity, requireDevice, type MobileState } from '../mobile/guard.ts';
import { deviceGuardErrors } from '../mobile/parameters.ts';
import type { Principal } from '../staff/principal.ts';
import {
  approvalBlock,
  ApprovalStateError,
  maySign,
  processRequest,
  type PolicyRow,
  type ProcessInput,
  type RequestRow,
} from '../approvals/service.ts';
import { discardReceived, refuseUnreadBody } from '../../http/multipart.ts';
import { MAX_ATTACHMENTS, receiveForm, withStoredAttachments, type ReceivedAttachment } from './attachments.ts';
import type { StoredAttachment } from '../kyc/storage.ts';
import { clearDecision, cleanDecision, DECISION_FORM, DECISION_TARGETS, submitDecision } from './decisions.ts';
import { httpErrorOf } from '../backoffice/access.ts';

/** JSON bodies of case-work endpoints are small forms; files come as multipart. */
const JSON_LIMIT_BYTES = 256 * 1024;

export interface CaseWorkBody {
  fields: Record<string, unknown>;
  /** Temporary files: stored by withStoredAttachments only for a request that goes through. */
  files: ReceivedAttachment[];
}

/**
 * A JSON object, or a multipart form with attachments[] files received to temporary files. Read
 * only once the request is known to be allowed (checkDecision, checkProcessing): a refused
 * request's files are never read, let alone stored.
 */
export async function readCaseWorkBody(app: AppContext, ctx: Context): Promise<CaseWorkBody> {
  if (ctx.is('multipart/form-data')) return receiveForm(ctx, app.files.temporaryDirectory());
  return { fields: await readJsonObject(ctx, JSON_LIMIT_BYTES), files: [] };
}

/**
 * What the URL and the principal tell about a decision before its body is read: the principal
 * may decide on the model (403), the record exists and is theirs to see (404), no change to it is
 * waiting for approval (409). submitDecision checks all of it again in its transaction.
 */
export async function checkDecision(app: AppContext, model: BoundModel, principal: Principal, pk: string): Promise<void> {
  await app.db.transaction(async (trx) => {
    const row = await getRow(trx, model, principal, pk);
    if (!row) throw new ObjectNotFound(model, pk);
    await clearDecision(trx, app.backoffice.site, principal, model, row);
  });
}

/**
 * What the URL and the principal tell about processing an approval request before the body (and
 * its action) is read: the request exists (404) and is pending (409); its maker may withdraw it;
 * anyone else must be a signer of its policy (403) who has not signed it yet, and its replay
 * evidence must be ready (409). processRequest checks all of it again with the request locked.
 */
export async function checkProcessing(app: AppContext, principal: Principal, requestId: string): Promise<void> {
  const request = (await app.db('approval_requests').where({ id: requestId }).first()) as RequestRow | undefined;
  if (!request) throw new ApprovalStateError('not_found');
  if (request.status !== 'pending') throw new ApprovalStateError(`This request was already ${request.status}.`);
  if (request.maker_id === principal.user.id) return;
  const policy = request.policy_id === null ? null : (((await app.db('approval_policies').where({ id: request.policy_id }).first()) as PolicyRow | undefined) ?? null);
  if (!(await maySign(app.db, principal, policy, request))) throw new PermissionDenied('You are not authorized to sign this request.');
  if (request.evidence_status === 'queued' || request.evidence_status === 'running') {
    throw new ApprovalStateError('The replay evidence of this rule change is still being computed; sign once it is attached.');
  }
  if (await app.db('approval_signatures').where({ request_id: requestId, user_id: principal.user.id }).first('id')) {
    throw new ApprovalStateError('You have already signed this request.');
  }
}

/** The back-office errors of case work as HTTP errors in the envelope (never a 500): the access core maps them. */
export const caseWorkError = httpErrorOf;

/** The decision target named by a path: registered and one of the three decision models, else 404. */
export function decisionModel(app: AppContext, appLabel: string, modelName: string): BoundModel {
  const model = app.backoffice.site.get(appLabel, modelName);
  if (!model || !DECISION_TARGETS[model.key]) throw new HttpError(404, `Decisions are not made on ${appLabel.slice(0, 100)}.${modelName.slice(0, 100)}.`, 'model_not_found');
  return model;
}

/**
 * Validates, then submits a decision with its files, which stay only if the decision (or its
 * approval request) is written; shared by the mobile endpoint and the web form. The temporary
 * files go whatever happens.
 */
export async function decide(app: AppContext, model: BoundModel, principal: Principal, pk: string, fields: Record<string, unknown>, files: ReceivedAttachment[], origin: WriteOrigin) {
  try {
    const input = cleanDecision(fields);
    return await withStoredAttachments(app, files, (attachments) => submitDecision(app, model, principal, pk, input, attachments, origin));
  } finally {
    await discardReceived(files);
  }
}

/** The answer to an approval request; the OpenAPI document shows the same schema. */
const PROCESS_FORM = z.object({ action: z.enum(['approve', 'reject', 'withdraw']), reason: z.string().max(10_000).default('') });

export function processInput(fields: Record<string, unknown>, attachments: StoredAttachment[]): ProcessInput {
  const checked = checkForm(PROCESS_FORM, fields);
  if (!checked.ok) throw new ValidationFailed(checked.errors);
  return { action: checked.data.action, reason: checked.data.reason.trim(), attachments };
}

/**
 * The case-work endpoints of the mobile API: compliance decisions on scored records and the
 * processing of approval requests (approve, reject, withdraw), JSON or multipart with evidence.
 */
export function registerCaseWorkRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  const authenticated = requireDevice(createIdentity(app));
  const principalOf = (ctx: Context) => (ctx.state as MobileState).mobile.principal;

  router.post(`${MOBILE_PREFIX}data/approval/:model/:pk/process/`, authenticated, async (ctx) => {
    let body: CaseWorkBody | undefined;
    try {
      const principal = principalOf(ctx);
      const pathModel = app.backoffice.site.get('approval', ctx.params.model!);
      if (!pathModel || pathModel.table !== 'approval_requests') throw new HttpError(404, `No approval model ${ctx.params.model!.slice(0, 100)} is registered.`, 'model_not_found');
      if (!app.backoffice.site.can(principal, pathModel, 'view')) throw new PermissionDenied();
      const requests = app.backoffice.site.get('approval', 'approvalrequest')!;
      if (!(await getRow(app.db, requests, principal, ctx.params.pk!))) throw new ApprovalStateError('not_found');
      // Everything the URL and the principal tell, before a byte of the body (and its files) is read.
      await checkProcessing(app, principal, ctx.params.pk!);
      body = await readCaseWorkBody(app, ctx);
      const input = processInput(body.fields, []);
      const outcome = await withStoredAttachments(app, body.files, (attachments) => processRequest(app, principal, ctx.params.pk!, { ...input, attachments }));
      const request = (await app.db('approval_requests').where({ id: ctx.params.pk }).first()) as RequestRow;
      respond(ctx, outcome.message, { ...outcome, request: await approvalBlock({ db: app.db, site: app.backoffice.site }, principal, request) } satisfies z.infer<typeof PROCESSED>);
    } catch (error) {
      if (!body) refuseUnreadBody(ctx);
      throw caseWorkError(error);
    } finally {
      if (body) await discardReceived(body.files);
    }
  });

  router.post(`${MOBILE_PREFIX}data/:app/:model/:pk/decision/`, authenticated, async (ctx) => {
    let body: CaseWorkBody | undefined;
    try {
      const principal = principalOf(ctx);
      const model = decisionModel(app, ctx.params.app!, ctx.params.model!);
      // Permission, record and pending approval before the body: a refused caller never uploads anything.
      await checkDecision(app, model, principal, ctx.params.pk!);
      body = await readCaseWorkBody(app, ctx);
      const outcome = await decide(app, model, principal, ctx.params.pk!, body.fields, body.files, { channel: 'mobile' });
      if (outcome.status === 'pending') {
        const message = 'Change submitted for approval.';
        respond(ctx, message, { messages: [{ level: 'info', message }], pending_approval: true, approval_request: outcome.approvalRequestId } satisfies z.infer<typeof DECISION_PENDING>, 202);
        return;
      }
      respond(ctx, 'Decision recorded.', { decision: decisionPayload(outcome.decision), target: outcome.target, pending_approval: false } satisfies z.infer<typeof DECIDED>, 201);
    } catch (error) {
      if (!body) refuseUnreadBody(ctx);
      throw caseWorkError(error);
    } finally {
      if (body) await discardReceived(body.files);
    }
  });

  documentCaseWork(docs);
}

export function decisionPayload(row: Record<string, unknown>) {
  const number = (value: unknown) => (value === null || value === undefined ? null : Number(value));
  return {
    id: row.id,
    target_model: row.target_model,
    target_id: row.target_id,
    decision: row.decision,
    score: number(row.score),
    original_score: number(row.original_score),
    original_decision: row.original_decision,
    description: row.description,
    document_description: row.document_description,
    attachments: ((row.attachments as StoredAttachment[]) ?? []).map(({ name, content_type, size, sha256 }) => ({ name, content_type, size, sha256 })),
    batch_id: row.batch_id,
    actor: row.actor,
    created_at: (row.created_at as Date).toISOString().slice(0, 19),
  };
}

// The case-work answers, for the OpenAPI document.
const DECIDED = z.object({
  decision: anyObject,
  target: z.object({ model: z.string(), pk: z.string(), decision: z.string().nullable(), score: z.number().nullable() }),
  pending_approval: z.literal(false),
});
const DECISION_PENDING = z.object({ messages: MESSAGES, pending_approval: z.literal(true), approval_request: z.string() });
const PROCESSED = z.object({
  status: z.string(),
  stage: z.number().int(),
  forwarded_to: z.number().int().nullable(),
  applied: z.boolean(),
  message: z.string(),
  request: anyObject,
});

const DECISION_PATH = `${MOBILE_PREFIX}data/{app}/{model}/{pk}/decision/`;
const PROCESS_PATH = `${MOBILE_PREFIX}data/approval/{model}/{pk}/process/`;

function documentCaseWork(docs: OpenAPIRegistry): void {
  docs.registerPath({
    method: 'post',
    path: DECISION_PATH,
    summary: `Record a compliance decision on an execution log, financial or non-financial event (JSON, or multipart with up to ${MAX_ATTACHMENTS} attachments[]: images, videos, PDF; 25 MB each)`,
    tags: ['mobile'],
    security: [{ bearer: [] }],
    request: { body: { content: { 'application/json': { schema: DECISION_FORM }, 'multipart/form-data': { schema: DECISION_FORM.extend({ 'attachments[]': z.array(z.string()).optional() }) } } } },
    responses: {
      201: envelopeResponse('Decision written: data.decision, data.target {model, pk, decision, score}', DECIDED),
      202: envelopeResponse('An approval policy covers decisions on this model: data.pending_approval, data.approval_request', DECISION_PENDING),
      ...errorResponses(deviceGuardErrors('post', DECISION_PATH), {
        400: 'Validation failed. (data.errors: decision, description, score, document_description); too_many_attachments; file_type_not_allowed; file_empty',
        403: 'No change permission on the target or no engine.add_compliancedecision',
        404: 'Not a decision model, or no such record',
        409: 'The record has a change waiting for approval (data.messages, level error)',
        413: 'An attachment is over 25 MB',
      }),
    },
  });
  docs.registerPath({
    method: 'post',
    path: PROCESS_PATH,
    summary: 'Approve or reject an approval request (checkers), or withdraw it (its maker); JSON or multipart with attachments[]',
    tags: ['mobile'],
    security: [{ bearer: [] }],
    request: { body: { content: { 'application/json': { schema: PROCESS_FORM } } } },
    responses: {
      200: envelopeResponse('data.status, data.stage, data.forwarded_to (next stage or null), data.applied, data.request (the approval block)', PROCESSED),
      ...errorResponses(deviceGuardErrors('post', PROCESS_PATH), {
        400: 'Validation failed. (data.errors: action, reason; a rejection needs a reason); the applied change no longer validates',
        403: 'The maker signing their own request; not a signer of its policy; withdrawing another maker\'s request',
        404: 'No such approval model or request',
        409: 'Already processed; already signed by this user; replay evidence still being computed',
      }),
    },
  });
}
