import { OpenAPIRegistry, OpenApiGeneratorV31, extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';

extendZodWithOpenApi(z);

export function createOpenApiRegistry(): OpenAPIRegistry {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
  return registry;
}

/** The envelope around an endpoint's data, for documentation. */
export function envelopeOf<T extends z.ZodType>(data: T) {
  return z.object({ status: z.boolean(), message: z.string(), data });
}

/** A JSON object whose keys depend on the model or the record (data endpoints' cells, a form's values). */
export const anyObject = z.record(z.string(), z.unknown());

/** A response entry whose JSON body is `schema`. */
export function jsonResponse(description: string, schema: z.ZodType) {
  return { description, content: { 'application/json': { schema } } };
}

/** A success response entry in the envelope around `data`. */
export function envelopeResponse(description: string, data: z.ZodType) {
  return jsonResponse(description, envelopeOf(data));
}

export const errorEnvelope = z
  .object({
    status: z.literal(false),
    message: z.string(),
    data: z.object({ reason: z.string().optional() }).catchall(z.unknown()),
  })
  .openapi('ErrorEnvelope');

/** Response entries for the error statuses an endpoint can answer with; a status in several lists gets their descriptions joined. */
export function errorResponses(...lists: Record<number, string>[]) {
  const descriptions = new Map<string, string[]>();
  for (const list of lists) for (const [status, description] of Object.entries(list)) descriptions.set(status, [...(descriptions.get(status) ?? []), description]);
  return Object.fromEntries(
    [...descriptions].map(([status, parts]) => [status, { description: parts.join('; '), content: { 'application/json': { schema: errorEnvelope } } }]),
  );
}

/** What any operation can answer (requestLifecycle), unless its module says more. */
const OPERATION_ERRORS = { 500: 'Internal server error (data.reason internal_error, data.request_id)' };
/** What any JSON body can be refused with (readJsonObject and the batch reader), unless the module says more. */
const JSON_BODY_ERRORS = {
  400: 'Body not UTF-8, not JSON, or not a JSON object',
  413: 'Body over the size limit',
  415: 'Content-Type is not application/json',
};

export function buildOpenApiDocument(registry: OpenAPIRegistry) {
  const document = new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Warden',
      version: '0.1.0',
      description:
        'Fraud prevention, AML monitoring and KYC onboarding. JSON responses use the envelope {status, message, data}, ' +
        'except where the integration spec gives its own shape: the KYC upload answers ({status: "success", message, path, artifact_id}) ' +
        'and the end-kyc-session answer ({status, message, session_id, session_status}). /metrics answers Prometheus text and the report CSV text/csv.',
    },
  });
  completeOperations(document);
  return document;
}

/**
 * What every operation shares, added here so that no module repeats it: each {name} of its path
 * template is a required string parameter (the routes read ctx.params as strings and check them
 * themselves), and the errors of the request lifecycle and of a JSON body.
 */
function completeOperations(document: ReturnType<OpenApiGeneratorV31['generateDocument']>): void {
  const errorEntry = (description: string) => ({ description, content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorEnvelope' } } } });
  for (const [template, item] of Object.entries(document.paths ?? {})) {
    const names = [...template.matchAll(/\{(\w+)\}/g)].map((match) => match[1]!);
    for (const method of ['get', 'post', 'put', 'patch', 'delete'] as const) {
      const operation = item[method];
      if (!operation) continue;
      const declared = new Set((operation.parameters ?? []).map((parameter) => ('in' in parameter && parameter.in === 'path' ? parameter.name : '')));
      const missing = names.filter((name) => !declared.has(name));
      if (missing.length) {
        operation.parameters = [...(operation.parameters ?? []), ...missing.map((name) => ({ name, in: 'path' as const, required: true, schema: { type: 'string' as const } }))];
      }
      const requestBody = operation.requestBody;
      const jsonBody = Boolean(requestBody && 'content' in requestBody && requestBody.content['application/json']);
      const responses = (operation.responses ??= {});
      for (const [status, description] of Object.entries({ ...OPERATION_ERRORS, ...(jsonBody ? JSON_BODY_ERRORS : {}) })) responses[status] ??= errorEntry(description);
    }
  }
}

export { z };
