import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Knex } from 'knex';
import type { Context } from 'koa';
import { h } from 'preact';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { HttpError } from '../../http/errors.ts';
import { envelopeResponse, errorResponses, z } from '../../http/openapi.ts';
import { canObject, httpErrorOf } from '../backoffice/access.ts';
import { ChainError, ObjectNotFound, PendingApprovalConflict, PermissionDenied, ValidationFailed } from '../backoffice/errors.ts';
import { getRow, scopedQuery, validPk } from '../backoffice/query.ts';
import type { ActionChange, ActionDeclaration, BoundModel, FieldErrors, PickContext, PickResult, Row } from '../backoffice/registry.ts';
import type { DetailBlockProvider, DetailSectionProps, PlacedDetailSection } from '../backoffice/site.ts';
import { actionValues, applyChange, refusalText, type WriteChain, type WriteOrigin, type WriteOutcome } from '../backoffice/write.ts';
import { adminState, forbidden, modelUrl, notFound, objectUrl } from '../backoffice/web/common.tsx';
import { CsrfField } from '../backoffice/web/layout.tsx';
import { addMessage } from '../backoffice/web/session.ts';
import { MOBILE_PREFIX } from '../mobile/constants.ts';
import { MESSAGES, RECORD_DETAIL, recordDetail } from '../mobile/data.ts';
import { createIdentity, requireDevice, type MobileState } from '../mobile/guard.ts';
import { deviceGuardErrors } from '../mobile/parameters.ts';
import type { Principal } from '../staff/principal.ts';

/**
 * The case queue (issue 36, the case page as a workbench): who holds which case, and the ways an
 * officer takes work.
 * - Filters: "assigned to me", "unassigned", "assigned to anyone" on cases (and on alerts, by their
 *   case), declared in cases/admin.ts as `assignee` filters, so the web list, the mobile list and
 *   saved filters all have them.
 * - Bulk actions on cases (assign, take, change status with one rationale for all, close with a
 *   clear decision) and alerts (close, reopen): each chosen record is written through the write
 *   chain on its own (write.ts runAction), so through its permissions, the case's clean hook (a
 *   rationale), maker-checker (a policy on engine.watchlist makes each a request) and the audit log.
 * - Take: assign one case to yourself; refused (code `taken`) when someone else holds it, checked
 *   on the locked row so two officers taking at once cannot both have it.
 * - Next case: the oldest highest-priority unassigned open case the officer may see and change,
 *   assigned to them in one step. Candidates are read `for update skip locked`, one at a time, so
 *   officers asking at once each lock a different case; a case a write refuses (a pending
 *   approval, a hook) is passed over for the next.
 */

const CASE_MODEL = 'engine.watchlist';
/** How many candidates one "next case" tries before it gives up (each refused one is passed over). */
const NEXT_ATTEMPTS = 20;

function caseModel(site: { models: Map<string, BoundModel> }): BoundModel {
  return site.models.get(CASE_MODEL)!;
}

/** Take: only a case nobody else holds, and not a closed one. */
function takeGuard(row: Row, principal: Principal): FieldErrors | undefined {
  if (row.status === 'closed') return { assignee_id: [{ message: 'This case is closed.', code: 'closed' }] };
  if (row.assignee_id !== null && row.assignee_id !== undefined && String(row.assignee_id) !== principal.user.id) {
    return { assignee_id: [{ message: 'This case is already assigned to someone else.', code: 'taken' }] };
  }
  return undefined;
}

export const TAKE: ActionChange = {
  fields: [],
  values: (principal) => ({ assignee_id: principal.user.id }),
  guard: takeGuard,
};

/**
 * Next case: locks the first unassigned open case (priority first, then the oldest) that no other
 * transaction holds, and assigns it to the principal through the write chain in that transaction.
 * A candidate the write refuses (object permission, a hook, a change pending approval) is passed
 * over; at most NEXT_ATTEMPTS are tried. With a change policy on cases the assignment becomes an
 * approval request: the case stays unassigned until approved (the answer says so).
 */
export async function nextCase({ chain, principal, origin }: PickContext): Promise<PickResult> {
  const model = caseModel(chain.site);
  if (!chain.site.can(principal, model, 'view') || !chain.site.can(principal, model, 'change')) throw new PermissionDenied();
  // Cleaned before any lock is held: inside the transaction it would need a second connection.
  const values = await actionValues(chain, model, principal, TAKE, {});
  const passed: string[] = [];
  const refusals: string[] = [];
  for (let attempt = 0; attempt < NEXT_ATTEMPTS; attempt++) {
    const result = await chain.db.transaction(async (trx) => {
      const query = scopedQuery(trx, model, principal)
        .select('t.*')
        .whereNull('t.assignee_id')
        .whereNot('t.status', 'closed')
        // A case whose change waits for approval cannot be written: not a candidate.
        .whereNotExists((pending: Knex.QueryBuilder) =>
          pending.select(1).from('approval_requests as r').where('r.content_type', model.key).where('r.status', 'pending').whereRaw('r.object_id = t.id::text'),
        )
        .orderBy([
          { column: 't.priority', order: 'desc' },
          { column: 't.opened_at', order: 'asc' },
          { column: 't.id', order: 'asc' },
        ])
        .limit(1)
        .forUpdate('t')
        .skipLocked();
      if (passed.length) query.whereNotIn('t.id', passed);
      const [candidate] = (await query) as Row[];
      if (!candidate) return null;
      const pk = String(candidate.id);
      if (!canObject(chain.site, principal, model, 'change', candidate)) return { pk, refusal: `${model.repr(candidate)}: not yours to change` };
      try {
        const outcome = await applyChange({ ...chain, db: trx as unknown as Knex }, model, principal, TAKE, pk, values, origin);
        return { pk, outcome };
      } catch (error) {
        if (error instanceof ChainError) return { pk, refusal: `${model.repr(candidate)}: ${refusalText(error)}` };
        throw error;
      }
    });
    if (!result) break;
    if ('outcome' in result) {
      const outcome = result.outcome as WriteOutcome;
      const repr = outcome.row ? model.repr(outcome.row) : result.pk;
      if (outcome.status === 'pending') {
        return { level: 'info', message: `${repr} was chosen; its assignment to you was submitted for approval.`, pk: result.pk, approvalRequestId: outcome.approvalRequestId };
      }
      return { level: 'success', message: `${repr} is now assigned to you.`, pk: result.pk };
    }
    passed.push(result.pk);
    refusals.push(result.refusal!);
  }
  const skipped = refusals.length ? ` Passed over: ${refusals.slice(0, 5).join('; ')}${refusals.length > 5 ? '; …' : ''}.` : '';
  return { level: 'info', message: `No unassigned open case is waiting for you.${skipped}`, pk: null };
}

/** Take one case (the case page's button, the mobile endpoint): the write chain's outcome, or its error. */
export async function takeCase(chain: WriteChain, principal: Principal, pk: string, origin: WriteOrigin): Promise<WriteOutcome> {
  const model = caseModel(chain.site);
  if (!chain.site.can(principal, model, 'change')) throw new PermissionDenied();
  if (!validPk(model, pk)) throw new ObjectNotFound(model, pk);
  return applyChange(chain, model, principal, TAKE, pk, await actionValues(chain, model, principal, TAKE, {}), origin);
}

/** The bulk actions of cases (the list's action bar, the mobile actions endpoint, the schema). */
export const CASE_ACTIONS: ActionDeclaration[] = [
  {
    name: 'take',
    label: 'Take (assign to me)',
    permission: 'change',
    help: 'Assigns the chosen cases to you; a case someone else holds or a closed one is refused.',
    change: TAKE,
  },
  {
    name: 'assign',
    label: 'Assign to…',
    permission: 'change',
    help: 'Assigns the chosen cases to one user (empty: nobody).',
    change: { fields: ['assignee_id', 'rationale'] },
  },
  {
    name: 'change_status',
    label: 'Change status…',
    permission: 'change',
    help: 'Sets one status on the chosen cases, with one rationale kept in each case’s history.',
    change: { fields: ['status', 'rationale'], required: ['status', 'rationale'] },
  },
  {
    name: 'close',
    label: 'Close with a clear decision…',
    permission: 'change',
    help: 'Closes the chosen cases: their open alerts close and every alerted transaction gets the clear decision.',
    change: { fields: ['rationale', 'clear_decision', 'clear_score'], required: ['rationale', 'clear_decision'], fixed: { status: 'closed' } },
  },
  {
    name: 'next',
    label: 'Next case',
    permission: 'change',
    help: 'Assigns you the oldest highest-priority unassigned open case and opens it.',
    pick: nextCase,
  },
];

/** The bulk actions of alerts: their status, through the write chain like an edit of each. */
export const ALERT_ACTIONS: ActionDeclaration[] = [
  { name: 'close_alerts', label: 'Close selected alerts', permission: 'change', change: { fields: [], fixed: { status: 'closed' } } },
  { name: 'reopen_alerts', label: 'Reopen selected alerts', permission: 'change', change: { fields: [], fixed: { status: 'open' } } },
];

/**
 * The queue block of a case's detail (mobile detail and web page): who holds it and whether the
 * viewer may take it. Listed by the composition root with the other detail blocks.
 */
export const caseQueueBlocks: DetailBlockProvider = {
  models: [CASE_MODEL],
  describes: [
    {
      name: 'queue',
      label: 'Queue',
      description:
        '{assignee_id (null when unassigned), assigned_to_me, can_take (whether the viewer may take it: change permission, open, nobody else holds it), take_endpoint (POST, no body)}. The next case: POST data/engine/watchlist/next/.',
    },
  ],
  async blocks({ site, model, row, principal }) {
    const assignee = row.assignee_id === null || row.assignee_id === undefined ? null : String(row.assignee_id);
    const mayChange = canObject(site, principal, model, 'change', row);
    return {
      queue: {
        assignee_id: assignee,
        assigned_to_me: assignee === principal.user.id,
        can_take: mayChange && !takeGuard(row, principal) && assignee !== principal.user.id,
        take_endpoint: `${MOBILE_PREFIX}data/engine/watchlist/${String(row.id)}/take/`,
      },
    };
  },
};

/** The case page's take button, drawn from the queue block (a web detail section, above the form). */
export function CaseQueueSection({ model, pk, blocks, csrfToken }: DetailSectionProps) {
  const queue = blocks.queue as { can_take: boolean; assigned_to_me: boolean } | undefined;
  if (!queue || model.key !== CASE_MODEL) return null;
  if (queue.assigned_to_me) return h('p', { class: 'case-queue' }, 'This case is assigned to you.');
  if (!queue.can_take) return null;
  return h(
    'form',
    { method: 'post', action: modelUrl(model, `${encodeURIComponent(pk)}/take/`), class: 'case-queue' },
    h(CsrfField, { token: csrfToken }),
    h('button', { type: 'submit' }, 'Take this case'),
  );
}

/** The take button placed on the case page, for the composition root's detailSections. */
export const caseQueueSection: PlacedDetailSection = { position: 'top', component: CaseQueueSection };

/** A chain refusal on a web page: 403 and 404 pages; anything the user can fix becomes an error message. */
async function webRefusal(ctx: Context, app: AppContext, model: BoundModel, pk: string | null, error: unknown): Promise<void> {
  if (error instanceof PermissionDenied) forbidden(error.message);
  if (error instanceof ObjectNotFound) notFound(model, pk ?? '');
  if (error instanceof ValidationFailed || error instanceof PendingApprovalConflict) {
    await addMessage(app.db, adminState(ctx).session, { level: 'error', text: refusalText(error) });
    return;
  }
  throw error;
}

/**
 * The routes of the queue: the web posts (take on the case page, next case from the list) behind
 * the admin shell, and the mobile endpoints. Registered by the composition root after the shell.
 */
export function registerCaseQueueRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  const authenticated = requireDevice(createIdentity(app));
  const principalOf = (ctx: Context) => (ctx.state as MobileState).mobile.principal;
  const site = () => app.backoffice.site;

  router.post('/admin/engine/watchlist/next/', async (ctx) => {
    const state = adminState(ctx);
    const model = caseModel(site());
    if (!site().can(state.principal, model, 'view') || !site().can(state.principal, model, 'change')) forbidden('You do not have permission to change cases.');
    const picked = await nextCase({ chain: app.backoffice, principal: state.principal, origin: { channel: 'web' } });
    await addMessage(app.db, state.session, { level: picked.level, text: picked.message });
    ctx.redirect(picked.pk ? objectUrl(model, picked.pk) : modelUrl(model));
  });

  router.post('/admin/engine/watchlist/:pk/take/', async (ctx) => {
    const state = adminState(ctx);
    const model = caseModel(site());
    const pk = ctx.params.pk!;
    if (!validPk(model, pk)) notFound(model, pk);
    try {
      const outcome = await takeCase(app.backoffice, state.principal, pk, { channel: 'web' });
      const text = outcome.status === 'pending' ? 'Taking this case was submitted for approval.' : `${outcome.row ? model.repr(outcome.row) : 'The case'} is now assigned to you.`;
      await addMessage(app.db, state.session, { level: outcome.status === 'pending' ? 'info' : 'success', text });
    } catch (error) {
      await webRefusal(ctx, app, model, pk, error);
    }
    ctx.redirect(objectUrl(model, pk));
  });

  /** The case as the mobile detail shows it, read again after the write. */
  const caseObject = async (principal: Principal, pk: string) => {
    const model = caseModel(site());
    const row = await getRow(app.db, model, principal, pk);
    return row ? recordDetail(site(), app.db, principal, model, row, false) : null;
  };

  router.post(`${MOBILE_PREFIX}data/engine/watchlist/next/`, authenticated, async (ctx) => {
    const principal = principalOf(ctx);
    try {
      const picked = await nextCase({ chain: app.backoffice, principal, origin: { channel: 'mobile' } });
      const pending = Boolean(picked.approvalRequestId);
      respond(ctx, picked.message, {
        object: picked.pk && !pending ? await caseObject(principal, picked.pk) : null,
        pk: picked.pk,
        pending_approval: pending,
        approval_request_id: picked.approvalRequestId ?? null,
        messages: [{ level: picked.level, message: picked.message }],
      } satisfies z.infer<typeof CASE_ANSWER>, pending ? 202 : 200);
    } catch (error) {
      throw httpErrorOf(error);
    }
  });

  router.post(`${MOBILE_PREFIX}data/engine/watchlist/:pk/take/`, async (ctx, next) => {
    // data/<app>/<model>/actions/take/ is the generic actions endpoint (mobile/data.ts), not a case's pk.
    if (ctx.params.pk === 'actions') return next();
    return authenticated(ctx, async () => {
      await takeRoute(ctx);
    });
  });

  const takeRoute = async (ctx: Context) => {
    const principal = principalOf(ctx);
    const pk = ctx.params.pk!;
    try {
      const model = caseModel(site());
      if (!validPk(model, pk)) throw new HttpError(404, `No case with pk ${pk.slice(0, 100)} exists.`, 'not_found');
      const outcome = await takeCase(app.backoffice, principal, pk, { channel: 'mobile' });
      if (outcome.status === 'pending') {
        respond(ctx, 'Change submitted for approval.', { messages: outcome.messages, pending_approval: true, approval_request_id: outcome.approvalRequestId ?? null, object: null } satisfies z.infer<typeof CASE_ANSWER>, 202);
        return;
      }
      respond(ctx, 'Case taken.', { messages: outcome.messages, pending_approval: false, approval_request_id: null, object: await caseObject(principal, pk) } satisfies z.infer<typeof CASE_ANSWER>);
    } catch (error) {
      throw httpErrorOf(error);
    }
  };

  documentCaseQueue(docs);
}

/** The answer of next/ and take/: the case as the detail endpoint answers it (null while pending or when none waits). */
const CASE_ANSWER = z.object({
  messages: MESSAGES,
  pending_approval: z.boolean(),
  approval_request_id: z.string().nullable(),
  object: RECORD_DETAIL.nullable(),
  pk: z.string().nullable().optional(),
});

const NEXT_PATH = `${MOBILE_PREFIX}data/engine/watchlist/next/`;
const TAKE_PATH = `${MOBILE_PREFIX}data/engine/watchlist/{pk}/take/`;

function documentCaseQueue(docs: OpenAPIRegistry): void {
  const common = { tags: ['mobile'], security: [{ bearer: [] }] };
  docs.registerPath({
    method: 'post',
    path: NEXT_PATH,
    summary: 'Next case: assigns the caller the oldest highest-priority unassigned open case they may change (safe against callers at once) and answers it',
    ...common,
    responses: {
      200: envelopeResponse('data.object: the case as the detail endpoint answers it, or null with data.pk null when no case is waiting; data.messages', CASE_ANSWER),
      202: envelopeResponse('A change policy covers cases: the assignment was submitted for approval (data.pk, data.approval_request_id, data.pending_approval)', CASE_ANSWER),
      ...errorResponses(deviceGuardErrors('post', NEXT_PATH), { 403: 'No engine.view_watchlist or engine.change_watchlist' }),
    },
  });
  docs.registerPath({
    method: 'post',
    path: TAKE_PATH,
    summary: 'Take a case: assign it to the caller through the write chain (maker-checker and audit log as an edit)',
    ...common,
    responses: {
      200: envelopeResponse('data.object: the case as the detail endpoint answers it; data.messages', CASE_ANSWER),
      202: envelopeResponse('A change policy covers cases: submitted for approval (data.approval_request_id)', CASE_ANSWER),
      ...errorResponses(deviceGuardErrors('post', TAKE_PATH), {
        400: 'Validation failed. data.errors.assignee_id code taken (someone else holds the case) or closed',
        403: 'No engine.change_watchlist (or not this case)',
        404: 'No such case visible to the caller',
        409: 'A change to the case is waiting for approval',
      }),
    },
  });
}
