import type { Knex } from 'knex';
import type { Context } from 'koa';
import type { AppContext } from '../../../context.ts';
import { HttpError } from '../../../http/errors.ts';
import { filterParameters } from '../query.ts';
import type { BoundModel } from '../registry.ts';
import { adminState, forbidden, modelFromParams, modelUrl } from './common.tsx';
import { CsrfField } from './layout.tsx';
import { addMessage } from './session.ts';

/**
 * Saved filters: a user names the changelist query they are looking at (filters and search) and
 * finds it again as a shortcut on the changelist and the index. Rows of staff_saved_filters,
 * each user's own; a query is checked against the model's filter parameters before it is kept.
 */

export interface SavedFilter {
  id: number;
  app_label: string;
  model: string;
  name: string;
  query: string;
}

const MAX_NAME = 100;
const MAX_QUERY = 2000;

/** The user's saved filters, of one model or of all. */
export async function savedFiltersOf(db: Knex, userId: string, model?: BoundModel): Promise<SavedFilter[]> {
  const query = db('staff_saved_filters').where({ user_id: userId }).select('id', 'app_label', 'model', 'name', 'query').orderBy(['app_label', 'model', 'name']);
  if (model) query.where({ app_label: model.appLabel, model: model.model });
  return (await query) as SavedFilter[];
}

export function savedFilterUrl(filter: SavedFilter): string {
  return `/admin/${filter.app_label}/${filter.model}/${filter.query ? `?${filter.query}` : ''}`;
}

export function SavedFilterPanel({ model, savedFilters, current, csrfToken }: { model: BoundModel; savedFilters: SavedFilter[]; current: string; csrfToken: string }) {
  return (
    <section class="saved-filters">
      <h2>Saved filters</h2>
      {savedFilters.length > 0 ? (
        <ul>
          {savedFilters.map((filter) => (
            <li key={filter.id}>
              <a href={savedFilterUrl(filter)} aria-current={filter.query === current ? 'true' : undefined}>
                {filter.name}
              </a>
              <form method="post" action={modelUrl(model, `saved-filters/${filter.id}/delete/`)} class="inline-form">
                <CsrfField token={csrfToken} />
                <button type="submit" class="link-button delete-link" aria-label={`Delete saved filter ${filter.name}`} title="Delete">
                  ✕
                </button>
              </form>
            </li>
          ))}
        </ul>
      ) : (
        <p class="help">None yet.</p>
      )}
      {current && (
        <form method="post" action={modelUrl(model, 'saved-filters/')} class="save-filter">
          <CsrfField token={csrfToken} />
          <input type="hidden" name="query" value={current} />
          <label for="id_filter_name">Save current filters as</label>
          <input type="text" name="name" id="id_filter_name" maxLength={MAX_NAME} required />
          <button type="submit" class="button-small">
            Save
          </button>
        </form>
      )}
    </section>
  );
}

/** The filters and search of a query string, checked against the model; null when it names something else. */
function cleanQuery(model: BoundModel, raw: string): string | null {
  const known = filterParameters(model);
  const kept = new URLSearchParams();
  for (const [name, value] of new URLSearchParams(raw)) {
    if (name === 'o' || name === 'p') continue;
    if (name !== 'q' && !known.has(name)) return null;
    if (value !== '') kept.append(name, value);
  }
  return kept.toString();
}

export async function saveFilter(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const state = adminState(ctx);
  if (!app.backoffice.site.can(state.principal, model, 'view')) forbidden(`You do not have permission to view ${model.verboseNamePlural}.`);
  const form = state.form!;
  const name = (form.get('name') ?? '').trim();
  const query = cleanQuery(model, form.get('query') ?? '');
  let problem: string | null = null;
  if (!name || name.length > MAX_NAME || !name.isWellFormed() || name.includes('\u0000')) problem = `A saved filter needs a name of 1 to ${MAX_NAME} characters.`;
  else if (query === null) problem = 'The query names a filter this list does not have.';
  else if (!query || query.length > MAX_QUERY) problem = 'There is no filter or search to save (or it is too long).';
  if (problem) {
    await addMessage(app.db, state.session, { level: 'error', text: problem });
    ctx.redirect(modelUrl(model));
    return;
  }
  const inserted = await app.db('staff_saved_filters')
    .insert({ user_id: state.principal.user.id, app_label: model.appLabel, model: model.model, name, query })
    .onConflict(['user_id', 'app_label', 'model', 'name'])
    .ignore()
    .returning('id');
  await addMessage(
    app.db,
    state.session,
    inserted.length ? { level: 'success', text: `Saved the filter “${name}”.` } : { level: 'error', text: `You already have a saved filter named “${name}” here.` },
  );
  ctx.redirect(`${modelUrl(model)}?${query}`);
}

export async function deleteFilter(ctx: Context, app: AppContext): Promise<void> {
  const model = modelFromParams(app, ctx.params);
  const state = adminState(ctx);
  const id = ctx.params.id ?? '';
  // Only the owner's own rows: someone else's id is as unknown as a missing one.
  const deleted = /^\d{1,9}$/.test(id)
    ? await app.db('staff_saved_filters').where({ id: Number(id), user_id: state.principal.user.id, app_label: model.appLabel, model: model.model }).delete().returning('name')
    : [];
  if (!deleted.length) throw new HttpError(404, 'No such saved filter.');
  await addMessage(app.db, state.session, { level: 'success', text: `Deleted the saved filter “${deleted[0].name}”.` });
  ctx.redirect(modelUrl(model));
}
