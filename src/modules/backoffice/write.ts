import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Principal } from '../staff/principal.ts';
import { cleanForm, writableFields } from './forms.ts';
import { getRow, scopedQuery, validPk } from './query.ts';
import type { AdminSite } from './site.ts';
import type { ActionChange, ActionDeclaration, BoundModel, FieldErrors, Row, SaveContext } from './registry.ts';
import { canObject, canRunAction } from './access.ts';
import { ChainError, ObjectNotFound, PermissionDenied, ValidationFailed } from './errors.ts';
import { formatTimestamp } from '../../timestamps.ts';

/**
 * The one write chain of the back office: form validation from the registration, its clean hook,
 * then in one transaction: the approval hook (a covered write becomes a request instead), the save
 * hooks, the row, and one audit-log row. The web admin, the mobile data API, decisions and the
 * assistant's writing tools all come through here.
 */

export type Message = { level: 'info' | 'success' | 'warning' | 'error'; message: string };

export type WriteOperation = 'add' | 'change' | 'delete';

/** What a maker-checker policy sees of a write it may take over. */
export interface ApprovalCandidate {
  trx: Knex.Transaction;
  model: BoundModel;
  operation: WriteOperation;
  pk: string | null;
  before: Row | null;
  /** Column values the write would store (empty for a delete). */
  values: Row;
  /** Every cleaned form value, virtual fields included. */
  cleaned: Row;
  principal: Principal;
  origin: WriteOrigin;
}

/** How a write reached the chain: the assistant's writes carry the MCP call that made them. */
export interface WriteOrigin {
  channel: 'web' | 'mobile' | 'mcp' | 'cli' | 'system';
  mcp?: Record<string, unknown>;
  /** Set when an approved request applies its change: the hook lets it through and the audit row names the request and its checkers. */
  approval?: { requestId: string; checkers: string[] };
}

/** Filled by the approvals module: returns the request it opened instead of writing, or null. */
export type ApprovalHook = (candidate: ApprovalCandidate) => Promise<{ requestId: string } | null>;

export interface WriteOutcome {
  status: 'created' | 'updated' | 'deleted' | 'pending';
  row: Row | null;
  pk: string | null;
  messages: Message[];
  warnings: string[];
  approvalRequestId?: string;
}

export interface WriteChain {
  site: AdminSite;
  db: Knex;
  /** null until the approvals module installs one. */
  approvalHook: ApprovalHook | null;
}

function diffOf(model: BoundModel, before: Row | null, values: Row): Record<string, [unknown, unknown]> {
  const diff: Record<string, [unknown, unknown]> = {};
  for (const [name, value] of Object.entries(values)) {
    if (model.fields?.[name]?.hidden) {
      diff[name] = ['(hidden)', '(changed)'];
      continue;
    }
    const old = before ? before[name] : null;
    if (!sameValue(old, value)) diff[name] = [jsonable(old), jsonable(value)];
  }
  return diff;
}

/** A value as JSON shows it to staff: a time in the spec's form (UTC, to the second, no offset). */
export function jsonable(value: unknown): unknown {
  if (value instanceof Date) return formatTimestamp(value);
  return value ?? null;
}

/**
 * A value as compared with another: a time as its full ISO instant (with its offset), which
 * Date.parse reads as the same instant on any host, where the shown form would be read in the
 * host's own time zone.
 */
export function comparable(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString();
  return value ?? null;
}

/** Django's empty values: a full web form sends '' for a field the record holds as null. */
function isEmpty(value: unknown): boolean {
  return value === null || value === undefined || value === '' || (Array.isArray(value) && value.length === 0);
}

/**
 * Whether a stored value and a written (or remembered) one are the same, for the audit diff, the
 * approval diff and the stale check of an approved change alike: empty values are equal, decimals
 * by number ("10.00" is 10), times by instant.
 */
export function sameValue(a: unknown, b: unknown): boolean {
  if (isEmpty(a) && isEmpty(b)) return true;
  const left = comparable(a);
  const right = comparable(b);
  if (typeof left === 'object' || typeof right === 'object') return JSON.stringify(left) === JSON.stringify(right);
  if (typeof left === 'string' && typeof right === 'number') return Number(left) === right;
  if (typeof left === 'number' && typeof right === 'string') return left === Number(right);
  // decimals come back from PostgreSQL as strings with their scale: 10 and "10.00" are equal
  if (typeof left === 'string' && typeof right === 'string' && /^-?\d+(\.\d+)?$/.test(left) && /^-?\d+(\.\d+)?$/.test(right)) return Number(left) === Number(right);
  if (typeof left === 'string' && typeof right === 'string' && (/T\d{2}:/.test(left) || /T\d{2}:/.test(right))) {
    const [l, r] = [Date.parse(left), Date.parse(right)];
    if (!Number.isNaN(l) && l === r) return true;
  }
  return left === right;
}

async function writeAudit(trx: Knex.Transaction, model: BoundModel, principal: Principal, flag: 1 | 2 | 3, pk: string, repr: string, change: unknown, approval?: WriteOrigin['approval']) {
  await trx('admin_log_entries').insert({
    user_id: principal.user.id,
    // The maker is the row's user; an approved change names its checkers beside them.
    actor: approval ? `${principal.user.username} (approved by ${approval.checkers.join(', ')})` : principal.user.username,
    action_flag: flag,
    content_type: model.key,
    object_id: pk,
    object_repr: repr.slice(0, 200),
    change: JSON.stringify(change),
    approval_request_id: approval?.requestId ?? null,
  });
}

/** m2m values are stored in their link table after the row. */
async function saveRelations(trx: Knex.Transaction, model: BoundModel, pk: string, cleaned: Row): Promise<void> {
  for (const field of model.formFields) {
    const through = field.declaration.through;
    if (field.type !== 'm2m' || !through || cleaned[field.name] === undefined) continue;
    await trx(through.table).where(through.sourceColumn, pk).delete();
    // A full form that leaves an m2m field out cleans it to null: the record then has no links.
    const values = (cleaned[field.name] ?? []) as unknown[];
    if (values.length) await trx(through.table).insert(values.map((value) => ({ [through.sourceColumn]: pk, [through.targetColumn]: value })));
  }
}

/** Reads the m2m values of a record, keyed by field, for forms and diffs. */
export async function loadRelations(db: Knex | Knex.Transaction, model: BoundModel, pk: string): Promise<Row> {
  const values: Row = {};
  for (const field of model.formFields) {
    const through = field.declaration.through;
    if (field.type !== 'm2m' || !through) continue;
    values[field.name] = (await db(through.table).where(through.sourceColumn, pk).orderBy(through.targetColumn).pluck(through.targetColumn)).map(String);
  }
  return values;
}

/**
 * Adds (pk null) or changes a record. `partial` is PATCH: only sent fields are checked and
 * written; otherwise the whole form is. Throws ValidationFailed, PermissionDenied, ObjectNotFound
 * or PendingApprovalConflict; never writes half.
 */
export async function saveObject(
  chain: WriteChain,
  model: BoundModel,
  principal: Principal,
  pk: string | null,
  input: unknown,
  options: { partial?: boolean; origin?: WriteOrigin } = {},
): Promise<WriteOutcome> {
  const operation = pk === null ? 'add' : 'change';
  if (!chain.site.can(principal, model, operation)) throw new PermissionDenied();
  const origin = options.origin ?? { channel: 'web' };
  const existing = pk === null ? null : await getRow(chain.db, model, principal, pk);
  if (pk !== null && !existing) throw new ObjectNotFound(model, pk);
  if (existing && !canObject(chain.site, principal, model, 'change', existing)) throw new PermissionDenied();

  const { cleaned, errors, warnings } = await cleanForm(chain.site, chain.db, model, input, options.partial ?? false);
  if (Object.keys(errors).length) throw new ValidationFailed(errors, warnings);
  const before = existing ? { ...existing, ...(await loadRelations(chain.db, model, pk!)) } : null;
  const hookErrors = model.hooks?.clean?.(cleaned, before, principal);
  if (hookErrors && Object.keys(hookErrors).length) throw new ValidationFailed(hookErrors, warnings);

  const result = await chain.db.transaction(async (trx) => {
    // Lock the record, so two writers and an approval never interleave on it.
    const locked = pk === null ? null : ((await getRow(trx, model, principal, pk, true)) ?? null);
    if (pk !== null && !locked) throw new ObjectNotFound(model, pk);
    // Again on the locked row: another write may have changed what the check read (a user made superuser).
    if (locked && !canObject(chain.site, principal, model, 'change', locked)) throw new PermissionDenied();
    const values: Row = {};
    for (const field of writableFields(model)) {
      if (field.virtual || field.type === 'm2m' || cleaned[field.name] === undefined) continue;
      // PostgreSQL arrays take the JS array itself; json columns take its text.
      const isArray = model.columnTypes.get(field.name)?.udtName.startsWith('_');
      values[field.name] = field.type === 'json' && !isArray && cleaned[field.name] !== null ? JSON.stringify(cleaned[field.name]) : cleaned[field.name];
    }
    const context: SaveContext = { trx, principal, before: locked, values, cleaned, operation };
    await model.hooks?.beforeSave?.(context);

    if (chain.approvalHook) {
      const pending = await chain.approvalHook({ trx, model, operation, pk, before: locked, values, cleaned, principal, origin });
      if (pending) return { pending, row: locked, pk };
    }
    let row: Row;
    if (pk === null) {
      const info = model.columnTypes.get(model.pk)!;
      if (values[model.pk] === undefined && info.udtName === 'uuid' && !info.hasDefault) values[model.pk] = randomUUID();
      [row] = await trx(model.table).insert(values).returning('*');
    } else {
      const updates = { ...values };
      if (model.columnTypes.has('updated_at') && Object.keys(updates).length) updates.updated_at = trx.fn.now();
      row = Object.keys(updates).length ? (await trx(model.table).where(model.pk, pk).update(updates).returning('*'))[0] : locked!;
    }
    const savedPk = String(row[model.pk]);
    await saveRelations(trx, model, savedPk, cleaned);
    await model.hooks?.afterSave?.({ ...context, row });
    const relations = await loadRelations(trx, model, savedPk);
    const diff = diffOf(model, pk === null ? null : before, { ...values, ...relations });
    await writeAudit(trx, model, principal, pk === null ? 1 : 2, savedPk, model.repr(row), diff, origin.approval);
    const messages = model.hooks?.messages?.({ ...context, row }) ?? [];
    return { row, pk: savedPk, messages };
  }).catch((error: { code?: string; constraint?: string }) => {
    // A unique constraint is a validation error the user can fix, not a server fault.
    if (error.code === '23505') throw new ValidationFailed({ __all__: [{ message: `A ${model.verboseName} with these values already exists.`, code: 'unique' }] }, warnings);
    if (error.code === '23503') throw new ValidationFailed({ __all__: [{ message: 'This record is still referenced by other records.', code: 'protected' }] }, warnings);
    throw error;
  });

  if ('pending' in result && result.pending) {
    return {
      status: 'pending',
      row: result.row,
      pk: result.pk,
      messages: [{ level: 'info', message: 'Change submitted for approval.' }],
      warnings,
      approvalRequestId: result.pending.requestId,
    };
  }
  const saved = result as { row: Row; pk: string; messages: Message[] };
  chain.site.notifyChange({ model: model.key, pk: saved.pk, operation, actorId: principal.user.id });
  return {
    status: pk === null ? 'created' : 'updated',
    row: saved.row,
    pk: saved.pk,
    messages: [{ level: 'success', message: pk === null ? `The ${model.verboseName} "${model.repr(saved.row)}" was added successfully.` : `The ${model.verboseName} "${model.repr(saved.row)}" was changed successfully.` }, ...saved.messages],
    warnings,
  };
}

/** Deletes a record through the same chain (permission, approval hook, audit row). */
export async function deleteObject(chain: WriteChain, model: BoundModel, principal: Principal, pk: string, origin: WriteOrigin = { channel: 'web' }): Promise<WriteOutcome> {
  if (!chain.site.can(principal, model, 'delete')) throw new PermissionDenied();
  const result = await chain.db.transaction(async (trx) => {
    const row = await getRow(trx, model, principal, pk, true);
    if (!row) throw new ObjectNotFound(model, pk);
    if (!canObject(chain.site, principal, model, 'delete', row)) throw new PermissionDenied();
    await model.hooks?.beforeDelete?.({ trx, principal, row });
    if (chain.approvalHook) {
      const pending = await chain.approvalHook({ trx, model, operation: 'delete', pk, before: row, values: {}, cleaned: {}, principal, origin });
      if (pending) return { pending, row };
    }
    await trx(model.table).where(model.pk, pk).delete();
    await writeAudit(trx, model, principal, 3, pk, model.repr(row), {}, origin.approval);
    return { row };
  }).catch((error: { code?: string }) => {
    if (error.code === '23503') throw new ValidationFailed({ __all__: [{ message: `This ${model.verboseName} is still referenced by other records and cannot be deleted.`, code: 'protected' }] });
    throw error;
  });
  if ('pending' in result && result.pending) {
    return { status: 'pending', row: result.row, pk, messages: [{ level: 'info', message: 'Change submitted for approval.' }], warnings: [], approvalRequestId: result.pending.requestId };
  }
  chain.site.notifyChange({ model: model.key, pk, operation: 'delete', actorId: principal.user.id });
  return { status: 'deleted', row: null, pk, messages: [{ level: 'success', message: `The ${model.verboseName} "${model.repr(result.row)}" was deleted successfully.` }], warnings: [] };
}

/** The most records one bulk action is run on (the web changelist sends at most a page). */
export const MAX_ACTION_RECORDS = 1000;

/** What a bulk change did to one chosen record. */
export interface RecordOutcome {
  pk: string;
  repr: string;
  /** updated: written; pending: submitted for approval (a request of its own); refused: not written, with the reason. */
  status: 'updated' | 'pending' | 'refused';
  /** For a refused record: the chain's reason (validation_failed, permission_denied, not_found, pending_approval). */
  reason?: string;
  message?: string;
  errors?: FieldErrors;
  approvalRequestId?: string;
}

/** What an action answers: the message shown, and for a bulk change each record's outcome; for a list-level action the record it opened. */
export interface ActionResult extends Message {
  outcomes?: RecordOutcome[];
  pk?: string | null;
  approvalRequestId?: string;
}

/**
 * Runs an action of a model (see ActionDeclaration): the user must be allowed to run it
 * (canRunAction, else PermissionDenied). A `run` action runs on the chosen records the user may
 * see, all in one transaction, with an audit row each. A `change` action writes `input` (the
 * action's fields) on each chosen record through saveObject, one write per record, and reports
 * each record's outcome; its fields are checked once first (ValidationFailed before any write).
 * A `pick` action needs no selection.
 */
export async function runAction(
  chain: WriteChain,
  model: BoundModel,
  principal: Principal,
  actionName: string,
  pks: string[],
  options: { input?: unknown; origin?: WriteOrigin } = {},
): Promise<ActionResult> {
  const action = model.actions?.find((candidate) => candidate.name === actionName);
  if (!action) throw new ValidationFailed({ action: [{ message: `Unknown action: ${actionName.slice(0, 100)}.`, code: 'invalid_choice' }] });
  if (!canRunAction(chain.site, principal, model, action)) throw new PermissionDenied();
  const origin = options.origin ?? { channel: 'web' };
  if (action.pick) {
    const picked = await action.pick({ chain, principal, origin });
    return { level: picked.level, message: picked.message, pk: picked.pk, ...(picked.approvalRequestId ? { approvalRequestId: picked.approvalRequestId } : {}) };
  }
  pks = [...new Set(pks.filter((pk) => validPk(model, pk)))];
  if (!pks.length) throw new ValidationFailed({ action: [{ message: 'Items must be selected in order to perform actions on them.', code: 'required' }] });
  if (pks.length > MAX_ACTION_RECORDS) throw new ValidationFailed({ action: [{ message: `An action runs on at most ${MAX_ACTION_RECORDS} records at a time.`, code: 'too_many' }] });
  if (action.change) return runChange(chain, model, principal, action, action.change, pks, options.input, origin);
  if (!action.run) throw new Error(`${model.key}: action ${action.name} declares neither run, change nor pick`);
  const run = action.run;
  return chain.db.transaction(async (trx) => {
    const rows = (await scopedQuery(trx, model, principal).select('t.*').whereIn(`t.${model.pk}`, pks).forUpdate()) as Row[];
    const message = await run({ db: trx, principal }, rows);
    for (const row of rows) await writeAudit(trx, model, principal, 2, String(row[model.pk]), model.repr(row), { action: actionName });
    return { level: 'success' as const, message };
  });
}

/**
 * The values a bulk change writes on every record: the action's fields as sent (anything else is
 * ignored), its fixed values and the ones that depend on the user, cleaned once as a partial form
 * so a bad or missing value refuses the whole action before any record is written.
 */
export async function actionValues(chain: WriteChain, model: BoundModel, principal: Principal, change: ActionChange, input: unknown): Promise<Row> {
  if (input !== undefined && input !== null && (typeof input !== 'object' || Array.isArray(input))) {
    throw new ValidationFailed({ __all__: [{ message: 'The action\'s fields must be a JSON object.', code: 'invalid' }] });
  }
  const sent = (input ?? {}) as Record<string, unknown>;
  const values: Row = {};
  for (const name of change.fields) if (Object.hasOwn(sent, name)) values[name] = sent[name];
  const errors: FieldErrors = {};
  for (const name of change.required ?? []) {
    const value = values[name];
    if (value === undefined || value === null || (typeof value === 'string' && value.trim() === '')) errors[name] = [{ message: 'This field is required.', code: 'required' }];
  }
  Object.assign(values, change.fixed ?? {}, change.values?.(principal) ?? {});
  const { errors: formErrors } = await cleanForm(chain.site, chain.db, model, values, true);
  for (const [name, list] of Object.entries(formErrors)) if (!errors[name]) errors[name] = list;
  if (Object.keys(errors).length) throw new ValidationFailed(errors);
  return values;
}

async function runChange(
  chain: WriteChain,
  model: BoundModel,
  principal: Principal,
  action: ActionDeclaration,
  change: ActionChange,
  pks: string[],
  input: unknown,
  origin: WriteOrigin,
): Promise<ActionResult> {
  const values = await actionValues(chain, model, principal, change, input);
  const reprs = new Map(
    ((await scopedQuery(chain.db, model, principal)
      .select([...new Set([model.pk, ...model.reprColumns])].map((name) => `t.${name}`))
      .whereIn(`t.${model.pk}`, pks)) as Row[]).map((row) => [String(row[model.pk]), model.repr(row)]),
  );
  const outcomes: RecordOutcome[] = [];
  // One record after the other, each its own transaction: a refused record leaves the others written.
  for (const pk of pks) outcomes.push(await changeRecord(chain, model, principal, change, pk, values, origin, reprs.get(pk) ?? pk));
  return { ...actionSummary(model, action, outcomes), outcomes };
}

async function changeRecord(chain: WriteChain, model: BoundModel, principal: Principal, change: ActionChange, pk: string, values: Row, origin: WriteOrigin, repr: string): Promise<RecordOutcome> {
  try {
    const outcome = await applyChange(chain, model, principal, change, pk, values, origin);
    if (outcome.status === 'pending') return { pk, repr, status: 'pending', approvalRequestId: outcome.approvalRequestId };
    return { pk, repr: outcome.row ? model.repr(outcome.row) : repr, status: 'updated' };
  } catch (error) {
    if (!(error instanceof ChainError)) throw error;
    return {
      pk,
      repr,
      status: 'refused',
      reason: error.reason,
      message: refusalText(error),
      ...(error instanceof ValidationFailed ? { errors: error.errors } : {}),
    };
  }
}

/**
 * One record's write of a bulk change (`values` from actionValues), through saveObject. With a
 * guard, the record is locked first, in a transaction the write joins: the guard reads the row
 * no one else can change until the write commits, so two users running it at once are serialised
 * (the second sees the first's write). Throws the chain's errors.
 */
export async function applyChange(chain: WriteChain, model: BoundModel, principal: Principal, change: ActionChange, pk: string, values: Row, origin: WriteOrigin): Promise<WriteOutcome> {
  if (!change.guard) return saveObject(chain, model, principal, pk, values, { partial: true, origin });
  const guard = change.guard;
  return chain.db.transaction(async (trx) => {
    if (!chain.site.can(principal, model, 'change')) throw new PermissionDenied();
    const locked = await getRow(trx, model, principal, pk, true);
    if (!locked) throw new ObjectNotFound(model, pk);
    if (!canObject(chain.site, principal, model, 'change', locked)) throw new PermissionDenied();
    const errors = guard(locked, principal);
    if (errors && Object.keys(errors).length) throw new ValidationFailed(errors);
    return saveObject({ ...chain, db: trx as unknown as Knex }, model, principal, pk, values, { partial: true, origin });
  });
}

/** A refusal as one line: a validation error's messages, or the error's own. */
export function refusalText(error: ChainError): string {
  if (error instanceof ValidationFailed) return Object.values(error.errors).flat().map((problem) => problem.message).join(' ');
  return error.message;
}

const LISTED_REFUSALS = 10;

/** The message of a bulk change: how many records were changed, submitted and refused, and why. */
function actionSummary(model: BoundModel, action: ActionDeclaration, outcomes: RecordOutcome[]): Message {
  const count = (status: RecordOutcome['status']) => outcomes.filter((outcome) => outcome.status === status).length;
  const noun = (n: number) => `${n} ${n === 1 ? model.verboseName : model.verboseNamePlural}`;
  const [updated, pending, refused] = [count('updated'), count('pending'), count('refused')];
  const parts: string[] = [];
  if (updated) parts.push(`${noun(updated)} changed`);
  if (pending) parts.push(`${noun(pending)} submitted for approval`);
  if (refused) {
    const listed = outcomes.filter((outcome) => outcome.status === 'refused').slice(0, LISTED_REFUSALS).map((outcome) => `${outcome.repr}: ${outcome.message}`);
    const more = refused > LISTED_REFUSALS ? `; and ${refused - LISTED_REFUSALS} more` : '';
    parts.push(`${noun(refused)} refused (${listed.join('; ')}${more})`);
  }
  const level = refused === 0 ? (updated ? 'success' : 'info') : updated + pending ? 'warning' : 'error';
  return { level, message: `${action.label}: ${parts.join(', ')}.` };
}
