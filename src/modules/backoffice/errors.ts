import type { BoundModel, FieldErrors } from './registry.ts';

/**
 * What the write chain and the access checks refuse with: each error carries its HTTP status and
 * stable reason, so every face (web, mobile, MCP, CLI) maps it once (access.ts httpErrorOf).
 */
export abstract class ChainError extends Error {
  abstract readonly status: number;
  abstract readonly reason: string;
  /** Fields the envelope's data adds. */
  data(): Record<string, unknown> {
    return { messages: [{ level: 'error', message: this.message }] };
  }
}

export class ValidationFailed extends ChainError {
  readonly status = 400;
  readonly reason = 'validation_failed';
  constructor(
    readonly errors: FieldErrors,
    readonly warnings: string[] = [],
  ) {
    super('Validation failed.');
  }
  override data(): Record<string, unknown> {
    return { errors: this.errors, warnings: this.warnings };
  }
}

export class PermissionDenied extends ChainError {
  readonly status = 403;
  readonly reason = 'permission_denied';
  constructor(message = 'You do not have permission to perform this action.') {
    super(message);
  }
  override data(): Record<string, unknown> {
    return {};
  }
}

export class ObjectNotFound extends ChainError {
  readonly status = 404;
  readonly reason = 'not_found';
  constructor(model: BoundModel, pk: string) {
    super(`${model.verboseName} with pk ${pk.slice(0, 100)} does not exist.`);
  }
  override data(): Record<string, unknown> {
    return {};
  }
}

/** A change while another one waits for approval on the same record. */
export class PendingApprovalConflict extends ChainError {
  readonly status = 409;
  readonly reason = 'pending_approval';
  override data(): Record<string, unknown> {
    return { ...super.data(), pending_approval: true };
  }
}
