import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { respond } from '../../http/envelope.ts';
import { getRow, validPk } from '../backoffice/query.ts';
import type { BoundModel, Row } from '../backoffice/registry.ts';
import type { DetailSectionProps } from '../backoffice/site.ts';
import { saveObject } from '../backoffice/write.ts';
import { ValidationFailed } from '../backoffice/errors.ts';
import { httpErrorOf } from '../backoffice/access.ts';
import { CsrfField } from '../backoffice/web/layout.tsx';
import { adminState, forbidden, homeCrumbs, notFound, objectUrl, renderPage } from '../backoffice/web/common.tsx';
import { addMessage } from '../backoffice/web/session.ts';
import { formatDateTime, type DatePreferences } from '../backoffice/web/format.ts';
import { acceptOnly } from '../mobile/parameters.ts';
import type { MobileState } from '../mobile/guard.ts';
import type { Principal } from '../staff/principal.ts';
import type { CaseEvidence, EvidenceRecord, LabelledValue } from './evidence.ts';
import { caseTimeline, type TimelineEntry, type TimelinePage } from './timeline.ts';
import { ContextSection } from './web.tsx';

/**
 * The case page as a workbench (web): the evidence (customer, KYC, alerted records with their
 * rules) and the timeline with a note form, drawn from the case's `evidence` and `timeline` detail
 * blocks; the note post; the full timeline, page by page, on the web and in the mobile API.
 */

const CASE_MODEL = 'engine.watchlist';

/** An entry's time (UTC, to the second) as the viewer reads dates. */
function when(at: string, preferences: DatePreferences): string {
  return formatDateTime(new Date(`${at}Z`), preferences);
}

function recordUrl(link: { model: string; pk: string }): string {
  const [app, model] = link.model.split('.');
  return `/admin/${app}/${model}/${encodeURIComponent(link.pk)}/change/`;
}

function Fields({ fields }: { fields: LabelledValue[] }) {
  return (
    <dl class="workbench-fields">
      {fields.map((field) => (
        <div key={field.name}>
          <dt>{field.label}</dt>
          <dd>{field.value}</dd>
        </div>
      ))}
    </dl>
  );
}

function RecordRow({ item }: { item: EvidenceRecord }) {
  const { alert, record, rules } = item;
  return (
    <tr>
      <td>
        <a href={`/admin/engine/alert/${alert.pk}/change/`}>{alert.kind === 'sanctions' ? 'Sanctions' : 'Rules'}</a>
        <br />
        <span class={`badge tone-${alert.decision === 'REJECT' ? 'danger' : alert.decision === 'REVIEW' ? 'warning' : 'success'}`}>{alert.decision}</span> {alert.score}
      </td>
      <td>{record ? <a href={recordUrl(record)}>{record.ref ?? record.pk}</a> : '—'}</td>
      <td>{record ? <Fields fields={record.fields.filter((field) => !['transaction_ref', 'customer_ref', 'score', 'decision'].includes(field.name))} /> : '—'}</td>
      <td>
        {rules.length === 0 ? (
          '—'
        ) : (
          <ul class="workbench-rules">
            {rules.map((rule) => (
              <li key={rule.code}>
                <strong>{rule.name ?? rule.code}</strong> <span class="help">{rule.code}</span>
                {rule.score !== null && ` ${rule.score >= 0 ? '+' : ''}${rule.score}`}
              </li>
            ))}
          </ul>
        )}
      </td>
    </tr>
  );
}

function EvidenceSection({ evidence }: { evidence: CaseEvidence }) {
  return (
    <section class="module workbench-evidence" aria-labelledby="evidence-heading">
      <h2 id="evidence-heading">Evidence</h2>
      {evidence.customer && (
        <div class="workbench-customer">
          <h3>
            Customer: <a href={`/admin/customer/customer/${evidence.customer.pk}/change/`}>{evidence.customer.repr}</a>
          </h3>
          <Fields fields={evidence.customer.fields} />
        </div>
      )}
      {evidence.kyc && (
        <div>
          <h3>KYC</h3>
          {evidence.kyc.length === 0 ? (
            <p>No verification session.</p>
          ) : (
            <ul>
              {evidence.kyc.map((session) => (
                <li key={session.pk}>
                  <a href={`/admin/document/documentverificationsession/${encodeURIComponent(session.pk)}/change/`}>{session.flow}</a>: {session.status} ({session.created_at.replace('T', ' ')} UTC)
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
      {evidence.records && (
        <div>
          <h3>
            Alerted records{evidence.alerts_total > evidence.records.length ? ` (newest ${evidence.records.length} of ${evidence.alerts_total})` : ''}
          </h3>
          {evidence.records.length === 0 ? (
            <p>No alerts.</p>
          ) : (
            <table class="workbench-records">
              <thead>
                <tr>
                  <th scope="col">Alert</th>
                  <th scope="col">Record</th>
                  <th scope="col">Details</th>
                  <th scope="col">Matched rules</th>
                </tr>
              </thead>
              <tbody>
                {evidence.records.map((item) => (
                  <RecordRow item={item} key={item.alert.pk} />
                ))}
              </tbody>
            </table>
          )}
        </div>
      )}
    </section>
  );
}

function Entry({ entry, preferences }: { entry: TimelineEntry; preferences: DatePreferences }) {
  return (
    <li class={`timeline-entry timeline-${entry.kind}`}>
      <time datetime={`${entry.at}Z`}>{when(entry.at, preferences)}</time>
      <div>
        <strong>{entry.link ? <a href={recordUrl(entry.link)}>{entry.title}</a> : entry.title}</strong>
        {entry.actor && <span class="timeline-actor"> by {entry.actor}</span>}
        {entry.details.length > 0 && (
          <ul class="timeline-details">
            {entry.details.map((detail, index) => (
              <li key={index}>
                {detail.label}: {detail.value}
              </li>
            ))}
          </ul>
        )}
        {entry.text && <p class="timeline-text">{entry.text}</p>}
        {entry.attachments.length > 0 && (
          <p class="timeline-attachments">
            Attachments: {entry.attachments.map((file) => `${file.name} (${Math.ceil(file.size / 1024)} KB)`).join(', ')}
          </p>
        )}
      </div>
    </li>
  );
}

function TimelineList({ timeline, preferences }: { timeline: TimelinePage; preferences: DatePreferences }) {
  return timeline.entries.length === 0 ? (
    <p>Nothing has happened on this case yet.</p>
  ) : (
    <ol class="timeline">
      {timeline.entries.map((entry) => (
        <Entry entry={entry} preferences={preferences} key={`${entry.kind}-${entry.at}-${entry.title}`} />
      ))}
    </ol>
  );
}

function TimelineSection({ pk, timeline, csrfToken, canNote, preferences }: { pk: string; timeline: TimelinePage; csrfToken: string; canNote: boolean; preferences: DatePreferences }) {
  return (
    <section class="module workbench-timeline" aria-labelledby="timeline-heading">
      <h2 id="timeline-heading">Timeline</h2>
      {canNote && (
        <form method="post" action={`/admin/engine/watchlist/${pk}/note/`} class="workbench-note">
          <CsrfField token={csrfToken} />
          <label for="case-note">Add a note</label>
          <textarea id="case-note" name="body" rows={3} required maxLength={10_000} />
          <button type="submit">Add note</button>
        </form>
      )}
      <TimelineList timeline={timeline} preferences={preferences} />
      {timeline.pages > 1 && (
        <p>
          <a href={`/admin/engine/watchlist/${pk}/timeline/?page=2`}>Older entries ({timeline.total} in all)</a>
        </p>
      )}
    </section>
  );
}

/** The evidence above a case's form (a site extension, drawn from the case's `evidence` block). */
export function CaseEvidenceSection({ model, blocks }: DetailSectionProps) {
  if (model.key !== CASE_MODEL || !blocks.evidence) return null;
  const evidence = blocks.evidence as CaseEvidence;
  return (
    <>
      <EvidenceSection evidence={evidence} />
      {evidence.context && (
        <ContextSection
          context={evidence.context.data}
          title={`Decision context of the newest alert${evidence.context.record_ref ? ` (${evidence.context.record_ref})` : ''}`}
          note="What the rules saw when they scored its record; each alert's page shows its own."
        />
      )}
    </>
  );
}

/** The timeline below a case's form, with the note form (from the case's `timeline` block). */
export function CaseTimelineSection({ model, pk, blocks, csrfToken, preferences }: DetailSectionProps) {
  if (model.key !== CASE_MODEL || !blocks.timeline) return null;
  const timeline = blocks.timeline as TimelinePage & { can_note: boolean };
  return <TimelineSection pk={pk} timeline={timeline} csrfToken={csrfToken} canNote={timeline.can_note} preferences={preferences} />;
}

/** The case a workbench path names, for a viewer who may view cases (403) and this one (404). */
async function caseOf(app: AppContext, principal: Principal, pk: string): Promise<{ model: BoundModel; row: Row }> {
  const site = app.backoffice.site;
  const model = site.models.get(CASE_MODEL)!;
  if (!site.can(principal, model, 'view')) throw new HttpError(403, `You do not have permission to view ${model.verboseNamePlural}.`, 'permission_denied');
  const row = validPk(model, pk) ? await getRow(app.db, model, principal, pk) : undefined;
  if (!row) throw new HttpError(404, `No case ${pk.slice(0, 100)}.`, 'not_found');
  return { model, row };
}

function pageParameter(raw: unknown): number {
  if (raw === undefined) return 1;
  const text = String(raw);
  if (!/^\d{1,6}$/.test(text) || Number(text) < 1) throw new HttpError(400, 'page must be a whole number from 1.', 'invalid_parameter', { errors: { page: [{ message: 'Enter a whole number from 1.', code: 'invalid' }] } });
  return Number(text);
}

/** The web routes of the workbench: the note post and the full timeline (behind the admin shell). */
export function registerWorkbenchPages(router: Router, app: AppContext): void {
  router.post('/admin/engine/watchlist/:pk/note/', async (ctx) => {
    const state = adminState(ctx);
    const site = app.backoffice.site;
    const cases = site.models.get(CASE_MODEL)!;
    const notes = site.models.get('engine.casenote')!;
    if (!site.can(state.principal, cases, 'view')) forbidden();
    const row = validPk(cases, ctx.params.pk!) ? await getRow(app.db, cases, state.principal, ctx.params.pk!) : undefined;
    if (!row) notFound(cases, ctx.params.pk!);
    try {
      await saveObject(app.backoffice, notes, state.principal, null, { case_id: row.id, body: state.form!.get('body') ?? '' }, { origin: { channel: 'web' } });
      await addMessage(app.db, state.session, { level: 'success', text: 'Note added.' });
    } catch (caught) {
      if (caught instanceof ValidationFailed) {
        await addMessage(app.db, state.session, { level: 'error', text: `The note was not added: ${Object.values(caught.errors).flat().map((error) => error.message).join(' ')}` });
      } else {
        const error = httpErrorOf(caught);
        if (error instanceof HttpError && error.status === 403) forbidden(error.message);
        throw error;
      }
    }
    ctx.redirect(objectUrl(cases, row.id));
  });

  router.get('/admin/engine/watchlist/:pk/timeline/', async (ctx) => {
    const state = adminState(ctx);
    const page = pageParameter(ctx.query.page);
    const { model, row } = await caseOf(app, state.principal, ctx.params.pk!).catch((error: HttpError) => {
      if (error.status === 403) forbidden(error.message);
      if (error.status === 404) notFound(app.backoffice.site.models.get(CASE_MODEL)!, ctx.params.pk!);
      throw error;
    });
    const timeline = await caseTimeline(app.db, app.backoffice.site, state.principal, row, page);
    const title = `Timeline of ${model.repr(row)}`;
    await renderPage(
      ctx,
      app,
      200,
      title,
      homeCrumbs(model, { label: model.repr(row), href: objectUrl(model, row.id) }, { label: 'Timeline' }),
      <>
        <h1>{title}</h1>
        <p>
          Page {timeline.page} of {timeline.pages} ({timeline.total} entries).
        </p>
        <TimelineList timeline={timeline} preferences={state.principal.user} />
        <nav class="paginator" aria-label="Timeline pages">
          {timeline.page > 1 && <a href={`?page=${timeline.page - 1}`}>Newer</a>} {timeline.page < timeline.pages && <a href={`?page=${timeline.page + 1}`}>Older</a>}
        </nav>
      </>,
    );
  });
}

/** data/engine/watchlist/<pk>/timeline/?page=N: a page of the timeline the case detail's block starts. */
export function registerWorkbenchRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string): void {
  router.get(path('data/engine/watchlist/:pk/timeline/'), authenticated, async (ctx: Context) => {
    acceptOnly(ctx, ['page']);
    const principal = (ctx.state as MobileState).mobile.principal;
    const page = pageParameter(ctx.query.page);
    const { row } = await caseOf(app, principal, ctx.params.pk!);
    respond(ctx, 'Case timeline.', await caseTimeline(app.db, app.backoffice.site, principal, row, page));
  });
}
