import type Router from '@koa/router';
import type { Knex } from 'knex';
import type { Context, Middleware } from 'koa';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { ForbiddenError, HttpError, MethodNotAllowedError } from '../../http/errors.ts';
import { readJsonObject } from '../../http/json-body.ts';
import { anyObject, envelopeResponse, z } from '../../http/openapi.ts';
import { canObject, httpErrorOf, objectPerms } from '../backoffice/access.ts';
import { relationOptions } from '../backoffice/autocomplete.ts';
import {
  filterParameters,
  getRow,
  inlineBlocks,
  joinedValues,
  listRows,
  nameLabel,
  MAX_PAGE_SIZE,
  QueryError,
  validPk,
  type AutocompletePage,
} from '../backoffice/query.ts';
import { detailBlocks } from '../backoffice/site.ts';
import type { AdminSite } from '../backoffice/site.ts';
import type { BoundModel, ResolvedField, Row } from '../backoffice/registry.ts';
import { deleteObject, loadRelations, MAX_ACTION_RECORDS, runAction, saveObject, type ActionResult, type RecordOutcome, type WriteOutcome } from '../backoffice/write.ts';
import type { Principal } from '../staff/principal.ts';
import { acceptOnly, documentRoutes, invalidParameter, positiveInteger, singleParameter } from './parameters.ts';
import {
  capitalize,
  cellValue,
  columnOf,
  listCells,
  columnTone,
  displayText,
  endpoints,
  modelReference,
  rawValue,
  registeredModel,
} from './present.ts';
import type { MobileState } from './guard.ts';

/**
 * The data layer: lists, details, writes and autocomplete of every registered model, through the
 * registry's queries and its one write chain. Lists cost one page query and one count whatever the
 * page size; a detail costs its row, one query per relation it shows, and its inline blocks.
 */

/** Form bodies are flat objects of form fields; a megabyte is far above any real one. */
export const DATA_BODY_LIMIT_BYTES = 1024 * 1024;
const LIST_PARAMETERS = ['p', 'q', 'o', 'page_size', 'fields'];
const MAX_SEARCH_LENGTH = 200;
const MAX_PAGE = 1_000_000;
const MAX_EXTRA_FIELDS = 50;
/** Results of reports are read at reports/results/<pk>/, a page of their output at a time (spec). */
const DETAIL_ELSEWHERE = new Set(['report.reportresult']);

function principalOf(ctx: Context): Principal {
  return (ctx.state as MobileState).mobile.principal;
}

function requireView(site: AdminSite, principal: Principal, model: BoundModel): void {
  if (!site.can(principal, model, 'view')) throw new ForbiddenError(`You do not have permission to view ${model.verboseNamePlural}.`, 'permission_denied');
}

/** The registry's errors as the spec's answers (the access core maps them, once for every face). */
function chainError(error: unknown): never {
  const mapped = httpErrorOf(error);
  if (mapped !== error) throw mapped;
  return queryError(error);
}

function queryError(error: unknown): never {
  if (error instanceof QueryError) throw invalidParameter(error.parameter, error.message);
  throw error;
}

/** Parses `o`: column indexes joined by dots, minus for descending (`2.-1`). */
function parseOrdering(value: string | undefined): number[] {
  if (value === undefined || value === '') return [];
  if (!/^-?\d{1,4}(\.-?\d{1,4}){0,19}$/.test(value)) throw invalidParameter('o', 'o must be column indexes separated by dots, minus for descending (for example 2.-1).');
  const order = value.split('.').map(Number);
  if (order.some((index) => index === 0)) throw invalidParameter('o', 'Column indexes start at 1.');
  return order;
}

/** The stored columns a `fields` parameter may ask for: the model's columns that are not hidden. */
function parseExtraFields(model: BoundModel, value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const names = [...new Set(value.split(',').map((name) => name.trim()).filter(Boolean))];
  if (names.length > MAX_EXTRA_FIELDS) throw invalidParameter('fields', `At most ${MAX_EXTRA_FIELDS} fields may be asked for.`);
  for (const name of names) {
    if (!model.columnTypes.has(name) || model.fields?.[name]?.hidden) throw invalidParameter('fields', `Unknown field: ${name.slice(0, 100)}.`);
  }
  return names;
}

// The data endpoints' answers for the OpenAPI document: the keys the service fixes are typed, the
// cells and fields, which depend on the model, are any JSON.
const LIST_PAGE = z.object({
  timezone: z.literal('UTC'),
  results: z.array(
    z.object({
      pk: z.string(),
      repr: z.string(),
      cells: z.record(z.string(), z.union([z.string(), z.boolean(), z.null()])),
      tones: z.record(z.string(), z.string()),
      related_model: z.string().nullable().optional(),
      related_pk: z.string().nullable().optional(),
      fields: anyObject.optional(),
    }),
  ),
  pagination: z.object({ page: z.number().int(), page_size: z.number().int(), total: z.number().int(), pages: z.number().int(), total_is_estimate: z.boolean() }),
  applied: z.object({ query: z.string(), filters: z.record(z.string(), z.string()), ordering: z.string() }),
  columns: z.array(z.string()),
});

const AUTOCOMPLETE_PAGE: z.ZodType<AutocompletePage> = z.object({
  results: z.array(z.object({ value: z.string(), text: z.string() })),
  more: z.boolean(),
  page: z.number().int(),
});

export async function listPage(ctx: Context, site: AdminSite, db: Knex, principal: Principal, model: BoundModel): Promise<z.infer<typeof LIST_PAGE>> {
  const accepted = filterParameters(model);
  for (const name of Object.keys(ctx.query)) {
    if (!LIST_PARAMETERS.includes(name) && !accepted.has(name)) throw invalidParameter(name, `Unknown parameter: ${name.slice(0, 100)}.`);
  }
  const page = positiveInteger(ctx, 'p', 1, MAX_PAGE);
  const pageSize = positiveInteger(ctx, 'page_size', model.pageSize, MAX_PAGE_SIZE);
  const search = singleParameter(ctx, 'q', MAX_SEARCH_LENGTH) ?? '';
  if (search.trim() && !model.searchFields?.length) throw invalidParameter('q', `${model.verboseNamePlural} cannot be searched.`);
  const orderParameter = singleParameter(ctx, 'o', 100);
  const order = parseOrdering(orderParameter);
  const extraFields = parseExtraFields(model, singleParameter(ctx, 'fields'));
  const filters: Record<string, string> = {};
  for (const name of accepted) {
    const value = singleParameter(ctx, name, 200);
    if (value !== undefined) filters[name] = value;
  }
  const result = await listRows(site, db, model, principal, { page, pageSize, search, order, filters }, extraFields ?? []).catch(queryError);
  const cells = [...listCells(model).values()];
  return {
    timezone: 'UTC',
    results: result.rows.map((row, index) => {
      const cellValues: Record<string, string | boolean | null> = {};
      const tones: Record<string, string> = {};
      for (const cell of cells) {
        cellValues[cell.name] = cell.read(row);
        const tone = cell.tone?.(row[cell.name], row);
        if (tone) tones[cell.name] = tone;
      }
      return {
        pk: String(row[model.pk]),
        repr: model.repr(row),
        cells: cellValues,
        tones,
        // The record the card opens (a request's target), for models that annotate their rows.
        ...(result.links ? { related_model: result.links[index]?.model ?? null, related_pk: result.links[index]?.pk ?? null } : {}),
        ...(extraFields ? { fields: Object.fromEntries(extraFields.map((name) => [name, rawValue(model, name, row[name])])) } : {}),
      };
    }),
    pagination: { page: result.page, page_size: result.pageSize, total: result.total, pages: result.pages, total_is_estimate: result.totalIsEstimate },
    applied: { query: search, filters, ordering: orderParameter ?? '' },
    columns: model.columns.map((column) => column.name),
  };
}

type DetailKind = 'text' | 'date' | 'badge' | 'number' | 'bool' | 'json' | 'relation' | 'file' | 'image';

function fieldKind(field: ResolvedField, toned: boolean): DetailKind {
  if (toned) return 'badge';
  switch (field.type) {
    case 'integer':
    case 'float':
    case 'decimal':
      return 'number';
    case 'boolean':
    case 'nullboolean':
      return 'bool';
    case 'date':
    case 'datetime':
      return 'date';
    case 'json':
      return 'json';
    case 'file':
      return 'file';
    case 'image':
      return 'image';
    default:
      return 'text';
  }
}

/** The registered model a relation field of this row points into: its declared target, or the generic relation's. */
function relationTarget(site: AdminSite, field: ResolvedField, row: Row): BoundModel | undefined {
  if (field.declaration.relatedModelOf) {
    const key = field.declaration.relatedModelOf(row);
    return key ? site.models.get(key) : undefined;
  }
  return (field.type === 'fk' || field.type === 'm2m') && field.related ? site.models.get(field.related) : undefined;
}

/** The repr of each related record a detail shows: one query per relation field, never per value. */
async function relatedReprs(site: AdminSite, db: Knex, principal: Principal, model: BoundModel, row: Row): Promise<Map<string, Map<string, string>>> {
  const lookups = model.formFields.flatMap((field) => {
    const target = field.declaration.hidden ? undefined : relationTarget(site, field, row);
    // A record of a model the viewer may not view is not named (its key stays the display).
    if (target && !site.can(principal, target, 'view')) return [];
    if (!target) return [];
    const raw = row[field.name];
    const values = (Array.isArray(raw) ? raw : raw === null || raw === undefined ? [] : [raw]).map(String).filter((value) => validPk(target, value));
    return values.length ? [{ field, target, values }] : [];
  });
  const found = await Promise.all(
    lookups.map(async ({ field, target, values }) => {
      const rows = (await db(target.table).whereIn(target.pk, values).select([...new Set([target.pk, ...target.reprColumns])])) as Row[];
      return [field.name, new Map(rows.map((related) => [String(related[target.pk]), target.repr(related)]))] as const;
    }),
  );
  return new Map(found);
}

/** A record's detail; the modules' blocks (data_context, mark, approval...) sit beside these keys. */
export const RECORD_DETAIL = z
  .object({
    pk: z.string(),
    repr: z.string(),
    timezone: z.literal('UTC'),
    status_field: z.string().nullable(),
    fields: z.record(z.string(), anyObject),
    perms: anyObject,
    inlines: z.array(anyObject).optional(),
  })
  .catchall(z.unknown());

export async function recordDetail(site: AdminSite, db: Knex, principal: Principal, model: BoundModel, stored: Row, includeInlines: boolean): Promise<z.infer<typeof RECORD_DETAIL>> {
  const pk = String(stored[model.pk]);
  const [relations, joined, blocks, inlines] = await Promise.all([
    loadRelations(db, model, pk),
    joinedValues(site, db, model, stored, principal),
    detailBlocks(db, site, model, stored, principal),
    includeInlines ? inlineBlocks(site, db, model, principal, stored) : undefined,
  ]);
  const row = { ...stored, ...relations };
  const perms = objectPerms(site, principal, model, row);
  const reprs = await relatedReprs(site, db, principal, model, row);
  const fields: Record<string, Record<string, unknown>> = {};
  for (const field of model.formFields) {
    if (field.declaration.hidden) continue;
    const value = row[field.name];
    const column = columnOf(model, field.name);
    const tone = column ? columnTone(column, row) : null;
    const target = relationTarget(site, field, row);
    const names = reprs.get(field.name);
    const entry: Record<string, unknown> = {
      type: 'field',
      label: field.label,
      kind: fieldKind(field, Boolean(column?.tone)),
      value: rawValue(model, field.name, value),
      display: names && !field.declaration.display
        ? (Array.isArray(value) ? value.map((item) => names.get(String(item)) ?? String(item)).join(', ') : names.get(String(value)) ?? displayText(model, field.name, value, row))
        : displayText(model, field.name, value, row),
      editable: perms.change && !field.readonly && field.type !== 'file' && field.type !== 'image',
    };
    if (tone) entry.tone = tone;
    // A single link to a record the user may open becomes a relation; anything else stays text.
    // A generic relation links only to a record that still exists (an audit row outlives its record).
    const generic = Boolean(field.declaration.relatedModelOf);
    if (target && (field.type === 'fk' || generic) && site.can(principal, target, 'view') && (!generic || names?.has(String(value)))) {
      entry.kind = 'relation';
      entry.related_model = `${target.appLabel}.${target.model}`;
      entry.related_pk = value === null || value === undefined ? null : String(value);
    }
    if (field.declaration.help) entry.help_text = field.declaration.help;
    fields[field.name] = entry;
  }
  const formNames = new Set(model.formFields.map((field) => field.name));
  for (const [name, declaration] of Object.entries(model.fields ?? {})) {
    if (formNames.has(name) || !declaration.display || declaration.hidden) continue;
    fields[name] = { type: 'display', label: nameLabel(model, name), kind: 'text', display: displayText(model, name, row[name], row), editable: false };
  }
  // Columns of related records that the fieldsets name (`customer_id__customer_ref`).
  for (const [name, value] of Object.entries(joined)) {
    fields[name] = { type: 'display', label: nameLabel(model, name), kind: 'text', display: displayText(model, name, value, row), editable: false };
  }
  const detail: z.infer<typeof RECORD_DETAIL> = {
    pk,
    repr: model.repr(row),
    timezone: 'UTC',
    status_field: model.statusColumn ?? null,
    fields,
    perms,
    // The modules' blocks (data_context, mark, approval), the same ones the web change page shows.
    ...blocks,
  };
  if (inlines) {
    detail.inlines = inlines.map((block) => ({
      model: { ...modelReference(block.model), endpoints: endpoints(block.model) },
      verbose_name_plural: block.label,
      total: block.total,
      rows: block.rows.map((related) => ({
        pk: String(related[block.model.pk]),
        repr: block.model.repr(related),
        fields: Object.fromEntries(
          block.fields.map((name) => {
            const column = columnOf(block.model, name);
            return [name, column ? cellValue(block.model, column, related) : displayText(block.model, name, related[name], related)];
          }),
        ),
      })),
    }));
  }
  return detail;
}

export const MESSAGES = z.array(z.object({ level: z.string(), message: z.string() }));
const SAVED_OBJECT = z.object({ pk: z.string(), repr: z.string(), fields: anyObject });
/** A write's answer: 200 or 201 with the saved object (none for a delete), 202 when submitted for approval. */
const WRITE_ANSWER = z.object({
  messages: MESSAGES,
  pending_approval: z.boolean(),
  approval_request_id: z.string().nullable().optional(),
  warnings: z.array(z.string()),
  object: SAVED_OBJECT.optional(),
});

/** The saved record as a write answers it: pk, repr and the raw values of its visible form fields. */
async function savedObject(db: Knex, model: BoundModel, row: Row): Promise<z.infer<typeof SAVED_OBJECT>> {
  const pk = String(row[model.pk]);
  const full = { ...row, ...(await loadRelations(db, model, pk)) };
  return {
    pk,
    repr: model.repr(full),
    fields: Object.fromEntries(model.formFields.filter((field) => !field.declaration.hidden).map((field) => [field.name, rawValue(model, field.name, full[field.name])])),
  };
}

const WRITE_MESSAGES = { created: 'Created.', updated: 'Updated.', deleted: 'Deleted.' } as const;

async function answerWrite(ctx: Context, db: Knex, model: BoundModel, outcome: WriteOutcome): Promise<void> {
  if (outcome.status === 'pending') {
    respond(ctx, 'Change submitted for approval.', {
      messages: outcome.messages,
      pending_approval: true,
      approval_request_id: outcome.approvalRequestId ?? null,
      warnings: outcome.warnings,
    } satisfies z.infer<typeof WRITE_ANSWER>, 202);
    return;
  }
  const data: z.infer<typeof WRITE_ANSWER> = { messages: outcome.messages, pending_approval: false, warnings: outcome.warnings };
  if (outcome.status !== 'deleted' && outcome.row) data.object = await savedObject(db, model, outcome.row);
  respond(ctx, WRITE_MESSAGES[outcome.status], data, outcome.status === 'created' ? 201 : 200);
}

/** An action's body: `pks` (the chosen records; none for an action that needs no selection) and `fields` (a bulk change's values). */
function actionBody(body: Record<string, unknown>): { pks: string[]; fields: unknown } {
  const errors: Record<string, { message: string; code: string }[]> = {};
  const pks = body.pks ?? [];
  if (!Array.isArray(pks) || pks.length > MAX_ACTION_RECORDS || !pks.every((pk) => typeof pk === 'string' || (typeof pk === 'number' && Number.isInteger(pk)))) {
    errors.pks = [{ message: `pks must be a list of at most ${MAX_ACTION_RECORDS} record keys.`, code: 'invalid_list' }];
  }
  const fields = body.fields ?? {};
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) errors.fields = [{ message: 'fields must be a JSON object of the action\'s fields.', code: 'invalid' }];
  const unknown = Object.keys(body).filter((key) => key !== 'pks' && key !== 'fields');
  if (unknown.length) errors[unknown[0]!.slice(0, 100)] = [{ message: 'Unknown key: send pks and fields.', code: 'unknown' }];
  if (Object.keys(errors).length) throw new HttpError(400, 'Validation failed.', 'validation_failed', { errors, warnings: [] });
  return { pks: (pks as unknown[]).map(String), fields };
}

const REFUSAL_STATUS: Readonly<Record<string, number>> = { validation_failed: 400, permission_denied: 403, not_found: 404, pending_approval: 409 };

const ACTION_RESULT = z.object({
  pk: z.string(),
  repr: z.string(),
  status: z.enum(['updated', 'pending', 'refused']),
  reason: z.string().nullable(),
  message: z.string().nullable(),
  errors: anyObject.nullable(),
  approval_request_id: z.string().nullable(),
});

/** Each record's outcome of a bulk change, as the spec's JSON names them. */
function actionResults(outcomes: RecordOutcome[]): z.infer<typeof ACTION_RESULT>[] {
  return outcomes.map((outcome) => ({
    pk: outcome.pk,
    repr: outcome.repr,
    status: outcome.status,
    reason: outcome.reason ?? null,
    message: outcome.message ?? null,
    errors: outcome.errors ?? null,
    approval_request_id: outcome.approvalRequestId ?? null,
  }));
}

/** An action's answer: a bulk change's per-record results, a list-level action's record, or just its messages. */
const ACTION_ANSWER = z.object({
  level: z.string(),
  messages: MESSAGES,
  results: z.array(ACTION_RESULT).nullable().optional(),
  counts: z.object({ updated: z.number().int(), pending: z.number().int(), refused: z.number().int() }).optional(),
  pending_approval: z.boolean().optional(),
  pk: z.string().nullable().optional(),
  object: RECORD_DETAIL.nullable().optional(),
  approval_request_id: z.string().nullable().optional(),
});

/**
 * The answer of an action. A bulk change answers 200 when any record was written or submitted
 * for approval, with every record's outcome in data.results; when every record was refused it is
 * an error of their common kind (400, 403, 404 or 409; 400 action_refused when they differ), still
 * with data.results. A list-level action (next case) answers the record it opened.
 */
async function answerAction(ctx: Context, site: AdminSite, db: Knex, principal: Principal, model: BoundModel, result: ActionResult): Promise<void> {
  const messages = [{ level: result.level, message: result.message }];
  if (result.outcomes) {
    const results = actionResults(result.outcomes);
    const counts = { updated: 0, pending: 0, refused: 0 };
    for (const outcome of result.outcomes) counts[outcome.status]++;
    if (!counts.updated && !counts.pending) {
      const reasons = [...new Set(result.outcomes.map((outcome) => outcome.reason ?? 'action_refused'))];
      const reason = reasons.length === 1 && REFUSAL_STATUS[reasons[0]!] ? reasons[0]! : 'action_refused';
      throw new HttpError(REFUSAL_STATUS[reason] ?? 400, result.message, reason, { messages, results, counts });
    }
    respond(ctx, result.message, { level: result.level, messages, results, counts, pending_approval: counts.pending > 0 } satisfies z.infer<typeof ACTION_ANSWER>);
    return;
  }
  if (result.pk !== undefined) {
    const pending = Boolean(result.approvalRequestId);
    const row = result.pk && !pending ? await getRow(db, model, principal, result.pk) : undefined;
    respond(ctx, result.message, {
      level: result.level,
      messages,
      pk: result.pk,
      object: row ? await recordDetail(site, db, principal, model, row, false) : null,
      pending_approval: pending,
      approval_request_id: result.approvalRequestId ?? null,
    } satisfies z.infer<typeof ACTION_ANSWER>, pending ? 202 : 200);
    return;
  }
  respond(ctx, result.message, { level: result.level, messages, results: null } satisfies z.infer<typeof ACTION_ANSWER>);
}

/** The autocomplete endpoint only reads (a detail path whose pk is "autocomplete" is that endpoint too). */
function refuseAutocompleteWrite(ctx: Context): never {
  ctx.set('Allow', 'GET, HEAD');
  throw new MethodNotAllowedError(['GET', 'HEAD']);
}

function detailModel(ctx: Context, site: AdminSite): BoundModel {
  const model = registeredModel(site, ctx.params.app!, ctx.params.model!);
  if (DETAIL_ELSEWHERE.has(model.key)) throw new HttpError(404, 'Not found: report results are read at reports/results/<pk>/.', 'not_found');
  return model;
}

const AUTOCOMPLETE_PARAMETERS = ['field', 'q', 'p'];

export function registerDataRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string, docs: OpenAPIRegistry): void {
  const site = () => app.backoffice.site;
  const origin = { channel: 'mobile' as const };

  router.get(path('data/:app/:model/'), authenticated, async (ctx) => {
    const model = registeredModel(site(), ctx.params.app!, ctx.params.model!);
    requireView(site(), principalOf(ctx), model);
    const page = await listPage(ctx, site(), app.db, principalOf(ctx), model);
    respond(ctx, `Page ${page.pagination.page} of ${page.pagination.pages}.`, page);
  });

  router.post(path('data/:app/:model/'), authenticated, async (ctx) => {
    const model = registeredModel(site(), ctx.params.app!, ctx.params.model!);
    const body = await readJsonObject(ctx, DATA_BODY_LIMIT_BYTES);
    const outcome = await saveObject(app.backoffice, model, principalOf(ctx), null, body, { partial: false, origin }).catch(chainError);
    await answerWrite(ctx, app.db, model, outcome);
  });

  // Before the detail routes: "autocomplete" would otherwise read as a pk.
  router.get(path('data/:app/:model/autocomplete/'), authenticated, async (ctx) => {
    acceptOnly(ctx, AUTOCOMPLETE_PARAMETERS);
    const model = registeredModel(site(), ctx.params.app!, ctx.params.model!);
    const name = singleParameter(ctx, 'field', 100);
    const page = positiveInteger(ctx, 'p', 1, MAX_PAGE);
    const search = singleParameter(ctx, 'q', MAX_SEARCH_LENGTH) ?? '';
    const { field, options } = await relationOptions(site(), app.db, principalOf(ctx), model, name ?? '', search, page).catch(chainError);
    respond(ctx, `Options for ${field.label}.`, options);
  });
  // A POST there is no detail's method either: without this the 405 would list the detail's.
  router.post(path('data/:app/:model/autocomplete/'), authenticated, refuseAutocompleteWrite);

  router.get(path('data/:app/:model/:pk/'), authenticated, async (ctx) => {
    const principal = principalOf(ctx);
    const model = detailModel(ctx, site());
    requireView(site(), principal, model);
    acceptOnly(ctx, ['include_inlines']);
    const include = singleParameter(ctx, 'include_inlines', 5);
    if (include !== undefined && !['0', '1', 'true', 'false'].includes(include)) throw invalidParameter('include_inlines', 'include_inlines takes 1 or 0.');
    const row = await getRow(app.db, model, principal, ctx.params.pk!);
    if (!row) throw new HttpError(404, `No ${model.verboseName} with pk ${ctx.params.pk!.slice(0, 100)} exists.`, 'not_found');
    if (!canObject(site(), principal, model, 'view', row)) {
      throw new ForbiddenError(`You do not have permission to view this ${model.verboseName}.`, 'permission_denied');
    }
    const detail = await recordDetail(site(), app.db, principal, model, row, include === '1' || include === 'true');
    respond(ctx, String(detail.repr), detail);
  });

  for (const [method, partial] of [['patch', true], ['put', false]] as const) {
    router[method](path('data/:app/:model/:pk/'), authenticated, async (ctx) => {
      if (ctx.params.pk === 'autocomplete') refuseAutocompleteWrite(ctx);
      const model = detailModel(ctx, site());
      const body = await readJsonObject(ctx, DATA_BODY_LIMIT_BYTES);
      const outcome = await saveObject(app.backoffice, model, principalOf(ctx), ctx.params.pk!, body, { partial, origin }).catch(chainError);
      await answerWrite(ctx, app.db, model, outcome);
    });
  }

  // A bulk action (the schema's actions): its fields in the JSON body, through runAction and so the write chain.
  router.post(path('data/:app/:model/actions/:action/'), authenticated, async (ctx) => {
    const principal = principalOf(ctx);
    const model = registeredModel(site(), ctx.params.app!, ctx.params.model!);
    requireView(site(), principal, model);
    const action = (model.actions ?? []).find((candidate) => candidate.name === ctx.params.action);
    if (!action) throw new HttpError(404, `${capitalize(model.verboseNamePlural)} have no action ${ctx.params.action!.slice(0, 100)}.`, 'not_found');
    const { pks, fields } = actionBody(await readJsonObject(ctx, DATA_BODY_LIMIT_BYTES));
    const result = await runAction(app.backoffice, model, principal, action.name, pks, { input: fields, origin }).catch(chainError);
    await answerAction(ctx, site(), app.db, principal, model, result);
  });

  router.delete(path('data/:app/:model/:pk/'), authenticated, async (ctx) => {
    if (ctx.params.pk === 'autocomplete') refuseAutocompleteWrite(ctx);
    const model = detailModel(ctx, site());
    const outcome = await deleteObject(app.backoffice, model, principalOf(ctx), ctx.params.pk!, origin).catch(chainError);
    await answerWrite(ctx, app.db, model, outcome);
  });

  const ACTION_BODY = z.object({ pks: z.array(z.string()).max(MAX_ACTION_RECORDS).optional(), fields: anyObject.optional() });
  const writeErrors = { 400: 'Malformed JSON or Validation failed. (data.errors, data.warnings)', 403: 'Forbidden as on the web', 404: 'Model or record not found', 409: 'A change is already pending approval for this record' };
  const pending = envelopeResponse('An approval policy covers the change: submitted for approval (data.approval_request_id)', WRITE_ANSWER);
  documentRoutes(docs, path, [
    ['get', 'data/{app}/{model}/', 'Paginated list: p, q, o, page_size (max 200), fields and the schema\'s filter parameters', null, { 200: envelopeResponse('One page', LIST_PAGE) }, {
      400: 'Unknown parameter (named in data.parameter) or bad value', 403: 'No view permission', 404: 'Model not registered',
    }],
    ['post', 'data/{app}/{model}/', 'Create through the write chain (201; 202 when submitted for approval)', anyObject, { 201: envelopeResponse('Created: data.object', WRITE_ANSWER), 202: pending }, writeErrors],
    ['get', 'data/{app}/{model}/autocomplete/', 'Options of a relation field: field (required), q, p; 20 a page', null, {
      200: envelopeResponse('One page of options', AUTOCOMPLETE_PAGE),
    }, {
      400: 'field missing or not a relation field; unknown parameter', 403: 'No permission on the model or no view permission on the target', 404: 'Model not registered',
    }],
    ['get', 'data/{app}/{model}/{pk}/', 'Detail; include_inlines=1 adds the inline blocks', null, { 200: envelopeResponse('The record', RECORD_DETAIL) }, { 400: 'Unknown parameter', 403: 'No view permission', 404: 'Model or record not found' }],
    ['patch', 'data/{app}/{model}/{pk}/', 'Partial update: only the sent fields change', anyObject, { 200: envelopeResponse('Updated: data.object', WRITE_ANSWER), 202: pending }, writeErrors],
    ['put', 'data/{app}/{model}/{pk}/', 'Full update', anyObject, { 200: envelopeResponse('Updated: data.object', WRITE_ANSWER), 202: pending }, writeErrors],
    ['delete', 'data/{app}/{model}/{pk}/', 'Delete', null, { 200: envelopeResponse('Deleted', WRITE_ANSWER), 202: pending }, {
      400: 'Validation failed. (data.errors: the registration refuses the delete, e.g. the last active superuser)', 403: 'Forbidden as on the web', 404: 'Model or record not found', 409: 'Pending approval',
    }],
    ['post', 'data/{app}/{model}/actions/{action}/', 'Run a bulk action of the schema: pks (chosen records; none for one that needs no selection) and fields (a bulk change\'s values, described in the schema\'s actions[].fields). A bulk change writes each record through the write chain on its own: data.results has each one\'s status (updated, pending, refused with reason and errors), data.counts; a list-level action answers data.pk and data.object (202 when submitted for approval)', ACTION_BODY, {
      200: envelopeResponse('Ran: data.results and data.counts for a bulk change, data.pk and data.object for a list-level action', ACTION_ANSWER),
      202: envelopeResponse('A list-level action submitted for approval (data.approval_request_id)', ACTION_ANSWER),
    }, {
      400: 'Malformed body; the action\'s fields refused before any write (data.errors); every record refused for different reasons (action_refused, data.results)',
      403: 'No view permission, not allowed to run the action, or every record refused for permission',
      404: 'Model not registered or no such action; every chosen record not found',
      409: 'Every chosen record has a change pending approval',
    }],
  ]);
}
