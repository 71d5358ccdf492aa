import type { AppContext } from '../../src/context.ts';
import { defineEvent, type EventType } from '../../src/modules/events/service.ts';
import { parseRuleFile } from '../../src/modules/rules/definitions.ts';
import { loadRules } from '../../src/modules/rules/store.ts';

const operator = { type: 'operator', id: 'test' } as const;

export async function defineEvents(app: AppContext, events: Array<[slug: string, type: EventType, active?: boolean]>): Promise<void> {
  for (const [slug, type, active = true] of events) await defineEvent(app.db, { slug, name: slug, type, active }, operator);
}

export async function loadRuleSet(app: AppContext, rules: unknown[], replace = true) {
  return loadRules(app.db, parseRuleFile({ rules }), operator, { deactivateMissing: replace });
}

/** ISO time `hours` before now. */
export function hoursAgo(hours: number): string {
  return new Date(Date.now() - hours * 3_600_000).toISOString();
}

/** Number of rows in a table, optionally filtered. */
export async function countRows(knex: import('knex').Knex, table: string, where: Record<string, unknown> = {}): Promise<number> {
  const [row] = await knex(table).where(where).count({ count: '*' });
  return Number(row!.count);
}
