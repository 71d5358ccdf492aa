import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import type { Actor } from '../../actor.ts';
import { AnnouncedValue, announce, CHANNELS, type NotificationHub } from '../../db/notifications.ts';

/** The spec's event_type constant: which endpoint accepts events of each type. */
export const EVENT_TYPES = { 0: 'Onboarding', 1: 'Financial', 2: 'Non-financial' } as const;
export type EventType = keyof typeof EVENT_TYPES;

export function isEventType(type: unknown): type is EventType {
  return typeof type === 'number' && Number.isInteger(type) && Object.hasOwn(EVENT_TYPES, type);
}

export interface EventDefinition {
  slug: string;
  name: string;
  type: EventType;
  active: boolean;
}

export class EventInputError extends Error {}

const SLUG = /^[a-z0-9][a-z0-9_.-]{0,63}$/;

export async function defineEvent(db: Knex, input: EventDefinition, actor: Actor): Promise<EventDefinition> {
  if (!SLUG.test(input.slug)) {
    throw new EventInputError(`"${input.slug}" is not a valid slug: lower-case letters, digits, _ . - (at most 64).`);
  }
  // Own keys of a whole number only: `in` would also take "constructor" or "toString" from Object.prototype.
  if (!isEventType(input.type)) throw new EventInputError(`Event type must be 0 (Onboarding), 1 (Financial) or 2 (Non-financial).`);
  return db.transaction(async (trx) => {
    const [row] = await trx('events')
      .insert({ slug: input.slug, name: input.name || input.slug, type: input.type, active: input.active })
      .onConflict('slug')
      .merge({ name: input.name || input.slug, type: input.type, active: input.active, updated_at: trx.fn.now() })
      .returning(['slug', 'name', 'type', 'active']);
    await recordAudit(trx, actor, 'event.define', 'event', input.slug, { ...input });
    await announce(trx, CHANNELS.events, input.slug);
    return row as EventDefinition;
  });
}

export async function listEvents(db: Knex): Promise<EventDefinition[]> {
  return db('events').select('slug', 'name', 'type', 'active').orderBy('slug');
}

/** All event definitions in memory (a few dozen rows), reloaded after any change is announced. */
export class EventCache {
  private readonly events: AnnouncedValue<Map<string, EventDefinition>>;

  constructor(db: Knex, hub: NotificationHub) {
    this.events = new AnnouncedValue(hub, CHANNELS.events, async () => new Map((await listEvents(db)).map((event) => [event.slug, event])));
  }

  all(): Promise<Map<string, EventDefinition>> {
    return this.events.get();
  }
}
