import type Router from '@koa/router';
import type { Context } from 'koa';
import type { ComponentChildren } from 'preact';
import type { AppContext } from '../../../context.ts';
import type { BoundModel } from '../registry.ts';
import { isOwnPage, postOwnPage, postPairing, postPassword, showOwnPage } from './account.tsx';
import { postChangelistAction, showChangelist } from './changelist.tsx';
import { postAddForm, postDeletePage, renderObjectPage, showAddForm, showDeletePage, showHistory, submitObjectForm } from './changeform.tsx';
import { showAutocomplete } from './autocomplete.ts';
import { exportChangelist } from './export.ts';
import { adminState, ADMIN_ROOT, capitalize, modelFromParams, modelUrl, renderPage } from './common.tsx';
import { deleteFilter, saveFilter, savedFiltersOf, savedFilterUrl, type SavedFilter } from './saved-filters.tsx';

/**
 * The pages the registry generates, under /admin/ behind the shell (registered after it, so its
 * session, CSRF and header middleware has run): the index, and per model the changelist, add,
 * change, delete and history pages; saved filters; the user's own page with password change and
 * phone pairing.
 */

interface IndexGroup {
  name: string;
  models: { model: BoundModel; canAdd: boolean }[];
}

function IndexPage({ groups, savedFilters, models, panels }: { groups: IndexGroup[]; savedFilters: SavedFilter[]; models: Map<string, BoundModel>; panels: ComponentChildren[] }) {
  return (
    <>
      <h1>Site administration</h1>
      {panels}
      <div class="dashboard">
        <div class="app-list">
          {groups.length === 0 && <p>You don’t have permission to view or edit anything.</p>}
          {groups.map((group) => (
            <section class="module" key={group.name}>
              <h2>{group.name}</h2>
              <table>
                <tbody>
                  {group.models.map(({ model, canAdd }) => (
                    <tr key={model.key}>
                      <th scope="row">
                        <a href={modelUrl(model)}>{capitalize(model.verboseNamePlural)}</a>
                      </th>
                      <td class="add-link">
                        {canAdd && (
                          <a href={modelUrl(model, 'add/')} aria-label={`Add ${model.verboseName}`}>
                            + Add
                          </a>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </section>
          ))}
        </div>
        <aside class="module saved-shortcuts">
          <h2>Saved filters</h2>
          {savedFilters.length === 0 ? (
            <p class="help">Save a changelist’s filters and search under a name to find them here.</p>
          ) : (
            <ul>
              {savedFilters.map((filter) => (
                <li key={filter.id}>
                  <a href={savedFilterUrl(filter)}>{filter.name}</a>{' '}
                  <span class="help">{capitalize(models.get(`${filter.app_label}.${filter.model}`)?.verboseNamePlural ?? filter.model)}</span>
                </li>
              ))}
            </ul>
          )}
        </aside>
      </div>
    </>
  );
}

async function showIndex(ctx: Context, app: AppContext): Promise<void> {
  const state = adminState(ctx);
  const site = app.backoffice.site;
  const groups: IndexGroup[] = [];
  for (const model of site.visibleModels(state.principal)) {
    const name = model.menu?.group ?? capitalize(model.appLabel);
    let group = groups.find((candidate) => candidate.name === name);
    if (!group) groups.push((group = { name, models: [] }));
    group.models.push({ model, canAdd: site.can(state.principal, model, 'add') });
  }
  const visible = new Set(site.visibleModels(state.principal).map((model) => model.key));
  // The modules' panels (the dashboard), read at once with the saved filters.
  const [saved, panels] = await Promise.all([
    savedFiltersOf(app.db, state.principal.user.id),
    Promise.all((site.extensions.indexPanels ?? []).map((panel) => panel({ db: app.db, site, principal: state.principal, now: app.now?.() ?? new Date() }))),
  ]);
  const savedFilters = saved.filter((filter) => visible.has(`${filter.app_label}.${filter.model}`));
  await renderPage(ctx, app, 200, 'Site administration', [{ label: 'Home' }], <IndexPage groups={groups} savedFilters={savedFilters} models={site.models} panels={panels as ComponentChildren[]} />);
}

export function registerAdminPages(router: Router, app: AppContext): void {
  const page = (handler: (ctx: Context, app: AppContext) => Promise<void>) => (ctx: Context) => handler(ctx, app);

  router.get(ADMIN_ROOT, page(showIndex));
  router.post('/admin/auth/user/:pk/password/', page(postPassword));
  router.post('/admin/auth/user/:pk/pairing/', page(postPairing));
  router.post('/admin/:app/:model/saved-filters/', page(saveFilter));
  router.post('/admin/:app/:model/saved-filters/:id/delete/', page(deleteFilter));
  router.get('/admin/:app/:model/', page(showChangelist));
  router.post('/admin/:app/:model/', page(postChangelistAction));
  router.get('/admin/:app/:model/autocomplete/', page(showAutocomplete));
  router.get('/admin/:app/:model/export.csv', page(exportChangelist));
  router.get('/admin/:app/:model/add/', page(showAddForm));
  router.post('/admin/:app/:model/add/', page(postAddForm));
  router.get(
    '/admin/:app/:model/:pk/change/',
    page((ctx) => (isOwnPage(ctx) ? showOwnPage(ctx, app) : renderObjectPage(ctx, app, modelFromParams(app, ctx.params), ctx.params.pk!))),
  );
  router.post(
    '/admin/:app/:model/:pk/change/',
    page((ctx) => (isOwnPage(ctx) ? postOwnPage(ctx, app) : submitObjectForm(ctx, app, modelFromParams(app, ctx.params), ctx.params.pk!))),
  );
  router.get('/admin/:app/:model/:pk/delete/', page(showDeletePage));
  router.post('/admin/:app/:model/:pk/delete/', page(postDeletePage));
  router.get('/admin/:app/:model/:pk/history/', page(showHistory));
}
