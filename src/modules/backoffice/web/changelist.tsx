import type { Context } from 'koa';
import type { AppContext } from '../../../context.ts';
import { columnKind, columnLabel, columnSortable, filterSpecs, listRows, QueryError, scopedQuery, validPk, type FilterSpec, type ListResult } from '../query.ts';
import type { ActionDeclaration, BoundModel, FieldErrors, ResolvedField, Row } from '../registry.ts';
import { reprFor, runnableActions } from '../access.ts';
import { PermissionDenied, ValidationFailed } from '../errors.ts';
import { runAction } from '../write.ts';
import {
  adminState,
  capitalize,
  Cell,
  count,
  forbidden,
  homeCrumbs,
  modelFromParams,
  modelUrl,
  objectUrl,
  renderPage,
} from './common.tsx';
import type { DatePreferences } from './format.ts';
import { CsrfField } from './layout.tsx';
import { ErrorList } from './changeform.tsx';
import { savedFiltersOf, SavedFilterPanel, type SavedFilter } from './saved-filters.tsx';
import { addMessage } from './session.ts';

/**
 * The changelist: the registration's columns, sortable headers (`o`, 1-based column indexes joined
 * by dots, minus for descending, as the mobile API), search (`q`), the filter sidebar, pages (`p`),
 * bulk actions with a confirmation step, and the user's saved filters. Every other query
 * parameter is a filter; one the model does not know is a 400 with the message on the page.
 *
 * Bulk actions: the action bar's select lists those that run on chosen rows; the second step (the
 * confirmation page, no script needed) asks for a bulk change's fields (a status and a rationale),
 * then the write chain writes each record and the message tells each one's outcome. Actions that
 * need no selection (next case) are buttons above the list.
 */

const RESERVED = new Set(['q', 'o', 'p']);
const PAGE_WINDOW = 3;

export interface ChangelistQuery {
  search: string;
  order: number[];
  page: number;
  filters: Record<string, string>;
}

/** Reads q, o, p and the filters from a query string; a malformed o or p is a QueryError. */
export function parseChangelistQuery(query: URLSearchParams): ChangelistQuery {
  const filters: Record<string, string> = {};
  for (const [name, value] of query) if (!RESERVED.has(name) && !(name in filters)) filters[name] = value;
  const rawOrder = query.get('o') ?? '';
  const order = rawOrder === '' ? [] : rawOrder.split('.').map((part) => (/^-?[1-9]\d{0,2}$/.test(part) ? Number(part) : NaN));
  if (order.some(Number.isNaN)) throw new QueryError(`The ordering “${rawOrder.slice(0, 50)}” is not a list of column numbers such as 2.-1.`, 'o');
  const rawPage = query.get('p') ?? '1';
  if (!/^[1-9]\d{0,6}$/.test(rawPage)) throw new QueryError(`The page “${rawPage.slice(0, 50)}” is not a page number.`, 'p');
  return { search: query.get('q') ?? '', order, page: Number(rawPage), filters };
}

/** The query string of a changelist state; empty values are left out. */
export function changelistQueryString(state: { search: string; order: number[]; page: number; filters: Record<string, string> }): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(state.filters)) if (value !== '') params.set(name, value);
  if (state.search) params.set('q', state.search);
  if (state.order.length) params.set('o', state.order.join('.'));
  if (state.page > 1) params.set('p', String(state.page));
  const text = params.toString();
  return text ? `?${text}` : '';
}

/** The o value after clicking column `index`: it becomes the first key (toggled if it already was). */
function orderAfterClick(order: number[], index: number): number[] {
  const current = order.find((entry) => Math.abs(entry) === index);
  const rest = order.filter((entry) => Math.abs(entry) !== index);
  if (current !== undefined && Math.abs(order[0]!) === index) return [-current, ...rest];
  return [index, ...rest].slice(0, 3);
}

function pageNumbers(page: number, pages: number): (number | null)[] {
  const wanted = new Set<number>([1, pages]);
  for (let offset = -PAGE_WINDOW; offset <= PAGE_WINDOW; offset++) if (page + offset >= 1 && page + offset <= pages) wanted.add(page + offset);
  const sorted = [...wanted].sort((a, b) => a - b);
  const result: (number | null)[] = [];
  sorted.forEach((number, index) => {
    if (index > 0 && number - sorted[index - 1]! > 1) result.push(null);
    result.push(number);
  });
  return result;
}

interface ChangelistProps {
  model: BoundModel;
  query: ChangelistQuery;
  result: ListResult | null;
  error: string | null;
  specs: FilterSpec[];
  actions: ActionDeclaration[];
  canAdd: boolean;
  savedFilters: SavedFilter[];
  csrfToken: string;
  preferences: DatePreferences;
}

function SearchBar({ model, query }: Pick<ChangelistProps, 'model' | 'query'>) {
  if (!model.searchFields?.length) return null;
  return (
    <form method="get" action={modelUrl(model)} class="search-bar" role="search">
      <label for="searchbar" class="visually-hidden">
        Search {model.verboseNamePlural}
      </label>
      <input type="search" name="q" id="searchbar" value={query.search} placeholder={`Search ${model.verboseNamePlural}`} />
      {Object.entries(query.filters).map(([name, value]) => (
        <input type="hidden" name={name} value={value} key={name} />
      ))}
      {query.order.length > 0 && <input type="hidden" name="o" value={query.order.join('.')} />}
      <button type="submit">Search</button>
    </form>
  );
}

function FilterBlock({ model, spec, query }: { model: BoundModel; spec: FilterSpec; query: ChangelistQuery }) {
  const others = Object.fromEntries(Object.entries(query.filters).filter(([name]) => !spec.parameters.includes(name)));
  if (spec.input) {
    const udt = model.columnTypes.get(spec.field)?.udtName ?? '';
    const type = ['date', 'timestamptz', 'timestamp'].includes(udt) ? 'date' : 'number';
    return (
      <details class="filter" open>
        <summary>By {spec.title.toLowerCase()}</summary>
        <form method="get" action={modelUrl(model)} class="range-filter">
          {Object.entries(others).map(([name, value]) => (
            <input type="hidden" name={name} value={value} key={name} />
          ))}
          {query.search && <input type="hidden" name="q" value={query.search} />}
          {query.order.length > 0 && <input type="hidden" name="o" value={query.order.join('.')} />}
          {spec.parameters.map((parameter, index) => (
            <label key={parameter}>
              {index === 0 ? 'From' : 'To'}
              <input type={type} step={type === 'number' ? 'any' : undefined} name={parameter} value={query.filters[parameter] ?? ''} />
            </label>
          ))}
          <button type="submit" class="button-small">Apply</button>
        </form>
      </details>
    );
  }
  return (
    <details class="filter" open>
      <summary>By {spec.title.toLowerCase()}</summary>
      <ul>
        {spec.choices.map((choice) => (
          <li key={choice.display} class={choice.selected ? 'selected' : undefined}>
            <a href={modelUrl(model) + changelistQueryString({ ...query, page: 1, filters: { ...others, ...choice.params } })} aria-current={choice.selected ? 'true' : undefined}>
              {choice.display}
            </a>
          </li>
        ))}
      </ul>
    </details>
  );
}

export function Pagination({ model, query, result }: { model: BoundModel; query: ChangelistQuery; result: ListResult }) {
  const noun = result.total === 1 ? model.verboseName : model.verboseNamePlural;
  return (
    <nav class="paginator" aria-label="Pages">
      <span class="result-count">
        {result.totalIsEstimate ? 'about ' : ''}
        {count(result.total)} {noun}
        {result.pages > 1 && ` · page ${count(result.page)} of ${result.totalIsEstimate ? 'about ' : ''}${count(result.pages)}`}
      </span>
      {result.pages > 1 && (
        <span class="pages">
          {result.page > 1 && (
            <a href={modelUrl(model) + changelistQueryString({ ...query, page: result.page - 1 })} rel="prev">
              ‹ Previous
            </a>
          )}
          {pageNumbers(result.page, result.pages).map((number, index) =>
            number === null ? (
              <span key={`gap-${index}`} class="gap">
                …
              </span>
            ) : number === result.page ? (
              <span key={number} class="this-page" aria-current="page">
                {number}
              </span>
            ) : (
              <a key={number} href={modelUrl(model) + changelistQueryString({ ...query, page: number })}>
                {number}
              </a>
            ),
          )}
          {result.page < result.pages && (
            <a href={modelUrl(model) + changelistQueryString({ ...query, page: result.page + 1 })} rel="next">
              Next ›
            </a>
          )}
        </span>
      )}
    </nav>
  );
}

function ResultsTable({ model, query, result, actions, preferences }: Pick<ChangelistProps, 'model' | 'query' | 'actions' | 'preferences'> & { result: ListResult }) {
  if (!result.rows.length) return <p class="empty">No {model.verboseNamePlural} match.</p>;
  return (
    <div class="table-scroll">
      <table class="results">
        <thead>
          <tr>
            {actions.length > 0 && (
              <th scope="col" class="action-checkbox">
                <span class="visually-hidden">Select</span>
              </th>
            )}
            {model.columns.map((column, index) => {
              const number = index + 1;
              const label = columnLabel(model, column);
              const kind = columnKind(model, column);
              if (!columnSortable(model, column)) return <th scope="col" class={`column-${kind}`} key={column.name}>{label}</th>;
              const position = query.order.findIndex((entry) => Math.abs(entry) === number);
              const direction = position < 0 ? null : query.order[position]! < 0 ? 'descending' : 'ascending';
              return (
                <th scope="col" class={`column-${kind} sortable${direction ? ' sorted' : ''}`} key={column.name} aria-sort={direction ?? undefined}>
                  <a href={modelUrl(model) + changelistQueryString({ ...query, page: 1, order: orderAfterClick(query.order, number) })}>
                    {label}
                    {direction && (
                      <span class="sort-mark" aria-hidden="true">
                        {direction === 'ascending' ? ' ▲' : ' ▼'}
                        {query.order.length > 1 ? position + 1 : ''}
                      </span>
                    )}
                  </a>
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {result.rows.map((row) => {
            const pk = String(row[model.pk]);
            return (
              <tr key={pk}>
                {actions.length > 0 && (
                  <td class="action-checkbox">
                    <input type="checkbox" name="_selected_action" value={pk} aria-label={`Select ${model.repr(row)}`} />
                  </td>
                )}
                {model.columns.map((column, index) => {
                  const kind = columnKind(model, column);
                  const cell = <Cell model={model} column={column} row={row} preferences={preferences} />;
                  // data-label: a phone shows each row as a card, the header's label beside each value.
                  return index === 0 ? (
                    <th scope="row" class={`column-${kind}`} key={column.name}>
                      <a href={objectUrl(model, pk)}>{cell}</a>
                    </th>
                  ) : (
                    <td class={`column-${kind}`} key={column.name} data-label={columnLabel(model, column)}>
                      {cell}
                    </td>
                  );
                })}
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function ChangelistBody(props: ChangelistProps) {
  const { model, query, result, error, specs, actions, canAdd, savedFilters, csrfToken } = props;
  // Actions on chosen rows go in the action bar; those that need no selection are buttons above.
  const selectionActions = actions.filter((action) => !action.pick);
  const current = changelistQueryString({ ...query, page: 1, order: [] }).slice(1);
  return (
    <>
      <div class="page-head">
        <h1>{capitalize(model.verboseNamePlural)}</h1>
        {actions.filter((action) => action.pick).map((action) => (
          <form method="post" action={modelUrl(model)} class="list-action" key={action.name}>
            <CsrfField token={csrfToken} />
            <input type="hidden" name="action" value={action.name} />
            <input type="hidden" name="_changelist_filters" value={changelistQueryString(query).slice(1)} />
            <button type="submit" title={action.help}>
              {action.label}
            </button>
          </form>
        ))}
        {canAdd && (
          <a class="button" href={modelUrl(model, 'add/')}>
            Add {model.verboseName}
          </a>
        )}
        {result && (
          <a class="button button-secondary export-csv" href={modelUrl(model, 'export.csv') + changelistQueryString({ ...query, page: 1 })} download>
            Export CSV
          </a>
        )}
      </div>
      <div class="changelist">
        <div class="changelist-main">
          <SearchBar model={model} query={query} />
          <a class="jump-to-filters" href="#changelist-filters">
            Filters and saved filters ↓
          </a>
          {error && (
            <p class="errornote" role="alert">
              {error} <a href={modelUrl(model)}>Clear all filters</a>
            </p>
          )}
          {result && (
            <form method="post" action={modelUrl(model) + changelistQueryString(query)} class="changelist-form">
              <CsrfField token={csrfToken} />
              <input type="hidden" name="_changelist_filters" value={changelistQueryString(query).slice(1)} />
              {selectionActions.length > 0 && result.rows.length > 0 && (
                <div class="actions">
                  <label for="id_action">Action</label>
                  <select name="action" id="id_action" required>
                    <option value="">---------</option>
                    {selectionActions.map((action) => (
                      <option value={action.name} key={action.name}>
                        {action.label}
                      </option>
                    ))}
                  </select>
                  <button type="submit" class="button-small">
                    Go
                  </button>
                </div>
              )}
              <Pagination model={model} query={query} result={result} />
              <ResultsTable {...props} actions={selectionActions} result={result} />
            </form>
          )}
          {result && result.rows.length > 0 && <Pagination model={model} query={query} result={result} />}
        </div>
        <aside class="changelist-sidebar" id="changelist-filters" aria-label="Filters">
          <SavedFilterPanel model={model} savedFilters={savedFilters} current={current} csrfToken={csrfToken} />
          {specs.length > 0 && (
            <section class="filters">
              <h2>Filter</h2>
              {specs.map((spec) => (
                <FilterBlock model={model} spec={spec} query={query} key={spec.title} />
              ))}
            </section>
          )}
        </aside>
      </div>
    </>
  );
}

export async function showChangelist(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const state = adminState(ctx);
  const site = app.backoffice.site;
  if (!site.can(state.principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
  let query: ChangelistQuery = { search: '', order: [], page: 1, filters: {} };
  let result: ListResult | null = null;
  let error: string | null = null;
  // Read beside the list, not after it (one round trip less); awaited below, so a failure still answers.
  const savedFilters = savedFiltersOf(app.db, state.principal.user.id, model);
  savedFilters.catch(() => {});
  try {
    query = parseChangelistQuery(new URLSearchParams(ctx.querystring));
    result = await listRows(site, app.db, model, state.principal, { page: query.page, pageSize: model.pageSize, search: query.search, order: query.order, filters: query.filters });
  } catch (caught) {
    if (!(caught instanceof QueryError)) throw caught;
    error = caught.message;
  }
  // Filter links drop a parameter the model does not know, so the sidebar leads out of the error.
  const known = new Set(filterSpecs(model, {}).flatMap((spec) => spec.parameters));
  if (error) query = { ...query, filters: Object.fromEntries(Object.entries(query.filters).filter(([name]) => known.has(name))) };
  await renderPage(
    ctx,
    app,
    error ? 400 : 200,
    capitalize(model.verboseNamePlural),
    homeCrumbs(undefined, { label: capitalize(model.verboseNamePlural) }),
    <ChangelistBody
      model={model}
      query={query}
      result={result}
      error={error}
      specs={filterSpecs(model, query.filters)}
      actions={runnableActions(app.backoffice.site, state.principal, model)}
      canAdd={site.can(state.principal, model, 'add')}
      savedFilters={await savedFilters}
      csrfToken={state.session.csrfToken}
      preferences={state.principal.user}
    />,
  );
}

/** Where to go back to after an action: the changelist with the query it was submitted from. */
function changelistReturn(model: BoundModel, form: URLSearchParams): string {
  const query = new URLSearchParams(form.get('_changelist_filters') ?? '').toString();
  return modelUrl(model) + (query ? `?${query}` : '');
}

/** Targets with at most this many records are offered as a select in an action's form; larger ones take a typed id. */
const SMALL_TARGET = 100;

interface RelationChoices {
  /** Every record of a small target; null when there are too many to list. */
  options: { value: string; text: string }[] | null;
  /** For a large target the user may view: the field's autocomplete URL. */
  search: string | null;
}

/** The fields a bulk change asks for, resolved from the model's form. */
function actionFields(model: BoundModel, action: ActionDeclaration): ResolvedField[] {
  return (action.change?.fields ?? []).map((name) => model.formFields.find((field) => field.name === name)).filter((field): field is ResolvedField => Boolean(field));
}

/** The options of an action's relation fields (the assignee): one query per field. */
async function relationChoices(app: AppContext, model: BoundModel, ctx: Context, fields: ResolvedField[]): Promise<Map<string, RelationChoices>> {
  const principal = adminState(ctx).principal;
  const site = app.backoffice.site;
  const choices = new Map<string, RelationChoices>();
  for (const field of fields) {
    if (field.type !== 'fk' || !field.related) continue;
    const target = site.models.get(field.related)!;
    const ordering = target.ordering?.[0] ?? target.pk;
    const rows = (await scopedQuery(app.db, target, principal)
      .select([...new Set([target.pk, ...target.reprColumns])].map((name) => `t.${name}`))
      .orderBy(`t.${ordering.replace(/^-/, '')}`, ordering.startsWith('-') ? 'desc' : 'asc')
      .limit(SMALL_TARGET + 1)) as Row[];
    if (rows.length <= SMALL_TARGET) choices.set(field.name, { options: rows.map((row) => ({ value: String(row[target.pk]), text: reprFor(site, principal, target, row) })), search: null });
    else choices.set(field.name, { options: null, search: site.can(principal, target, 'view') ? modelUrl(model, `autocomplete/?field=${encodeURIComponent(field.name)}`) : null });
  }
  return choices;
}

/** One input of an action's form, labelled, with its help and errors. */
function ActionField({ field, required, value, errors, related }: { field: ResolvedField; required: boolean; value: string; errors?: { message: string }[]; related?: RelationChoices }) {
  const id = `id_${field.name}`;
  const help = field.declaration.help;
  const described = [help ? `${id}_help` : '', errors?.length ? `${id}_errors` : ''].filter(Boolean).join(' ') || undefined;
  const common = { id, name: field.name, required, 'aria-invalid': errors?.length ? true : undefined, 'aria-describedby': described };
  let input;
  if (field.type === 'choice' || (field.type === 'fk' && related?.options)) {
    const options = field.type === 'choice' ? (field.choices ?? []).map((choice) => ({ value: choice.value, text: choice.label })) : related!.options!;
    input = (
      <select {...common}>
        <option value="">---------</option>
        {options.map((option) => (
          <option value={option.value} selected={option.value === value} key={option.value}>
            {option.text}
          </option>
        ))}
      </select>
    );
  } else if (field.type === 'text') {
    input = <textarea {...common} rows={3} maxLength={field.maxLength ?? undefined}>{value}</textarea>;
  } else if (field.type === 'decimal' || field.type === 'float' || field.type === 'integer') {
    input = <input type="number" step={field.type === 'integer' ? '1' : 'any'} {...common} value={value} />;
  } else if (field.type === 'boolean') {
    input = <input type="checkbox" {...common} required={false} checked={value === 'on' || value === 'true'} />;
  } else if (field.type === 'fk') {
    const listId = `${id}_options`;
    input = (
      <>
        <input type="text" {...common} value={value} autocomplete="off" list={related?.search ? listId : undefined} data-autocomplete={related?.search ?? undefined} placeholder="ID" />
        {related?.search && <datalist id={listId} />}
      </>
    );
  } else {
    input = <input type="text" {...common} value={value} maxLength={field.maxLength ?? undefined} />;
  }
  return (
    <div class={`form-row field-${field.name}${errors?.length ? ' has-errors' : ''}`}>
      <label for={id}>
        {field.label}
        {required ? ' (required)' : ''}
      </label>
      <div class="field-body">
        {input}
        {errors?.length ? (
          <div id={`${id}_errors`}>
            <ErrorList errors={errors} />
          </div>
        ) : null}
        {help && (
          <p class="help" id={`${id}_help`}>
            {help}
          </p>
        )}
      </div>
    </div>
  );
}

/** A bulk change's fields as the action form sent them. */
function submittedActionInput(fields: ResolvedField[], form: URLSearchParams): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  for (const field of fields) input[field.name] = field.type === 'boolean' ? form.get(field.name) === 'on' || form.get(field.name) === 'true' : (form.get(field.name) ?? '');
  return input;
}

/**
 * A bulk action: the first POST (from the changelist) shows the confirmation page listing the
 * chosen records, with the fields a bulk change asks for; the second (with `post=yes`) runs it
 * through the write chain. A bulk change whose fields are refused (a missing rationale) comes back
 * with the errors; each record's outcome is in the message. An action that needs no selection (next
 * case) runs on the first POST and opens the record it picked.
 */
export async function postChangelistAction(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const state = adminState(ctx);
  const site = app.backoffice.site;
  if (!site.can(state.principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
  const form = state.form!;
  const back = changelistReturn(model, form);
  const actionName = form.get('action') ?? '';
  const pks = [...new Set(form.getAll('_selected_action'))].filter((pk) => validPk(model, pk)).slice(0, 1000);
  const action = runnableActions(app.backoffice.site, state.principal, model).find((candidate) => candidate.name === actionName);
  if (!actionName) {
    await addMessage(app.db, state.session, { level: 'warning', text: 'No action selected.' });
    return ctx.redirect(back);
  }
  if (!action) {
    if ((model.actions ?? []).some((candidate) => candidate.name === actionName)) forbidden('You do not have permission to run this action.');
    await addMessage(app.db, state.session, { level: 'error', text: `Unknown action: ${actionName.slice(0, 100)}.` });
    return ctx.redirect(back);
  }
  if (action.pick) {
    try {
      const result = await runAction(app.backoffice, model, state.principal, action.name, [], { origin: { channel: 'web' } });
      await addMessage(app.db, state.session, { level: result.level, text: result.message });
      return ctx.redirect(result.pk ? objectUrl(model, result.pk) : back);
    } catch (caught) {
      if (caught instanceof PermissionDenied) forbidden(caught.message);
      throw caught;
    }
  }
  if (!pks.length) {
    await addMessage(app.db, state.session, { level: 'warning', text: 'Items must be selected in order to perform actions on them. No items have been changed.' });
    return ctx.redirect(back);
  }
  const fields = actionFields(model, action);
  const confirmation = async (status: number, errors: FieldErrors) => {
    const rows = (await scopedQuery(app.db, model, state.principal)
      .select([...new Set([model.pk, ...model.reprColumns])].map((name) => `t.${name}`))
      .whereIn(`t.${model.pk}`, pks)) as Row[];
    const related = await relationChoices(app, model, ctx, fields);
    const required = new Set(action.change?.required ?? []);
    const general = Object.entries(errors).filter(([name]) => !fields.some((field) => field.name === name)).flatMap(([, list]) => list);
    return renderPage(
      ctx,
      app,
      status,
      fields.length ? action.label : 'Are you sure?',
      homeCrumbs(model, { label: action.label }),
      <>
        <h1>{fields.length ? action.label : 'Are you sure?'}</h1>
        {general.length > 0 && (
          <p class="errornote" role="alert">
            {general.map((problem) => problem.message).join(' ')}
          </p>
        )}
        <p>
          {action.label}: this applies to the following {rows.length === 1 ? model.verboseName : `${rows.length} ${model.verboseNamePlural}`}.
          {action.change ? ' Each one is written on its own, as if edited alone: one that is refused leaves the others changed.' : ''}
        </p>
        <ul class="object-list">
          {rows.map((row) => (
            <li key={String(row[model.pk])}>
              <a href={objectUrl(model, row[model.pk])}>{model.repr(row)}</a>
            </li>
          ))}
        </ul>
        <form method="post" action={modelUrl(model)} class="action-form change-form">
          <CsrfField token={state.session.csrfToken} />
          <input type="hidden" name="action" value={action.name} />
          <input type="hidden" name="post" value="yes" />
          <input type="hidden" name="_changelist_filters" value={form.get('_changelist_filters') ?? ''} />
          {rows.map((row) => (
            <input type="hidden" name="_selected_action" value={String(row[model.pk])} key={String(row[model.pk])} />
          ))}
          {action.help && <p class="help">{action.help}</p>}
          {fields.length > 0 && (
            <fieldset class="module">
              <legend>Values for every chosen {model.verboseName}</legend>
              {fields.map((field) => (
                <ActionField
                  key={field.name}
                  field={field}
                  required={required.has(field.name)}
                  value={form.get('post') === 'yes' ? (form.get(field.name) ?? '') : ''}
                  errors={errors[field.name]}
                  related={related.get(field.name)}
                />
              ))}
            </fieldset>
          )}
          <div class="submit-row">
            <button type="submit">{fields.length ? `Apply to ${rows.length === 1 ? `1 ${model.verboseName}` : `${rows.length} ${model.verboseNamePlural}`}` : 'Yes, I’m sure'}</button>
            <a class="button button-secondary" href={back}>
              No, take me back
            </a>
          </div>
        </form>
      </>,
    );
  };
  if (form.get('post') !== 'yes') return confirmation(200, {});
  try {
    const result = await runAction(app.backoffice, model, state.principal, action.name, pks, { input: submittedActionInput(fields, form), origin: { channel: 'web' } });
    await addMessage(app.db, state.session, { level: result.level, text: result.message });
  } catch (caught) {
    if (caught instanceof PermissionDenied) forbidden(caught.message);
    if (!(caught instanceof ValidationFailed)) throw caught;
    // The action's fields were refused before any record was written: the form again, with the errors.
    if (action.change) return confirmation(400, caught.errors);
    const text = Object.values(caught.errors).flat().map((problem) => problem.message).join(' ');
    await addMessage(app.db, state.session, { level: 'error', text });
  }
  ctx.redirect(back);
}
