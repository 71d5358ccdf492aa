import type { Knex } from 'knex';
import type { Principal } from '../staff/principal.ts';
import { autocomplete, QueryError, type AutocompletePage } from './query.ts';
import type { BoundModel, ResolvedField } from './registry.ts';
import type { AdminSite } from './site.ts';
import { PermissionDenied } from './errors.ts';

/**
 * The options of a relation field, as the web form's search box and the mobile API's
 * autocomplete/ both offer them (Django's AutocompleteJsonView): the user must be able to use the
 * model's forms at all (view, add or change) and to view the target model, whose scope applies.
 */

/** A field whose options can be searched: an fk or m2m to a registered model, not hidden. */
export function relationField(model: BoundModel, name: string): ResolvedField | undefined {
  return model.formFields.find((field) => field.name === name && (field.type === 'fk' || field.type === 'm2m') && field.related !== null && !field.declaration.hidden);
}

export async function relationOptions(
  site: AdminSite,
  db: Knex,
  principal: Principal,
  model: BoundModel,
  fieldName: string,
  search: string,
  page: number,
): Promise<{ field: ResolvedField; options: AutocompletePage }> {
  const perms = site.perms(principal, model);
  if (!perms.view && !perms.add && !perms.change) throw new PermissionDenied(`You do not have permission to use ${model.verboseNamePlural}.`);
  if (!fieldName) throw new QueryError('field is required: the name of a relation field of the model.', 'field');
  const field = relationField(model, fieldName);
  if (!field) throw new QueryError(`${fieldName.slice(0, 100)} is not a relation field of ${model.verboseNamePlural}.`, 'field');
  const target = site.models.get(field.related!)!;
  if (!site.can(principal, target, 'view')) throw new PermissionDenied(`You do not have permission to view ${target.verboseNamePlural}.`);
  return { field, options: await autocomplete(db, target, principal, search, page) };
}
