import type { Context } from 'koa';
import type { ComponentChildren, FunctionComponent } from 'preact';
import type { AppContext } from '../../../context.ts';
import type { Principal } from '../../staff/principal.ts';
import { label } from '../declare.ts';
import { writableFields } from '../forms.ts';
import { canObject, reprFor } from '../access.ts';
import { getRow, inlineBlocks, joinedValues, nameLabel, scopedQuery, validPk, type InlineBlock } from '../query.ts';
import type { BoundModel, FieldErrors, ResolvedField, Row } from '../registry.ts';
import { deleteObject, loadRelations, saveObject } from '../write.ts';
import { ObjectNotFound, PendingApprovalConflict, PermissionDenied, ValidationFailed } from '../errors.ts';
import {
  adminState,
  capitalize,
  fieldText,
  forbidden,
  homeCrumbs,
  modelFromParams,
  modelUrl,
  notFound,
  objectUrl,
  renderPage,
} from './common.tsx';
import { dateInputValue, dateTimeInputValue, wallTimeToIso, type DatePreferences } from './format.ts';
import { CsrfField } from './layout.tsx';
import { detailBlocks, type DetailSectionPosition, type DetailSectionProps } from '../site.ts';
import { addMessage } from './session.ts';

/**
 * The add, change and view pages of a record, its delete confirmation and its history, generated
 * from the registration: fieldsets, a widget per field type, read-only fields as text, errors
 * next to their fields, related blocks. Every write goes through saveObject / deleteObject.
 */

/** What a form holds: one text per field, a list for multi-selects. */
export type FormValues = Record<string, string | string[]>;

/** Targets with at most this many rows are offered as a select; larger ones take a typed id. */
const SMALL_TARGET = 100;
const HISTORY_LIMIT = 200;
const PASSWORD_LIKE = /password|secret/;

interface RelatedOptions {
  /** Every choice when the target is small; null when it is too large to list. */
  options: { value: string; text: string }[] | null;
  /** The reprs of the current values, by pk. */
  current: Map<string, string>;
  /** For a target too large to list that the user may view: its autocomplete URL (the search box) and its changelist (to look an ID up). */
  search: { url: string; listUrl: string } | null;
}

/** A stored value as a form input holds it. */
function inputValue(field: ResolvedField, value: unknown, preferences: DatePreferences): string | string[] {
  if (value === null || value === undefined) return field.type === 'm2m' ? [] : '';
  if (field.type === 'm2m') return Array.isArray(value) ? value.map(String) : [];
  if (field.type === 'boolean' || field.type === 'nullboolean') return value === true ? 'true' : value === false ? 'false' : '';
  if (field.type === 'date') return value instanceof Date || typeof value === 'string' ? dateInputValue(value) : '';
  if (field.type === 'datetime' && value instanceof Date) return dateTimeInputValue(value, preferences.timezone);
  if (field.type === 'json') return JSON.stringify(value, null, 2);
  return String(value);
}

function initialValues(model: BoundModel, row: Row | null, preferences: DatePreferences): FormValues {
  const values: FormValues = {};
  for (const field of model.formFields) values[field.name] = inputValue(field, row?.[field.name], preferences);
  return values;
}

/** The form as submitted, in the shape the form cleaning reads. */
function submittedInput(model: BoundModel, form: URLSearchParams, timeZone: string): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const field of writableFields(model)) {
    // The add-by-ID box of a large m2m target is sent empty when unused.
    if (field.type === 'm2m') input[field.name] = form.getAll(field.name).filter((value) => value !== '');
    else if (field.type === 'boolean') input[field.name] = form.get(field.name) === 'on' || form.get(field.name) === 'true';
    else if (field.type === 'nullboolean') input[field.name] = form.get(field.name) === 'true' ? true : form.get(field.name) === 'false' ? false : null;
    else if (field.type === 'datetime') input[field.name] = wallTimeToIso(form.get(field.name) ?? '', timeZone);
    else input[field.name] = form.get(field.name) ?? '';
  }
  return input;
}

/** The submitted texts, so a refused form comes back as the user typed it. */
function submittedValues(model: BoundModel, form: URLSearchParams): FormValues {
  const values: FormValues = {};
  for (const field of writableFields(model)) {
    if (field.type === 'm2m') values[field.name] = form.getAll(field.name).filter((value) => value !== '');
    else if (field.type === 'boolean') values[field.name] = form.get(field.name) === 'on' || form.get(field.name) === 'true' ? 'true' : 'false';
    else values[field.name] = field.virtual && PASSWORD_LIKE.test(field.name) ? '' : (form.get(field.name) ?? '');
  }
  return values;
}

/** Options and current reprs of the fk and m2m fields: one query per relation field, never per row. */
async function relatedOptions(app: AppContext, model: BoundModel, ctx: Context, values: FormValues, editable: boolean): Promise<Map<string, RelatedOptions>> {
  const state = adminState(ctx);
  const result = new Map<string, RelatedOptions>();
  for (const field of model.formFields) {
    if ((field.type !== 'fk' && field.type !== 'm2m') || !field.related || field.choices) continue;
    const target = app.backoffice.site.models.get(field.related)!;
    const columns = [...new Set([target.pk, ...target.reprColumns])].map((name) => `t.${name}`);
    const wanted = [values[field.name] ?? []].flat().filter((value) => value !== '' && validPk(target, value));
    let options: { value: string; text: string }[] | null = null;
    let search: RelatedOptions['search'] = null;
    if (editable && !field.readonly) {
      const ordering = target.ordering?.[0] ?? target.pk;
      const rows = (await scopedQuery(app.db, target, state.principal)
        .select(columns)
        .orderBy(`t.${ordering.replace(/^-/, '')}`, ordering.startsWith('-') ? 'desc' : 'asc')
        .limit(SMALL_TARGET + 1)) as Row[];
      if (rows.length <= SMALL_TARGET) options = rows.map((row) => ({ value: String(row[target.pk]), text: reprFor(app.backoffice.site, state.principal, target, row) }));
      else if (app.backoffice.site.can(state.principal, target, 'view')) {
        search = { url: modelUrl(model, `autocomplete/?field=${encodeURIComponent(field.name)}`), listUrl: modelUrl(target) };
      }
    }
    const current = new Map<string, string>();
    if (wanted.length) {
      const rows = (await app.db(`${target.table} as t`).select(columns).whereIn(`t.${target.pk}`, wanted)) as Row[];
      for (const row of rows) current.set(String(row[target.pk]), reprFor(app.backoffice.site, state.principal, target, row));
    }
    result.set(field.name, { options, current, search });
  }
  return result;
}

/** The record a generic relation field of this row names (Django's content type plus object id), as a link. */
interface GenericLink {
  href: string;
  text: string;
}

/**
 * The links of the generic relation fields (relatedModelOf) of a row: to a record of a registered
 * model the viewer may view, that exists within their scope, named by its repr. Anything else stays
 * the stored value (an audit row outlives its record). One query per field, never per value.
 */
async function genericLinks(app: AppContext, model: BoundModel, principal: Principal, row: Row): Promise<Map<string, GenericLink>> {
  const site = app.backoffice.site;
  const links = new Map<string, GenericLink>();
  await Promise.all(
    model.formFields.map(async (field) => {
      const relatedModelOf = field.declaration.relatedModelOf;
      const value = row[field.name];
      if (!relatedModelOf || field.declaration.hidden || value === null || value === undefined) return;
      const key = relatedModelOf(row);
      const target = key ? site.models.get(key) : undefined;
      if (!target || !site.can(principal, target, 'view') || !validPk(target, String(value))) return;
      const columns = [...new Set([target.pk, ...target.reprColumns])].map((name) => `t.${name}`);
      const found = (await scopedQuery(app.db, target, principal).select(columns).where(`t.${target.pk}`, String(value)).first()) as Row | undefined;
      if (found) links.set(field.name, { href: objectUrl(target, value), text: target.repr(found) });
    }),
  );
  return links;
}

/** A field's errors, announced: the alert role on a wrapper, since a list with another role loses its items' semantics (axe: listitem). */
export function ErrorList({ errors }: { errors?: { message: string }[] }) {
  if (!errors?.length) return null;
  return (
    <div role="alert">
      <ul class="errorlist">
        {errors.map((error, index) => (
          <li key={index}>{error.message}</li>
        ))}
      </ul>
    </div>
  );
}

interface WidgetProps {
  field: ResolvedField;
  value: string | string[];
  related?: RelatedOptions;
  invalid: boolean;
}

function Widget({ field, value, related, invalid }: WidgetProps) {
  const id = `id_${field.name}`;
  const text = Array.isArray(value) ? value.join(',') : value;
  const common = { id, name: field.name, 'aria-invalid': invalid || undefined, 'aria-describedby': field.declaration.help ? `${id}_help` : undefined };
  switch (field.type) {
    case 'text':
      return <textarea {...common} rows={5} maxLength={field.maxLength ?? undefined} required={field.required}>{text}</textarea>;
    case 'json':
      return <textarea {...common} rows={6} class="monospace" required={field.required}>{text}</textarea>;
    case 'integer':
      return <input type="number" step="1" {...common} value={text} required={field.required} />;
    case 'float':
    case 'decimal':
      return <input type="number" step="any" {...common} value={text} required={field.required} />;
    case 'boolean':
      return <input type="checkbox" {...common} checked={text === 'true'} />;
    case 'nullboolean':
      return (
        <select {...common}>
          <option value="" selected={text === ''}>Unknown</option>
          <option value="true" selected={text === 'true'}>Yes</option>
          <option value="false" selected={text === 'false'}>No</option>
        </select>
      );
    case 'date':
      return <input type="date" {...common} value={text} required={field.required} />;
    case 'datetime':
      return <input type="datetime-local" step="1" {...common} value={text} required={field.required} />;
    case 'time':
      return <input type="time" step="1" {...common} value={text} required={field.required} />;
    case 'choice':
      return (
        <select {...common} required={field.required}>
          {!field.required || text === '' ? <option value="">---------</option> : null}
          {(field.choices ?? []).map((choice) => (
            <option value={choice.value} selected={choice.value === text} key={choice.value}>
              {choice.label}
            </option>
          ))}
        </select>
      );
    case 'm2m': {
      const selected = new Set([value].flat());
      const options = field.choices ? field.choices.map((choice) => ({ value: choice.value, text: choice.label })) : mergeCurrent(related);
      const select = (
        <select {...common} multiple size={Math.min(10, Math.max(4, options.length))}>
          {options.map((option) => (
            <option value={option.value} selected={selected.has(option.value)} key={option.value}>
              {option.text}
            </option>
          ))}
        </select>
      );
      if (field.choices || related?.options) return select;
      // Too many to list: the current ones stay selectable, and one more is added by its ID.
      return (
        <>
          {select}
          <RelationInput id={`${id}_add`} name={field.name} value="" label={`Add to ${field.label.toLowerCase()} by ID`} related={related} />
        </>
      );
    }
    case 'fk':
      if (related?.options) {
        const options = mergeCurrent(related);
        return (
          <select {...common} required={field.required}>
            <option value="">---------</option>
            {options.map((option) => (
              <option value={option.value} selected={option.value === text} key={option.value}>
                {option.text}
              </option>
            ))}
          </select>
        );
      }
      return <RelationInput {...common} value={text} required={field.required} related={related} />;
    default:
      if (field.virtual && PASSWORD_LIKE.test(field.name)) {
        return <input type="password" {...common} value="" maxLength={field.maxLength ?? undefined} required={field.required} autocomplete="new-password" />;
      }
      return <input type="text" {...common} value={text} maxLength={field.maxLength ?? undefined} required={field.required} />;
  }
}

interface RelationInputProps {
  id: string;
  name: string;
  value: string;
  related?: RelatedOptions;
  required?: boolean;
  label?: string;
  'aria-invalid'?: boolean;
  'aria-describedby'?: string;
}

/**
 * The ID of a record of a target too large to list, with its name beside it, a link to look one up
 * on the target's changelist, and (with JavaScript, static/admin.js) a search box's suggestions.
 */
function RelationInput({ related, value, label, ...input }: RelationInputProps) {
  const search = related?.search;
  const listId = `${input.id}_options`;
  return (
    <span class="fk-input">
      <input type="text" {...input} value={value} aria-label={label} placeholder={label} autocomplete="off" list={search ? listId : undefined} data-autocomplete={search?.url} />
      {search && <datalist id={listId} />}
      <span class="fk-repr">{value ? (related?.current.get(value) ?? 'not found') : ''}</span>
      {search && (
        <a class="fk-lookup" href={search.listUrl} target="_blank" rel="noopener">
          Look up
        </a>
      )}
    </span>
  );
}

/** The small target's options, plus current values that the scope or the limit left out. */
function mergeCurrent(related?: RelatedOptions): { value: string; text: string }[] {
  const options = [...(related?.options ?? [])];
  for (const [value, text] of related?.current ?? []) if (!options.some((option) => option.value === value)) options.push({ value, text });
  return options;
}

interface FormPageProps {
  app: AppContext;
  model: BoundModel;
  row: Row | null;
  values: FormValues;
  errors: FieldErrors;
  editable: boolean;
  related: Map<string, RelatedOptions>;
  blocks: InlineBlock[];
  canDelete: boolean;
  canHistory: boolean;
  csrfToken: string;
  preferences: DatePreferences;
  /** Links of the generic relation fields, by field name. */
  links: Map<string, GenericLink>;
  /** Sections above the form (the work done on the record: its decision form, matched rules). */
  top?: ComponentChildren;
  extras?: ComponentChildren;
}

function ReadonlyValue({ app, model, name, row, related, link, preferences }: { app: AppContext; model: BoundModel; name: string; row: Row | null; related?: RelatedOptions; link?: GenericLink; preferences: DatePreferences }) {
  const field = model.formFields.find((candidate) => candidate.name === name);
  if (link) {
    return (
      <span class="readonly">
        <a href={link.href}>{link.text}</a>
      </span>
    );
  }
  if (field?.related && related) {
    const target = app.backoffice.site.models.get(field.related)!;
    const values = [row?.[name] ?? []].flat().map(String);
    if (!values.length) return <span class="readonly">—</span>;
    return (
      <span class="readonly">
        {values.map((value, index) => (
          <span key={value}>
            {index > 0 && ', '}
            <a href={objectUrl(target, value)}>{related.current.get(value) ?? value}</a>
          </span>
        ))}
      </span>
    );
  }
  if (field?.type === 'json' && row?.[name] !== null && row?.[name] !== undefined && typeof row[name] === 'object' && !Array.isArray(row[name])) {
    return <pre class="readonly json">{JSON.stringify(row[name], null, 2)}</pre>;
  }
  return <span class="readonly">{row ? fieldText(model, name, row, preferences) : '—'}</span>;
}

function FieldRow(props: FormPageProps & { name: string }) {
  const { app, model, name, row, values, errors, editable, related, links, preferences } = props;
  const field = model.formFields.find((candidate) => candidate.name === name);
  if (field?.declaration.hidden) return null;
  const writable = editable && field !== undefined && !field.readonly && field.type !== 'file' && field.type !== 'image';
  // A virtual field (a new password) has nothing to show when it cannot be written.
  if (!writable && field?.virtual && field.type !== 'm2m') return null;
  // A virtual password belongs to the add form; a stored user changes it on the password form.
  if (writable && row && field.virtual && PASSWORD_LIKE.test(field.name)) return null;
  const id = `id_${name}`;
  const help = field?.declaration.help ?? model.fields?.[name]?.help;
  const fieldErrors = errors[name];
  return (
    <div class={`form-row field-${name}${fieldErrors ? ' has-errors' : ''}${field?.type === 'boolean' && writable ? ' checkbox-row' : ''}`}>
      {writable ? (
        <label for={id} class={field.required ? 'required' : undefined}>
          {field.label}
        </label>
      ) : (
        <span class="label">{nameLabel(model, name)}</span>
      )}
      <div class="field-body">
        {writable ? (
          <Widget field={field} value={values[name] ?? ''} related={related.get(name)} invalid={Boolean(fieldErrors)} />
        ) : (
          <ReadonlyValue app={app} model={model} name={name} row={row && field?.type === 'm2m' ? { ...row, [name]: values[name] } : row} related={related.get(name)} link={links.get(name)} preferences={preferences} />
        )}
        <ErrorList errors={fieldErrors} />
        {help && writable && (
          <p class="help" id={`${id}_help`}>
            {help}
          </p>
        )}
      </div>
    </div>
  );
}

function InlineTable({ block, preferences }: { block: InlineBlock; preferences: DatePreferences }) {
  const target = block.model;
  return (
    <section class="inline-group">
      <h2>
        {capitalize(block.label)} <span class="count">({block.total})</span>
      </h2>
      {block.rows.length === 0 ? (
        <p class="help">None.</p>
      ) : (
        <div class="table-scroll">
          <table>
            <thead>
              <tr>
                {block.fields.map((name) => (
                  <th scope="col" key={name}>
                    {nameLabel(target, name)}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {block.rows.map((row) => (
                <tr key={String(row[target.pk])}>
                  {block.fields.map((name, index) => (
                    <td key={name}>{index === 0 ? <a href={objectUrl(target, row[target.pk])}>{fieldText(target, name, row, preferences)}</a> : fieldText(target, name, row, preferences)}</td>
                  ))}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {block.total > block.rows.length && (
        <p class="help">
          Showing the first {block.rows.length} of {block.total}. <a href={modelUrl(target)}>All {target.verboseNamePlural}</a>
        </p>
      )}
    </section>
  );
}

function FormPage(props: FormPageProps) {
  const { model, row, errors, editable, blocks, canDelete, canHistory, csrfToken, top, extras, preferences } = props;
  const fieldsets = model.fieldsets?.length ? model.fieldsets : [{ title: null, fields: model.formFields.map((field) => field.name), classes: [] as string[] }];
  const placed = new Set(fieldsets.flatMap((fieldset) => fieldset.fields));
  const shown = model.formFields.map((field) => field.name);
  const general = Object.entries(errors)
    .filter(([name]) => name === '__all__' || !placed.has(name) || !shown.includes(name))
    .flatMap(([, problems]) => problems);
  const pk = row ? String(row[model.pk]) : null;
  const body = fieldsets.map((fieldset, index) => (
    <fieldset class={`module ${(fieldset.classes ?? []).join(' ')}`} key={index}>
      {fieldset.title && <legend>{fieldset.title}</legend>}
      {'description' in fieldset && fieldset.description && <p class="help">{fieldset.description}</p>}
      {fieldset.fields.map((name) => (
        <FieldRow {...props} name={name} key={name} />
      ))}
    </fieldset>
  ));
  return (
    <>
      <div class="page-head">
        <h1>{row ? `${editable ? 'Change' : 'View'} ${model.verboseName}` : `Add ${model.verboseName}`}</h1>
        {pk && (
          <div class="object-tools">
            {canHistory && (
              <a class="button button-secondary" href={objectUrl(model, pk, 'history')}>
                History
              </a>
            )}
            {canDelete && (
              <a class="button button-danger" href={objectUrl(model, pk, 'delete')}>
                Delete
              </a>
            )}
          </div>
        )}
      </div>
      {row && <p class="object-repr">{model.repr(row)}</p>}
      {top}
      {Object.keys(errors).length > 0 && (
        <div class="errornote" role="alert">
          <p>{Object.keys(errors).length === 1 ? 'Please correct the error below.' : 'Please correct the errors below.'}</p>
          {general.length > 0 && <ErrorList errors={general} />}
        </div>
      )}
      {editable ? (
        <form method="post" action={pk ? objectUrl(model, pk) : modelUrl(model, 'add/')} class="change-form" novalidate>
          <CsrfField token={csrfToken} />
          {body}
          <div class="submit-row">
            <button type="submit" name="_save" value="1">
              Save
            </button>
            <button type="submit" name="_continue" value="1" class="button-secondary">
              Save and continue editing
            </button>
            {!pk && (
              <button type="submit" name="_addanother" value="1" class="button-secondary">
                Save and add another
              </button>
            )}
          </div>
        </form>
      ) : (
        <div class="change-form readonly-form">{body}</div>
      )}
      {blocks.map((block) => (
        <InlineTable block={block} preferences={preferences} key={block.model.key} />
      ))}
      {extras}
    </>
  );
}

export interface ObjectPageOptions {
  submitted?: FormValues;
  errors?: FieldErrors;
  status?: number;
  /** Sections below the form (the user's own page: password change, phone pairing). */
  extras?: ComponentChildren;
  /** The user's own page opens without auth.user permissions (read-only unless they have change). */
  ownPage?: boolean;
}

/** The add page (pk null) or the change page of a record; view-only when the user may not change it. */
export async function renderObjectPage(ctx: Context, app: AppContext, model: BoundModel, pk: string | null, options: ObjectPageOptions = {}): Promise<void> {
  const state = adminState(ctx);
  const site = app.backoffice.site;
  const principal = state.principal;
  let row: Row | null = null;
  let editable: boolean;
  if (pk === null) {
    if (!site.can(principal, model, 'add')) forbidden(`You do not have permission to add ${model.verboseNamePlural}.`);
    editable = true;
  } else {
    if (!options.ownPage && !site.can(principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
    row = (await getRow(app.db, model, principal, pk)) ?? null;
    if (!row) notFound(model, pk);
    if (!options.ownPage && !canObject(site, principal, model, 'view', row)) forbidden();
    const [relations, joined] = await Promise.all([loadRelations(app.db, model, pk), joinedValues(site, app.db, model, row, principal)]);
    row = { ...row, ...relations, ...joined };
    editable = canObject(site, principal, model, 'change', row);
  }
  const values = { ...initialValues(model, row, principal.user), ...options.submitted };
  const canView = site.can(principal, model, 'view');
  // The page's independent reads, sent at once: the modules' sections, the relation choices, the inlines, the generic links.
  const [sections, related, blocks, links] = await Promise.all([
    row ? detailSections(app, model, pk!, row, principal, state.session.csrfToken) : { top: null, bottom: null },
    relatedOptions(app, model, ctx, values, editable),
    row ? inlineBlocks(site, app.db, model, principal, row) : [],
    row ? genericLinks(app, model, principal, row) : new Map(),
  ]);
  const title = row ? model.repr(row) : `Add ${model.verboseName}`;
  await renderPage(
    ctx,
    app,
    options.status ?? 200,
    title,
    canView ? homeCrumbs(model, { label: title }) : homeCrumbs(undefined, { label: title }),
    <FormPage
      app={app}
      model={model}
      row={row}
      values={values}
      errors={options.errors ?? {}}
      editable={editable}
      related={related}
      blocks={blocks}
      canDelete={Boolean(row) && canObject(site, principal, model, 'delete', row!)}
      canHistory={Boolean(row) && canView}
      csrfToken={state.session.csrfToken}
      preferences={principal.user}
      links={links}
      top={sections.top}
      extras={
        <>
          {options.extras}
          {sections.bottom}
        </>
      }
    />,
  );
}

/**
 * The sections the modules add to a record's page (site extensions), drawn from its detail blocks
 * (read once): those placed at the top go above the form, the others below it.
 */
async function detailSections(app: AppContext, model: BoundModel, pk: string, row: Row, principal: Principal, csrfToken: string) {
  const site = app.backoffice.site;
  const props: DetailSectionProps = { model, pk, blocks: await detailBlocks(app.db, site, model, row, principal), csrfToken, preferences: principal.user };
  const render = (position: DetailSectionPosition) =>
    site.extensions.detailSections
      .filter((entry) => entry.position === position)
      .map((entry, index) => {
        const Section = entry.component as FunctionComponent<DetailSectionProps>;
        return <Section key={`${position}-${index}`} {...props} />;
      });
  return { top: render('top'), bottom: render('bottom') };
}

/** POST of an add or change form: through the write chain; a refused form comes back with its errors. */
export async function submitObjectForm(ctx: Context, app: AppContext, model: BoundModel, pk: string | null, options: Omit<ObjectPageOptions, 'submitted' | 'errors' | 'status'> = {}): Promise<void> {
  const state = adminState(ctx);
  const form = state.form!;
  if (pk !== null && !validPk(model, pk)) notFound(model, pk);
  try {
    const outcome = await saveObject(app.backoffice, model, state.principal, pk, submittedInput(model, form, state.principal.user.timezone), { origin: { channel: 'web' } });
    for (const message of outcome.messages) await addMessage(app.db, state.session, { level: message.level, text: message.message });
    if (outcome.status === 'pending') return ctx.redirect(pk ? objectUrl(model, pk) : modelUrl(model));
    if (form.has('_continue')) return ctx.redirect(objectUrl(model, outcome.pk!));
    if (form.has('_addanother')) return ctx.redirect(modelUrl(model, 'add/'));
    return ctx.redirect(site(app).can(state.principal, model, 'view') ? modelUrl(model) : objectUrl(model, outcome.pk!));
  } catch (caught) {
    if (caught instanceof PermissionDenied) forbidden(caught.message);
    if (caught instanceof ObjectNotFound) notFound(model, pk ?? '');
    if (caught instanceof ValidationFailed || caught instanceof PendingApprovalConflict) {
      const errors = caught instanceof ValidationFailed ? caught.errors : { __all__: [{ message: caught.message, code: 'pending_approval' }] };
      return renderObjectPage(ctx, app, model, pk, { ...options, submitted: submittedValues(model, form), errors, status: caught instanceof ValidationFailed ? 400 : 409 });
    }
    throw caught;
  }
}

function site(app: AppContext) {
  return app.backoffice.site;
}

export async function showAddForm(ctx: Context, app: AppContext): Promise<void> {
  await renderObjectPage(ctx, app, modelFromParams(app, ctx.params), null);
}

export async function postAddForm(ctx: Context, app: AppContext): Promise<void> {
  await submitObjectForm(ctx, app, modelFromParams(app, ctx.params), null);
}

/** The record, with the model's view and object permissions checked: 404 when missing, 403 when not allowed. */
async function viewableRow(ctx: Context, app: AppContext, model: BoundModel, pk: string): Promise<Row> {
  const principal = adminState(ctx).principal;
  if (!site(app).can(principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
  const row = await getRow(app.db, model, principal, pk);
  if (!row) notFound(model, pk);
  if (!canObject(site(app), principal, model, 'view', row)) forbidden();
  return row;
}

function DeletePage({ model, row, csrfToken, error }: { model: BoundModel; row: Row; csrfToken: string; error?: string }) {
  const pk = String(row[model.pk]);
  return (
    <>
      <h1>Are you sure?</h1>
      {error && (
        <p class="errornote" role="alert">
          {error}
        </p>
      )}
      <p>
        Are you sure you want to delete the {model.verboseName} “{model.repr(row)}”? This cannot be undone.
      </p>
      <form method="post" action={objectUrl(model, pk, 'delete')}>
        <CsrfField token={csrfToken} />
        <input type="hidden" name="post" value="yes" />
        <div class="submit-row">
          <button type="submit" class="button-danger">
            Yes, I’m sure
          </button>
          <a class="button button-secondary" href={objectUrl(model, pk)}>
            No, take me back
          </a>
        </div>
      </form>
    </>
  );
}

async function deletableRow(ctx: Context, app: AppContext, model: BoundModel, pk: string): Promise<Row> {
  const row = await viewableRow(ctx, app, model, pk);
  const principal = adminState(ctx).principal;
  if (!canObject(site(app), principal, model, 'delete', row)) {
    forbidden(`You do not have permission to delete this ${model.verboseName}.`);
  }
  return row;
}

export async function showDeletePage(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const pk = ctx.params.pk!;
  const row = await deletableRow(ctx, app, model, pk);
  await renderPage(ctx, app, 200, 'Are you sure?', homeCrumbs(model, { label: model.repr(row), href: objectUrl(model, pk) }, { label: 'Delete' }), <DeletePage model={model} row={row} csrfToken={adminState(ctx).session.csrfToken} />);
}

export async function postDeletePage(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const pk = ctx.params.pk!;
  const state = adminState(ctx);
  const row = await deletableRow(ctx, app, model, pk);
  try {
    const outcome = await deleteObject(app.backoffice, model, state.principal, pk, { channel: 'web' });
    for (const message of outcome.messages) await addMessage(app.db, state.session, { level: message.level, text: message.message });
    ctx.redirect(outcome.status === 'pending' ? objectUrl(model, pk) : modelUrl(model));
  } catch (caught) {
    if (caught instanceof PermissionDenied) forbidden(caught.message);
    if (caught instanceof ObjectNotFound) notFound(model, pk);
    if (!(caught instanceof ValidationFailed || caught instanceof PendingApprovalConflict)) throw caught;
    const error = caught instanceof ValidationFailed ? Object.values(caught.errors).flat().map((problem) => problem.message).join(' ') : caught.message;
    await renderPage(ctx, app, caught instanceof ValidationFailed ? 400 : 409, 'Are you sure?', homeCrumbs(model, { label: model.repr(row), href: objectUrl(model, pk) }, { label: 'Delete' }), <DeletePage model={model} row={row} csrfToken={state.session.csrfToken} error={error} />);
  }
}

interface LogEntry {
  action_time: Date;
  actor: string;
  action_flag: number;
  change: unknown;
}

const ACTIONS: Record<number, string> = { 1: 'Added', 2: 'Changed', 3: 'Deleted' };

/** A log entry's change as lines: `field: old → new` for diffs, the stored value otherwise. */
function changeLines(model: BoundModel, change: unknown): string[] {
  if (!change || typeof change !== 'object' || Array.isArray(change)) return change === null || change === undefined ? [] : [JSON.stringify(change)];
  return Object.entries(change as Record<string, unknown>).map(([name, value]) => {
    const field = name === 'action' ? 'Action' : nameLabel(model, name);
    // Labels, not codes: a status reads "In review", not in_review.
    const choices = model.formFields.find((candidate) => candidate.name === name)?.choices;
    const shown = (stored: unknown) => choices?.find((choice) => choice.value === String(stored))?.label ?? short(stored);
    if (Array.isArray(value) && value.length === 2) return `${field}: ${shown(value[0])} → ${shown(value[1])}`;
    return `${field}: ${shown(value)}`;
  });
}

function short(value: unknown): string {
  const text = value === null || value === undefined ? '—' : typeof value === 'string' ? value : JSON.stringify(value);
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

export async function showHistory(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const pk = ctx.params.pk!;
  const row = await viewableRow(ctx, app, model, pk);
  const preferences = adminState(ctx).principal.user;
  const entries = (await app.db('admin_log_entries')
    .where({ content_type: model.key, object_id: String(row[model.pk]) })
    .orderBy([{ column: 'action_time', order: 'desc' }, { column: 'id', order: 'desc' }])
    .limit(HISTORY_LIMIT)
    .select('action_time', 'actor', 'action_flag', 'change')) as LogEntry[];
  const logModel = site(app).models.get('admin.logentry')!;
  await renderPage(
    ctx,
    app,
    200,
    `Change history: ${model.repr(row)}`,
    homeCrumbs(model, { label: model.repr(row), href: objectUrl(model, pk) }, { label: 'History' }),
    <>
      <h1>Change history: {model.repr(row)}</h1>
      {entries.length === 0 ? (
        <p>This object doesn’t have a change history. It probably wasn’t added via this admin site.</p>
      ) : (
        <div class="table-scroll">
          <table class="history">
            <thead>
              <tr>
                <th scope="col">Date/time</th>
                <th scope="col">User</th>
                <th scope="col">Action</th>
                <th scope="col">Changes</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((entry, index) => (
                <tr key={index}>
                  <td class="nowrap">{fieldText(logModel, 'action_time', entry as unknown as Row, preferences)}</td>
                  <td>{entry.actor}</td>
                  <td>{ACTIONS[entry.action_flag] ?? label(String(entry.action_flag))}</td>
                  <td>
                    <ul class="change-lines">
                      {changeLines(model, entry.change).map((line, lineIndex) => (
                        <li key={lineIndex}>{line}</li>
                      ))}
                    </ul>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {entries.length === HISTORY_LIMIT && <p class="help">Showing the latest {HISTORY_LIMIT} entries.</p>}
    </>,
  );
}
