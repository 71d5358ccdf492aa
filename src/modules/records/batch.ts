import type { Context } from 'koa';
import { BadRequestError, PayloadTooLargeError } from '../../http/errors.ts';
import { readJsonBody } from '../../http/json-body.ts';

export const MAX_RECORDS_PER_REQUEST = 1000;

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * Reads an upsert body: one object or an array of 1 to 1000 objects. The request-level errors of
 * the spec, in the order a caller would fix them.
 */
export async function readUpsertBatch(ctx: Context, limitBytes: number): Promise<Record<string, unknown>[]> {
  const body = await readJsonBody(ctx, limitBytes);
  if (Array.isArray(body)) {
    if (body.length === 0) throw new BadRequestError('Payload contains no records.', 'no_records');
    if (body.length > MAX_RECORDS_PER_REQUEST) {
      throw new PayloadTooLargeError(
        `Payload contains ${body.length} records; at most ${MAX_RECORDS_PER_REQUEST} are accepted per request.`,
        'too_many_records',
      );
    }
    body.forEach((element, index) => {
      if (element === null || typeof element !== 'object' || Array.isArray(element)) {
        throw new BadRequestError(`Record at index ${index} is not a JSON object (received ${describe(element)}).`, 'record_not_object', {
          index,
          received: describe(element),
        });
      }
    });
    return body as Record<string, unknown>[];
  }
  if (body !== null && typeof body === 'object') return [body as Record<string, unknown>];
  throw new BadRequestError(`A JSON object (or an array of objects) is required; received ${describe(body)}.`, 'object_required');
}

/**
 * For refs repeated within one batch: the batch index of each ref's last occurrence, the one
 * stored (every earlier occurrence is written over by it).
 */
export function lastOccurrence(items: ReadonlyArray<{ index: number; ref: string | null }>): Map<string, number> {
  const last = new Map<string, number>();
  for (const item of items) if (item.ref !== null) last.set(item.ref, item.index);
  return last;
}

/**
 * Every occurrence of a ref repeated in one batch reports the stored (last) record, as if the
 * occurrences had been sent one after another: only the first can be 'created'.
 */
export function reportRepeatedRefs<R extends { action: string; warnings: string[] }>(
  items: ReadonlyArray<{ index: number; ref: string | null; warnings: string[] }>,
  lastIndex: Map<string, number>,
  results: R[],
  refField: string,
): void {
  const groups = new Map<string, Array<{ index: number; warnings: string[] }>>();
  for (const item of items) if (item.ref) groups.set(item.ref, [...(groups.get(item.ref) ?? []), item]);
  for (const [ref, occurrences] of groups) {
    if (occurrences.length < 2) continue;
    const final = results[lastIndex.get(ref)!]!;
    occurrences.forEach(({ index, warnings }, occurrence) => {
      if (occurrence === occurrences.length - 1) return;
      results[index] = {
        ...final,
        action: occurrence === 0 && final.action === 'created' ? 'created' : 'updated',
        warnings: [...warnings, `${refField}: repeated later in this batch; the later record was stored.`],
      };
    });
    if (final.action === 'created') results[lastIndex.get(ref)!] = { ...final, action: 'updated' };
  }
}
