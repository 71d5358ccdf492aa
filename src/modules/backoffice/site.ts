import type { Knex } from 'knex';
import type { Principal } from '../staff/principal.ts';
import { codenamesOf, label, mayOperate, modelKey, RegistryError } from './declare.ts';
import type {
  BoundModel,
  Choice,
  ColumnInfo,
  FieldType,
  ModelRegistration,
  Operation,
  ResolvedField,
  Row,
} from './registry.ts';

/**
 * The generic half of the back office: the registrations it is given (src/app/registrations.ts holds the
 * list; nothing here imports a registration) bound to the database, and the permission checks.
 */

/** Called after a write through the chain commits: the live channel refreshes lists with it. */
export type ChangeListener = (change: { model: string; pk: string; operation: 'add' | 'change' | 'delete'; actorId: string | null }) => void;

/**
 * The registrations bound to a database: each column's type read from PostgreSQL once, then the
 * start-up checks (Django's system checks) run. A registration that refers to something that does
 * not exist stops start-up with a message naming the registration and the field.
 */
export class AdminSite {
  readonly models = new Map<string, BoundModel>();
  readonly changeListeners: ChangeListener[] = [];

  private constructor(
    private readonly codenames: readonly string[],
    /** What the modules add to every face beside their registrations (see SiteExtensions). */
    readonly extensions: SiteExtensions,
  ) {}

  static async bind(db: Knex, registrations: readonly ModelRegistration[], extensions: SiteExtensions = { detailBlocks: [], detailSections: [] }): Promise<AdminSite> {
    const tables = [...new Set(registrations.map((registration) => registration.table))];
    const columns = (await db
      .select('table_name', 'column_name', 'data_type', 'udt_name', 'is_nullable', 'column_default', 'character_maximum_length')
      .from('information_schema.columns')
      .where('table_schema', db.raw('current_schema()'))
      .whereIn('table_name', tables)) as {
      table_name: string;
      column_name: string;
      data_type: string;
      udt_name: string;
      is_nullable: string;
      column_default: string | null;
      character_maximum_length: number | null;
    }[];
    const foreignKeys = (await db.raw(`
      select cl.relname as table_name, att.attname as column_name, ref.relname as target_table
      from pg_constraint con
      join pg_class cl on cl.oid = con.conrelid
      join pg_class ref on ref.oid = con.confrelid
      join pg_attribute att on att.attrelid = con.conrelid and att.attnum = con.conkey[1]
      where con.contype = 'f' and array_length(con.conkey, 1) = 1 and cl.relnamespace = current_schema()::regnamespace
    `)).rows as { table_name: string; column_name: string; target_table: string }[];

    const byTable = new Map<string, Map<string, ColumnInfo>>();
    for (const column of columns) {
      let map = byTable.get(column.table_name);
      if (!map) byTable.set(column.table_name, (map = new Map()));
      map.set(column.column_name, {
        dataType: column.data_type,
        udtName: column.udt_name,
        nullable: column.is_nullable === 'YES',
        hasDefault: column.column_default !== null,
        maxLength: column.character_maximum_length,
      });
    }
    const site = new AdminSite(codenamesOf(registrations), extensions);
    for (const registration of registrations) {
      const key = modelKey(registration.appLabel, registration.model);
      if (site.models.has(key)) throw new RegistryError(`${key}: registered twice`);
      const columnTypes = byTable.get(registration.table);
      if (!columnTypes) throw new RegistryError(`${key}: table ${registration.table} does not exist`);
      const bound: BoundModel = {
        ...registration,
        key,
        pk: registration.pk ?? 'id',
        objectName: registration.model.charAt(0).toUpperCase() + registration.model.slice(1),
        verboseNamePlural: registration.verboseNamePlural ?? `${registration.verboseName}s`,
        pageSize: registration.pageSize ?? 100,
        columnTypes,
        formFields: [],
      };
      site.models.set(key, bound);
    }
    const permissionChoices = site.codenames.map((codename) => ({ value: codename, label: codename }));
    for (const model of site.models.values()) {
      model.formFields = resolveFormFields(model, permissionChoices);
      checkModel(site, model, foreignKeys);
    }
    return site;
  }

  get(appLabel: string, model: string): BoundModel | undefined {
    return this.models.get(modelKey(appLabel, model));
  }

  permissionCodenames(): readonly string[] {
    return this.codenames;
  }

  /** Every codename the principal holds: all of them for an active superuser. */
  permissionsOf(principal: Principal): string[] {
    return this.codenames.filter((codename) => principal.has(codename));
  }

  /** Whether the principal may do `operation` on the model at all (object hooks refine it per row). */
  can(principal: Principal, model: BoundModel, operation: Operation): boolean {
    return mayOperate(principal, model, operation);
  }

  perms(principal: Principal, model: BoundModel): Record<Operation, boolean> {
    return {
      view: this.can(principal, model, 'view'),
      add: this.can(principal, model, 'add'),
      change: this.can(principal, model, 'change'),
      delete: this.can(principal, model, 'delete'),
    };
  }

  visibleModels(principal: Principal): BoundModel[] {
    return [...this.models.values()].filter((model) => this.can(principal, model, 'view'));
  }

  notifyChange(change: Parameters<ChangeListener>[0]): void {
    for (const listener of this.changeListeners) listener(change);
  }
}

function typeOfColumn(column: ColumnInfo): FieldType {
  switch (column.udtName) {
    case 'int2':
    case 'int4':
    case 'int8':
      return 'integer';
    case 'float4':
    case 'float8':
      return 'float';
    case 'numeric':
      return 'decimal';
    case 'bool':
      return column.nullable ? 'nullboolean' : 'boolean';
    case 'date':
      return 'date';
    case 'timestamptz':
    case 'timestamp':
      return 'datetime';
    case 'time':
      return 'time';
    case 'uuid':
      return 'uuid';
    case 'json':
    case 'jsonb':
      return 'json';
    case 'varchar':
      return 'string';
    case 'text':
      return 'string';
    default:
      // arrays and anything else are edited as JSON lists
      return 'json';
  }
}

function resolveFormFields(model: BoundModel, permissionChoices: readonly Choice[]): ResolvedField[] {
  const readonly = new Set(model.readonly ?? []);
  return (model.form ?? []).map((name) => {
    const declaration = model.fields?.[name] ?? {};
    const column = model.columnTypes.get(name);
    if (!column && !declaration.virtual) throw new RegistryError(`${model.key}: form field "${name}" is not a column of ${model.table} (declare it virtual)`);
    const choices = declaration.permissionChoices ? permissionChoices : (declaration.choices ?? null);
    const type: FieldType = declaration.type ?? (choices ? 'choice' : declaration.related ? 'fk' : column ? typeOfColumn(column) : 'string');
    return {
      name,
      label: declaration.label ?? label(name),
      type,
      required: declaration.required ?? (column ? !column.nullable && !column.hasDefault && type !== 'boolean' : false),
      maxLength: declaration.maxLength ?? column?.maxLength ?? null,
      choices,
      related: declaration.related ?? null,
      readonly: readonly.has(name),
      virtual: declaration.virtual ?? false,
      declaration,
    };
  });
}

/** Whether `name` can be shown for a model: a column, a declared field, or `fk__field` of a registered target. */
function fieldExists(site: AdminSite, model: BoundModel, name: string): boolean {
  if (model.columnTypes.has(name) || model.fields?.[name]?.display || model.fields?.[name]?.virtual) return true;
  const [relation = '', target, ...rest] = name.split('__');
  if (!target || rest.length) return false;
  const related = model.fields?.[relation]?.related;
  const targetModel = related ? site.models.get(related) : undefined;
  return Boolean(targetModel && model.columnTypes.has(relation) && targetModel.columnTypes.has(target));
}

function checkModel(site: AdminSite, model: BoundModel, foreignKeys: { table_name: string; column_name: string; target_table: string }[]): void {
  const fail = (what: string, name: string) => {
    throw new RegistryError(`${model.key}: ${what} "${name}" does not refer to an existing field`);
  };
  if (!model.columnTypes.has(model.pk)) fail('pk', model.pk);
  for (const column of model.reprColumns) if (!model.columnTypes.has(column)) fail('repr column', column);
  // Computed fields exist only on listed rows (the annotator fills them), so only list columns may name them.
  for (const column of model.columns) if (!fieldExists(site, model, column.name) && !model.fields?.[column.name]?.computed) fail('list column', column.name);
  for (const role of [model.titleColumn, model.statusColumn, model.dateColumn]) {
    if (role && !model.columns.some((column) => column.name === role)) fail('card role column', role);
  }
  for (const filter of model.filters ?? []) if (!model.columnTypes.has(filter.field)) fail('filter', filter.field);
  for (const search of model.searchFields ?? []) {
    const name = search.replace(/^[=^]/, '');
    if (!model.columnTypes.has(name)) fail('search field', name);
  }
  for (const order of model.ordering ?? []) if (!model.columnTypes.has(order.replace(/^-/, ''))) fail('ordering', order);
  const formNames = new Set(model.form ?? []);
  for (const fieldset of model.fieldsets ?? []) {
    for (const name of fieldset.fields) if (!formNames.has(name) && !fieldExists(site, model, name)) fail(`fieldset "${fieldset.title ?? ''}" field`, name);
  }
  for (const name of model.readonly ?? []) if (!fieldExists(site, model, name)) fail('read-only field', name);
  for (const [name, declaration] of Object.entries(model.fields ?? {})) {
    if (declaration.computed && !model.annotate) throw new RegistryError(`${model.key}: field "${name}" is computed, but the model does not annotate its rows`);
    if (declaration.related && !site.models.has(declaration.related)) {
      throw new RegistryError(`${model.key}: field "${name}" relates to ${declaration.related}, which is not registered`);
    }
  }
  for (const inline of model.inlines ?? []) {
    const target = site.models.get(inline.model);
    if (!target) throw new RegistryError(`${model.key}: inline ${inline.model} is not registered`);
    if (!target.columnTypes.has(inline.fk)) throw new RegistryError(`${model.key}: inline ${inline.model} has no column "${inline.fk}"`);
    for (const column of Object.keys(inline.where ?? {})) {
      if (!target.columnTypes.has(column)) throw new RegistryError(`${model.key}: inline ${inline.model} has no column "${column}"`);
    }
    for (const name of inline.fields ?? []) if (!fieldExists(site, target, name)) fail(`inline ${inline.model} field`, name);
  }
  // Every database foreign key of the table is either a declared relation or marked plain.
  for (const foreignKey of foreignKeys) {
    if (foreignKey.table_name !== model.table) continue;
    const declaration = model.fields?.[foreignKey.column_name];
    if (declaration?.related || declaration?.type === 'uuid' || declaration?.type === 'string' || declaration?.type === 'integer') continue;
    if (declaration?.hidden) continue;
    throw new RegistryError(
      `${model.key}: column "${foreignKey.column_name}" references ${foreignKey.target_table}; declare it as a relation (related) or as a plain value (type)`,
    );
  }
}

/**
 * The extension points of the generic back office, filled by the composition root
 * (src/app/registrations.ts): no generic page or endpoint imports a module to show its part.
 */
export interface SiteExtensions {
  /** Blocks of a record's detail, for the mobile detail and the web change page alike. */
  detailBlocks: readonly DetailBlockProvider[];
  /**
   * Sections of the web change page drawn from those blocks: each placed above the record's form
   * (`top`: the work done on the record, such as its decision form and matched rules) or below it
   * (`bottom`, after the inlines).
   */
  detailSections: readonly PlacedDetailSection[];
  /**
   * Menu entries that are links rather than models (the dashboard, the video-call console, reports),
   * so the phone's menu matches the web's: shown to a user who holds the permission each names.
   */
  menuLinks?: readonly MenuLink[];
  /** Panels of the web admin's index (the dashboard): each reads what it shows for the viewer and draws it. */
  indexPanels?: readonly IndexPanel[];
}

/** A panel of the admin index: an async function of the viewer that returns a preact element (or null), typed loosely so the generic half needs no JSX. */
export type IndexPanel = (context: { db: Knex; site: AdminSite; principal: Principal; now: Date }) => Promise<unknown>;

/** A menu entry that is a link (the spec's menu item of type url). */
export interface MenuLink {
  /** The menu group it goes in (a model group of that label, or a group of its own). */
  group: string;
  label: string;
  icon?: string | null;
  /** Where it leads: an address on this service (a mobile API path for the phone). */
  url: string;
  /** The permission (app_label.codename) a user needs to see it; a superuser sees every link. */
  permission: string;
}

export type DetailSectionPosition = 'top' | 'bottom';

/** A web detail section and where on the change page it goes. */
export interface PlacedDetailSection {
  position: DetailSectionPosition;
  component: DetailSection;
}

/** What a web detail section is given: the record, its detail blocks, the form token, and how the viewer reads dates. */
export interface DetailSectionProps {
  model: BoundModel;
  pk: string;
  blocks: Record<string, unknown>;
  csrfToken: string;
  /** The viewer's time zone and date and time formats (the user row). */
  preferences: { timezone: string; date_format: string; time_format: string; show_today: boolean };
}

/** A preact function component; typed loosely here so the generic half needs no JSX. */
export type DetailSection = (props: DetailSectionProps) => unknown;

/** The extra blocks of one record's detail, merged, for the mobile detail and the web change page alike. */
export async function detailBlocks(db: Knex, site: AdminSite, model: BoundModel, row: Row, principal: Principal): Promise<Record<string, unknown>> {
  // The providers read independently: asked at once, merged in their listed order.
  const providers = site.extensions.detailBlocks.filter((provider) => !provider.models || provider.models.includes(model.key));
  const parts = await Promise.all(providers.map((provider) => provider.blocks({ db, site, model, row, principal })));
  return Object.assign({}, ...parts) as Record<string, unknown>;
}

/**
 * Blocks a module adds to the detail of records (the mobile detail and the web change page both
 * include them): decision context, the mark block, the approval block, the pending marker. One
 * provider per module, listed by the composition root, so no page or endpoint knows them one by one.
 */
export interface DetailBlockProvider {
  /** The model keys (app_label.model) it adds to; absent means every model. */
  models?: readonly string[];
  /** What the mobile schema says of the blocks it adds (name, label, the shape of its value). */
  describes?: readonly BlockDescription[] | ((model: BoundModel) => readonly BlockDescription[]);
  blocks(context: DetailBlockContext): Promise<Record<string, unknown>>;
}

export interface BlockDescription {
  name: string;
  label: string;
  description: string;
}

/** The blocks a model's detail carries, as the mobile schema describes them. */
export function describedBlocks(site: AdminSite, model: BoundModel): BlockDescription[] {
  return site.extensions.detailBlocks
    .filter((provider) => !provider.models || provider.models.includes(model.key))
    .flatMap((provider) => (typeof provider.describes === 'function' ? provider.describes(model) : (provider.describes ?? [])));
}

export interface DetailBlockContext {
  db: Knex;
  site: AdminSite;
  model: BoundModel;
  row: Row;
  principal: Principal;
}
