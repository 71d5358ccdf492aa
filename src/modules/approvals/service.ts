import type { Knex } from 'knex';
import type { AppContext } from '../../context.ts';
import { permissionFor } from '../backoffice/declare.ts';
import type { BoundModel, ResolvedField, Row, RowAnnotator } from '../backoffice/registry.ts';
import { formatTimestamp } from '../../timestamps.ts';
import { deleteObject, jsonable as baseJsonable, sameValue, saveObject, type ApprovalCandidate, type ApprovalHook, type WriteOrigin } from '../backoffice/write.ts';
import { ChainError, PendingApprovalConflict, PermissionDenied, ValidationFailed } from '../backoffice/errors.ts';
import { loadPrincipal, type Principal } from '../staff/principal.ts';
import type { StoredAttachment } from '../kyc/storage.ts';
import type { AdminSite, DetailBlockProvider } from '../backoffice/site.ts';
import { notifyMaker, notifySigners, type SignerCheck } from '../notifications/raise.ts';

/**
 * Maker-checker: policies per model and operation, requests that hold a covered write (with its
 * typed diff) until enough people signed every stage, and the application of the change through
 * the same write chain once the last stage is signed.
 */

export type ApprovalOperation = 'add' | 'change' | 'delete' | 'decision';

export interface PolicyRow {
  id: number;
  content_type: string;
  operation: ApprovalOperation;
  stages: number;
  signatures_per_stage: number;
  signer_group_id: number | null;
  signer_permission: string | null;
  active: boolean;
}

export interface RequestRow {
  id: string;
  policy_id: number | null;
  content_type: string;
  object_id: string | null;
  object_repr: string;
  operation: ApprovalOperation;
  diff: TypedDiff;
  payload: Record<string, unknown>;
  status: 'pending' | 'approved' | 'rejected' | 'withdrawn';
  stage: number;
  stages: number;
  signatures_required: number;
  maker_id: string | null;
  maker: string;
  attachments: StoredAttachment[];
  evidence: unknown;
  evidence_status: string | null;
  mcp_origin: unknown;
  reason: string;
  created_at: Date;
  processed_at: Date | null;
}

export interface DiffEntry {
  name: string;
  label: string;
  /** scalar, text (long text), json or set (m2m and arrays) */
  type: 'scalar' | 'text' | 'json' | 'set';
  old: unknown;
  new: unknown;
}

export interface TypedDiff {
  fields: DiffEntry[];
  inline_blocks: { model: string; label: string; fields: DiffEntry[] }[];
}

export const PENDING_MESSAGE = 'This record has a change waiting for approval; it cannot be changed until that request is processed.';

export async function findPolicy(db: Knex | Knex.Transaction, contentType: string, operation: ApprovalOperation): Promise<PolicyRow | null> {
  return ((await db('approval_policies').where({ content_type: contentType, operation, active: true }).first()) as PolicyRow | undefined) ?? null;
}

/** The typed diff of a write: each form field whose value would change, typed for display. */
export function typedDiff(model: BoundModel, before: Row | null, cleaned: Row, operation: 'add' | 'change' | 'delete'): TypedDiff {
  const fields: DiffEntry[] = [];
  const jsonable = (field: ResolvedField, value: unknown) => diffValue(model, field, value);
  for (const field of model.formFields) {
    if (field.declaration.hidden) continue;
    const isArray = model.columnTypes.get(field.name)?.udtName.startsWith('_');
    const type: DiffEntry['type'] = field.type === 'm2m' || isArray ? 'set' : field.type === 'json' ? 'json' : field.type === 'text' ? 'text' : 'scalar';
    if (operation === 'delete') {
      if (before && before[field.name] !== undefined && !field.virtual) fields.push({ name: field.name, label: field.label, type, old: jsonable(field, before[field.name]), new: null });
      continue;
    }
    if (cleaned[field.name] === undefined) continue;
    const old = before ? jsonable(field, before[field.name]) : null;
    if (field.virtual) {
      if (cleaned[field.name] !== null && cleaned[field.name] !== '') fields.push({ name: field.name, label: field.label, type, old: null, new: jsonable(field, cleaned[field.name]) });
      continue;
    }
    if (before && sameValue(before[field.name], cleaned[field.name])) continue;
    fields.push({ name: field.name, label: field.label, type, old, new: jsonable(field, cleaned[field.name]) });
  }
  return { fields, inline_blocks: [] };
}

/** The calendar day of a date column's value (node-pg reads it as local midnight of that day). */
function localDay(value: Date): string {
  const pad = (number: number) => String(number).padStart(2, '0');
  return `${String(value.getFullYear()).padStart(4, '0')}-${pad(value.getMonth() + 1)}-${pad(value.getDate())}`;
}

/**
 * A value of the diff in the spec's date forms: a date field as YYYY-MM-DD (node-pg reads a date
 * column as local midnight of its day), a time as UTC to the second with no offset, whether it is
 * the stored value or the form's cleaned one (which keeps the milliseconds and the Z).
 */
function diffValue(model: BoundModel, field: ResolvedField, value: unknown): unknown {
  if (value instanceof Date) {
    if (field.type === 'date' || model.columnTypes.get(field.name)?.udtName === 'date') return localDay(value);
    return formatTimestamp(value);
  }
  if (field.type === 'datetime' && typeof value === 'string' && /(Z|[+-]\d{2}:?\d{2}|\.\d+)$/.test(value)) {
    const time = Date.parse(value);
    if (!Number.isNaN(time)) return formatTimestamp(new Date(time));
  }
  return baseJsonable(value);
}

export interface NewRequest {
  policy: PolicyRow;
  contentType: string;
  objectId: string | null;
  objectRepr: string;
  operation: ApprovalOperation;
  diff: TypedDiff;
  payload: Record<string, unknown>;
  principal: Principal;
  origin: WriteOrigin;
  attachments?: StoredAttachment[];
  evidenceStatus?: string | null;
}

/** Opens a request; a record that already has one pending refuses a second (the unique index decides races). */
export async function openRequest(trx: Knex.Transaction, request: NewRequest): Promise<string> {
  const [row] = (await trx.raw(
    `insert into approval_requests (policy_id, content_type, object_id, object_repr, operation, diff, payload, stages, signatures_required,
       maker_id, maker, attachments, mcp_origin, evidence_status)
     values (?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?)
     on conflict (content_type, object_id) where status = 'pending' and object_id is not null do nothing
     returning id`,
    [
      request.policy.id,
      request.contentType,
      request.objectId,
      request.objectRepr.slice(0, 200),
      request.operation,
      JSON.stringify(request.diff),
      JSON.stringify(request.payload),
      request.policy.stages,
      request.policy.signatures_per_stage,
      request.principal.user.id,
      request.principal.user.username,
      JSON.stringify(request.attachments ?? []),
      request.origin.mcp ? JSON.stringify(request.origin.mcp) : null,
      request.evidenceStatus ?? null,
    ],
  )).rows as { id: string }[];
  if (!row) throw new PendingApprovalConflict(PENDING_MESSAGE);
  await notifySigners(trx, row.id, await signerCheck(trx, row.id));
  return row.id;
}

export async function pendingRequestFor(db: Knex | Knex.Transaction, contentType: string, objectId: string): Promise<string | null> {
  const row = (await db('approval_requests').where({ content_type: contentType, object_id: objectId, status: 'pending' }).first('id')) as { id: string } | undefined;
  return row?.id ?? null;
}

/** Called when a request for a rule change opens (the replay evidence job); set by the composition root. */
export type RequestOpened = (trx: Knex.Transaction, requestId: string, candidate: ApprovalCandidate) => Promise<void>;

/**
 * The write chain's approval hook: a record with a pending request refuses every other change; a
 * write covered by an active policy becomes a request (the record keeps its old values).
 */
export function createApprovalHook(onOpened: (model: BoundModel) => RequestOpened | null): ApprovalHook {
  return async (candidate) => {
    if (candidate.origin.approval) return null;
    const { trx, model, operation, pk } = candidate;
    if (pk !== null && (await pendingRequestFor(trx, model.key, pk))) throw new PendingApprovalConflict(PENDING_MESSAGE);
    const policy = await findPolicy(trx, model.key, operation);
    if (!policy) return null;
    const diff = typedDiff(model, candidate.before, candidate.cleaned, operation);
    const opened = onOpened(model);
    const requestId = await openRequest(trx, {
      policy,
      contentType: model.key,
      objectId: pk,
      objectRepr: candidate.before ? model.repr(candidate.before) : model.repr({ ...candidate.values }),
      operation,
      diff,
      payload: { input: jsonSafe(candidate.cleaned), channel: candidate.origin.channel },
      principal: candidate.principal,
      origin: candidate.origin,
      evidenceStatus: opened ? 'queued' : null,
    });
    await opened?.(trx, requestId, candidate);
    return { requestId };
  };
}

function jsonSafe(values: Row): Row {
  return JSON.parse(JSON.stringify(values, (_key, value: unknown) => (value instanceof Date ? value.toISOString() : value))) as Row;
}

/** For the approval_request notification: whether a user may sign the request at its current stage. */
async function signerCheck(trx: Knex.Transaction, requestId: string): Promise<SignerCheck> {
  const request = (await trx('approval_requests').where({ id: requestId }).first()) as RequestRow;
  const policy = request.policy_id === null ? null : (((await trx('approval_policies').where({ id: request.policy_id }).first()) as PolicyRow | undefined) ?? null);
  return async (db, userId) => {
    const principal = await loadPrincipal(db, userId);
    return principal !== null && (await maySign(db, principal, policy, request));
  };
}

/**
 * Whether the principal may sign requests of this policy: a superuser signs any; then the policy's
 * signer permission or its signer group (`inSignerGroup`: whether they belong to it); a policy that
 * names neither lets whoever may make the change check it. The pending list's scope
 * (approvals/admin.ts) says the same in SQL.
 */
function signs(
  principal: Principal,
  policy: Pick<PolicyRow, 'signer_group_id' | 'signer_permission'> | null,
  request: Pick<RequestRow, 'content_type' | 'operation'>,
  inSignerGroup: boolean,
): boolean {
  if (principal.user.is_superuser) return true;
  if (!policy) return false;
  if (policy.signer_permission && principal.has(policy.signer_permission)) return true;
  if (policy.signer_group_id !== null) return inSignerGroup;
  if (policy.signer_permission) return false;
  const [appLabel, modelName] = request.content_type.split('.') as [string, string];
  return principal.has(permissionFor({ appLabel, model: modelName }, request.operation === 'decision' ? 'change' : request.operation));
}

export async function maySign(db: Knex | Knex.Transaction, principal: Principal, policy: PolicyRow | null, request: RequestRow): Promise<boolean> {
  const inSignerGroup =
    policy?.signer_group_id != null &&
    !principal.user.is_superuser &&
    Boolean(await db('staff_user_groups').where({ user_id: principal.user.id, group_id: policy.signer_group_id }).first('user_id'));
  return signs(principal, policy, request, inSignerGroup);
}

export type ActionCode = 'review' | 'withdraw' | 'signed' | 'waiting_stage' | 'not_authorized' | 'processed' | 'forwarded';

export interface SignatureRow {
  stage: number;
  user_id: string;
  username: string;
  action: string;
  reason: string;
  attachments: StoredAttachment[];
  created_at: Date;
}

/**
 * What the viewer can do with a request: processed once it left pending; the maker may withdraw;
 * a checker who signed this stage sees signed, one whose signature moved an earlier stage on sees
 * forwarded; a rule change waits for its replay evidence before anyone signs (waiting_stage);
 * otherwise review for those who may sign, not_authorized for the rest. `ownStage`: the stage the
 * viewer signed at, null when they have not signed.
 */
export function actionCode(
  request: Pick<RequestRow, 'status' | 'maker_id' | 'stage' | 'evidence_status'>,
  ownStage: number | null,
  principal: Principal,
  signer: boolean,
): ActionCode {
  if (request.status !== 'pending') return 'processed';
  if (request.maker_id === principal.user.id) return 'withdraw';
  if (ownStage !== null) return ownStage === request.stage ? 'signed' : 'forwarded';
  if (!signer) return 'not_authorized';
  if (request.evidence_status === 'queued' || request.evidence_status === 'running') return 'waiting_stage';
  return 'review';
}

export const ACTION_LABELS: Readonly<Record<ActionCode, string>> = {
  review: 'Review',
  withdraw: 'Withdraw',
  signed: 'Signed',
  waiting_stage: 'Waiting for evidence',
  not_authorized: 'Not authorized',
  processed: 'Processed',
  forwarded: 'Forwarded',
};

export async function signaturesOf(db: Knex | Knex.Transaction, requestId: string): Promise<SignatureRow[]> {
  return (await db('approval_signatures as s')
    .join('staff_users as u', 'u.id', 's.user_id')
    .where('s.request_id', requestId)
    .orderBy('s.id')
    .select('s.stage', 's.user_id', 'u.username', 's.action', 's.reason', 's.attachments', 's.created_at')) as SignatureRow[];
}

/** The approval block of a request's detail, as the viewer sees it (web and mobile alike). */
export async function approvalBlock(app: { db: Knex; site: AdminSite }, principal: Principal, request: RequestRow): Promise<Record<string, unknown>> {
  const policy = request.policy_id === null ? null : (((await app.db('approval_policies').where({ id: request.policy_id }).first()) as PolicyRow | undefined) ?? null);
  const signatures = await signaturesOf(app.db, request.id);
  const ownStage = signatures.find((signature) => signature.user_id === principal.user.id)?.stage ?? null;
  const code = actionCode(request, ownStage, principal, await maySign(app.db, principal, policy, request));
  const [appLabel, modelName] = request.content_type.split('.') as [string, string];
  const target = app.site.get(appLabel, modelName);
  const targetPk = request.object_id ?? (request.payload.target_pk as string | undefined) ?? null;
  const targetRow = target && targetPk ? ((await app.db(target.table).where(target.pk, targetPk).first()) as Row | undefined) : undefined;
  return {
    id: request.id,
    status: request.status,
    operation: request.operation,
    diff: request.diff,
    stage: request.stage,
    stages: request.stages,
    signatures: signatures
      .filter((signature) => signature.stage === request.stage || request.status !== 'pending')
      .filter((signature) => signature.action === 'approve').length,
    signatures_required: request.signatures_required,
    signature_log: signatures.map((signature) => ({
      stage: signature.stage,
      user: signature.username,
      action: signature.action,
      reason: signature.reason,
      attachments: signature.attachments.map(publicAttachment),
      at: signature.created_at.toISOString().slice(0, 19),
    })),
    attachments: request.attachments.map(publicAttachment),
    action: { code, label: ACTION_LABELS[code] },
    maker: request.maker,
    reason: request.reason,
    target: {
      model: request.content_type,
      title: target?.verboseName ?? request.content_type,
      pk: targetPk,
      // A request names what it asks to change, as its list does: its signers see what they sign.
      display: targetRow && target ? target.repr(targetRow) : request.object_repr,
      exists: Boolean(targetRow),
      related_model: target ? { app_label: target.appLabel, model: target.model } : null,
    },
    mcp_origin: request.mcp_origin ?? null,
    evidence: request.evidence ?? null,
    evidence_status: request.evidence_status,
  };
}

/**
 * The list card of each request as the viewer sees it (web changelist, mobile list, MCP search
 * alike): its action code, the target model's name, and the target the card opens where the viewer
 * may view it. One query for the page: the policy, the viewer's signer-group membership and their
 * own signature come joined, and the action follows the same rules as the detail's.
 */
export const annotateRequests: RowAnnotator = async ({ db, principal, model, mayView }, rows) => {
  const viewer = principal.user.id;
  const found = (await db('approval_requests as r')
    .leftJoin('approval_policies as p', 'p.id', 'r.policy_id')
    .whereIn('r.id', rows.map((row) => String(row.id)))
    .select(
      'r.id', 'r.status', 'r.maker_id', 'r.stage', 'r.evidence_status', 'r.content_type', 'r.object_id', 'r.operation',
      'p.id as policy', 'p.signer_group_id', 'p.signer_permission',
      db.raw('exists (select 1 from staff_user_groups g where g.user_id = ? and g.group_id = p.signer_group_id) as in_signer_group', [viewer]),
      db.raw('(select s.stage from approval_signatures s where s.request_id = r.id and s.user_id = ?) as own_stage', [viewer]),
    )) as (Pick<RequestRow, 'id' | 'status' | 'maker_id' | 'stage' | 'evidence_status' | 'content_type' | 'object_id' | 'operation'> &
    Pick<PolicyRow, 'signer_group_id' | 'signer_permission'> & { policy: number | null; in_signer_group: boolean; own_stage: number | null })[];
  const byId = new Map(found.map((request) => [request.id, request]));
  return rows.map((row) => {
    const request = byId.get(String(row.id));
    if (!request) return { values: { action: null, target_model: null }, link: null };
    const signer = signs(principal, request.policy === null ? null : request, request, request.in_signer_group);
    const target = model(request.content_type);
    return {
      values: { action: actionCode(request, request.own_stage, principal, signer), target_model: target?.verboseName ?? request.content_type },
      link: target && mayView(target) ? { model: target.key, pk: request.object_id } : null,
    };
  });
};

function publicAttachment(attachment: StoredAttachment) {
  return { name: attachment.name, content_type: attachment.content_type, size: attachment.size, sha256: attachment.sha256 };
}

/** A request that cannot be processed as asked: 404 when it does not exist ('not_found'), else 409 with the reason. */
export class ApprovalStateError extends ChainError {
  readonly reason: string;
  readonly status: number;
  constructor(message: string) {
    super(message === 'not_found' ? 'This approval request does not exist.' : message);
    this.status = message === 'not_found' ? 404 : 409;
    this.reason = message === 'not_found' ? 'not_found' : 'approval_state';
  }
  override data(): Record<string, unknown> {
    return {};
  }
}

export interface ProcessInput {
  action: 'approve' | 'reject' | 'withdraw';
  reason: string;
  attachments: StoredAttachment[];
}

export interface ProcessOutcome {
  status: RequestRow['status'];
  stage: number;
  forwarded_to: number | null;
  applied: boolean;
  message: string;
}

/** Applies the change an approved request holds: registered per operation by the modules that open them. */
export type RequestApplier = (trx: Knex.Transaction, request: RequestRow, maker: Principal, checkers: string[]) => Promise<void>;

const appliers = new Map<string, RequestApplier>();

/** A module whose requests are not plain writes (compliance decisions) applies them itself. */
export function registerApplier(operation: ApprovalOperation, applier: RequestApplier): void {
  appliers.set(operation, applier);
}

/**
 * An approved request whose record changed since it was made (a merchant upsert, another write
 * in between): applying its diff would overwrite the newer data, so it is refused instead.
 */
export class StaleRequest extends Error {
  constructor(readonly fields: string[]) {
    super(`The record changed since this request was made (${fields.join(', ')}): it was not applied; make the change again on the current record.`);
  }
}

/** Throws StaleRequest when a field the diff remembers (`names`: the ones stored on `current`) no longer holds its old value. */
export function refuseStale(diff: TypedDiff, current: Row, names: ReadonlySet<string>): void {
  const now = (entry: DiffEntry) => {
    const value = current[entry.name];
    // A date field's old value is its day (YYYY-MM-DD): the stored one is compared as its day too.
    return value instanceof Date && typeof entry.old === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(entry.old) ? localDay(value) : baseJsonable(value);
  };
  const stale = diff.fields.filter((entry) => names.has(entry.name) && !sameValue(entry.old, now(entry))).map((entry) => entry.label);
  if (stale.length) throw new StaleRequest(stale);
}

/**
 * What an approved change writes: the fields its diff shows (what the checkers signed) and the
 * virtual ones (a rationale, a closing decision), not the rest of the form it was made with, which
 * would write back values a newer change has replaced. An addition writes its whole form.
 */
function appliedInput(model: BoundModel, request: RequestRow): unknown {
  const input = request.payload.input as Row;
  if (request.operation !== 'change') return input;
  const signed = new Set(request.diff.fields.map((entry) => entry.name));
  const virtual = new Set(model.formFields.filter((field) => field.virtual && field.type !== 'm2m').map((field) => field.name));
  return Object.fromEntries(Object.entries(input).filter(([name]) => signed.has(name) || virtual.has(name)));
}

function writeApplier(app: AppContext): RequestApplier {
  return async (trx, request, maker, checkers) => {
    const [appLabel, modelName] = request.content_type.split('.') as [string, string];
    const model = app.backoffice.site.get(appLabel, modelName);
    if (!model) throw new ApprovalStateError(`The model ${request.content_type} is no longer registered.`);
    if (request.operation !== 'add' && request.object_id !== null) {
      // Stored columns only: the diff remembers a column's old value (virtual fields and m2m links
      // have none); a delete does not mind read-only ones (a login moves last_login).
      const readonly = new Set(request.operation === 'delete' ? (model.readonly ?? []) : []);
      const stored = (await trx(model.table).where(model.pk, request.object_id).first()) as Row | undefined;
      if (stored) refuseStale(request.diff, stored, new Set([...model.columnTypes.keys()].filter((name) => !readonly.has(name))));
    }
    const chain = { ...app.backoffice, db: trx as unknown as Knex };
    const origin: WriteOrigin = { channel: (request.payload.channel as WriteOrigin['channel']) ?? 'web', approval: { requestId: request.id, checkers } };
    if (request.operation === 'delete') await deleteObject(chain, model, maker, request.object_id!, origin);
    else await saveObject(chain, model, maker, request.operation === 'add' ? null : request.object_id, appliedInput(model, request), { partial: request.operation === 'change', origin });
  };
}

/**
 * Approve, reject or withdraw, with the request row locked: two checkers signing at the same
 * moment are serialised, so exactly one of them moves the stage. The maker never signs; one user
 * signs a request once; the last signature of the last stage applies the change in the same
 * transaction (a change that no longer validates rolls everything back and is reported).
 */
export async function processRequest(app: AppContext, principal: Principal, requestId: string, input: ProcessInput): Promise<ProcessOutcome> {
  return app.db.transaction(async (trx) => {
    const request = (await trx('approval_requests').where({ id: requestId }).forUpdate().first()) as RequestRow | undefined;
    if (!request) throw new ApprovalStateError('not_found');
    if (request.status !== 'pending') throw new ApprovalStateError(`This request was already ${request.status}.`);
    if (input.action === 'withdraw') {
      if (request.maker_id !== principal.user.id) throw new PermissionDenied('Only the maker may withdraw a request.');
      await trx('approval_requests').where({ id: requestId }).update({ status: 'withdrawn', reason: input.reason, processed_at: trx.fn.now() });
      return { status: 'withdrawn', stage: request.stage, forwarded_to: null, applied: false, message: 'Request withdrawn.' };
    }
    if (request.maker_id === principal.user.id) throw new PermissionDenied('You cannot sign your own request.');
    const policy = request.policy_id === null ? null : (((await trx('approval_policies').where({ id: request.policy_id }).first()) as PolicyRow | undefined) ?? null);
    if (!(await maySign(trx, principal, policy, request))) throw new PermissionDenied('You are not authorized to sign this request.');
    if (request.evidence_status === 'queued' || request.evidence_status === 'running') {
      throw new ApprovalStateError('The replay evidence of this rule change is still being computed; sign once it is attached.');
    }
    if (input.action === 'reject' && !input.reason.trim()) throw new ValidationFailed({ reason: [{ message: 'A reason is required to reject.', code: 'required' }] });
    const signed = await trx('approval_signatures')
      .insert({ request_id: requestId, stage: request.stage, user_id: principal.user.id, action: input.action, reason: input.reason, attachments: JSON.stringify(input.attachments) })
      .onConflict(['request_id', 'user_id'])
      .ignore()
      .returning('id');
    if (!signed.length) throw new ApprovalStateError('You have already signed this request.');
    if (input.action === 'reject') {
      await trx('approval_requests').where({ id: requestId }).update({ status: 'rejected', reason: input.reason, processed_at: trx.fn.now() });
      await notifyMaker(trx, requestId, 'rejected');
      return { status: 'rejected', stage: request.stage, forwarded_to: null, applied: false, message: 'Request rejected.' };
    }
    const [counted] = (await trx('approval_signatures').where({ request_id: requestId, stage: request.stage, action: 'approve' }).count('* as count')) as { count: string }[];
    const count = Number(counted!.count);
    if (count < request.signatures_required) {
      return { status: 'pending', stage: request.stage, forwarded_to: null, applied: false, message: `Signed; ${request.signatures_required - count} more signature(s) needed at stage ${request.stage}.` };
    }
    if (request.stage < request.stages) {
      await trx('approval_requests').where({ id: requestId }).update({ stage: request.stage + 1 });
      await notifyMaker(trx, requestId, 'forwarded');
      await notifySigners(trx, requestId, await signerCheck(trx, requestId));
      return { status: 'pending', stage: request.stage + 1, forwarded_to: request.stage + 1, applied: false, message: `Stage ${request.stage} complete; forwarded to stage ${request.stage + 1}.` };
    }
    const maker = request.maker_id ? await loadPrincipal(trx, request.maker_id) : null;
    if (!maker || !maker.user.is_active) throw new ApprovalStateError('The maker of this request no longer has an active account; it cannot be applied.');
    const checkers = (await signaturesOf(trx, requestId)).filter((signature) => signature.action === 'approve').map((signature) => signature.username);
    // The request leaves pending first, so the write chain's pending check lets its own change through.
    await trx('approval_requests').where({ id: requestId }).update({ status: 'approved', processed_at: trx.fn.now() });
    try {
      await (appliers.get(request.operation) ?? writeApplier(app))(trx, request, maker, checkers);
    } catch (error) {
      // Refused before anything was written: the request closes with the reason, the maker is told.
      if (!(error instanceof StaleRequest)) throw error;
      await trx('approval_requests').where({ id: requestId }).update({ status: 'rejected', reason: error.message });
      await notifyMaker(trx, requestId, 'rejected');
      return { status: 'rejected', stage: request.stage, forwarded_to: null, applied: false, message: error.message };
    }
    await notifyMaker(trx, requestId, 'approved');
    return { status: 'approved', stage: request.stage, forwarded_to: null, applied: true, message: 'Request approved and applied.' };
  });
}

/** The detail blocks of approval requests (the approval block) and the pending marker of every other record. */
export const approvalBlocks: DetailBlockProvider = {
  describes: (model) =>
    model.table === 'approval_requests'
      ? [{ name: 'approval', label: 'Approval request', description: 'The request with its typed diff, signatures, replay evidence and the action open to the viewer (see the spec\'s approval block).' }]
      : [
          { name: 'pending_approval', label: 'Pending approval', description: 'Whether a change to this record waits for approval (it cannot be changed until then).' },
          { name: 'approval_request', label: 'Approval request', description: 'The pk of that request, or null.' },
        ],
  async blocks({ db, site, model, row, principal }) {
    if (model.table === 'approval_requests') return { approval: await approvalBlock({ db, site }, principal, row as unknown as RequestRow) };
    const pending = await pendingRequestFor(db, model.key, String(row[model.pk]));
    return { pending_approval: pending !== null, approval_request: pending };
  },
};
