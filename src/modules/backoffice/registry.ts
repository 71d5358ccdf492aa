import type { Knex } from 'knex';
import type { FieldErrors } from '../../validation/form.ts';
import type { Principal } from '../staff/principal.ts';
import type { WriteChain, WriteOrigin } from './write.ts';

/**
 * The back-office registry: one declaration per model (like Django's ModelAdmin) that the web admin,
 * the mobile schema and data API, the MCP tools, permissions, the audit log and approvals all read.
 * A registration declares; the code that serves it is generic. Field types come from the database
 * columns (read once at start-up); a registration declares only what differs.
 */

export type ColumnKind = 'text' | 'date' | 'badge' | 'number' | 'bool';
export type Tone = 'success' | 'warning' | 'danger' | 'info' | 'neutral';
export type FieldType =
  | 'string' | 'text' | 'integer' | 'float' | 'decimal' | 'boolean' | 'nullboolean' | 'date' | 'datetime' | 'time'
  | 'choice' | 'fk' | 'm2m' | 'json' | 'uuid' | 'file' | 'image';
export type Operation = 'view' | 'add' | 'change' | 'delete';
/** A stored row as node-pg returns it. */
export type Row = Record<string, unknown>;
export interface Choice {
  value: string;
  label: string;
}

export interface FieldDeclaration {
  label?: string;
  type?: FieldType;
  required?: boolean;
  maxLength?: number;
  choices?: readonly Choice[];
  /** m2m of permission codenames (Django's auth.Permission): its choices are every codename the site knows, filled in when it binds. */
  permissionChoices?: true;
  /** fk: the related model (app_label.model) and the column of it that the value refers to (its pk by default). */
  related?: string;
  /** m2m: the link table and its two columns. */
  through?: { table: string; sourceColumn: string; targetColumn: string };
  /** A field that is not a column of the table (a password, a rationale): the save hooks handle it. */
  virtual?: boolean;
  /** Never shown nor written through the generic pages (secrets, hashes). */
  hidden?: boolean;
  /** A value some viewers may read only in part: what `visibleRow` hands out, given which models the viewer may view. */
  redact?: (value: unknown, mayView: (modelKey: string) => boolean) => unknown;
  help?: string;
  /** A value shown in the detail instead of the stored one (formatted, joined, counted). */
  display?: (row: Row) => string;
  /**
   * A generic relation (Django's content type plus object id): the registered model (app_label.model)
   * whose pk this field holds, read from the row; null when the row names none.
   */
  relatedModelOf?: (row: Row) => string | null;
  /** A value no column holds: the registration's `annotate` puts it on each listed row (list columns may name it). */
  computed?: true;
}

export interface ColumnDeclaration {
  /** A field of the model, or `relation__field` for a column of a registered fk target (joined, never a query per row). */
  name: string;
  label?: string;
  kind?: ColumnKind;
  sortable?: boolean;
  /** Colour of a badge cell. */
  tone?: (value: unknown, row: Row) => Tone | null;
}

export type FilterDeclaration =
  /** Choices of a field (its declared choices, or true/false for booleans): `<field>__exact`. */
  | { type: 'choice'; field: string; title?: string; choices?: readonly Choice[] }
  /** Two inputs, `<field>__range__gte` and `<field>__range__lte`, for numbers and dates. */
  | { type: 'range'; field: string; title?: string }
  /** Whether a nullable field is set: `<field>__isnull`. */
  | { type: 'isnull'; field: string; title?: string }
  /**
   * Who a record is assigned to, relative to the viewer: `<field>__assigned` takes `me` (the
   * viewer's user id), `none` (nobody) or `any` (somebody). `field` holds a staff user id, or,
   * with `via`, the key of a row of another table whose `column` does (an alert's case's assignee).
   * A saved "assigned to me" filter means whoever opens it.
   */
  | { type: 'assignee'; field: string; title?: string; via?: { table: string; pk?: string; column: string } };

export interface FieldsetDeclaration {
  title: string | null;
  fields: string[];
  classes?: string[];
  description?: string;
}

export interface InlineDeclaration {
  /** The related model (app_label.model) whose rows point at this one. */
  model: string;
  /** The column of the related table that holds this model's pk (or an expression of it). */
  fk: string;
  /**
   * Fixed column values the related rows also have (execution logs of financial records: target
   * financial), so the lookup uses the related table's index on (those columns, fk).
   */
  where?: Record<string, string>;
  label?: string;
  /** Related model columns shown in the block; its list columns by default. */
  fields?: string[];
  /** Ordering of the block's rows (a column of the related table, `-` for descending). */
  ordering?: string;
}

export interface ActionContext {
  db: Knex.Transaction;
  principal: Principal;
}

/**
 * A bulk change: the same values written on each chosen record, each through the write chain
 * (saveObject, partial) as if edited alone: model and object permission, clean hook (a case's
 * rationale), approval hook (a maker-checker policy makes each a request of its own), save hooks
 * and an audit row. Each record is its own write: one refused record leaves the others written.
 */
export interface ActionChange {
  /** Form fields of the model the user fills in once for all records (their types, labels and choices are the form's). */
  fields: string[];
  /** Of those, the ones that must not be left empty (checked once, before any record is written). */
  required?: string[];
  /** Values written whatever is sent (closing: status closed). */
  fixed?: Row;
  /** Values that depend on who runs it (take: the assignee is the user). */
  values?(principal: Principal): Row;
  /**
   * Checked on each record once it is locked, before its write: field errors refuse that record
   * (take refuses a case someone else holds). Two users running it at once are serialised by the lock.
   */
  guard?(row: Row, principal: Principal): FieldErrors | undefined;
}

/** What a list-level action (no selection) answers: its message and the record it opened, if any. */
export interface PickResult {
  level: 'info' | 'success' | 'warning' | 'error';
  message: string;
  /** The record to open (next case: the case just assigned); null when there was none. */
  pk: string | null;
  /** Set when the pick became an approval request instead of a write. */
  approvalRequestId?: string;
}

export interface PickContext {
  /** The write chain the pick writes through. */
  chain: WriteChain;
  principal: Principal;
  /** How the request reached the chain (web, mobile), for the audit log and approvals. */
  origin: WriteOrigin;
}

/**
 * A bulk action of a list, one of three kinds:
 * - `run`: code run on the chosen rows in one transaction (all or nothing), one audit row per row;
 * - `change`: a bulk change through the write chain, one write per chosen record (see ActionChange);
 * - `pick`: a button of the list that needs no selection (next case), answering the record it opened.
 */
export interface ActionDeclaration {
  name: string;
  label: string;
  /** The permission a user needs to run it: an operation on this model or a custom codename. */
  permission: Operation | string;
  /** One line telling what it does, under its form and in the mobile schema. */
  help?: string;
  /** Runs on the chosen rows, in the write chain's transaction; returns the message shown. */
  run?(context: ActionContext, rows: Row[]): Promise<string>;
  change?: ActionChange;
  pick?(context: PickContext): Promise<PickResult>;
}

export interface SaveContext {
  trx: Knex.Transaction;
  principal: Principal;
  /** The stored row before the write (null for an add). */
  before: Row | null;
  /** Column values about to be written (hooks may add to them). */
  values: Row;
  /** Every cleaned form value, virtual fields included. */
  cleaned: Row;
  operation: 'add' | 'change';
}

export interface SaveHooks {
  /** Cross-field validation: returns field errors ({field: [{message, code}]}), or nothing. */
  clean?(cleaned: Row, before: Row | null, principal: Principal): FieldErrors | undefined;
  /** Before the row is written, inside the transaction: fill derived columns, hash secrets. */
  beforeSave?(context: SaveContext): Promise<void> | void;
  /** After the row is written, inside the same transaction: side records (history, links). */
  afterSave?(context: SaveContext & { row: Row }): Promise<void> | void;
  /** Before a row is deleted, inside the transaction: refuse (ValidationFailed) what must stay. */
  beforeDelete?(context: { trx: Knex.Transaction; principal: Principal; row: Row }): Promise<void> | void;
  /** Messages to show after the save (a new API secret shown once). */
  messages?(context: SaveContext & { row: Row }): { level: 'info' | 'success' | 'warning' | 'error'; message: string }[];
}

export type { FieldError, FieldErrors } from '../../validation/form.ts';

export interface AnnotateContext {
  db: Knex;
  principal: Principal;
  /** A registered model by key (app_label.model), for rows that name another model. */
  model(key: string): BoundModel | undefined;
  /** Whether the viewer may view a model's records (a card links only where they may). */
  mayView(model: BoundModel): boolean;
}

export interface RowAnnotation {
  /** The row's computed fields, by name: read like stored values (choices, tones, display). */
  values: Row;
  /** The record the row's list card opens (a request's target), or null where the viewer may not open one. */
  link: { model: string; pk: string | null } | null;
}

/**
 * What a list shows of each row that neither its columns nor the row alone can give: it depends on
 * the viewer or on other tables (a request's action as this user sees it). Runs once per page with
 * a constant number of queries whatever the page size; answers one annotation per row, in order.
 */
export type RowAnnotator = (context: AnnotateContext, rows: readonly Row[]) => Promise<RowAnnotation[]>;

export interface ModelRegistration {
  appLabel: string;
  model: string;
  table: string;
  /** The primary key column; `id` by default. */
  pk?: string;
  verboseName: string;
  verboseNamePlural?: string;
  /** A proxy lists another model's rows, narrowed by `scope` (Django's proxy models). */
  proxyOf?: string;
  /** How one record reads in titles and links; `reprColumns` are what it needs selected. */
  repr: (row: Row) => string;
  reprColumns: string[];
  columns: ColumnDeclaration[];
  titleColumn?: string;
  statusColumn?: string;
  dateColumn?: string;
  filters?: FilterDeclaration[];
  /** Django's search_fields: `=field` exact, `^field` starts with (case-insensitive), `field` contains. */
  searchFields?: string[];
  /** Default ordering, `-` for descending. The pk is always added last for a stable order. */
  ordering?: string[];
  pageSize?: number;
  fields?: Record<string, FieldDeclaration>;
  /** The form's fields in order; read-only fields are shown but not written. */
  form?: string[];
  fieldsets?: FieldsetDeclaration[];
  readonly?: string[];
  inlines?: InlineDeclaration[];
  actions?: ActionDeclaration[];
  /** Operations no one may do through the back office, superusers included (view-only models). */
  disabled?: Partial<Record<'add' | 'change' | 'delete', true>>;
  /** Custom permissions besides view/add/change/delete: codename and name. */
  customPermissions?: { codename: string; name: string }[];
  /** Narrows what a user sees (proxies, own rows); applied to every query of the model. */
  scope?: (query: Knex.QueryBuilder, principal: Principal, alias: string) => void;
  /** Per-object permission, after the model permission passed. */
  objectPermission?: (principal: Principal, operation: Operation, row: Row) => boolean;
  hooks?: SaveHooks;
  /** Per-viewer values and the card's link of each listed row, for every list (web, mobile, MCP); its fields are declared `computed`. */
  annotate?: RowAnnotator;
  /** Where the model sits in the mobile menu and on the web index. */
  menu?: { group: string; icon?: string };
}

/** A registered model with what the database told about its columns. */
export interface BoundModel extends ModelRegistration {
  key: string;
  pk: string;
  objectName: string;
  verboseNamePlural: string;
  pageSize: number;
  columnTypes: Map<string, ColumnInfo>;
  /** Every form field, resolved: type from the column unless declared. */
  formFields: ResolvedField[];
}

export interface ColumnInfo {
  dataType: string;
  udtName: string;
  nullable: boolean;
  hasDefault: boolean;
  maxLength: number | null;
}

export interface ResolvedField {
  name: string;
  label: string;
  type: FieldType;
  required: boolean;
  maxLength: number | null;
  choices: readonly Choice[] | null;
  related: string | null;
  readonly: boolean;
  virtual: boolean;
  declaration: FieldDeclaration;
}
