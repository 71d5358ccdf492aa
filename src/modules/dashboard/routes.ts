import type Router from '@koa/router';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type { Context, Middleware } from 'koa';
import type { AppContext } from '../../context.ts';
import { respond } from '../../http/envelope.ts';
import { ForbiddenError, HttpError } from '../../http/errors.ts';
import { isStorableText } from '../../validation/storable.ts';
import { authenticateCaller } from '../mobile/identity.ts';
import { acceptOnly, deviceGuardErrors, documentRoutes } from '../mobile/parameters.ts';
import { createIdentity, type MobileState } from '../mobile/guard.ts';
import type { Principal } from '../staff/principal.ts';
import { mayName } from '../backoffice/access.ts';
import { envelopeResponse, errorResponses, z } from '../../http/openapi.ts';
import { AGENT_SUMMARY, agentSummary, CARD, cards, CARDS, DECISIONS_BY_DAY, decisionsByDay, HIGH_VOLUME, highVolumeCustomers, LOBBY, lobby } from './blocks.ts';
import { SESSION_MODEL } from '../videocall/queue.ts';
import { checkRecording, endAndTell, readRecordingUpload, RECORDING_STORED, requestSnapshot, SNAPSHOT_REQUESTED, storeRecording, TAKEN_CALL, takeAndJoin } from '../videocall/agent.ts';
import { discardReceived, refuseUnreadBody } from '../../http/multipart.ts';

/** The model whose view permission each block needs (403 without it). */
const BLOCK_MODELS = {
  decisionsByDay: 'transaction.financialevent',
  highVolume: 'transaction.financialevent',
  lobby: SESSION_MODEL,
} as const;

function principalOf(ctx: Context): Principal {
  return (ctx.state as MobileState).mobile.principal;
}

/** dashboard/...: each block checks its own permission, so a home screen shows the blocks the user may see. */
/** The session a lobby path names: text PostgreSQL cannot hold (NUL) names none (404, not a 500 from the query). */
function sessionParameter(ctx: Context): string {
  const session = ctx.params.session!;
  if (!isStorableText(session)) throw new HttpError(404, 'No such session in the video-call queue.', 'not_found');
  return session;
}

export function registerDashboardRoutes(router: Router, app: AppContext, authenticated: Middleware, path: (relative: string) => string, docs: OpenAPIRegistry): void {
  const site = () => app.backoffice.site;
  const now = () => app.now?.() ?? new Date();
  const mayView = (principal: Principal, model: string) => {
    const bound = site().models.get(model);
    return Boolean(bound && site().can(principal, bound, 'view'));
  };
  const requireBlock = (ctx: Context, model: string, block: string) => {
    if (!mayView(principalOf(ctx), model)) throw new ForbiddenError(`You do not have permission to see the ${block} block.`, 'permission_denied');
  };

  router.get(path('dashboard/widgets/'), authenticated, async (ctx) => {
    acceptOnly(ctx, []);
    const principal = principalOf(ctx);
    const visible = CARDS.filter((spec) => mayView(principal, spec.model));
    if (!visible.length) throw new ForbiddenError('You do not have permission to see any dashboard card.', 'permission_denied');
    const at = now();
    respond(ctx, 'Dashboard cards.', { cards: await cards(app.db, visible, at) });
  });

  router.get(path('dashboard/decisions-by-day/'), authenticated, async (ctx) => {
    acceptOnly(ctx, []);
    requireBlock(ctx, BLOCK_MODELS.decisionsByDay, 'decisions');
    respond(ctx, 'Decisions by day.', await decisionsByDay(app.db, now()));
  });

  router.get(path('dashboard/high-volume-customers/'), authenticated, async (ctx) => {
    acceptOnly(ctx, []);
    requireBlock(ctx, BLOCK_MODELS.highVolume, 'high-volume customers');
    respond(ctx, 'High-volume customers.', await highVolumeCustomers(app.db, now(), mayName(site(), principalOf(ctx), 'customer.customer')));
  });

  router.get(path('dashboard/lobby/'), authenticated, async (ctx) => {
    acceptOnly(ctx, []);
    requireBlock(ctx, BLOCK_MODELS.lobby, 'lobby');
    respond(ctx, 'Video-call lobby.', await lobby(app.db, principalOf(ctx), now()));
  });

  router.post(path('dashboard/lobby/:session/take/'), authenticated, async (ctx) => {
    requireBlock(ctx, BLOCK_MODELS.lobby, 'lobby');
    const taken = await takeAndJoin(app, principalOf(ctx).user.id, sessionParameter(ctx));
    respond(ctx, 'Call taken.', { ...(await lobby(app.db, principalOf(ctx), now())), ...taken });
  });

  router.post(path('dashboard/lobby/:session/snapshot/'), authenticated, async (ctx) => {
    requireBlock(ctx, BLOCK_MODELS.lobby, 'lobby');
    respond(ctx, 'Snapshot requested.', await requestSnapshot(app, principalOf(ctx).user.id, sessionParameter(ctx)));
  });

  router.post(path('dashboard/lobby/:session/recording/'), authenticated, async (ctx) => {
    requireBlock(ctx, BLOCK_MODELS.lobby, 'lobby');
    const session = sessionParameter(ctx);
    if (!ctx.is('multipart/form-data')) throw new HttpError(415, 'Send the recording as multipart/form-data with the field "file".', 'content_type_invalid');
    try {
      // A refused agent uploads nothing.
      await checkRecording(app, principalOf(ctx).user.id, session);
    } catch (error) {
      refuseUnreadBody(ctx);
      throw error;
    }
    const { files } = await readRecordingUpload(app, ctx);
    try {
      respond(ctx, 'Recording stored.', await storeRecording(app, principalOf(ctx).user.id, session, files[0] ?? null));
    } finally {
      await discardReceived(files);
    }
  });

  router.post(path('dashboard/lobby/:session/end/'), authenticated, async (ctx) => {
    requireBlock(ctx, BLOCK_MODELS.lobby, 'lobby');
    await endAndTell(app, principalOf(ctx).user.id, sessionParameter(ctx));
    respond(ctx, 'Call ended.', await lobby(app.db, principalOf(ctx), now()));
  });

  // The agent summary leaves no heartbeat: its caller is checked without the last-seen stamp.
  const identity = createIdentity(app);
  const withoutHeartbeat: Middleware = async (ctx, next) => {
    (ctx.state as MobileState).mobile = await authenticateCaller(identity, ctx.get('authorization'), { touch: false });
    await next();
  };
  router.get(path('dashboard/agent-summary/'), withoutHeartbeat, async (ctx) => {
    acceptOnly(ctx, []);
    respond(ctx, 'Agent summary.', (await agentSummary(app.db, principalOf(ctx), now())) satisfies z.infer<typeof AGENT_SUMMARY>);
  });

  const unknownParameter = { 400: 'Unknown parameter (these take none)' };
  documentRoutes(docs, path, [
    ['get', 'dashboard/widgets/', 'Cards (value, change today vs yesterday, 7-day trend) the user may see', null, { 200: envelopeResponse('The cards', z.object({ cards: z.array(CARD) })) }, { 403: 'No card visible to this user', ...unknownParameter }],
    ['get', 'dashboard/decisions-by-day/', 'Financial events per day over 30 days, by decision', null, { 200: envelopeResponse('The chart', DECISIONS_BY_DAY) }, { 403: 'No view permission on financial events', ...unknownParameter }],
    ['get', 'dashboard/high-volume-customers/', 'Top customers by 30-day amount (per currency)', null, { 200: envelopeResponse('The customers', HIGH_VOLUME) }, { 403: 'No view permission on financial events', ...unknownParameter }],
    ['get', 'dashboard/lobby/', 'The video-call queue', null, { 200: envelopeResponse('The lobby', LOBBY) }, { 403: 'No view permission on verification sessions', ...unknownParameter }],
    ['post', 'dashboard/lobby/{session}/take/', 'Take a waiting (or offered) call: the agent is then in call; the end user\'s page gets agent_joined', null, { 200: envelopeResponse('Taken: the lobby, the agent token and the ICE servers', LOBBY.merge(TAKEN_CALL)) }, {
      403: 'Not an agent, or no view permission on verification sessions', 404: 'Session not in the queue', 409: 'Already in a call, or the call is no longer waiting',
    }],
    ['post', 'dashboard/lobby/{session}/snapshot/', 'Ask the end user\'s page for a snapshot of its camera (uploaded with take_snapshot)', null, { 200: envelopeResponse('Requested', SNAPSHOT_REQUESTED) }, {
      403: 'No view permission on verification sessions', 404: 'No such session in the video-call queue', 409: 'You are not in a call for this session, or its end user is not connected',
    }],
    ['post', 'dashboard/lobby/{session}/end/', 'End your call', null, { 200: envelopeResponse('Ended: the lobby', LOBBY) }, {
      403: 'No view permission on verification sessions', 404: 'No such session in the video-call queue', 409: 'You are not in a call for this session',
    }],
    ['get', 'dashboard/agent-summary/', 'The agent summary ({agent: false} for a non-agent); writes no last-seen stamp', null, { 200: envelopeResponse('The summary', AGENT_SUMMARY) }, unknownParameter],
  ]);
  docs.registerPath({
    method: 'post',
    path: path('dashboard/lobby/{session}/recording/'),
    summary: 'Store the call\'s recording as the session\'s recording artifact (the call\'s agent, during it or within an hour after; only with the end user\'s consent)',
    tags: ['mobile'],
    security: [{ bearer: [] }],
    request: { body: { content: { 'multipart/form-data': { schema: z.object({ file: z.string().openapi({ format: 'binary', description: 'WebM or MP4 video, up to 25 MB' }) }) } } } },
    responses: {
      200: envelopeResponse('Stored', RECORDING_STORED),
      ...errorResponses(deviceGuardErrors('post', path('dashboard/lobby/{session}/recording/')), {
        400: 'No file, an empty file, or a malformed multipart body',
        403: 'No view permission on verification sessions',
        404: 'No such session in the video-call queue',
        409: 'No call of yours on this session in the last hour (not_in_call), or no consent to recording (recording_not_consented)',
        413: 'The file is larger than 25 MB',
        415: 'Not multipart, or not WebM/MP4 video by content',
      }),
    },
  });
}
