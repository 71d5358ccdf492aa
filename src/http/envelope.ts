import type { Context } from 'koa';

/** The spec's response envelope: every JSON endpoint answers in this shape. */
export interface Envelope<T = Record<string, unknown>> {
  status: boolean;
  message: string;
  data: T;
}

export function envelope<T>(status: boolean, message: string, data: T): Envelope<T> {
  return { status, message, data };
}

export function respond<T>(ctx: Context, message: string, data: T, httpStatus = 200): void {
  ctx.status = httpStatus;
  ctx.body = envelope(true, message, data);
}
