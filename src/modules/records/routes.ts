import type { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import type Router from '@koa/router';
import type { AppContext } from '../../context.ts';
import { requireMerchant } from '../merchant/bearer.ts';
import { respond } from '../../http/envelope.ts';
import { envelopeResponse, errorResponses, z } from '../../http/openapi.ts';
import type { RequestState } from '../../http/state.ts';
import { MAX_RECORDS_PER_REQUEST, readUpsertBatch } from './batch.ts';
import { compileFieldTable, type FieldTable } from './fields.ts';

/** One batch upsert endpoint: its path, the fields of a record, what a result holds, and the work. */
export interface UpsertEndpoint {
  path: string;
  label: string;
  fields: FieldTable;
  resultFields: string[];
  handle(app: AppContext, records: Record<string, unknown>[], state: RequestState): Promise<unknown[]>;
}

/**
 * Batch upsert endpoints (the customer and transaction modules declare theirs): one object or an
 * array of up to 1000, a result per record in order.
 */
export function registerUpsertRoutes(router: Router, app: AppContext, docs: OpenAPIRegistry, endpoints: readonly UpsertEndpoint[]): void {
  for (const endpoint of endpoints) {
    router.post(endpoint.path, requireMerchant(app), async (ctx) => {
      const records = await readUpsertBatch(ctx, app.config.bodyLimitBytes);
      const results = await endpoint.handle(app, records, ctx.state as RequestState);
      respond(ctx, `Processed ${records.length} ${endpoint.label} record(s).`, { results });
    });

    const recordSchema = compileFieldTable(endpoint.fields).schema;
    // A record's result holds these keys, or error for a skipped record.
    const result = z.object(Object.fromEntries([...endpoint.resultFields, 'error'].map((field) => [field, z.unknown()])));
    docs.registerPath({
      method: 'post',
      path: endpoint.path,
      summary: `Upsert ${endpoint.label} records (one object or an array of up to ${MAX_RECORDS_PER_REQUEST})`,
      security: [{ bearer: [] }],
      request: {
        body: {
          content: {
            'application/json': {
              schema: z.union([recordSchema, z.array(recordSchema).min(1).max(MAX_RECORDS_PER_REQUEST)]),
            },
          },
        },
      },
      responses: {
        200: envelopeResponse(
          `Processed; data.results holds one entry per record in the order sent (${endpoint.resultFields.join(', ')}, and error for skipped records)`,
          z.object({ results: z.array(result) }),
        ),
        ...errorResponses({
          400: 'Body not JSON, neither object nor array, empty array (Payload contains no records.), or an element that is not an object',
          401: 'Bearer token missing, invalid or expired',
          403: 'Credential deactivated or IP not allowed',
          413: 'More than 1000 records, or body over the size limit',
          415: 'Content-Type is not application/json',
        }),
      },
    });
  }
}
