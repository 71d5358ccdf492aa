import { HttpError } from '../../http/errors.ts';
import type { Principal } from '../staff/principal.ts';
import type { ActionDeclaration, BoundModel, Operation, ResolvedField, Row } from './registry.ts';
import type { AdminSite } from './site.ts';
import { ChainError } from './errors.ts';

/**
 * The access core: for a principal, a model and (where it matters) one of its rows, what may be
 * seen and done. Every face (web admin, mobile data API, MCP tools, reports, dashboard blocks,
 * notifications, the live socket) asks here instead of re-deriving the registry's rules:
 * - which rows: the registration's `scope` (query.ts scopedQuery applies it to every query);
 * - which fields: `visibleRow` and `visibleFields` (a hidden field never leaves the server);
 * - which operations: `site.can` for the model, `canObject` for one row;
 * - which actions: `canRunAction`;
 * - which related records may be named: `mayName`;
 * - whether an approval policy covers the effect: the write chain's approval hook and, for
 *   decisions, cases/decisions.ts clearDecision, both keyed by the effect, not the door;
 * - the error each refusal raises: ChainError's status and reason, mapped once per face by
 *   `httpErrorOf` (or read as text by the MCP tools).
 */

/** Whether a field is declared hidden: secrets, hashes, payloads only the service reads. */
export function isHidden(model: BoundModel, name: string): boolean {
  return model.fields?.[name]?.hidden === true;
}

/** A model's form fields that may be shown. */
export function visibleFields(model: BoundModel): ResolvedField[] {
  return model.formFields.filter((field) => !field.declaration.hidden);
}

/**
 * A stored row as it may leave the server for this viewer: hidden fields and binary columns
 * dropped, redacted fields in the part the viewer may read, times as ISO instants. The MCP tools
 * and anything else that hands whole rows out read rows through this.
 */
export function visibleRow(site: AdminSite, principal: Principal, model: BoundModel, row: Row): Row {
  const visible: Row = {};
  const mayView = (key: string) => mayName(site, principal, key);
  for (const [name, value] of Object.entries(row)) {
    if (isHidden(model, name) || Buffer.isBuffer(value)) continue;
    const redact = model.fields?.[name]?.redact;
    visible[name] = redact && value !== null && value !== undefined ? redact(value, mayView) : value instanceof Date ? value.toISOString() : value;
  }
  return visible;
}

/** Whether the principal may do `operation` on this one row: the model permission, then the registration's object permission. */
export function canObject(site: AdminSite, principal: Principal, model: BoundModel, operation: Operation, row: Row): boolean {
  return site.can(principal, model, operation) && (!model.objectPermission || model.objectPermission(principal, operation, row));
}

/** The four operations on one row (the detail's `perms`, the change page's buttons). */
export function objectPerms(site: AdminSite, principal: Principal, model: BoundModel, row: Row): Record<Operation, boolean> {
  return {
    view: canObject(site, principal, model, 'view', row),
    add: site.can(principal, model, 'add'),
    change: canObject(site, principal, model, 'change', row),
    delete: canObject(site, principal, model, 'delete', row),
  };
}

/** Whether the principal may run a bulk action: an operation on the model, or a custom codename. */
export function canRunAction(site: AdminSite, principal: Principal, model: BoundModel, action: ActionDeclaration): boolean {
  const operation = action.permission as Operation;
  return ['view', 'add', 'change', 'delete'].includes(operation) ? site.can(principal, model, operation) : principal.has(action.permission);
}

/** The actions of a model the principal may run. */
export function runnableActions(site: AdminSite, principal: Principal, model: BoundModel): ActionDeclaration[] {
  return (model.actions ?? []).filter((action) => canRunAction(site, principal, model, action));
}

/**
 * Whether a record of another model may be named to the principal (its repr in a relation, a joined
 * column, a dashboard row): only where they may view that model. A case's customer is a name to
 * someone who may view customers and an id to everyone else.
 */
export function mayName(site: AdminSite, principal: Principal, modelKey: string): boolean {
  const model = site.models.get(modelKey);
  return model !== undefined && site.can(principal, model, 'view');
}

/** A refusal of the write chain or the access checks as the envelope's HTTP error; anything else is returned as it is. */
export function httpErrorOf(error: unknown): unknown {
  if (error instanceof ChainError) return new HttpError(error.status, error.message, error.reason, error.data());
  return error;
}

/** How a record of another model reads to the principal: its repr where they may view its model, else its kind and key. */
export function reprFor(site: AdminSite, principal: Principal, model: BoundModel, row: Row): string {
  return site.can(principal, model, 'view') ? model.repr(row) : `${model.verboseName} ${String(row[model.pk])}`;
}

/**
 * The access rule in SQL, for statements that pick many users at once (who is notified): the ids
 * (column `id`) of active staff holding any of the codenames, directly or through a group, and of
 * every active superuser (Principal.has), as a query that names the codenames array twice by `codenames`
 * (a placeholder), so a statement can use it as a subquery.
 */
export function usersWhoMaySql(codenames: string): string {
  return `select u.id from staff_users u
     where u.is_active and u.is_staff and (
       u.is_superuser
       or exists (select 1 from staff_user_permissions p where p.user_id = u.id and p.codename = any(${codenames}))
       or exists (select 1 from staff_user_groups ug join staff_group_permissions gp on gp.group_id = ug.group_id
                  where ug.user_id = u.id and gp.codename = any(${codenames})))`;
}
