import type { Executor } from '../db/knex.ts';

/**
 * What writers need of the staff live socket, apart from the socket itself (./staff.ts): modules
 * that announce changes (notifications) depend on this, never on the socket, which itself calls
 * into modules (video-call offers).
 */

/** One message for staff sockets: `to` is `mainstream` (everyone logged in) or a user id. */
export interface LiveMessage {
  to: 'mainstream' | string;
  type: string;
  /** app_label.model: only sockets whose login permissions include it receive the message. */
  model?: string | null;
  data: Record<string, unknown>;
}

export interface LivePublisher {
  /** Publishes inside the writer's transaction: delivered at commit, dropped on rollback. */
  publish(executor: Executor, message: LiveMessage): Promise<void>;
}
