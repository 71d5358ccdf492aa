import type { OpenAPIRegistry, ResponseConfig } from '@asteasolutions/zod-to-openapi';
import { envelopeResponse, errorResponses, z } from '../../http/openapi.ts';
import { MOBILE_PREFIX } from '../mobile/constants.ts';
import { deviceGuardErrors } from '../mobile/parameters.ts';
import { MAX_AI_JOBS_PER_USER } from '../ai/delegation.ts';
import { AI_BLOCK, FEEDBACK_FORM } from '../ai/review.ts';
import { APPROVAL_FORM, ASSISTANT_STATUS, CONVERSATION, CONVERSATIONS, MAX_MESSAGE, MESSAGE_FORM, TURN_ACCEPTED } from './service.ts';

type Endpoint = [method: 'get' | 'post' | 'delete', relative: string, summary: string, request: z.ZodType | null, ok: Record<number, ResponseConfig>, errors: Record<number, string>];

const unavailable = { 503: 'The AI gateway is not installed (WARDEN_GATEWAY_URL)' };
const unreachable = { 502: 'The AI gateway cannot be reached, or answered 401' };
const limited = { 429: `The user already has ${MAX_AI_JOBS_PER_USER} AI reviews or assistant turns queued or running (reason too_many_running, Retry-After)` };

/** The AI review and assistant endpoints in the OpenAPI document (so the fuzz run reaches them too). */
export function documentAiRoutes(docs: OpenAPIRegistry): void {
  const endpoints: Endpoint[] = [
    ['get', 'data/{app}/{model}/{pk}/ai/', 'The AI block of a case, read from the stored reviews (no gateway needed; can_run false without one)', null, { 200: envelopeResponse('The AI block', AI_BLOCK) }, { 403: 'No permission to view the model', 404: 'Not a case model, or no such case' }],
    ['post', 'data/{app}/{model}/{pk}/ai/run/', 'Run an AI review of a case', null, { 202: envelopeResponse('Queued: data.review_id and the AI block', AI_BLOCK.extend({ review_id: z.string() })) }, { ...unavailable, ...unreachable, ...limited, 403: 'Closed case; no permission', 404: 'Not a case model, or no such case', 409: 'A review is already in flight' }],
    ['post', 'data/{app}/{model}/{pk}/ai/feedback/', 'Feedback on the latest review, or {resend: true}', FEEDBACK_FORM, { 200: envelopeResponse('The AI block with its feedback', AI_BLOCK) }, { ...unavailable, 400: 'Validation failed (data.errors: verdict, note, to_knowledge)', 404: 'No such case', 409: 'A note already exists for that review; no finished review' }],
    ['get', 'assistant/status/', 'Assistant status (200 always; enabled false with a reason when unavailable)', null, { 200: envelopeResponse('The status', ASSISTANT_STATUS) }, {}],
    ['get', 'assistant/conversations/', "The caller's conversations", null, { 200: envelopeResponse('Newest first', CONVERSATIONS) }, { ...unavailable, ...unreachable }],
    ['post', 'assistant/conversations/', 'A new empty conversation', null, { 201: envelopeResponse('The conversation', CONVERSATION) }, { ...unavailable, ...unreachable }],
    ['get', 'assistant/conversations/{id}/', 'A conversation; long polling with after, wait (capped at 30 s) and tick', null, { 200: envelopeResponse('The conversation, with the messages after `after`', CONVERSATION) }, { ...unavailable, ...unreachable, 400: 'after, wait or tick is not a whole number', 404: 'No such conversation' }],
    ['delete', 'assistant/conversations/{id}/', 'Delete a conversation', null, { 200: envelopeResponse('Deleted', z.object({})) }, { ...unavailable, ...unreachable, 404: 'No such conversation' }],
    ['post', 'assistant/conversations/{id}/messages/', 'Send a message (starts a turn)', MESSAGE_FORM, { 202: envelopeResponse('The turn is queued', TURN_ACCEPTED) }, { ...unavailable, ...unreachable, ...limited, 400: `text missing or over ${MAX_MESSAGE} characters`, 404: 'No such conversation', 409: 'Busy with a previous message, or waiting for an approval answer' }],
    ['post', 'assistant/conversations/{id}/approval/', 'Answer a writing tool call', APPROVAL_FORM, { 202: envelopeResponse('The turn is queued', TURN_ACCEPTED) }, { ...unavailable, ...unreachable, ...limited, 400: 'approve missing or not a boolean', 404: 'No such conversation', 409: 'No call waits' }],
  ];
  for (const [method, relative, summary, request, ok, errors] of endpoints) {
    docs.registerPath({
      method,
      path: `${MOBILE_PREFIX}${relative}`,
      summary,
      tags: ['mobile'],
      security: [{ bearer: [] }],
      ...(request ? { request: { body: { content: { 'application/json': { schema: request } } } } } : {}),
      responses: { ...ok, ...errorResponses(deviceGuardErrors(method, `${MOBILE_PREFIX}${relative}`), errors) },
    });
  }
}
