import type { Knex } from 'knex';
import { scopedQuery } from '../backoffice/query.ts';
import type { AdminSite, IndexPanel } from '../backoffice/site.ts';
import type { Principal } from '../staff/principal.ts';
import { card, CARDS } from './blocks.ts';

/**
 * The dashboard at the top of the web admin's index (issue 37): the viewer's own work (cases
 * assigned to them, unassigned open cases, approval requests waiting for their signature), then
 * the mobile dashboard's cards, each a link to the list it counts. Only what the viewer may view;
 * every count in one statement of its own, all sent at once.
 */

interface Count {
  key: string;
  label: string;
  value: number;
  href: string;
  /** The 7 daily counts of a card, oldest first; absent for the viewer's own counts. */
  trend?: number[];
}

function listUrl(modelKey: string, filters: Record<string, string>): string {
  const [app, model] = modelKey.split('.');
  const query = new URLSearchParams(filters).toString();
  return `/admin/${app}/${model}/${query ? `?${query}` : ''}`;
}

async function countOf(query: Knex.QueryBuilder): Promise<number> {
  const [row] = (await query.count('* as count')) as { count: string }[];
  return Number(row?.count ?? 0);
}

/** The viewer's own counts: their open cases, the unassigned open ones, and the requests they may sign. */
function ownCounts(db: Knex, site: AdminSite, principal: Principal): Promise<Count | null>[] {
  const cases = site.models.get('engine.watchlist');
  const pending = site.models.get('approval.pendingapprovalrequest');
  const counts: Promise<Count | null>[] = [];
  if (cases && site.can(principal, cases, 'view')) {
    counts.push(
      // Each count is exactly what its link lists (the list's filters, not a condition of its own).
      countOf(scopedQuery(db, cases, principal).where('t.assignee_id', principal.user.id)).then((value) => ({
        key: 'my_cases',
        label: 'Cases assigned to me',
        value,
        href: listUrl(cases.key, { assignee_id__assigned: 'me' }),
      })),
      countOf(scopedQuery(db, cases, principal).whereNull('t.assignee_id').where('t.status', 'open')).then((value) => ({
        key: 'unassigned_cases',
        label: 'Unassigned open cases',
        value,
        href: listUrl(cases.key, { assignee_id__assigned: 'none', status__exact: 'open' }),
      })),
    );
  }
  if (pending && site.can(principal, pending, 'view')) {
    // The proxy's scope is the requests this viewer may act on.
    counts.push(countOf(scopedQuery(db, pending, principal)).then((value) => ({ key: 'my_signatures', label: 'Waiting for my signature', value, href: listUrl(pending.key, {}) })));
  }
  return counts;
}

function Panel({ counts }: { counts: Count[] }) {
  return (
    <section class="module index-dashboard" aria-labelledby="index-dashboard-title">
      <h2 id="index-dashboard-title">Dashboard</h2>
      <ul class="dashboard-cards">
        {counts.map((count) => (
          <li key={count.key} class="dashboard-card">
            <a href={count.href}>
              <span class="dashboard-value">{count.value.toLocaleString('en-US')}</span> <span class="dashboard-label">{count.label}</span>
            </a>
            {count.trend && <span class="help"> last 7 days: {count.trend.join(', ')}</span>}
          </li>
        ))}
      </ul>
    </section>
  );
}

export const dashboardPanel: IndexPanel = async ({ db, site, principal, now }) => {
  const cards = CARDS.filter((spec) => {
    const model = site.models.get(spec.model);
    return model !== undefined && site.can(principal, model, 'view');
  }).map((spec) =>
    card(db, spec, now).then((shown): Count => ({ key: shown.key, label: shown.label, value: shown.value, trend: shown.trend, href: listUrl(spec.model, spec.filters) })),
  );
  const counts = (await Promise.all([...ownCounts(db, site, principal), ...cards])).filter((count): count is Count => count !== null);
  return counts.length ? <Panel counts={counts} /> : null;
};
