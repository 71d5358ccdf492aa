import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { discardReceived, refuseUnreadBody } from '../../http/multipart.ts';
import { decisionTone, label } from '../backoffice/declare.ts';
import { validPk } from '../backoffice/query.ts';
import type { DetailSectionProps } from '../backoffice/site.ts';
import { CSRF_FIELD, CsrfField, ErrorPage, type ErrorPageProps } from '../backoffice/web/layout.tsx';
import { adminState, Badge, modelUrl, objectUrl } from '../backoffice/web/common.tsx';
import { createHttpsDetector, expectedOrigin, safeNextUrl, SECURITY_HEADERS } from '../backoffice/web/security.ts';
import { addMessage, resolveSession, sameSecret, SESSION_COOKIE } from '../backoffice/web/session.ts';
import { chrome, LOGIN_PATH, sendPage, type AdminState } from '../backoffice/web/shell.tsx';
import { ValidationFailed } from '../backoffice/errors.ts';
import type { DiffEntry, TypedDiff } from '../approvals/service.ts';
import { processRequest } from '../approvals/service.ts';
import type { ReplayEvidence } from '../approvals/replay.ts';
import type { DecisionContext } from '../rules/evaluate.ts';
import { MAX_ATTACHMENT_BYTES, receiveForm, type ReceivedForm } from './attachments.ts';
import type { DecisionsBlock, MatchedRulesBlock } from './blocks.ts';
import { caseWorkError, checkDecision, decide, decisionModel, processInput } from './routes.ts';

/**
 * The web admin's side of case work: the sections of a change page and the form posts. Above the
 * record's form (CaseWorkTopSections): the pending marker, the matched rules, the decision form
 * with the earlier decisions and their attachments, and the decision context as labelled rows;
 * on an alert the decision form is its record's. Below it (CaseWorkSections): an approval
 * request with its diff, evidence and actions.
 *
 * The decision form is multipart, with evidence files under the mobile endpoint's allowlist and
 * limits. The shell reads and checks only urlencoded forms, so this one post is answered before
 * the shell (registerCaseWorkUploads): it resolves the session, checks the Origin, the decision
 * (permission, record, pending approval) before reading a byte, then the form's CSRF token before
 * any file is stored.
 */

function text(value: unknown): string {
  if (value === null || value === undefined) return '—';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** A byte count as people read it. */
function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

/** A score with its two decimals, as the record shows it. */
function score(value: number | null | undefined): string {
  return value === null || value === undefined ? '—' : value.toFixed(2);
}

function DecisionBadge({ decision }: { decision: string | null | undefined }) {
  if (!decision) return <>—</>;
  return <Badge tone={decisionTone(decision)}>{decision}</Badge>;
}

const SECTION_TITLES: Readonly<Record<string, string>> = {
  transaction: 'Record',
  customer: 'Customer',
  aggregates: "Customer's earlier transactions",
  event: 'Event type',
};

/** Labels of the context's keys where the column name does not read well. */
const KEY_LABELS: Readonly<Record<string, string>> = {
  id: 'ID',
  customer_id: 'Customer ID',
  customer_ref: 'Customer reference',
  transaction_ref: 'Transaction reference',
  event_slug: 'Event',
  io_type: 'Direction',
  ip_address: 'IP address',
  ip_address_score: 'IP address score',
  email_risk_score: 'E-mail risk score',
  kyc_status: 'KYC status',
  pep: 'PEP',
  iban: 'IBAN',
  bic: 'BIC',
  url: 'URL',
  days_since_first_transaction: 'Days since the first transaction',
  avg_amount_30d: 'Average amount, last 30 days',
};

const WINDOWS: Readonly<Record<string, string>> = { '1h': 'last hour', '24h': 'last 24 hours', '7d': 'last 7 days', '30d': 'last 30 days' };

/** The label of one key: known names, the aggregates' names spelled out, anything else from its words. */
function keyLabel(key: string): string {
  if (Object.hasOwn(KEY_LABELS, key)) return KEY_LABELS[key]!;
  const aggregate = /^(count|sum)(?:_(credit|debit))?_(1h|24h|7d|30d)$/.exec(key);
  if (aggregate) {
    const [, what, direction, window] = aggregate;
    const kind = what === 'count' ? 'Transactions' : 'Amount';
    const flow = direction === 'credit' ? ' incoming' : direction === 'debit' ? ' outgoing' : '';
    return `${kind}${flow}, ${WINDOWS[window!]}`;
  }
  const distinct = /^distinct_(devices|ips|countries)_(24h|30d)$/.exec(key);
  if (distinct) return `Distinct ${distinct[1] === 'ips' ? 'IP addresses' : distinct[1]}, ${WINDOWS[distinct[2]!]}`;
  if (/^\d+$/.test(key)) return `#${Number(key) + 1}`;
  return label(key);
}

/** A dotted key (a nested value flattened: geo.lat, counterparty.name) as its parts' labels. */
function contextLabel(key: string): string {
  return key.split('.').map(keyLabel).join(' › ');
}

const TIMESTAMP = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})$/;

function contextValue(section: string, key: string, value: unknown): string {
  if (value === null || value === undefined || value === '') return '—';
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  if (section === 'transaction' && key === 'io_type' && (value === 0 || value === 1)) return value === 0 ? 'Incoming' : 'Outgoing';
  if (section === 'event' && key === 'type' && typeof value === 'number') return ['Onboarding', 'Financial', 'Non-financial'][value] ?? String(value);
  if (typeof value === 'string') {
    const timestamp = TIMESTAMP.exec(value);
    return timestamp ? `${timestamp[1]} ${timestamp[2]} UTC` : value;
  }
  return String(value);
}

/** A section's values as rows: nested values (a context stored before they were flattened) become dotted keys too. */
function contextRows(values: Record<string, unknown>, prefix = ''): [string, unknown][] {
  return Object.entries(values).flatMap(([key, value]): [string, unknown][] => {
    const name = prefix ? `${prefix}.${key}` : key;
    if (value !== null && typeof value === 'object') {
      const nested = contextRows(value as Record<string, unknown>, name);
      return nested.length ? nested : [[name, null]];
    }
    return [[name, value]];
  });
}

/** The decision context as labelled rows, one table per section; never JSON. `title` names whose it is (the case page shows its newest alert's). */
export function ContextSection({ context, title = 'Decision context', note = 'What the rules saw when they scored the record.' }: { context: DecisionContext; title?: string; note?: string }) {
  return (
    <section class="module casework-context" aria-labelledby="casework-context-title">
      <h2 id="casework-context-title">{title}</h2>
      <p class="casework-note">{note}</p>
      <div class="casework-context-sections">
        {Object.entries(context).map(([section, values]) => {
          const rows = contextRows(values as Record<string, unknown>);
          return (
            <table key={section} class="casework-fields">
              <caption>{SECTION_TITLES[section] ?? label(section)}</caption>
              <tbody>
                {rows.length === 0 ? (
                  <tr>
                    <td colSpan={2} class="help">
                      Nothing recorded.
                    </td>
                  </tr>
                ) : (
                  rows.map(([key, value]) => (
                    <tr key={key}>
                      <th scope="row">{contextLabel(key)}</th>
                      <td>{contextValue(section, key.split('.').pop()!, value)}</td>
                    </tr>
                  ))
                )}
              </tbody>
            </table>
          );
        })}
      </div>
    </section>
  );
}

/** The matched rules by code and name, each with the score it contributed and the decision it forces. */
function MatchedRulesSection({ block }: { block: MatchedRulesBlock | null }) {
  return (
    <section class="module casework-rules" aria-labelledby="casework-rules-title">
      <h2 id="casework-rules-title">Matched rules</h2>
      {block === null ? (
        <p class="casework-note">No rule has scored this record.</p>
      ) : block.by_decision ? (
        <p class="casework-note">
          Set by a compliance decision ({block.actor}, {block.scored_at.replace('T', ' ')} UTC): no rule ran.
        </p>
      ) : (
        <div class="table-scroll">
          <table>
            <thead>
              <tr>
                <th scope="col">Rule</th>
                <th scope="col">Name</th>
                <th scope="col" class="column-number">
                  Contribution
                </th>
                <th scope="col">Forces</th>
              </tr>
            </thead>
            <tbody>
              {block.rules.length === 0 ? (
                <tr>
                  <td colSpan={4} class="help">
                    No rule matched.
                  </td>
                </tr>
              ) : (
                block.rules.map((rule, index) => (
                  <tr key={`${rule.code}-${index}`}>
                    <td class="monospace">{rule.code}</td>
                    <td>{rule.name ?? '(rule removed)'}</td>
                    <td class="column-number">+{score(rule.score)}</td>
                    <td>
                      <DecisionBadge decision={rule.decision} />
                    </td>
                  </tr>
                ))
              )}
            </tbody>
            <tfoot>
              <tr>
                <th scope="row" colSpan={2}>
                  Score (scored {block.scored_at.replace('T', ' ')} UTC)
                </th>
                <td class="column-number">{score(block.score)}</td>
                <td>
                  <DecisionBadge decision={block.decision} />
                </td>
              </tr>
            </tfoot>
          </table>
        </div>
      )}
    </section>
  );
}

interface Mark {
  allowed: boolean;
  options: { value: string; label: string }[];
  current: string | null;
  score: number | null;
  needs_approval: boolean;
  max_attachments?: number;
  has_decisions: boolean;
}

/** An alert's record's mark block: the record it rules on, and the form's settings. */
interface RecordMark extends Mark {
  model: string;
  pk: string;
  repr: string;
}

/** The path of the decision post of a record of a decision model. */
function decisionPath(modelKey: string, pk: string): string {
  const [appLabel, model] = modelKey.split('.') as [string, string];
  return modelUrl({ appLabel, model }, `${encodeURIComponent(pk)}/decision/`);
}

function DecisionForm({ action, back, mark, csrfToken, record }: { action: string; back: string; mark: Mark; csrfToken: string; record?: { href: string; repr: string } }) {
  const maxFiles = mark.max_attachments ?? 10;
  return (
    <>
      <p class="casework-note">
        {record && (
          <>
            On <a href={record.href}>{record.repr}</a>.{' '}
          </>
        )}
        Current decision <DecisionBadge decision={mark.current} />, score {score(mark.score)}.
        {mark.needs_approval ? ' A decision here is submitted for approval first.' : ''}
      </p>
      {mark.allowed ? (
        <form method="post" action={action} enctype="multipart/form-data" class="casework-form">
          {/* First, so the token arrives before any file part. */}
          <CsrfField token={csrfToken} />
          <input type="hidden" name="next" value={back} />
          <div class="form-row">
            <label for="casework-decision" class="required">
              Decision
            </label>
            <select id="casework-decision" name="decision" required>
              {mark.options.map((option) => (
                <option value={option.value} key={option.value} selected={option.value === mark.current}>
                  {option.label}
                </option>
              ))}
            </select>
          </div>
          <div class="form-row">
            <label for="casework-score">Score</label>
            <input id="casework-score" name="score" type="number" min="0" max="100" step="0.01" aria-describedby="casework-score-help" />
            <p class="help" id="casework-score-help">
              From 0 to 100; left empty, the score stays {score(mark.score)}.
            </p>
          </div>
          <div class="form-row">
            <label for="casework-description" class="required">
              Description
            </label>
            <textarea id="casework-description" name="description" rows={3} required />
          </div>
          <div class="form-row">
            <label for="casework-document-description">Document description</label>
            <input id="casework-document-description" name="document_description" type="text" />
          </div>
          <div class="form-row">
            <label for="casework-attachments">Attachments</label>
            <input id="casework-attachments" name="attachments[]" type="file" multiple accept="image/*,video/*,application/pdf" aria-describedby="casework-attachments-help" />
            <p class="help" id="casework-attachments-help">
              Up to {maxFiles} files: images, videos or PDF documents, {MAX_ATTACHMENT_BYTES / (1024 * 1024)} MB each.
            </p>
          </div>
          <div class="submit-row">
            <button type="submit">{mark.needs_approval ? 'Submit for approval' : 'Record decision'}</button>
          </div>
        </form>
      ) : (
        <p class="casework-note">You may not make decisions here.</p>
      )}
    </>
  );
}

/** The earlier decisions, newest first, each with its attachments' names and sizes. */
function EarlierDecisions({ decisions }: { decisions: DecisionsBlock }) {
  if (decisions.total === 0) return null;
  return (
    <div class="casework-decisions">
      <h3>Earlier decisions</h3>
      <ul>
        {decisions.rows.map((decision) => (
          <li key={decision.id}>
            <DecisionBadge decision={decision.decision} />
            {decision.score === null ? '' : ` score ${score(decision.score)}`} by {decision.actor}, {decision.created_at.replace('T', ' ')} UTC: {decision.description}
            {decision.attachments.length > 0 && (
              <ul class="casework-attachments" aria-label="Attachments">
                {decision.attachments.map((attachment, index) => (
                  <li key={index}>
                    {attachment.name || '(unnamed)'} <span class="help">({attachment.content_type}, {size(attachment.size)})</span>
                  </li>
                ))}
              </ul>
            )}
          </li>
        ))}
      </ul>
      {decisions.total > decisions.rows.length && (
        <p class="help">
          The newest {decisions.rows.length} of {decisions.total}; the compliance decisions list has every one.
        </p>
      )}
    </div>
  );
}

/** The decision section: the record's own form, or on an alert its record's. */
function DecisionSection({ model, pk, blocks, csrfToken }: DetailSectionProps) {
  const own = blocks.mark as Mark | undefined;
  const recordMark = blocks.record_mark as RecordMark | undefined;
  const mark = own ?? recordMark;
  if (!mark) return null;
  const back = objectUrl(model, pk);
  const [appLabel, modelName] = (recordMark?.model ?? '').split('.') as [string, string];
  return (
    <section class="module casework-decision" aria-labelledby="casework-decision-title">
      <h2 id="casework-decision-title">Compliance decision</h2>
      <div class="casework-body">
        <DecisionForm
          action={own ? decisionPath(model.key, pk) : decisionPath(recordMark!.model, recordMark!.pk)}
          back={back}
          mark={mark}
          csrfToken={csrfToken}
          record={!own && recordMark ? { href: objectUrl({ appLabel, model: modelName }, recordMark.pk), repr: recordMark.repr } : undefined}
        />
        {blocks.decisions ? <EarlierDecisions decisions={blocks.decisions as DecisionsBlock} /> : null}
      </div>
    </section>
  );
}

function DiffTable({ diff }: { diff: TypedDiff }) {
  const rows = (entries: DiffEntry[]) =>
    entries.map((entry) => (
      <tr key={entry.name}>
        <th scope="row">{entry.label}</th>
        <td>{entry.type}</td>
        <td>{text(entry.old)}</td>
        <td>{text(entry.new)}</td>
      </tr>
    ));
  return (
    <table class="casework-diff">
      <thead>
        <tr>
          <th>Field</th>
          <th>Type</th>
          <th>Now</th>
          <th>Proposed</th>
        </tr>
      </thead>
      <tbody>
        {rows(diff.fields)}
        {diff.inline_blocks.flatMap((block) => rows(block.fields))}
      </tbody>
    </table>
  );
}

function EvidenceSection({ evidence, status }: { evidence: ReplayEvidence | { error: string } | null; status: string | null }) {
  if (!status) return null;
  if (!evidence || status !== 'done' || 'error' in evidence) {
    return <p class="casework-evidence">Replay evidence: {status}{evidence && 'error' in evidence ? ` (${evidence.error})` : ''}.</p>;
  }
  const decisions = ['ACCEPT', 'REVIEW', 'REJECT'] as const;
  return (
    <section class="casework-evidence">
      <h3>
        Replay of {evidence.events} financial events ({evidence.window.from} to {evidence.window.to}): {evidence.changed} change outcome
      </h3>
      <table>
        <thead>
          <tr>
            <th>Now \ proposed</th>
            {decisions.map((decision) => (
              <th key={decision}>{decision}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {decisions.map((from) => (
            <tr key={from}>
              <th scope="row">{from}</th>
              {decisions.map((to) => (
                <td key={to}>{evidence.outcomes[from][to]}</td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
      <p>
        Alerts added: {evidence.alerts_added}; removed: {evidence.alerts_removed}.
      </p>
      <ul>
        {evidence.examples.map((example) => (
          <li key={example.record_id}>
            {example.transaction_ref}: {example.current.decision} {example.current.score} → {example.proposed.decision} {example.proposed.score}
          </li>
        ))}
      </ul>
    </section>
  );
}

function ApprovalSection({ approval, csrfToken }: { approval: Record<string, unknown>; csrfToken: string }) {
  const action = approval.action as { code: string; label: string };
  const target = approval.target as { model: string; display: string };
  const path = `/admin/approval/approvalrequest/${String(approval.id)}/process/`;
  return (
    <section class="module casework-approval">
      <h2>
        {String(approval.operation)} {target.model}: {target.display}
      </h2>
      <p>
        Status {String(approval.status)}, stage {String(approval.stage)} of {String(approval.stages)}, {String(approval.signatures)} of{' '}
        {String(approval.signatures_required)} signatures; submitted by {String(approval.maker)}. Your action: {action.label}.
      </p>
      <DiffTable diff={approval.diff as TypedDiff} />
      <EvidenceSection evidence={approval.evidence as ReplayEvidence | null} status={approval.evidence_status as string | null} />
      {action.code === 'review' && (
        <form method="post" action={path}>
          <CsrfField token={csrfToken} />
          <label>
            Reason <textarea name="reason" />
          </label>
          <button type="submit" name="action" value="approve">
            Approve
          </button>
          <button type="submit" name="action" value="reject">
            Reject
          </button>
        </form>
      )}
      {action.code === 'withdraw' && (
        <form method="post" action={path}>
          <CsrfField token={csrfToken} />
          <input type="hidden" name="action" value="withdraw" />
          <button type="submit">Withdraw</button>
        </form>
      )}
    </section>
  );
}

/**
 * The case work above a record's form: the pending marker, the matched rules, the decision form
 * (on an alert, its record's) with the earlier decisions, and the decision context.
 */
export function CaseWorkTopSections(props: DetailSectionProps) {
  const { blocks } = props;
  const hasRules = 'matched_rules' in blocks;
  const hasForm = Boolean(blocks.mark || blocks.record_mark);
  const pending = blocks.pending_approval === true;
  if (!hasRules && !hasForm && !pending && !blocks.data_context) return null;
  return (
    <div class="casework-top">
      {pending && (
        <p class="casework-pending">
          A change to this record is waiting for approval (<a href={`/admin/approval/approvalrequest/${String(blocks.approval_request)}/change/`}>request</a>); it cannot be changed until then.
        </p>
      )}
      {hasRules && <MatchedRulesSection block={blocks.matched_rules as MatchedRulesBlock | null} />}
      {hasForm && <DecisionSection {...props} />}
      {blocks.data_context ? <ContextSection context={blocks.data_context as DecisionContext} /> : null}
    </div>
  );
}

/** The case work below a record's form: an approval request's diff, evidence and actions. */
export function CaseWorkSections({ blocks, csrfToken }: DetailSectionProps) {
  return blocks.approval ? <ApprovalSection approval={blocks.approval as Record<string, unknown>} csrfToken={csrfToken} /> : null;
}

/** The fields of a posted form, less the CSRF token and the page to go back to. */
function formFields(form: Iterable<[string, string]>): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [key, value] of form) if (key !== CSRF_FIELD && key !== 'next') fields[key] = value;
  return fields;
}

function errorText(error: ValidationFailed): string {
  return Object.entries(error.errors)
    .map(([field, list]) => `${field}: ${list.map((item) => item.message).join(' ')}`)
    .join('; ');
}

/** The text of a refusal that goes back to the page as an error message (validation, a file refused, a pending approval), else null. */
function refusalText(caught: unknown): string | null {
  if (caught instanceof ValidationFailed) return errorText(caught);
  const error = caseWorkError(caught);
  if (error instanceof HttpError && (error.status === 400 || error.status === 409 || error.status === 413)) return error.message;
  return null;
}

/** Where a decision's post goes back to: the page that sent it (within the admin), else the record. */
function backTo(next: string | null | undefined, record: string): string {
  return next ? safeNextUrl(next) : record;
}

function decisionMessage(outcome: Awaited<ReturnType<typeof decide>>): string {
  return outcome.status === 'pending' ? 'Change submitted for approval.' : `Decision ${outcome.target.decision} recorded.`;
}

/** Refusals come back to the page as an error message; a missing model or record is the admin's 404 and 403. */
async function withMessages(ctx: Context, app: AppContext, back: string, work: () => Promise<string>): Promise<void> {
  const state = adminState(ctx);
  try {
    await addMessage(app.db, state.session, { level: 'success', text: await work() });
  } catch (caught) {
    const refusal = refusalText(caught);
    if (refusal === null) throw caseWorkError(caught);
    await addMessage(app.db, state.session, { level: 'error', text: refusal });
  }
  ctx.redirect(back);
}

/** The form posts of case work, registered with the admin pages (behind the shell). */
export function registerCaseWorkPages(router: Router, app: AppContext): void {
  router.post('/admin/approval/:model/:pk/process/', async (ctx) => {
    const state = adminState(ctx);
    const model = app.backoffice.site.get('approval', ctx.params.model!);
    if (!model || model.table !== 'approval_requests') throw new HttpError(404, 'No such approval model.');
    if (!validPk(model, ctx.params.pk!)) throw new HttpError(404, 'No such approval request.');
    if (!app.backoffice.site.can(state.principal, model, 'view')) throw new HttpError(403, 'You do not have permission to view approval requests.');
    await withMessages(ctx, app, objectUrl(app.backoffice.site.get('approval', 'approvalrequest')!, ctx.params.pk), async () => {
      const outcome = await processRequest(app, state.principal, ctx.params.pk!, processInput(formFields(state.form!), []));
      return outcome.message;
    });
  });

  // A decision sent urlencoded (no files): the shell has checked its CSRF token.
  router.post('/admin/:app/:model/:pk/decision/', async (ctx) => {
    const state = adminState(ctx);
    const model = decisionModel(app, ctx.params.app!, ctx.params.model!);
    await withMessages(ctx, app, backTo(state.form!.get('next'), objectUrl(model, ctx.params.pk)), async () =>
      decisionMessage(await decide(app, model, state.principal, ctx.params.pk!, formFields(state.form!), [], { channel: 'web' })),
    );
  });
}

/** An HTML error page of the admin, for a request the shell did not see. */
async function sendErrorPage(ctx: Context, status: ErrorPageProps['status'], message: string): Promise<void> {
  await sendPage(ctx, status, <ErrorPage status={status} message={message} {...chrome(ctx.state as AdminState)} />);
}

/**
 * The decision form's multipart post (the record's page, with evidence files), answered before
 * the shell, which reads only urlencoded forms; register it before registerAdminShell. It does
 * what the shell does for a form post (security headers, the session, the Origin check), then:
 * the decision checked (permission, record, pending approval: checkDecision) before a byte of the
 * body is read; the body read to temporary files under the mobile endpoint's limits; the form's
 * csrfmiddlewaretoken compared with the session's, a mismatch refused (403) before any file is
 * stored; then the decision through decide(). The temporary files go whatever happens. Refusals
 * of the form (validation, a file type, too many or too large files, a pending approval) come
 * back to the page as an error message. Any other post to the path goes on to the shell.
 */
export function registerCaseWorkUploads(router: Router, app: AppContext): void {
  const isHttps = createHttpsDetector(app.config.trustedProxies);
  router.post('/admin/:app/:model/:pk/decision/', async (ctx: Context, next: Next) => {
    if (!ctx.is('multipart/form-data')) return next();
    const state = ctx.state as AdminState;
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) ctx.set(name, value);
    ctx.set('Cache-Control', 'no-store');
    state.https = isHttps(ctx);
    ctx.cookies.secure = state.https;
    const cookie = ctx.cookies.get(SESSION_COOKIE);
    const resolved = cookie ? await resolveSession(app.db, cookie, app.config.adminSessionIdleSeconds) : null;
    if (!resolved || !resolved.principal.user.is_staff) {
      refuseUnreadBody(ctx);
      return ctx.redirect(`${LOGIN_PATH}?next=${encodeURIComponent(ctx.originalUrl)}`);
    }
    state.principal = resolved.principal;
    state.session = resolved.session;
    const origin = ctx.get('origin');
    if (origin && origin !== expectedOrigin(ctx, state.https)) {
      refuseUnreadBody(ctx);
      state.log.info({ reason: 'origin' }, 'CSRF check failed');
      return sendErrorPage(ctx, 403, `CSRF verification failed. Request aborted. Origin checking failed: ${origin.slice(0, 200)} does not match this site.`);
    }
    let back = '/admin/';
    let body: ReceivedForm | undefined;
    try {
      const model = decisionModel(app, ctx.params.app!, ctx.params.model!);
      back = objectUrl(model, ctx.params.pk);
      // Permission, record and pending approval before the body: a refused user uploads nothing.
      await checkDecision(app, model, state.principal, ctx.params.pk!);
      body = await receiveForm(ctx, app.files.temporaryDirectory());
      const token = body.fields[CSRF_FIELD];
      if (!token || !sameSecret(state.session.csrfToken, token)) {
        state.log.info({ reason: token ? 'incorrect' : 'missing' }, 'CSRF check failed');
        return await sendErrorPage(ctx, 403, `CSRF verification failed. Request aborted. CSRF token ${token ? 'incorrect' : 'missing'}.`);
      }
      back = backTo(body.fields.next, back);
      // A file input left empty is sent as a part with no name and no bytes: no attachment.
      const files = body.files.filter((file) => file.filename !== '' || file.size > 0);
      const outcome = await decide(app, model, state.principal, ctx.params.pk!, formFields(Object.entries(body.fields)), files, { channel: 'web' });
      await addMessage(app.db, state.session, { level: 'success', text: decisionMessage(outcome) });
      ctx.redirect(back);
    } catch (caught) {
      if (!body) refuseUnreadBody(ctx);
      const refusal = refusalText(caught);
      if (refusal !== null) {
        await addMessage(app.db, state.session, { level: 'error', text: refusal });
        return ctx.redirect(back);
      }
      const error = caseWorkError(caught);
      if (error instanceof HttpError && (error.status === 403 || error.status === 404)) return sendErrorPage(ctx, error.status, error.message);
      throw error;
    } finally {
      if (body) await discardReceived(body.files);
    }
  });
}
