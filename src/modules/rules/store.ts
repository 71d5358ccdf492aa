import type { Knex } from 'knex';
import { recordAudit } from '../../audit.ts';
import type { Actor } from '../../actor.ts';
import { AnnouncedValue, announce, CHANNELS, type NotificationHub } from '../../db/notifications.ts';
import type { RuleDefinition, RuleInput } from './definitions.ts';

interface RuleRow {
  code: string;
  name: string;
  description: string | null;
  target: RuleDefinition['target'];
  event_slugs: string[];
  expression: RuleDefinition['expression'];
  score: string;
  decision: RuleDefinition['decision'];
  active: boolean;
  version: number;
}

function toDefinition(row: RuleRow): RuleDefinition {
  return {
    code: row.code,
    name: row.name,
    ...(row.description ? { description: row.description } : {}),
    target: row.target,
    event_slugs: row.event_slugs,
    expression: row.expression,
    score: Number(row.score),
    decision: row.decision,
    active: row.active,
    version: row.version,
  };
}

/** What changes a rule's behaviour: a change here bumps its version (the worker compile-cache key). */
function behaviourKey(rule: Pick<RuleInput, 'target' | 'event_slugs' | 'expression' | 'score' | 'decision'>): string {
  return JSON.stringify([rule.target, [...rule.event_slugs].sort(), rule.expression, Number(rule.score), rule.decision]);
}

export interface RuleLoadSummary {
  created: string[];
  updated: string[];
  unchanged: string[];
  deactivated: string[];
}

/**
 * Upserts the rules of a parsed rule file in one transaction. A rule whose expression, score,
 * decision, target or events changed gets version + 1; with `deactivateMissing`, active rules
 * absent from the file are deactivated (a file is then the whole rule set).
 */
export async function loadRules(
  db: Knex,
  inputs: RuleInput[],
  actor: Actor,
  options: { deactivateMissing?: boolean } = {},
): Promise<RuleLoadSummary> {
  return db.transaction(async (trx) => {
    const existing = new Map<string, RuleRow>(
      ((await trx('rules').select('*').forUpdate()) as RuleRow[]).map((row) => [row.code, row]),
    );
    const summary: RuleLoadSummary = { created: [], updated: [], unchanged: [], deactivated: [] };
    const by = `${actor.type}:${actor.id}`;
    for (const rule of inputs) {
      const current = existing.get(rule.code);
      const columns = {
        name: rule.name,
        description: rule.description ?? null,
        target: rule.target,
        event_slugs: rule.event_slugs,
        expression: JSON.stringify(rule.expression),
        score: rule.score,
        decision: rule.decision,
        active: rule.active,
        updated_by: by,
      };
      if (!current) {
        await trx('rules').insert({ code: rule.code, ...columns, version: 1 });
        summary.created.push(rule.code);
        continue;
      }
      const behaviourChanged = behaviourKey({ ...current, score: Number(current.score) }) !== behaviourKey(rule);
      const sameText = current.name === rule.name && (current.description ?? undefined) === rule.description;
      if (!behaviourChanged && sameText && current.active === rule.active) {
        summary.unchanged.push(rule.code);
        continue;
      }
      await trx('rules')
        .where({ code: rule.code })
        .update({ ...columns, version: behaviourChanged ? current.version + 1 : current.version, updated_at: trx.fn.now() });
      summary.updated.push(rule.code);
    }
    if (options.deactivateMissing) {
      const listed = new Set(inputs.map((rule) => rule.code));
      const missing = [...existing.values()].filter((row) => row.active && !listed.has(row.code)).map((row) => row.code);
      if (missing.length) await trx('rules').whereIn('code', missing).update({ active: false, updated_by: by, updated_at: trx.fn.now() });
      summary.deactivated = missing;
    }
    await recordAudit(trx, actor, 'rules.load', 'rules', '*', { ...summary });
    await announce(trx, CHANNELS.rules);
    return summary;
  });
}

export async function listRules(db: Knex): Promise<RuleDefinition[]> {
  return ((await db('rules').select('*').orderBy('code')) as RuleRow[]).map(toDefinition);
}

/**
 * The active rule set, kept in memory and reloaded after a change is announced. It hands out the
 * same array until the rules change (engine.ts compiles each array once).
 */
export class RuleCache {
  private readonly rules: AnnouncedValue<RuleDefinition[]>;

  constructor(db: Knex, hub: NotificationHub) {
    this.rules = new AnnouncedValue(hub, CHANNELS.rules, async () =>
      ((await db('rules').select('*').where({ active: true }).orderBy('code')) as RuleRow[]).map(toDefinition),
    );
  }

  active(): Promise<RuleDefinition[]> {
    return this.rules.get();
  }
}
