import type { AppContext } from '../../src/context.ts';
import { defineEvent, type EventType } from '../../src/modules/events/service.ts';
import { parseRuleFile } from '../../src/modules/rules/definitions.ts';
import { loadRules } from '../../src/modules/rules/store.ts';

const operator = { type: 'operator', id: 'test' } as const;

export async function defineEvents(app: AppContext, events: Array<[slug: string, type: EventType, active?: boolean]>): Promise<void> {
  for (const [slug, type, active = true] of events) await defineEvent(app.db, { slug, name: slug, type, active }, operator);
}

export async function loadRuleSet(app: AppContext, rules: unknown[], replace = true) {
  const summary = await loadRules(app.db, parseRuleFile({ rules }), operator, { deactivateMissing: replace });
  // The change reaches the process's rule cache by NOTIFY a few milliseconds after the commit: a
  // request sent at once could still be scored by the rules of just before (seen once in a full
  // run on a loaded machine). Wait until the cache serves what is stored.
  const key = (rules: ReadonlyArray<{ code: string; version: number }>) => rules.map((rule) => `${rule.code}:${rule.version}`).sort().join(',');
  const stored = key(await app.db('rules').select('code', 'version').where({ active: true }));
  for (let waited = 0; key(await app.rules.active()) !== stored; waited += 5) {
    if (waited > 5000) throw new Error('the rule cache did not take the change within 5 s');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return summary;
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
