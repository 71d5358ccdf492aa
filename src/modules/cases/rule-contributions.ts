import type { Knex } from 'knex';
import type { Row } from '../backoffice/registry.ts';

/** A rule an execution log matched: its code, the score it contributed and the decision it forces. */
export interface Contribution {
  code: string;
  score: number;
  decision: string | null;
}

/**
 * What alerts need to name their rules: the contributions stored in their execution logs, by log,
 * and the rules' names, by code. Two statements sent at once whatever the number of logs (the
 * codes come with the alerts, so the names need not wait for the logs). The case's evidence, its
 * timeline and a record's matched-rules block read them here.
 */
export async function ruleContributions(db: Knex, logIds: Iterable<string>, codes: Iterable<string>): Promise<{ byLog: Map<string, Contribution[]>; names: Map<string, string> }> {
  const logs = [...new Set(logIds)];
  const wanted = [...new Set(codes)];
  const [stored, rules] = await Promise.all([
    logs.length ? (db('execution_logs').whereIn('id', logs).select('id', 'matched_rules') as Promise<Row[]>) : Promise.resolve([] as Row[]),
    ruleNames(db, wanted),
  ]);
  const byLog = new Map(
    stored.map((log) => [
      String(log.id),
      ((log.matched_rules as Contribution[] | null) ?? []).map(({ code, score, decision }) => ({ code, score: Number(score), decision: decision ?? null })),
    ]),
  );
  return { byLog, names: rules };
}

/** The names of these rules, by code (one statement; none for no codes). */
export async function ruleNames(db: Knex, codes: readonly string[]): Promise<Map<string, string>> {
  if (!codes.length) return new Map();
  const rows = (await db('rules').whereIn('code', [...codes]).select('code', 'name')) as Row[];
  return new Map(rows.map((rule) => [String(rule.code), String(rule.name)]));
}
