import type Router from '@koa/router';
import type { Knex } from 'knex';
import type { Context, Middleware } from 'koa';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { ForbiddenError, HttpError } from '../../http/errors.ts';
import { canRunAction, isHidden, objectPerms, visibleFields } from '../backoffice/access.ts';
import { columnKind, columnLabel, columnSortable, filterSpecs, getRow, MAX_PAGE_SIZE } from '../backoffice/query.ts';
import { describedBlocks, type AdminSite } from '../backoffice/site.ts';
import type { ActionDeclaration, BoundModel, ResolvedField, Row } from '../backoffice/registry.ts';
import { loadRelations } from '../backoffice/write.ts';
import type { Principal } from '../staff/principal.ts';
import { capitalize, dataEndpoint, endpoints, modelNotFound, modelReference, rawValue } from './present.ts';
import { acceptOnly, documentRoutes, singleParameter } from './parameters.ts';
import { anyObject, envelopeResponse, z } from '../../http/openapi.ts';
import type { MobileState } from './guard.ts';

/**
 * The schema layer: what the client renders lists, filters and forms from. Read from the bound
 * registry for the calling user's permissions; nothing here declares a model.
 */


interface SavedFilterRow {
  id: number;
  app_label: string;
  model: string;
  name: string;
  query: string;
}

export interface Shortcut {
  id: number;
  label: string;
  params: Record<string, string>;
  query: string;
  url: string;
}

/** A saved web filter as a list shortcut: empty values dropped, the rest appended to the data endpoint. */
export function shortcutOf(model: BoundModel, saved: SavedFilterRow): Shortcut {
  // A Map, not an object: a saved query may name any parameter, `__proto__` included.
  const kept = new Map<string, string>();
  for (const [name, value] of new URLSearchParams(saved.query.replace(/^\?/, ''))) {
    if (value.trim() === '' || kept.has(name)) continue;
    kept.set(name, value);
  }
  const params = Object.fromEntries(kept);
  const query = new URLSearchParams(params).toString();
  return { id: saved.id, label: saved.name, params, query, url: query ? `${dataEndpoint(model)}?${query}` : dataEndpoint(model) };
}

/** GET schema/: the models the user may view, by app, and the menu with the user's shortcuts and the site's permitted links. */
// The schema endpoints' answers, for the OpenAPI document: the keys every model has are typed,
// what a registration declares (fields, filters, blocks, actions) is any JSON.
const MODEL_REFERENCE = z.object({ app_label: z.string(), model: z.string(), object_name: z.string(), verbose_name: z.string(), verbose_name_plural: z.string() });
const ENDPOINTS = z.object({ schema: z.string(), data: z.string() });
const INDEX_MODEL = MODEL_REFERENCE.extend({ is_proxy: z.boolean(), perms: anyObject, endpoints: ENDPOINTS });
const MENU_GROUP = z.object({ label: z.string(), icon: z.string().nullable(), items: z.array(anyObject) });
const SCHEMA_INDEX = z.object({ apps: z.array(z.object({ app_label: z.string(), models: z.array(INDEX_MODEL) })), menu: z.array(MENU_GROUP) });
const MODEL_SCHEMA = MODEL_REFERENCE.extend({
  is_proxy: z.boolean(),
  endpoints: ENDPOINTS,
  perms: anyObject,
  object: anyObject.optional(),
  list: anyObject,
  form: anyObject,
  blocks: z.array(anyObject),
  inlines: z.array(anyObject),
  actions: z.array(anyObject),
});

export async function schemaIndex(site: AdminSite, db: Knex, principal: Principal): Promise<z.infer<typeof SCHEMA_INDEX>> {
  const visible = site.visibleModels(principal);
  const saved = visible.length
    ? ((await db('staff_saved_filters')
        .where({ user_id: principal.user.id })
        .orderBy([{ column: 'name' }, { column: 'id' }])
        .select('id', 'app_label', 'model', 'name', 'query')) as SavedFilterRow[])
    : [];
  const apps = new Map<string, z.infer<typeof INDEX_MODEL>[]>();
  const menu = new Map<string, z.infer<typeof MENU_GROUP>>();
  for (const model of visible) {
    const perms = site.perms(principal, model);
    const entry = { ...modelReference(model), is_proxy: Boolean(model.proxyOf), perms, endpoints: endpoints(model) };
    let models = apps.get(model.appLabel);
    if (!models) apps.set(model.appLabel, (models = []));
    models.push(entry);

    const label = model.menu?.group ?? capitalize(model.appLabel);
    let group = menu.get(label);
    // A group shows the icon of its first model: registrations declare icons per model only.
    if (!group) menu.set(label, (group = { label, icon: model.menu?.icon ?? null, items: [] }));
    group.items.push({
      type: 'model',
      label: capitalize(model.verboseNamePlural),
      icon: model.menu?.icon ?? null,
      app_label: model.appLabel,
      model: model.model,
      perms,
      endpoints: endpoints(model),
      shortcuts: saved.filter((row) => row.app_label === model.appLabel && row.model === model.model).map((row) => shortcutOf(model, row)),
    });
  }
  // The site's link entries (dashboard, video-call console...), each for those holding its permission.
  for (const link of site.extensions.menuLinks ?? []) {
    if (!principal.has(link.permission)) continue;
    let group = menu.get(link.group);
    if (!group) menu.set(link.group, (group = { label: link.group, icon: link.icon ?? null, items: [] }));
    group.items.push({ type: 'url', label: link.label, icon: link.icon ?? null, url: link.url });
  }
  return {
    apps: [...apps].map(([appLabel, models]) => ({ app_label: appLabel, models })),
    menu: [...menu.values()].filter((group) => group.items.length),
  };
}

interface FormFieldSchema {
  name: string;
  type: string;
  label: string;
  required: boolean;
  disabled: boolean;
  help_text: string;
  max_length?: number | null;
  choices?: { value: string; label: string }[];
  related?: { app_label: string; model: string; object_name: string } | null;
  related_registered?: boolean;
  autocomplete?: string;
  upload_supported?: false;
  value?: unknown;
}


function formFieldSchema(site: AdminSite, model: BoundModel, field: ResolvedField, writable: boolean, initial: Row | null): FormFieldSchema {
  const schema: FormFieldSchema = {
    name: field.name,
    type: field.type,
    label: field.label,
    required: field.required,
    disabled: field.readonly || !writable || field.type === 'file' || field.type === 'image',
    help_text: field.declaration.help ?? '',
  };
  if (field.type === 'string' || field.type === 'text') schema.max_length = field.maxLength;
  if (field.choices) schema.choices = field.choices.map((choice) => ({ value: choice.value, label: choice.label }));
  if (field.type === 'fk' || field.type === 'm2m') {
    const target = field.related ? site.models.get(field.related) : undefined;
    schema.related = target ? { app_label: target.appLabel, model: target.model, object_name: target.objectName } : null;
    schema.related_registered = Boolean(target);
    if (target) schema.autocomplete = `${dataEndpoint(model)}autocomplete/?field=${encodeURIComponent(field.name)}`;
  }
  if (field.type === 'file' || field.type === 'image') schema.upload_supported = false;
  if (initial) schema.value = rawValue(model, field.name, initial[field.name]);
  return schema;
}

/**
 * An action as the client offers it: name, label, allowed, as in v1 (informational: code run on
 * the chosen records, all or nothing). A bulk change or a list-level action adds what the client
 * needs to run it: `kind` change (`fields` are form fields, filled once for all chosen records,
 * each record then written through the write chain on its own; `fixed` the values it writes
 * besides) or pick (no selection: next case), `selection` whether it needs chosen records,
 * `help_text`, and `endpoint`, where to POST {pks, fields}.
 */
function actionSchema(site: AdminSite, principal: Principal, model: BoundModel, action: ActionDeclaration) {
  const allowed = canRunAction(site, principal, model, action);
  if (!action.change && !action.pick) return { name: action.name, label: action.label, allowed };
  const required = new Set(action.change?.required ?? []);
  const fields = (action.change?.fields ?? []).flatMap((name) => {
    const field = model.formFields.find((candidate) => candidate.name === name);
    return field ? [{ ...formFieldSchema(site, model, field, allowed, null), required: required.has(name) }] : [];
  });
  return {
    name: action.name,
    label: action.label,
    allowed,
    kind: action.pick ? 'pick' : 'change',
    selection: !action.pick,
    help_text: action.help ?? '',
    fields,
    ...(action.change?.fixed ? { fixed: Object.fromEntries(Object.entries(action.change.fixed).map(([name, value]) => [name, rawValue(model, name, value)])) } : {}),
    endpoint: `${dataEndpoint(model)}actions/${action.name}/`,
  };
}

const OBJECT_ID_MAX = 500;

/**
 * GET schema/<app>/<model>/: every section of the spec's Model schema table. Without object_id the
 * form is the add form (a field is disabled when it is read-only or the user may neither add nor
 * change); with it, the change form of that record with its current values and permissions.
 */
export async function modelSchema(site: AdminSite, db: Knex, principal: Principal, model: BoundModel, objectId: string | undefined) {
  let perms = site.perms(principal, model);
  let initial: Row | null = null;
  let object: { pk: string; repr: string } | undefined;
  if (objectId !== undefined) {
    const row = objectId.length <= OBJECT_ID_MAX ? await getRow(db, model, principal, objectId) : undefined;
    if (!row) throw new HttpError(404, `No ${model.verboseName} with pk ${objectId.slice(0, 100)} is visible to you.`, 'not_found');
    perms = objectPerms(site, principal, model, row);
    if (!perms.view) throw new HttpError(404, `No ${model.verboseName} with pk ${objectId.slice(0, 100)} is visible to you.`, 'not_found');
    initial = { ...row, ...(await loadRelations(db, model, String(row[model.pk]))) };
    object = { pk: String(row[model.pk]), repr: model.repr(row) };
  }
  const writable = objectId === undefined ? perms.add || perms.change : perms.change;
  const fields = visibleFields(model);
  const form: Record<string, unknown> = {
    fields: fields.map((field) => formFieldSchema(site, model, field, writable, initial)),
    fieldsets: (model.fieldsets ?? [{ title: null, fields: fields.map((field) => field.name) }]).map((fieldset) => ({
      title: fieldset.title,
      fields: fieldset.fields.filter((name) => !isHidden(model, name)),
      classes: fieldset.classes ?? [],
      description: fieldset.description ?? '',
    })),
    readonly_fields: (model.readonly ?? []).filter((name) => !isHidden(model, name)),
  };
  if (objectId === undefined && !perms.add) {
    form.error = model.disabled?.add
      ? `${capitalize(model.verboseNamePlural)} are view-only here: they cannot be added.`
      : `You do not have permission to add ${model.verboseNamePlural}.`;
  }
  return {
    ...modelReference(model),
    is_proxy: Boolean(model.proxyOf),
    endpoints: endpoints(model),
    perms,
    ...(object ? { object } : {}),
    list: {
      columns: model.columns.map((column, index) => ({
        name: column.name,
        label: columnLabel(model, column),
        index: index + 1,
        sortable: columnSortable(model, column),
        kind: columnKind(model, column),
      })),
      title_column: model.titleColumn ?? null,
      status_column: model.statusColumn ?? null,
      date_column: model.dateColumn ?? null,
      filters: filterSpecs(model, {}).map(({ field: _field, ...spec }) => spec),
      search_enabled: Boolean(model.searchFields?.length),
      page_size: model.pageSize,
      max_page_size: MAX_PAGE_SIZE,
    },
    form,
    // The modules' detail blocks (timeline, evidence, decision form...): what the detail carries besides its fields.
    blocks: describedBlocks(site, model),
    inlines: (model.inlines ?? []).flatMap((inline) => {
      const target = site.models.get(inline.model)!;
      if (!site.can(principal, target, 'view')) return [];
      return [{ model: modelReference(target), label: inline.label ?? target.verboseNamePlural, fk: inline.fk, perms: site.perms(principal, target), endpoints: endpoints(target) }];
    }),
    actions: (model.actions ?? []).map((action) => actionSchema(site, principal, model, action)),
  };
}

export function registerSchemaRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string, docs: OpenAPIRegistry): void {
  const principalOf = (ctx: Context) => (ctx.state as MobileState).mobile.principal;

  router.get(path('schema/'), authenticated, async (ctx) => {
    acceptOnly(ctx, []);
    respond(ctx, 'Schema.', await schemaIndex(app.backoffice.site, app.db, principalOf(ctx)));
  });

  router.get(path('schema/:app/:model/'), authenticated, async (ctx) => {
    acceptOnly(ctx, ['object_id']);
    const site = app.backoffice.site;
    const principal = principalOf(ctx);
    const model = site.get(ctx.params.app!, ctx.params.model!);
    // As the data endpoints answer: 404 for a model that is not registered, 403 for one the user may not view.
    if (!model) throw modelNotFound(ctx.params.app!, ctx.params.model!);
    if (!site.can(principal, model, 'view')) throw new ForbiddenError(`You do not have permission to view ${model.verboseNamePlural}.`, 'permission_denied');
    respond(ctx, `Schema of ${model.verboseNamePlural}.`, await modelSchema(site, app.db, principal, model, singleParameter(ctx, 'object_id')));
  });

  documentRoutes(docs, path, [
    ['get', 'schema/', 'Models the user may view, by app, and the menu with saved-filter shortcuts', null, { 200: envelopeResponse('The index', SCHEMA_INDEX) }, { 400: 'Unknown parameter' }],
    ['get', 'schema/{app}/{model}/', 'Model schema: perms, list columns and filters, form fields and fieldsets, inlines, actions; object_id evaluates the change form', null, { 200: envelopeResponse('The model schema', MODEL_SCHEMA) }, {
      400: 'Unknown parameter',
      403: 'The user may not view the model (permission_denied)',
      404: 'Model not registered; object_id not found',
    }],
  ]);
}
