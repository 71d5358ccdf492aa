/** What a phone shows, and the data the app needs to open the right screen. */
export interface PushMessage {
  title: string;
  body: string;
  data: Record<string, string | number | null>;
}

/** A provider's answer: delivered, the token is dead (clear it), or refused for good. */
export type PushOutcome = { kind: 'sent' } | { kind: 'unregistered'; reason: string } | { kind: 'rejected'; reason: string };

/** The provider is busy or down (429, 5xx, network): the job is retried with backoff. */
export class PushRetryable extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}
