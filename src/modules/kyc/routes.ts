import type { Middleware } from 'koa';
import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type Router from '@koa/router';
import type { AppContext } from '../../context.ts';
import { requireMerchant } from '../merchant/bearer.ts';
import { respond } from '../../http/envelope.ts';
import { readJsonObject } from '../../http/json-body.ts';
import { envelopeOf, errorResponses, jsonResponse, z } from '../../http/openapi.ts';
import type { RequestState } from '../../http/state.ts';
import { DOCUMENTS_PATH } from '../../realtime/documents.ts';
import { validateBody } from '../../validation/request.ts';
import { createHttpsDetector } from '../backoffice/web/security.ts';
import { CLOSING_STATUS_VALUES } from './constants.ts';
import { verifyKycToken } from './errors.ts';
import { receiveUpload } from './multipart.ts';
import { closeSession, createSession } from './sessions.ts';
import { storeUpload } from './uploads.ts';

const MAX_UPLOAD_BYTES = 25 * 1024 * 1024;

const createSessionRequest = z
  .object({
    customer_ref: z.string().trim().min(1).max(48),
    flow: z.string().trim().min(1).max(64).optional(),
    device_id: z.string().max(128).optional(),
    ip_address: z.string().max(64).optional(),
    user_agent: z.string().max(1024).optional(),
    geo: z.record(z.string(), z.unknown()).optional(),
  })
  .openapi('CreateSessionRequest');

const sessionSchema = z
  .object({
    session_id: z.string(),
    flow: z.string(),
    required_artifact_types: z.array(z.string()),
    pending_artifact_types: z.array(z.string()),
    succeeded_artifact_types: z.array(z.string()),
    requires_video_call: z.boolean(),
    attempt_no: z.number().int(),
    videocall_token: z.string(),
    endpoint_token: z.string(),
    mrz_data: z.record(z.string(), z.unknown()).nullable(),
  })
  .openapi('VerificationSession');

// The spec's own shapes for the upload and end-session answers, not the envelope.
const snapshotResponse = z
  .object({ status: z.literal('success'), message: z.string(), path: z.string(), artifact_id: z.string() })
  .openapi('SnapshotResponse');
const uploadResponse = snapshotResponse.extend({ artifact_type: z.string() }).openapi('UploadResponse');
const endSessionResponse = z
  .object({ status: z.literal(true), message: z.string(), session_id: z.string(), session_status: z.string() })
  .openapi('EndKycSessionResponse');

const endSessionRequest = z
  .object({
    token: z.string(),
    status: z.enum(CLOSING_STATUS_VALUES, { error: `status must be one of ${CLOSING_STATUS_VALUES.join(', ')}.` }),
    checklist: z
      .record(z.string().max(128), z.boolean(), { error: 'checklist must map question ids to true or false.' })
      .refine((value) => Object.keys(value).length <= 200, 'checklist holds at most 200 answers.')
      .default({}),
  })
  .openapi('EndKycSessionRequest');
const END_SESSION_REASONS = { status: 'status_invalid', checklist: 'checklist_invalid' };

const KYC_ERRORS = {
  400: 'artifact_type_missing, artifact_type_invalid, file_missing, file_empty, multipart_invalid',
  401: 'token_missing, token_invalid, token_expired',
  403: 'token_wrong_audience',
  404: 'session_not_found',
  409: 'session_closed',
  413: 'file_too_large (over 25 MB, refused while streaming)',
  415: 'file_type_not_allowed (judged by content), content_type_invalid (not multipart)',
};

/**
 * The end user's uploads may come from a merchant's page that embeds the call (/kyc/call/call.js):
 * any origin may read their answers, errors included. They are authorised by the session token in
 * the form, never by a cookie, so another origin gains nothing it does not hold already.
 */
const anyOrigin: Middleware = async (ctx, next) => {
  try {
    await next();
  } finally {
    ctx.set('Access-Control-Allow-Origin', '*');
  }
};

export function registerKycRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry): void {
  const isHttps = createHttpsDetector(app.config.trustedProxies);
  router.post('/api/document/create-session/', requireMerchant(app), async (ctx) => {
    const body = validateBody(createSessionRequest, await readJsonObject(ctx, app.config.bodyLimitBytes));
    const session = await createSession(app, body, { type: 'merchant', id: (ctx.state as RequestState).credential!.id });
    // Beside the spec's session object: the documents socket, by the scheme and host the request came with.
    const websocketUrl = `${isHttps(ctx) ? 'wss' : 'ws'}://${ctx.host}${DOCUMENTS_PATH}`;
    respond(ctx, session.attempt_no > 1 ? 'The open session was returned.' : 'Session opened.', { session, websocket_url: websocketUrl });
  });

  router.post('/api/document/upload_document/', anyOrigin, async (ctx) => {
    const upload = await receiveUpload(ctx, MAX_UPLOAD_BYTES, app.files.temporaryDirectory());
    const stored = await storeUpload(app, upload, null);
    ctx.body = { status: 'success', message: 'Document received; its verification result follows on the websocket.', ...stored } satisfies z.infer<typeof uploadResponse>;
  });

  router.post('/api/document/take_snapshot/', anyOrigin, async (ctx) => {
    const upload = await receiveUpload(ctx, MAX_UPLOAD_BYTES, app.files.temporaryDirectory());
    const { artifact_id, path } = await storeUpload(app, upload, 'snapshot');
    ctx.body = { status: 'success', message: 'Snapshot received.', path, artifact_id } satisfies z.infer<typeof snapshotResponse>;
  });

  router.post('/api/document/end-kyc-session/', async (ctx) => {
    const body = await readJsonObject(ctx, app.config.bodyLimitBytes);
    // The token first: the spec answers a bad token with 401/403 before looking at the rest.
    const { sessionId, claims } = await verifyKycToken(app, 'agent', body.token);
    const { status, checklist } = validateBody(endSessionRequest, body, END_SESSION_REASONS);
    const agent = typeof claims.agent === 'string' ? claims.agent : 'agent';
    const session = await closeSession(app, sessionId, status, checklist, agent);
    ctx.body = { status: true, message: `Session ${session.status}.`, session_id: session.id, session_status: session.status } satisfies z.infer<typeof endSessionResponse>;
  });

  docs.registerPath({
    method: 'post',
    path: '/api/document/create-session/',
    summary: 'Open a verification session (or get the open one back with attempt_no + 1)',
    security: [{ bearer: [] }],
    request: { body: { content: { 'application/json': { schema: createSessionRequest } } } },
    responses: {
      200: { description: 'The session', content: { 'application/json': { schema: envelopeOf(z.object({ session: sessionSchema, websocket_url: z.string().openapi({ description: 'The documents socket for this session (ws:// or wss:// /ws/documents/)' }) })) } } },
      ...errorResponses({ 400: 'Unknown or inactive verification flow: <code>, or a missing customer_ref', 401: 'Invalid Bearer token' }),
    },
  });
  for (const [path, summary, answer] of [
    ['/api/document/upload_document/', 'Upload a document (multipart: token, artifact_type, snapshot file, extra_data)', uploadResponse],
    ['/api/document/take_snapshot/', 'Upload a frame captured during the call (multipart: token, snapshot image)', snapshotResponse],
  ] as const) {
    docs.registerPath({
      method: 'post',
      path,
      summary,
      request: {
        body: {
          content: {
            'multipart/form-data': {
              schema: z.object({
                token: z.string(),
                artifact_type: z.string().optional(),
                snapshot: z.string().openapi({ format: 'binary' }),
                extra_data: z.string().optional(),
              }),
            },
          },
        },
      },
      responses: { 200: jsonResponse('Stored (the spec\'s shape, not the envelope)', answer), ...errorResponses(KYC_ERRORS) },
    });
  }
  docs.registerPath({
    method: 'post',
    path: '/api/document/end-kyc-session/',
    summary: 'Close a session (agent token): completed, reported or ended (-> failed)',
    request: {
      body: {
        content: {
          'application/json': {
            schema: endSessionRequest,
          },
        },
      },
    },
    responses: {
      200: jsonResponse('Closed (or already closed); the spec\'s shape, not the envelope', endSessionResponse),
      ...errorResponses({ 400: 'status_invalid, checklist_invalid', 401: 'token_missing, token_invalid, token_expired', 403: 'token_wrong_audience (a session token)', 404: 'session_not_found' }),
    },
  });
}
