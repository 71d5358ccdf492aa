import type { Knex } from 'knex';
import { isStorableInstant } from '../../validation/storable.ts';
import type { Principal } from '../staff/principal.ts';
import { label } from './declare.ts';
import type { AdminSite } from './site.ts';
import type { BoundModel, ColumnDeclaration, ColumnKind, FilterDeclaration, Row, RowAnnotation } from './registry.ts';

/**
 * The queries every list, detail and autocomplete runs, for the web pages, the mobile data API and
 * the MCP tools alike: one page query plus one count, related columns joined, never a query per row.
 */

/** Above this many rows a list's total is PostgreSQL's estimate, as large admin sites do. */
export const EXACT_COUNT_LIMIT = 100_000;
/** Up to this many expected rows, a list's page and its exact total are one statement (see pageAndTotal). */
const ONE_STATEMENT_LIMIT = 20_000;
export const MAX_PAGE_SIZE = 200;
/** The alias of a model's table in scopedQuery (columns are written t.<name>). */
export const ALIAS = 't';

export class QueryError extends Error {
  constructor(
    message: string,
    readonly parameter: string,
  ) {
    super(message);
  }
}

export interface ListParameters {
  page: number;
  pageSize: number;
  search: string;
  /** Column indexes, 1-based, negative for descending (the `o` parameter: `2.-1`). */
  order: number[];
  /** Filter parameters as the schema names them (`decision__exact`, `score__range__gte`). */
  filters: Record<string, string>;
}

export interface FilterChoice {
  display: string;
  params: Record<string, string>;
  selected: boolean;
}

export interface FilterSpec {
  title: string;
  class: string;
  parameters: string[];
  choices: FilterChoice[];
  input: boolean;
  field: string;
}

export interface ListResult {
  /** The page's rows, with the registration's computed fields merged in. */
  rows: Row[];
  /** Each row's card link, in row order, for a model that annotates its rows. */
  links?: RowAnnotation['link'][];
  total: number;
  totalIsEstimate: boolean;
  page: number;
  pageSize: number;
  pages: number;
}

export function columnKind(model: BoundModel, column: ColumnDeclaration): ColumnKind {
  if (column.kind) return column.kind;
  if (column.tone) return 'badge';
  const info = model.columnTypes.get(column.name);
  if (!info) return 'text';
  if (['int2', 'int4', 'int8', 'float4', 'float8', 'numeric'].includes(info.udtName)) return 'number';
  if (info.udtName === 'bool') return 'bool';
  if (['date', 'timestamptz', 'timestamp'].includes(info.udtName)) return 'date';
  return 'text';
}

export function columnLabel(model: BoundModel, column: ColumnDeclaration): string {
  return column.label ?? model.fields?.[column.name]?.label ?? label(column.name);
}

/** The label of any name a detail shows: its form field's, its declaration's, a list column's of that name, or one made from the name. */
export function nameLabel(model: BoundModel, name: string): string {
  const column = model.columns.find((candidate) => candidate.name === name);
  return model.formFields.find((field) => field.name === name)?.label ?? model.fields?.[name]?.label ?? (column ? columnLabel(model, column) : label(name));
}

/** Whether a list column can be sorted on: stored columns and joined ones, unless declared otherwise. */
export function columnSortable(model: BoundModel, column: ColumnDeclaration): boolean {
  if (column.sortable !== undefined) return column.sortable;
  return model.columnTypes.has(column.name) || column.name.includes('__');
}

/** The filter definitions of a model with the current selection marked. */
export function filterSpecs(model: BoundModel, applied: Record<string, string>): FilterSpec[] {
  return (model.filters ?? []).map((filter) => filterSpec(model, filter, applied));
}

function filterSpec(model: BoundModel, filter: FilterDeclaration, applied: Record<string, string>): FilterSpec {
  const title = filter.title ?? model.fields?.[filter.field]?.label ?? label(filter.field);
  if (filter.type === 'range') {
    return { title, class: 'RangeFilter', parameters: [`${filter.field}__range__gte`, `${filter.field}__range__lte`], choices: [], input: true, field: filter.field };
  }
  if (filter.type === 'assignee') {
    const parameter = `${filter.field}__assigned`;
    const current = applied[parameter];
    return {
      title,
      class: 'AssigneeFilter',
      parameters: [parameter],
      choices: [
        { display: 'All', params: {}, selected: current === undefined },
        ...ASSIGNEE_CHOICES.map((option) => ({ display: option.label, params: { [parameter]: option.value }, selected: current === option.value })),
      ],
      input: false,
      field: filter.field,
    };
  }
  const parameter = filter.type === 'isnull' ? `${filter.field}__isnull` : `${filter.field}__exact`;
  const options =
    filter.type === 'isnull'
      ? [{ value: '0', label: 'Yes' }, { value: '1', label: 'No' }]
      : (filter.choices ?? model.fields?.[filter.field]?.choices ?? (model.columnTypes.get(filter.field)?.udtName === 'bool' ? [{ value: 'true', label: 'Yes' }, { value: 'false', label: 'No' }] : []));
  const current = applied[parameter];
  return {
    title,
    class: filter.type === 'isnull' ? 'IsNullFilter' : 'ChoicesFilter',
    parameters: [parameter],
    choices: [
      { display: 'All', params: {}, selected: current === undefined },
      ...options.map((option) => ({ display: option.label, params: { [parameter]: option.value }, selected: current === option.value })),
    ],
    input: false,
    field: filter.field,
  };
}

/** The values of an assignee filter: relative to the viewer, so a saved "assigned to me" is whoever opens it. */
export const ASSIGNEE_CHOICES = [
  { value: 'me', label: 'Assigned to me' },
  { value: 'none', label: 'Unassigned' },
  { value: 'any', label: 'Assigned to anyone' },
] as const;

/** Every filter parameter a model accepts. */
export function filterParameters(model: BoundModel): Set<string> {
  return new Set(filterSpecs(model, {}).flatMap((spec) => spec.parameters));
}

/** The base query of a model for a principal: its table under alias `t`, narrowed by its scope. */
export function scopedQuery(db: Knex | Knex.Transaction, model: BoundModel, principal: Principal): Knex.QueryBuilder {
  const query = db(`${model.table} as ${ALIAS}`);
  model.scope?.(query, principal, ALIAS);
  return query;
}

function applyFilters(query: Knex.QueryBuilder, model: BoundModel, principal: Principal, filters: Record<string, string>): void {
  const known = filterParameters(model);
  for (const [parameter, raw] of Object.entries(filters)) {
    if (!known.has(parameter)) throw new QueryError(`Unknown filter parameter: ${parameter}.`, parameter);
    const [field = '', lookup, bound] = parameter.split('__');
    const column = `${ALIAS}.${field}`;
    const info = model.columnTypes.get(field)!;
    if (lookup === 'assigned') {
      const declaration = model.filters!.find((filter) => filter.type === 'assignee' && filter.field === field) as Extract<FilterDeclaration, { type: 'assignee' }>;
      applyAssignee(query, declaration, principal, raw, parameter);
    } else if (lookup === 'isnull') {
      if (raw !== '0' && raw !== '1' && raw !== 'true' && raw !== 'false') throw new QueryError(`${parameter} takes 1 or 0.`, parameter);
      if (raw === '1' || raw === 'true') query.whereNull(column);
      else query.whereNotNull(column);
    } else if (lookup === 'exact') {
      if (info.udtName === 'bool') {
        if (!['true', 'false', '1', '0'].includes(raw)) throw new QueryError(`${parameter} takes true or false.`, parameter);
        query.where(column, raw === 'true' || raw === '1');
      } else {
        query.where(column, typedValue(info.udtName, raw, parameter));
      }
    } else if (lookup === 'range') {
      if (raw === '') continue;
      query.where(column, bound === 'gte' ? '>=' : '<=', typedValue(info.udtName, raw, parameter));
    }
  }
}

/**
 * `<field>__assigned`: me, none or any. With `via`, the assignee is a column of the row the field
 * names (an alert's case), read by its primary key in a subquery: one index lookup per candidate
 * row, no join that could repeat rows.
 */
function applyAssignee(query: Knex.QueryBuilder, filter: Extract<FilterDeclaration, { type: 'assignee' }>, principal: Principal, raw: string, parameter: string): void {
  if (raw !== 'me' && raw !== 'none' && raw !== 'any') throw new QueryError(`${parameter} takes me, none or any.`, parameter);
  const apply = (clause: Knex.QueryBuilder, column: string) => {
    if (raw === 'me') clause.where(column, principal.user.id);
    else if (raw === 'any') clause.whereNotNull(column);
    else clause.whereNull(column);
  };
  if (!filter.via) return apply(query, `${ALIAS}.${filter.field}`);
  const { table, pk = 'id', column } = filter.via;
  const assigned = (clause: Knex.QueryBuilder) => clause.select(1).from(`${table} as a_via`).whereRaw(`a_via.?? = ${ALIAS}.??`, [pk, filter.field]);
  // "none": no related row, or one that nobody holds.
  if (raw === 'none') query.whereNotExists((clause) => assigned(clause).whereNotNull(`a_via.${column}`));
  else query.whereExists((clause) => apply(assigned(clause), `a_via.${column}`));
}

const INTEGER_LIMITS: Record<string, number> = { int2: 32_767, int4: 2_147_483_647, int8: Number.MAX_SAFE_INTEGER };

/** A filter value checked against its column's type, so a bad value is a 400 and never reaches SQL as garbage. */
function typedValue(udtName: string, raw: string, parameter: string): string | number {
  if (['int2', 'int4', 'int8', 'float4', 'float8', 'numeric'].includes(udtName)) {
    const number = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(number)) throw new QueryError(`${parameter} must be a number.`, parameter);
    // PostgreSQL reads the value as the column's type: a fraction or an out-of-range number in an integer column is an error there.
    const limit = INTEGER_LIMITS[udtName];
    if (limit !== undefined && (!Number.isInteger(number) || Math.abs(number) > limit)) throw new QueryError(`${parameter} must be a whole number within ±${limit}.`, parameter);
    return number;
  }
  if (udtName === 'date' || udtName === 'timestamptz' || udtName === 'timestamp') {
    // Years 0001-9999 after the offset, as the storable guard has them: PostgreSQL refuses a year 0000.
    if (!/^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(raw) || !isStorableInstant(new Date(raw))) {
      throw new QueryError(`${parameter} must be a date (YYYY-MM-DD) or an ISO 8601 time.`, parameter);
    }
    return raw;
  }
  if (udtName === 'uuid' && !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(raw)) {
    throw new QueryError(`${parameter} must be a UUID.`, parameter);
  }
  if (raw.includes('\u0000')) throw new QueryError(`${parameter} contains a NUL character.`, parameter);
  return raw;
}

function applySearch(query: Knex.QueryBuilder, model: BoundModel, search: string): void {
  const terms = search.trim().split(/\s+/).filter(Boolean);
  if (!terms.length || !model.searchFields?.length) return;
  // Django: every term must match some search field.
  for (const term of terms) {
    if (term.includes('\u0000')) throw new QueryError('The search term contains a NUL character.', 'q');
    query.where((clause) => {
      for (const field of model.searchFields!) {
        const name = field.replace(/^[=^]/, '');
        const info = model.columnTypes.get(name)!;
        const textual = info.udtName === 'text' || info.udtName === 'varchar';
        const column = textual ? `${ALIAS}.${name}` : `${ALIAS}.${name}::text`;
        if (field.startsWith('=')) {
          if (info.udtName === 'uuid' && !/^[0-9a-f-]{36}$/i.test(term)) continue;
          clause.orWhereRaw(`${column} = ?`, [term]);
        } else if (field.startsWith('^')) {
          clause.orWhereRaw(`lower(${column}) like ?`, [`${escapeLike(term.toLowerCase())}%`]);
        } else {
          clause.orWhereRaw(`${column} ilike ?`, [`%${escapeLike(term)}%`]);
        }
      }
      clause.orWhereRaw('false');
    });
  }
}

function escapeLike(term: string): string {
  return term.replace(/[\\%_]/g, (character) => `\\${character}`);
}

/** The select list of a list page: pk, repr columns, list columns (related ones joined), extra raw fields. */
function selectColumns(site: AdminSite, model: BoundModel, query: Knex.QueryBuilder, extraFields: string[]): void {
  const selected = new Set<string>([model.pk, ...model.reprColumns, ...extraFields]);
  const joined = new Set<string>();
  const selects: string[] = [];
  for (const column of model.columns) {
    if (model.columnTypes.has(column.name)) {
      selected.add(column.name);
      continue;
    }
    const [relation = '', target] = column.name.split('__');
    if (!target) continue;
    const related = site.models.get(model.fields![relation]!.related!)!;
    const alias = `j_${relation}`;
    if (!joined.has(alias)) {
      joined.add(alias);
      query.leftJoin(`${related.table} as ${alias}`, `${alias}.${related.pk}`, `${ALIAS}.${relation}`);
    }
    selects.push(`${alias}.${target} as ${column.name}`);
  }
  // Display-only fields read other columns of the row: select the whole row when a list needs them.
  const needsRow = model.columns.some((column) => !model.columnTypes.has(column.name) && !column.name.includes('__') && !model.fields?.[column.name]?.computed);
  query.select(needsRow ? [`${ALIAS}.*`, ...selects] : [...[...selected].filter((name) => model.columnTypes.has(name)).map((name) => `${ALIAS}.${name}`), ...selects]);
}

function orderExpression(model: BoundModel, column: ColumnDeclaration): string {
  return model.columnTypes.has(column.name) ? `${ALIAS}.${column.name}` : `j_${column.name.split('__')[0]}.${column.name.split('__')[1]}`;
}

export async function listRows(
  site: AdminSite,
  db: Knex,
  model: BoundModel,
  principal: Principal,
  parameters: ListParameters,
  extraFields: string[] = [],
): Promise<ListResult> {
  const statements = listStatements(site, db, model, principal, parameters, extraFields);
  const { pageSize, pageNumber, hidden } = statements;
  const { rows, total, estimate } = await pageAndTotal(db, statements);
  const pages = Math.max(1, Math.ceil(total / pageSize));
  // Joined columns of related models the viewer may not view are blanked: a case list names its
  // customers only to those who may view customers.
  if (hidden.length) for (const row of rows) for (const name of hidden) row[name] = null;
  const links = await annotateRows(site, db, model, principal, rows);
  return { rows, links, total, totalIsEstimate: estimate, page: pageNumber, pageSize, pages };
}

/**
 * Every statement a list page may run, built but not run: which of them runs turns on how many
 * rows PostgreSQL expects (see pageAndTotal). listRows runs them; test/db/list-plans.test.ts
 * explains each of them for every ordering, filter and search a registration offers, so a list
 * that a million rows would turn into a full scan fails a test, not a phone.
 */
export interface ListStatements {
  /** `select 1` from the filtered rows: explained for the expected total, and counted by `count`. */
  counting: Knex.QueryBuilder;
  /** The exact total (up to EXACT_COUNT_LIMIT expected rows). */
  count: Knex.QueryBuilder;
  /** The page alone, ordered and limited (above ONE_STATEMENT_LIMIT expected rows). */
  page: Knex.QueryBuilder;
  /** The page and its exact total in one statement (up to ONE_STATEMENT_LIMIT expected rows). */
  onePass: Knex.QueryBuilder;
  /** The joined columns the viewer may not see (blanked in the rows). */
  hidden: string[];
  pageSize: number;
  pageNumber: number;
  offset: number;
}

export function listStatements(
  site: AdminSite,
  db: Knex,
  model: BoundModel,
  principal: Principal,
  parameters: ListParameters,
  extraFields: string[] = [],
): ListStatements {
  const pageSize = Math.min(Math.max(1, parameters.pageSize), MAX_PAGE_SIZE);
  const filtered = scopedQuery(db, model, principal);
  applyFilters(filtered, model, principal, parameters.filters);
  applySearch(filtered, model, parameters.search);

  const page = filtered.clone();
  selectColumns(site, model, page, extraFields);
  const hidden = hiddenJoins(site, model, principal);
  const orderings = listOrderings(model, parameters.order, hidden);

  const pageNumber = Math.max(1, parameters.page);
  const offset = (pageNumber - 1) * pageSize;
  const counting = filtered.clone().clearSelect().clearOrder().select(db.raw('1'));
  const count = db.count('* as count').from(counting.clone().as('c'));

  // One statement: the key and sort values of every match (a materialized CTE), their count, the
  // page's keys sorted out of them, and the page's rows read by primary key.
  const orderColumn = (index: number) => `${ORDER_COLUMN}${index}`;
  // The page's joins stay in: an ordering may name a related column (unused ones PostgreSQL drops).
  const matches = page
    .clone()
    .clearSelect()
    .select(`${ALIAS}.${model.pk} as ${KEY_COLUMN}`, ...orderings.map(([expression], index) => db.raw(`${expression} as ??`, [orderColumn(index)])));
  const keys = db.select('*').from('matches').limit(pageSize).offset(offset);
  const onePass = db(`${model.table} as ${ALIAS}`).join('page_keys', `page_keys.${KEY_COLUMN}`, `${ALIAS}.${model.pk}`);
  selectColumns(site, model, onePass, extraFields);
  onePass.withMaterialized('matches', matches).with('page_keys', keys).select(db.raw('(select count(*) from matches) as ??', [TOTAL_COLUMN]));
  orderings.forEach(([, direction, nullable], index) => {
    keys.orderByRaw(orderTerm(orderColumn(index), direction, nullable));
    onePass.orderByRaw(orderTerm(`page_keys.${orderColumn(index)}`, direction, nullable));
  });

  for (const [expression, direction, nullable] of orderings) page.orderByRaw(orderTerm(expression, direction, nullable));
  page.limit(pageSize).offset(offset);
  return { counting, count, page, onePass, hidden, pageSize, pageNumber, offset };
}

/** The list's ORDER BY terms for `o` (column indexes), else the model's ordering, then the pk; a column that cannot be sorted (or is hidden from the viewer) is a QueryError. */
function listOrderings(model: BoundModel, order: number[], hidden: string[]): Ordering[] {
  const orderings: Ordering[] = [];
  for (const index of order) {
    const column = model.columns[Math.abs(index) - 1];
    // A joined column the viewer may not see is not theirs to sort by either: the order would tell.
    if (!column || !columnSortable(model, column) || hidden.includes(column.name)) {
      throw new QueryError(`Ordering column ${Math.abs(index)} does not exist or cannot be sorted.`, 'o');
    }
    orderings.push([orderExpression(model, column), index < 0 ? 'desc' : 'asc', model.columnTypes.get(column.name)?.nullable ?? true]);
  }
  if (!orderings.length) {
    for (const order of model.ordering ?? []) {
      const name = order.replace(/^-/, '');
      orderings.push([`${ALIAS}.${name}`, order.startsWith('-') ? 'desc' : 'asc', model.columnTypes.get(name)!.nullable]);
    }
  }
  orderings.push([`${ALIAS}.${model.pk}`, orderings.at(-1)?.[1] ?? 'desc', false]);
  return orderings;
}

/**
 * The list's query without a page, for a CSV export: the same scope, filters, search, select list
 * (related columns joined) and ordering as listRows, so an export holds what the list shows, in its
 * order. `hidden` names the joined columns the viewer may not see (listRows blanks them; an export
 * leaves them out). Bad parameters are QueryErrors, thrown before any statement runs.
 */
export function listQuery(
  site: AdminSite,
  db: Knex,
  model: BoundModel,
  principal: Principal,
  parameters: Pick<ListParameters, 'search' | 'order' | 'filters'>,
): { query: Knex.QueryBuilder; hidden: string[] } {
  const query = scopedQuery(db, model, principal);
  applyFilters(query, model, principal, parameters.filters);
  applySearch(query, model, parameters.search);
  selectColumns(site, model, query, []);
  const hidden = hiddenJoins(site, model, principal);
  for (const [expression, direction, nullable] of listOrderings(model, parameters.order, hidden)) query.orderByRaw(orderTerm(expression, direction, nullable));
  return { query, hidden };
}

/** The list's joined columns whose related model the viewer may not view. */
function hiddenJoins(site: AdminSite, model: BoundModel, principal: Principal): string[] {
  return model.columns
    .filter((column) => !model.columnTypes.has(column.name) && column.name.includes('__'))
    .filter((column) => !site.can(principal, site.models.get(model.fields![column.name.split('__')[0]!]!.related!)!, 'view'))
    .map((column) => column.name);
}

/** Merges the registration's per-viewer values into the page's rows (in place) and answers their card links. */
export async function annotateRows(site: AdminSite, db: Knex, model: BoundModel, principal: Principal, rows: Row[]): Promise<RowAnnotation['link'][] | undefined> {
  if (!model.annotate) return undefined;
  if (!rows.length) return [];
  const annotations = await model.annotate({ db, principal, model: (key) => site.models.get(key), mayView: (target) => site.can(principal, target, 'view') }, rows);
  return rows.map((row, index) => {
    Object.assign(row, annotations[index]!.values);
    return annotations[index]!.link;
  });
}

/** An ordering term: the SQL expression, its direction, and whether the column can hold nulls. */
type Ordering = [expression: string, direction: 'asc' | 'desc', nullable: boolean];

/**
 * Nulls sort as the lowest value, where they can occur: first going up, last going down (MySQL's and
 * SQL Server's order), so the largest values top a descending list and one index declared
 * `(column nulls first, pk)` serves both directions, read forwards or backwards (PostgreSQL's own
 * default, nulls highest, would put unscored rows above the highest score). On a NOT NULL column
 * no nulls clause is written: it would stop PostgreSQL from reading a plain index backwards.
 */
function orderTerm(expression: string, direction: 'asc' | 'desc', nullable: boolean): string {
  return `${expression} ${direction}${nullable ? (direction === 'asc' ? ' nulls first' : ' nulls last') : ''}`;
}

/** Names the one-statement page gives its helper tables and columns. */
const KEY_COLUMN = 'warden_key';
const ORDER_COLUMN = 'warden_order_';
const TOTAL_COLUMN = 'warden_total';

/**
 * A page and the number of rows the list matches, chosen by how many rows PostgreSQL expects:
 * - up to ONE_STATEMENT_LIMIT: one statement. It first gathers the key and sort values of every
 *   match (a materialized CTE, planned for all of its rows, so PostgreSQL reads them through the
 *   filter's own index: a search prefix, say), counts them, sorts out the page's keys, and reads
 *   the page's rows by primary key. Planned for the page alone, the list's query may instead walk
 *   the ordering index backwards betting that matches come early; for a sparse match (the
 *   benchmark's 1,834 of 1,000,000 rows) that walk reads ~110,000 rows, and which plan PostgreSQL
 *   picks turns on the rows ANALYZE happens to sample. The matches are also read once, where a
 *   page query and a count read them twice, and only their keys are kept and sorted.
 * - up to EXACT_COUNT_LIMIT: the page and an exact count side by side; matches are many enough
 *   that the ordering index finds a page's rows early.
 * - above: the page and the planner's estimate, so a count never scans a million rows to print a
 *   number (as large admin sites do).
 */
async function pageAndTotal(db: Knex, statements: ListStatements): Promise<{ rows: Row[]; total: number; estimate: boolean }> {
  const { counting, count, page, onePass, offset } = statements;
  const { sql, bindings } = counting.toSQL();
  const plan = (await db.raw(`explain (format json) ${sql}`, bindings)).rows[0]['QUERY PLAN'][0].Plan as { 'Plan Rows': number };
  const expected = plan['Plan Rows'];
  const exactCount = async () => Number(((await count) as { count: number | string }[])[0]?.count ?? 0);
  if (expected <= ONE_STATEMENT_LIMIT) {
    const rows = (await onePass) as Row[];
    // A page past the last match has no row to carry the total.
    const total = rows.length ? Number(rows[0]![TOTAL_COLUMN]) : offset > 0 ? await exactCount() : 0;
    for (const row of rows) delete row[TOTAL_COLUMN];
    return { rows, total, estimate: false };
  }
  if (expected > EXACT_COUNT_LIMIT) return { rows: (await page) as Row[], total: Math.round(expected), estimate: true };
  const [rows, total] = await Promise.all([page as Promise<Row[]>, exactCount()]);
  return { rows, total, estimate: false };
}

/** One record as the model sees it (scope applied), or undefined. */
export async function getRow(db: Knex | Knex.Transaction, model: BoundModel, principal: Principal, pk: string, forUpdate = false): Promise<Row | undefined> {
  if (!validPk(model, pk)) return undefined;
  const query = scopedQuery(db, model, principal).select(`${ALIAS}.*`).where(`${ALIAS}.${model.pk}`, pk).first();
  if (forUpdate) query.forUpdate();
  return (await query) as Row | undefined;
}

/** Whether a pk could exist in the model's column (a uuid column never matches "abc"): not found, never a 500. */
export function validPk(model: BoundModel, pk: string): boolean {
  const udt = model.columnTypes.get(model.pk)!.udtName;
  if (udt === 'uuid') return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(pk);
  if (udt === 'int2' || udt === 'int4' || udt === 'int8') return /^\d{1,15}$/.test(pk) && Number(pk) <= 2_147_483_647;
  return pk.length > 0 && pk.length <= 500 && !pk.includes('\u0000');
}

/**
 * The `relation__field` names a record's detail shows besides its form fields (fieldsets and
 * read-only fields may name a column of a registered fk target, as list columns do), with their
 * values: one query per relation, never one per name. A relation that is empty gives nulls.
 */
export async function joinedValues(site: AdminSite, db: Knex, model: BoundModel, row: Row, principal: Principal): Promise<Row> {
  const names = new Set([...(model.fieldsets ?? []).flatMap((fieldset) => fieldset.fields), ...(model.readonly ?? [])].filter((name) => name.includes('__')));
  const byRelation = new Map<string, string[]>();
  for (const name of names) {
    const [relation = '', column = ''] = name.split('__');
    byRelation.set(relation, [...(byRelation.get(relation) ?? []), column]);
  }
  const values: Row = {};
  await Promise.all(
    [...byRelation].map(async ([relation, columns]) => {
      const target = site.models.get(model.fields![relation]!.related!)!;
      const key = row[relation];
      // A column of a model the viewer may not view is not read for them.
      if (!site.can(principal, target, 'view')) {
        for (const column of columns) values[`${relation}__${column}`] = null;
        return;
      }
      const found = key === null || key === undefined || !validPk(target, String(key)) ? undefined : ((await db(target.table).where(target.pk, key).first(columns)) as Row | undefined);
      for (const column of columns) values[`${relation}__${column}`] = found?.[column] ?? null;
    }),
  );
  return values;
}

export interface InlineBlock {
  model: BoundModel;
  label: string;
  fields: string[];
  total: number;
  rows: Row[];
}

export const INLINE_ROWS = 50;

/** The related blocks of a record the principal may view: up to 50 rows each with their total. */
export async function inlineBlocks(site: AdminSite, db: Knex, model: BoundModel, principal: Principal, row: Row): Promise<InlineBlock[]> {
  const blocks: InlineBlock[] = [];
  for (const inline of model.inlines ?? []) {
    const target = site.models.get(inline.model)!;
    if (!site.can(principal, target, 'view')) continue;
    const base = scopedQuery(db, target, principal).where(`${ALIAS}.${inline.fk}`, row[model.pk] as string);
    for (const [column, value] of Object.entries(inline.where ?? {})) base.where(`${ALIAS}.${column}`, value);
    const ordering = inline.ordering ?? target.ordering?.[0] ?? `-${target.pk}`;
    const [rows, [{ count }]] = await Promise.all([
      base.clone().select(`${ALIAS}.*`).orderBy(`${ALIAS}.${ordering.replace(/^-/, '')}`, ordering.startsWith('-') ? 'desc' : 'asc').limit(INLINE_ROWS),
      base.clone().count('* as count'),
    ]);
    blocks.push({
      model: target,
      label: inline.label ?? target.verboseNamePlural,
      fields: inline.fields ?? target.columns.filter((column) => target.columnTypes.has(column.name)).map((column) => column.name),
      total: Number(count),
      rows: rows as Row[],
    });
  }
  return blocks;
}

export const AUTOCOMPLETE_PAGE = 20;

export interface AutocompletePage {
  results: { value: string; text: string }[];
  more: boolean;
  page: number;
}

/** Options for a relation field: the target's records matching `q` by its search fields, 20 a page. */
export async function autocomplete(db: Knex, target: BoundModel, principal: Principal, search: string, page: number): Promise<AutocompletePage> {
  const query = scopedQuery(db, target, principal);
  applySearch(query, target, search);
  const pageNumber = Math.max(1, page);
  const rows = (await query
    .select([...new Set([target.pk, ...target.reprColumns])].map((name) => `${ALIAS}.${name}`))
    .orderBy(`${ALIAS}.${(target.ordering?.[0] ?? target.pk).replace(/^-/, '')}`, (target.ordering?.[0] ?? '').startsWith('-') ? 'desc' : 'asc')
    .orderBy(`${ALIAS}.${target.pk}`)
    .limit(AUTOCOMPLETE_PAGE + 1)
    .offset((pageNumber - 1) * AUTOCOMPLETE_PAGE)) as Row[];
  return {
    results: rows.slice(0, AUTOCOMPLETE_PAGE).map((row) => ({ value: String(row[target.pk]), text: target.repr(row) })),
    more: rows.length > AUTOCOMPLETE_PAGE,
    page: pageNumber,
  };
}
