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

export const errorEnvelope = z
  .object({
    status: z.literal(false),
    message: z.string(),
    data: z.object({ reason: z.string().optional() }).catchall(z.unknown()),
  })
  .openapi('ErrorEnvelope');

/** Response entries for the error statuses an endpoint can answer with. */
export function errorResponses(statuses: Record<number, string>) {
  return Object.fromEntries(
    Object.entries(statuses).map(([status, description]) => [
      status,
      { description, content: { 'application/json': { schema: errorEnvelope } } },
    ]),
  );
}

export function buildOpenApiDocument(registry: OpenAPIRegistry) {
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Warden',
      version: '0.1.0',
      description: 'Fraud prevention, AML monitoring and KYC onboarding. Every JSON response uses the envelope {status, message, data}.',
    },
  });
}

export { z };
