import type { Executor } from './db/knex.ts';
import type { Actor } from './actor.ts';

/** Appends one audit record in the caller's transaction. */
export async function recordAudit(
  executor: Executor,
  actor: Actor,
  action: string,
  entity: string,
  entityId: string,
  details: Record<string, unknown> = {},
): Promise<void> {
  await executor('audit_log').insert({
    actor_type: actor.type,
    actor_id: actor.id,
    action,
    entity,
    entity_id: entityId,
    details,
  });
}
