import type Router from '@koa/router';
import type { Context, Next } from 'koa';
import type { AppContext } from '../../context.ts';
import { ForbiddenError, HttpError } from '../../http/errors.ts';
import { discardReceived, refuseUnreadBody, type ReceivedFile } from '../../http/multipart.ts';
import { formatTimestamp } from '../../timestamps.ts';
import { isStorableText } from '../../validation/storable.ts';
import { adminState, renderPage } from '../backoffice/web/common.tsx';
import { CSRF_FIELD } from '../backoffice/web/layout.tsx';
import { createHttpsDetector, expectedOrigin, SECURITY_HEADERS } from '../backoffice/web/security.ts';
import { resolveSession, sameSecret, SESSION_COOKIE } from '../backoffice/web/session.ts';
import type { AdminState } from '../backoffice/web/shell.tsx';
import { lobby } from '../dashboard/blocks.ts';
import type { Principal } from '../staff/principal.ts';
import { checkRecording, endAndTell, readRecordingUpload, requestSnapshot, setAgentAvailability, storeRecording, takeAndJoin } from './agent.ts';
import { staticAsset } from './end-user.ts';
import { SESSION_MODEL } from './queue.ts';

/**
 * The web admin's agent console (issue 38) at /admin/videocall/: the availability switch, the
 * waiting calls (refreshed on videoCallQueue broadcasts of the live socket's web door), taking a
 * call, the call itself (static/console.js: RTCPeerConnection, the offer and ICE over
 * /admin/live/), snapshots, the session's documents and results, the recording (when the end
 * user consented) and the close form (end-kyc-session with the agent token). The JSON routes are
 * behind the admin shell (session cookie, urlencoded posts with csrfmiddlewaretoken, Origin
 * checked); the recording's multipart post is answered before the shell and does the same checks
 * itself (registerVideoCallUploads). Every call action goes through agent.ts, as the mobile API's.
 */

export const CONSOLE_PATH = '/admin/videocall/';

/**
 * The close form's questions. Flows define no checklist of their own (verification_flows has no
 * such column); until they do, every call is closed with these.
 */
export const CALL_CHECKLIST: readonly { id: string; label: string }[] = [
  { id: 'face_matches_document', label: 'The person on camera matches the document photo' },
  { id: 'document_original', label: 'The document shown is the original, not a copy or a screen' },
  { id: 'security_features_seen', label: 'The document’s security features were seen moving under the light' },
  { id: 'person_confirmed_details', label: 'The person confirmed their name and date of birth' },
  { id: 'no_one_prompting', label: 'Nobody else was prompting the person' },
];

/** The console's staff: a video-call agent who may view verification sessions (as the mobile lobby asks). */
function requireAgent(app: AppContext, principal: Principal): void {
  const model = app.backoffice.site.models.get(SESSION_MODEL);
  if (!principal.isAgent) throw new ForbiddenError('The video-call console is for video-call agents.', 'not_an_agent');
  if (!model || !app.backoffice.site.can(principal, model, 'view')) throw new ForbiddenError('You do not have permission to view verification sessions.', 'permission_denied');
}

/** The session a path names; text PostgreSQL cannot hold names none. */
function sessionParameter(ctx: Context): string {
  const session = ctx.params.session!;
  if (!isStorableText(session) || session.length > 200) throw new HttpError(404, 'No such session in the video-call queue.', 'not_found');
  return session;
}

/** Sessions whose call this agent took: only those show their documents in the console. */
async function requireOwnSession(app: AppContext, userId: string, sessionId: string): Promise<void> {
  const row = await app.db('video_call_queue').where({ session_id: sessionId, agent_id: userId }).first('session_id');
  if (!row) throw new HttpError(404, 'You have not taken a call for this session.', 'not_found');
}

/** A JSON route of the console: errors answer JSON too (the shell would render its HTML error page). */
function json(app: AppContext, handler: (ctx: Context, principal: Principal) => Promise<unknown>) {
  return async (ctx: Context) => {
    const principal = adminState(ctx).principal;
    try {
      requireAgent(app, principal);
      ctx.body = await handler(ctx, principal);
    } catch (error) {
      if (!(error instanceof HttpError) || error.status >= 500) throw error;
      ctx.status = error.status;
      ctx.body = { reason: error.reason ?? 'refused', message: error.message };
    }
    ctx.type = 'application/json';
  };
}

interface ArtifactRow {
  id: string;
  artifact_type: string;
  content_type: string;
  size: string | number;
  created_at: Date;
  result_type: string | null;
  result_code: string | null;
  result_message: string | null;
  result_data: unknown;
}

/** The session as the console shows it beside the video: its state, the consent, every artifact with its result. */
async function sessionArtifacts(app: AppContext, sessionId: string) {
  const [session, artifacts, call] = await Promise.all([
    app.db('verification_sessions')
      .where({ id: sessionId })
      .first('id', 'customer_ref', 'flow_code', 'status', 'required_artifact_types', 'pending_artifact_types', 'succeeded_artifact_types', 'call_consent', 'mrz_data') as Promise<Record<string, unknown> | undefined>,
    app
      .db('verification_artifacts as a')
      .leftJoin('verification_results as r', 'r.artifact_id', 'a.id')
      .where({ 'a.session_id': sessionId })
      .orderBy('a.created_at')
      .select('a.id', 'a.artifact_type', 'a.content_type', 'a.size', 'a.created_at', 'r.type as result_type', 'r.code as result_code', 'r.message as result_message', 'r.data as result_data') as Promise<ArtifactRow[]>,
    app.db('video_call_queue').where({ session_id: sessionId }).first('status', 'end_reason') as Promise<{ status: string; end_reason: string | null } | undefined>,
  ]);
  if (!session) throw new HttpError(404, 'No such session.', 'not_found');
  return {
    session,
    call: call ?? null,
    artifacts: artifacts.map((row) => ({
      id: row.id,
      artifact_type: row.artifact_type,
      content_type: row.content_type,
      size: Number(row.size),
      created_at: formatTimestamp(row.created_at),
      // Images are shown in the console; other files (videos, chip data) are listed only.
      url: row.content_type.startsWith('image/') ? `${CONSOLE_PATH}${encodeURIComponent(sessionId)}/artifacts/${row.id}/` : null,
      result: row.result_code ? { type: row.result_type, code: row.result_code, message: row.result_message, data: row.result_data } : null,
    })),
  };
}

function ConsolePage({ csrfToken, available, inCall }: { csrfToken: string; available: boolean; inCall: boolean }) {
  return (
    <section id="videocall" class="videocall" data-csrf-token={csrfToken} aria-labelledby="vc-title">
      <link rel="stylesheet" href={`${CONSOLE_PATH}console.css`} />
      <script type="module" src={`${CONSOLE_PATH}console.js`} />
      <h1 id="vc-title">Video calls</h1>
      <p id="vc-status" class="vc-status" role="status" aria-live="polite">
        {inCall ? 'You are marked as in a call that this page does not hold (was it reloaded?): it ends when the customer leaves.' : ''}
      </p>
      <div class="vc-availability">
        <input type="checkbox" id="vc-available" role="switch" checked={available} disabled={inCall} />
        <label for="vc-available">Available for calls</label>
      </div>
      <section id="vc-lobby-section" aria-labelledby="vc-lobby-title">
        <h2 id="vc-lobby-title">Waiting calls</h2>
        <p id="vc-resume-line" hidden>
          Your call with <span id="vc-resume-customer"></span> is still going on.{' '}
          <button type="button" id="vc-resume">
            Resume it
          </button>
        </p>
        <table class="results" id="vc-lobby">
          <thead>
            <tr>
              <th scope="col">Customer</th>
              <th scope="col">Waiting</th>
              <th scope="col">Status</th>
              <th scope="col">Action</th>
            </tr>
          </thead>
          <tbody />
        </table>
        <p id="vc-lobby-empty">Nobody is waiting.</p>
      </section>
      <section id="vc-call" class="vc-call" hidden aria-labelledby="vc-call-title">
        <h2 id="vc-call-title">
          Call with <span id="vc-customer" />
        </h2>
        <div class="vc-main">
          <div class="vc-videos">
            <figure>
              <video id="vc-remote" autoplay playsinline aria-label="The customer’s camera" />
              <figcaption>Customer</figcaption>
            </figure>
            <figure class="vc-self">
              <video id="vc-local" autoplay playsinline muted aria-label="Your camera" />
              <figcaption>You</figcaption>
            </figure>
            <p id="vc-recording" class="vc-recording" />
            <div class="vc-actions">
              <button type="button" id="vc-snapshot">
                Take a snapshot
              </button>
              <button type="button" id="vc-hangup">
                End the call
              </button>
            </div>
          </div>
          <aside class="vc-documents" aria-labelledby="vc-documents-title">
            <h3 id="vc-documents-title">Documents and results</h3>
            <p id="vc-session-state" />
            <ul id="vc-artifacts" class="vc-artifacts" />
          </aside>
        </div>
        <form id="vc-close" class="vc-close">
          <fieldset>
            <legend>Close the verification</legend>
            <div class="vc-field">
              <label for="vc-close-status">Outcome</label>
              <select id="vc-close-status" name="status" required>
                <option value="completed">Completed: identity verified</option>
                <option value="reported">Reported: suspicious, for review</option>
                <option value="ended">Ended: not verified</option>
              </select>
            </div>
            <fieldset class="vc-checklist">
              <legend>Checklist</legend>
              {CALL_CHECKLIST.map((item) => (
                <div class="vc-check" key={item.id}>
                  <input type="checkbox" id={`vc-check-${item.id}`} name={item.id} />
                  <label for={`vc-check-${item.id}`}>{item.label}</label>
                </div>
              ))}
            </fieldset>
            <button type="submit" id="vc-close-submit">
              Close the session
            </button>
          </fieldset>
        </form>
      </section>
    </section>
  );
}

/** The console's page and JSON routes; register after the admin shell. */
export function registerVideoCallPages(router: Router, app: AppContext): void {
  for (const name of ['console.js', 'console.css']) {
    const asset = staticAsset(name);
    router.get(`${CONSOLE_PATH}${name}`, (ctx) => {
      ctx.type = asset.type;
      ctx.body = asset.body;
    });
  }

  router.get(CONSOLE_PATH, async (ctx) => {
    const state = adminState(ctx);
    requireAgent(app, state.principal);
    const agent = (await app.db('staff_video_agents').where({ user_id: state.principal.user.id }).first('status', 'in_call')) as { status: string; in_call: boolean };
    await renderPage(
      ctx,
      app,
      200,
      'Video calls',
      [{ label: 'Home', href: '/admin/' }, { label: 'Video calls' }],
      <ConsolePage csrfToken={state.session.csrfToken} available={agent.status === 'AVAILABLE'} inCall={agent.in_call} />,
    );
  });

  router.get(`${CONSOLE_PATH}lobby.json`, json(app, (_ctx, principal) => lobby(app.db, principal, app.now?.() ?? new Date())));

  router.post(
    `${CONSOLE_PATH}availability/`,
    json(app, async (ctx, principal) => {
      const value = (ctx.state as AdminState).form?.get('available');
      if (value !== 'true' && value !== 'false') throw new HttpError(400, 'available must be true or false.', 'available_invalid');
      await setAgentAvailability(app, principal.user.id, value === 'true', app.now?.() ?? new Date());
      return lobby(app.db, principal, app.now?.() ?? new Date());
    }),
  );

  router.post(
    `${CONSOLE_PATH}:session/take/`,
    json(app, async (ctx, principal) => {
      const taken = await takeAndJoin(app, principal.user.id, sessionParameter(ctx));
      // The end user's consent decides whether the console records the call.
      const session = (await app.db('verification_sessions').where({ id: taken.session_id }).first('customer_ref', 'call_consent')) as { customer_ref: string; call_consent: unknown };
      return { ...taken, customer_ref: session.customer_ref, consent: session.call_consent ?? null };
    }),
  );

  router.post(
    `${CONSOLE_PATH}:session/snapshot/`,
    json(app, (ctx, principal) => requestSnapshot(app, principal.user.id, sessionParameter(ctx))),
  );

  router.post(
    `${CONSOLE_PATH}:session/end/`,
    json(app, async (ctx, principal) => {
      await endAndTell(app, principal.user.id, sessionParameter(ctx));
      return { ended: true };
    }),
  );

  router.get(
    `${CONSOLE_PATH}:session/artifacts.json`,
    json(app, async (ctx, principal) => {
      const sessionId = sessionParameter(ctx);
      await requireOwnSession(app, principal.user.id, sessionId);
      return sessionArtifacts(app, sessionId);
    }),
  );

  router.get(`${CONSOLE_PATH}:session/artifacts/:artifact/`, async (ctx) => {
    const principal = adminState(ctx).principal;
    requireAgent(app, principal);
    const sessionId = sessionParameter(ctx);
    await requireOwnSession(app, principal.user.id, sessionId);
    const artifact = /^[0-9a-f-]{36}$/.test(ctx.params.artifact!)
      ? ((await app.db('verification_artifacts').where({ id: ctx.params.artifact, session_id: sessionId }).first('path', 'content_type')) as { path: string; content_type: string } | undefined)
      : undefined;
    if (!artifact || !artifact.content_type.startsWith('image/')) throw new HttpError(404, 'No such image of this session.');
    ctx.type = artifact.content_type;
    ctx.body = await app.files.read(artifact.path);
  });
}

/**
 * POST /admin/videocall/<session>/recording/ (multipart: csrfmiddlewaretoken, file): the call's
 * recording from the console. Answered before the shell, which reads only urlencoded forms: the
 * session cookie, the Origin and the agent's call (checkRecording) are checked before a byte is
 * read, the form's CSRF token before the file is stored (storeRecording, as the mobile route).
 */
export function registerVideoCallUploads(router: Router, app: AppContext): void {
  const isHttps = createHttpsDetector(app.config.trustedProxies);
  router.post(`${CONSOLE_PATH}:session/recording/`, async (ctx: Context, next: Next) => {
    if (!ctx.is('multipart/form-data')) return next();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) ctx.set(name, value);
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'application/json';
    const refuse = (status: number, reason: string, message: string) => {
      refuseUnreadBody(ctx);
      ctx.status = status;
      ctx.body = { reason, message };
    };
    const https = isHttps(ctx);
    const cookie = ctx.cookies.get(SESSION_COOKIE);
    const resolved = cookie ? await resolveSession(app.db, cookie, app.config.adminSessionIdleSeconds) : null;
    if (!resolved || !resolved.principal.user.is_staff) return refuse(401, 'not_signed_in', 'Sign in to the admin first.');
    const origin = ctx.get('origin');
    if (origin && origin !== expectedOrigin(ctx, https)) return refuse(403, 'csrf_failed', 'Origin checking failed.');
    let received: ReceivedFile[] = [];
    try {
      requireAgent(app, resolved.principal);
      const sessionId = sessionParameter(ctx);
      await checkRecording(app, resolved.principal.user.id, sessionId);
      const body = await readRecordingUpload(app, ctx);
      received = body.files;
      const token = body.fields[CSRF_FIELD];
      if (!token || !sameSecret(resolved.session.csrfToken, token)) return refuse(403, 'csrf_failed', `CSRF token ${token ? 'incorrect' : 'missing'}.`);
      ctx.body = await storeRecording(app, resolved.principal.user.id, sessionId, received[0] ?? null);
    } catch (error) {
      if (!(error instanceof HttpError) || error.status >= 500) throw error;
      refuse(error.status, error.reason ?? 'refused', error.message);
    } finally {
      await discardReceived(received);
    }
  });
}
