/**
 * An error that maps to an HTTP response in the envelope. `reason` is the stable, machine-readable
 * code the spec names (for example token_expired); `data` adds fields to the envelope's data.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly reason?: string,
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export class BadRequestError extends HttpError {
  constructor(message: string, reason = 'bad_request', data?: Record<string, unknown>) {
    super(400, message, reason, data);
  }
}

export class UnauthorizedError extends HttpError {
  constructor(message: string, reason = 'unauthorized') {
    super(401, message, reason);
  }
}

export class ForbiddenError extends HttpError {
  constructor(message: string, reason = 'forbidden') {
    super(403, message, reason);
  }
}

export class MethodNotAllowedError extends HttpError {
  constructor(allowed: string[]) {
    super(405, `Method not allowed. Allowed: ${allowed.join(', ')}.`, 'method_not_allowed');
  }
}

export class PayloadTooLargeError extends HttpError {
  constructor(message: string, reason = 'payload_too_large') {
    super(413, message, reason);
  }
}

export class UnsupportedMediaTypeError extends HttpError {
  constructor(message: string, reason = 'unsupported_media_type') {
    super(415, message, reason);
  }
}

/**
 * The client went away before its body was read. No one receives the answer; it is a 400 so the
 * metrics and logs count the client's doing, not the service's.
 */
export class RequestAbortedError extends HttpError {
  constructor() {
    super(400, 'The request body was not received completely: the client closed the connection.', 'request_aborted');
  }
}

/**
 * 429: a limit of the caller's (login throttle, queued jobs) is reached. The one place that answers
 * errors sets Retry-After from it, whatever route raised it; `data.retry_after` says the same.
 */
export class TooManyRequestsError extends HttpError {
  constructor(
    message: string,
    reason: string,
    readonly retryAfterSeconds: number,
    data: Record<string, unknown> = {},
  ) {
    super(429, message, reason, { ...data, retry_after: retryAfterSeconds });
  }
}
