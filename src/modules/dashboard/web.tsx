import type { Knex } from 'knex';
import { mayName } from '../backoffice/access.ts';
import { scopedQuery } from '../backoffice/query.ts';
import type { AdminSite, IndexPanel } from '../backoffice/site.ts';
import { formatTimestamp } from '../../timestamps.ts';
import type { Principal } from '../staff/principal.ts';
import { agentSummary, cards, CARDS, CHART_DAYS, decisionsByDay, highVolumeCustomers, lobby } from './blocks.ts';

/**
 * The dashboard at the top of the web admin's index (issue 37): the viewer's own work (cases
 * assigned to them, unassigned open cases, alerts raised today, approval requests waiting for
 * their signature, KYC sessions waiting for a call), the mobile dashboard's cards, each a link to
 * the list it counts, and the mobile dashboard's blocks (decisions by day, high-volume customers,
 * the video-call lobby, the agent's own summary) from the same functions the mobile API answers
 * with. Only what the viewer may view (the same models the mobile blocks require); every count
 * and block read at once.
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

/** The UTC day's start, as the lists' range filters take it. */
function startOfUtcDay(now: Date): string {
  return `${now.toISOString().slice(0, 10)}T00:00:00Z`;
}

/** One of the viewer's own counts: what its link lists, counted by the list's own scoped query. */
interface OwnCount {
  key: string;
  label: string;
  href: string;
  query: Knex.QueryBuilder;
}

/**
 * The viewer's own counts (their open cases, the unassigned open ones, alerts today, KYC sessions
 * waiting for a call, the requests they may sign), each only for a viewer of its model, all read
 * in one statement (each a scalar subquery), so the page holds one connection for them.
 */
async function ownCounts(db: Knex, site: AdminSite, principal: Principal, now: Date): Promise<Count[]> {
  const may = (key: string) => {
    const model = site.models.get(key);
    return model && site.can(principal, model, 'view') ? model : undefined;
  };
  const cases = may('engine.watchlist');
  const alerts = may('engine.alert');
  const sessions = may('document.documentverificationsession');
  const pending = may('approval.pendingapprovalrequest');
  const today = startOfUtcDay(now);
  // Each count is exactly what its link lists (the list's filters, not a condition of its own).
  const counts: OwnCount[] = [
    ...(cases
      ? [
          { key: 'my_cases', label: 'Cases assigned to me', href: listUrl(cases.key, { assignee_id__assigned: 'me' }), query: scopedQuery(db, cases, principal).where('t.assignee_id', principal.user.id) },
          {
            key: 'unassigned_cases',
            label: 'Unassigned open cases',
            href: listUrl(cases.key, { assignee_id__assigned: 'none', status__exact: 'open' }),
            query: scopedQuery(db, cases, principal).whereNull('t.assignee_id').where('t.status', 'open'),
          },
        ]
      : []),
    ...(alerts
      ? [{ key: 'alerts_today', label: 'Alerts raised today (UTC)', href: listUrl(alerts.key, { created_at__range__gte: today }), query: scopedQuery(db, alerts, principal).where('t.created_at', '>=', today) }]
      : []),
    ...(sessions
      ? [
          {
            key: 'sessions_for_call',
            label: 'KYC sessions waiting for a call',
            href: listUrl(sessions.key, { status__exact: 'open', requires_video_call__exact: 'true' }),
            query: scopedQuery(db, sessions, principal).where({ 't.status': 'open', 't.requires_video_call': true }),
          },
        ]
      : []),
    // The proxy's scope is the requests this viewer may act on.
    ...(pending ? [{ key: 'my_signatures', label: 'Waiting for my signature', href: listUrl(pending.key, {}), query: scopedQuery(db, pending, principal) }] : []),
  ];
  if (!counts.length) return [];
  const row = (await db
    .select(Object.fromEntries(counts.map((count) => [count.key, db.raw('(?)', [count.query.clone().clearSelect().count('*')])])))
    .first()) as Record<string, string | number>;
  return counts.map(({ key, label, href }) => ({ key, label, href, value: Number(row[key]) }));
}

function Cards({ counts }: { counts: Count[] }) {
  return (
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
  );
}

type Decisions = Awaited<ReturnType<typeof decisionsByDay>>;
const DECISION_CLASSES: Record<string, string> = { ACCEPT: 'bar-accept', REVIEW: 'bar-review', REJECT: 'bar-reject', NONE: 'bar-none' };
const CHART = { width: 600, height: 160, gap: 2 };

/**
 * Financial events per UTC day by decision, as stacked bars (SVG: the page's CSP allows no inline
 * styles) with the figures in a table beside it for screen readers and exact numbers.
 */
function DecisionsChart({ decisions }: { decisions: Decisions }) {
  const totals = decisions.days.map((_, index) => decisions.series.reduce((sum, entry) => sum + entry.values[index]!, 0));
  const highest = Math.max(1, ...totals);
  const barWidth = CHART.width / decisions.days.length - CHART.gap;
  const summary = decisions.series.map((entry) => `${entry.decision} ${decisions.totals[entry.decision]!.toLocaleString('en-US')}`).join(', ');
  return (
    <section class="module dashboard-block" aria-labelledby="decisions-title">
      <h2 id="decisions-title">Decisions by day, last {CHART_DAYS} days (UTC)</h2>
      <svg class="decisions-chart" viewBox={`0 0 ${CHART.width} ${CHART.height}`} role="img" aria-labelledby="decisions-summary">
        <title id="decisions-summary">Financial events per day by decision over {CHART_DAYS} days: {summary}</title>
        {decisions.days.map((day, index) => {
          let top = CHART.height;
          return (
            <g key={day}>
              {decisions.series.map((entry) => {
                const height = (entry.values[index]! / highest) * CHART.height;
                top -= height;
                return height > 0 ? <rect key={entry.decision} class={DECISION_CLASSES[entry.decision] ?? 'bar-none'} x={index * (barWidth + CHART.gap)} y={top} width={barWidth} height={height} /> : null;
              })}
            </g>
          );
        })}
      </svg>
      <p class="dashboard-legend">
        {decisions.series.map((entry) => (
          <span key={entry.decision} class={`legend ${DECISION_CLASSES[entry.decision] ?? 'bar-none'}`}>
            {entry.decision}: {decisions.totals[entry.decision]!.toLocaleString('en-US')}
          </span>
        ))}
      </p>
      <details>
        <summary>Figures by day</summary>
        <table class="results">
          <thead>
            <tr>
              <th scope="col">Day</th>
              {decisions.series.map((entry) => (
                <th key={entry.decision} scope="col">
                  {entry.decision}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {decisions.days.map((day, index) => (
              <tr key={day}>
                <th scope="row">{day}</th>
                {decisions.series.map((entry) => (
                  <td key={entry.decision}>{entry.values[index]!.toLocaleString('en-US')}</td>
                ))}
              </tr>
            ))}
          </tbody>
        </table>
      </details>
    </section>
  );
}

type Volumes = Awaited<ReturnType<typeof highVolumeCustomers>>;

function HighVolume({ volumes }: { volumes: Volumes }) {
  return (
    <section class="module dashboard-block" aria-labelledby="volume-title">
      <h2 id="volume-title">High-volume customers, last {volumes.days} days</h2>
      {volumes.results.length ? (
        <table class="results">
          <thead>
            <tr>
              <th scope="col">Customer</th>
              <th scope="col">Amount</th>
              <th scope="col">Transactions</th>
            </tr>
          </thead>
          <tbody>
            {volumes.results.map((row, index) => (
              <tr key={index}>
                <td>{row.target ? <a href={`/admin/customer/customer/${encodeURIComponent(row.target.pk)}/change/`}>{row.name || row.customer_ref}</a> : 'Not shown (no permission)'}</td>
                <td>
                  {row.amount} {row.currency}
                </td>
                <td>{row.transactions.toLocaleString('en-US')}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p>No financial events in these days.</p>
      )}
    </section>
  );
}

type Lobby = Awaited<ReturnType<typeof lobby>>;

function LobbyBlock({ queue, sessionsUrl }: { queue: Lobby; sessionsUrl: string }) {
  return (
    <section class="module dashboard-block" aria-labelledby="lobby-title">
      <h2 id="lobby-title">Video-call lobby</h2>
      <p>
        {queue.waiting} waiting; agents available {queue.agents.available}, in a call {queue.agents.in_call}.
      </p>
      {queue.queue.length > 0 && (
        <table class="results">
          <thead>
            <tr>
              <th scope="col">Session</th>
              <th scope="col">Customer</th>
              <th scope="col">Status</th>
              <th scope="col">Waiting since</th>
            </tr>
          </thead>
          <tbody>
            {queue.queue.slice(0, 10).map((row) => (
              <tr key={row.session_id}>
                <td>
                  <a href={`${sessionsUrl}${encodeURIComponent(row.session_id)}/change/`}>{row.session_id}</a>
                </td>
                <td>{row.customer_ref}</td>
                <td>{row.offered_to_you ? 'offered to you' : row.status}</td>
                <td>
                  {row.enqueued_at} ({Math.round(row.waited_seconds / 60)} min)
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

type Summary = Awaited<ReturnType<typeof agentSummary>>;

function AgentBlock({ summary }: { summary: Summary }) {
  if (!summary.today) return null;
  return (
    <section class="module dashboard-block" aria-labelledby="agent-title">
      <h2 id="agent-title">My calls</h2>
      <p>
        {summary.availability_label}
        {summary.in_call ? ', in a call' : ''}. Today: {summary.today.calls} calls, {summary.today.on_screen_hours} h on screen. Last {summary.kpis!.days} days: {summary.kpis!.calls} calls
        {summary.kpis!.average_call_seconds !== null ? `, ${Math.round(summary.kpis!.average_call_seconds / 60)} min on average` : ''}.
      </p>
    </section>
  );
}

export const dashboardPanel: IndexPanel = async ({ db, site, principal, now }) => {
  const may = (key: string) => {
    const model = site.models.get(key);
    return model !== undefined && site.can(principal, model, 'view');
  };
  const visibleCards = CARDS.filter((spec) => may(spec.model));
  // The blocks need what the mobile dashboard's need: financial events, verification sessions, an agent.
  const events = may('transaction.financialevent');
  const sessions = site.models.get('document.documentverificationsession');
  const [counts, decisions, volumes, queue, summary] = await Promise.all([
    Promise.all([
      ownCounts(db, site, principal, now),
      cards(db, visibleCards, now).then((shown) => shown.map((card, index): Count => ({ key: card.key, label: card.label, value: card.value, trend: card.trend, href: listUrl(visibleCards[index]!.model, visibleCards[index]!.filters) }))),
    ]).then(([own, shownCards]) => [...own, ...shownCards]),
    events ? decisionsByDay(db, now) : null,
    events ? highVolumeCustomers(db, now, mayName(site, principal, 'customer.customer')) : null,
    sessions && may(sessions.key) ? lobby(db, principal, now) : null,
    principal.agent ? agentSummary(db, principal, now) : null,
  ]);
  if (!counts.length && !decisions && !queue && !summary) return null;
  return (
    <div class="index-dashboard">
      <section class="module" aria-labelledby="index-dashboard-title">
        <h2 id="index-dashboard-title">Dashboard</h2>
        <Cards counts={counts} />
        <p class="help">Figures as of {formatTimestamp(now)} UTC.</p>
      </section>
      <div class="dashboard-blocks">
        {decisions && <DecisionsChart decisions={decisions} />}
        {volumes && <HighVolume volumes={volumes} />}
        {queue && sessions && <LobbyBlock queue={queue} sessionsUrl={`/admin/${sessions.key.replace('.', '/')}/`} />}
        {summary && <AgentBlock summary={summary} />}
      </div>
    </div>
  );
};
