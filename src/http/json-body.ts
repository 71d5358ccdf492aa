import type { Context } from 'koa';
import { BadRequestError, PayloadTooLargeError, RequestAbortedError, UnsupportedMediaTypeError } from './errors.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads and parses a JSON request body. Written here rather than taken from koa-body because the
 * spec needs distinct answers that co-body does not give: a 415 for a non-JSON content type, a
 * 400 for bytes that are not UTF-8 (co-body replaces them silently), and a 413 decided while
 * streaming, before an oversized body is held in memory.
 */
export async function readJsonBody(ctx: Context, limitBytes: number): Promise<unknown> {
  const contentType = ctx.get('content-type');
  const [mediaType = '', ...parameters] = contentType.split(';').map((part) => part.trim().toLowerCase());
  if (mediaType !== 'application/json' && !mediaType.endsWith('+json')) {
    throw new UnsupportedMediaTypeError(
      `Content-Type must be application/json${contentType ? `, got ${contentType}` : ''}.`,
      'content_type_invalid',
    );
  }
  const charset = parameters.find((parameter) => parameter.startsWith('charset='))?.slice(8).replace(/"/g, '');
  if (charset && charset !== 'utf-8' && charset !== 'utf8') {
    throw new UnsupportedMediaTypeError('Request bodies must be UTF-8.', 'charset_invalid');
  }
  const declaredLength = Number(ctx.get('content-length') || 0);
  if (declaredLength > limitBytes) throw tooLarge(limitBytes);

  const chunks: Buffer[] = [];
  let received = 0;
  try {
    // Leaving the loop early must not destroy the request: that would reset the connection.
    for await (const chunk of ctx.req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      received += chunk.length;
      if (received > limitBytes) {
        // A chunked body has no length to refuse up front. Stop reading and answer 413 on a
        // connection that closes after it; destroying the socket here would leave the client
        // a reset instead of the answer.
        ctx.req.pause();
        ctx.set('Connection', 'close');
        throw tooLarge(limitBytes);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof PayloadTooLargeError) throw error;
    // The only other way reading a request fails: the client closed the connection mid-body.
    if (!ctx.req.complete) throw new RequestAbortedError();
    throw error;
  }
  let text: string;
  try {
    text = utf8.decode(Buffer.concat(chunks, received));
  } catch {
    throw new BadRequestError('Request body is not valid UTF-8.', 'invalid_utf8');
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  try {
    return JSON.parse(text);
  } catch {
    throw new BadRequestError('Request body is not valid JSON.', 'invalid_json');
  }
}

function tooLarge(limitBytes: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`Request body is larger than the limit of ${limitBytes} bytes.`, 'body_too_large');
}

/** A JSON body that must be an object (not an array, string, number or null). */
export async function readJsonObject(ctx: Context, limitBytes: number): Promise<Record<string, unknown>> {
  const body = await readJsonBody(ctx, limitBytes);
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestError('A JSON object is required.', 'object_required');
  }
  return body as Record<string, unknown>;
}
