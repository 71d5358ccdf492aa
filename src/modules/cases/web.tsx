import type Router from '@koa/router';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { validPk } from '../backoffice/query.ts';
import type { BoundModel } from '../backoffice/registry.ts';
import { CsrfField } from '../backoffice/web/layout.tsx';
import { adminState, objectUrl } from '../backoffice/web/common.tsx';
import { addMessage } from '../backoffice/web/session.ts';
import { ValidationFailed } from '../backoffice/errors.ts';
import type { DiffEntry, TypedDiff } from '../approvals/service.ts';
import { processRequest } from '../approvals/service.ts';
import type { ReplayEvidence } from '../approvals/replay.ts';
import { caseWorkError, decide, decisionModel, processInput } from './routes.ts';

/**
 * The web admin's side of case work: the blocks of a change page (pending marker, decision
 * context, decision form, approval request with its diff, evidence and actions) and the two form
 * posts. The forms are urlencoded like every admin form (the shell checks their CSRF token), so
 * evidence files are attached from the mobile client.
 */

type Blocks = Record<string, unknown>;

function text(value: unknown): string {
  if (value === null || value === undefined) return '—';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

function ContextTables({ context }: { context: Record<string, Record<string, unknown>> }) {
  return (
    <section class="module casework-context">
      <h2>Decision context</h2>
      {Object.entries(context).map(([section, values]) => (
        <table key={section}>
          <caption>{section}</caption>
          <tbody>
            {Object.keys(values).length === 0 ? (
              <tr>
                <td>(empty)</td>
              </tr>
            ) : (
              Object.entries(values).map(([key, value]) => (
                <tr key={key}>
                  <th scope="row">{key}</th>
                  <td>{text(value)}</td>
                </tr>
              ))
            )}
          </tbody>
        </table>
      ))}
    </section>
  );
}

interface Mark {
  allowed: boolean;
  options: { value: string; label: string }[];
  current: string | null;
  score: number | null;
  needs_approval: boolean;
  has_decisions: boolean;
}

function DecisionForm({ model, pk, mark, csrfToken }: { model: BoundModel; pk: string; mark: Mark; csrfToken: string }) {
  return (
    <section class="module casework-decision">
      <h2>Compliance decision</h2>
      <p>
        Current: {text(mark.current)}, score {text(mark.score)}.{mark.has_decisions ? ' Earlier decisions are listed below.' : ''}
        {mark.needs_approval ? ' A decision here is submitted for approval first.' : ''}
      </p>
      {mark.allowed && (
        <form method="post" action={`/admin/${model.appLabel}/${model.model}/${pk}/decision/`}>
          <CsrfField token={csrfToken} />
          <label>
            Decision{' '}
            <select name="decision" required>
              {mark.options.map((option) => (
                <option value={option.value} key={option.value} selected={option.value === mark.current}>
                  {option.label}
                </option>
              ))}
            </select>
          </label>
          <label>
            Score (0-100, empty keeps {text(mark.score)}) <input name="score" type="number" min="0" max="100" step="0.01" />
          </label>
          <label>
            Description <textarea name="description" required />
          </label>
          <label>
            Document description <input name="document_description" />
          </label>
          <button type="submit">Record decision</button>
        </form>
      )}
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

/** The case-work blocks of a change page, from the record's detailBlocks. */
export function CaseWorkSections({ model, pk, blocks, csrfToken }: { model: BoundModel; pk: string; blocks: Blocks; csrfToken: string }) {
  return (
    <>
      {blocks.pending_approval === true && (
        <p class="casework-pending">
          A change to this record is waiting for approval (<a href={`/admin/approval/approvalrequest/${String(blocks.approval_request)}/change/`}>request</a>); it cannot be changed until then.
        </p>
      )}
      {blocks.approval ? <ApprovalSection approval={blocks.approval as Record<string, unknown>} csrfToken={csrfToken} /> : null}
      {blocks.mark ? <DecisionForm model={model} pk={pk} mark={blocks.mark as Mark} csrfToken={csrfToken} /> : null}
      {blocks.data_context ? <ContextTables context={blocks.data_context as Record<string, Record<string, unknown>>} /> : null}
    </>
  );
}

function formFields(form: URLSearchParams): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [key, value] of form) if (key !== 'csrfmiddlewaretoken') fields[key] = value;
  return fields;
}

function errorText(error: ValidationFailed): string {
  return Object.entries(error.errors)
    .map(([field, list]) => `${field}: ${list.map((item) => item.message).join(' ')}`)
    .join('; ');
}

/** Refusals come back to the page as an error message; a missing model or record is the admin's 404 and 403. */
async function withMessages(ctx: Context, app: AppContext, back: string, work: () => Promise<string>): Promise<void> {
  const state = adminState(ctx);
  try {
    await addMessage(app.db, state.session, { level: 'success', text: await work() });
  } catch (caught) {
    const error = caseWorkError(caught);
    if (caught instanceof ValidationFailed) await addMessage(app.db, state.session, { level: 'error', text: errorText(caught) });
    else if (error instanceof HttpError && (error.status === 409 || error.status === 400)) await addMessage(app.db, state.session, { level: 'error', text: error.message });
    else throw error;
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

  router.post('/admin/:app/:model/:pk/decision/', async (ctx) => {
    const state = adminState(ctx);
    const model = decisionModel(app, ctx.params.app!, ctx.params.model!);
    await withMessages(ctx, app, objectUrl(model, ctx.params.pk), async () => {
      const outcome = await decide(app, model, state.principal, ctx.params.pk!, formFields(state.form!), [], { channel: 'web' });
      return outcome.status === 'pending' ? 'Change submitted for approval.' : `Decision ${outcome.target.decision} recorded.`;
    });
  });
}
