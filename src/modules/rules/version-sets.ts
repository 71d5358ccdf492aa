import { createHash } from 'node:crypto';
import type { Knex } from 'knex';

/**
 * The versions of the rules that ran for a record (code -> version), stored once per distinct map
 * in rule_version_sets and named by each execution log: a 30-rule map is about 590 bytes, which
 * every log of a batch repeated (a fifth of a 1000-record batch's log bytes; issue 17).
 * Content-addressed: the id is the MD5 of the map's JSON text, so the same map always has the
 * same id, in every process and in the migration that moved the stored logs' maps here.
 */
export interface RuleVersionSet {
  id: string;
  json: string;
  /** The databases this process stored the set in (or found it stored), while the map lives. */
  storedIn: WeakSet<Knex>;
}

// The rule selections hand out one frozen map per target and event until the rules change (a
// NOTIFY or a lost connection drops them), so what is remembered here is forgotten with them and
// checked again after any change to the rules or the connection.
const sets = new WeakMap<object, RuleVersionSet>();

export function ruleVersionSet(versions: Readonly<Record<string, number>>): RuleVersionSet {
  let set = sets.get(versions);
  if (!set) {
    const json = JSON.stringify(versions);
    sets.set(versions, (set = { id: createHash('md5').update(json).digest('hex'), json, storedIn: new WeakSet() }));
  }
  return set;
}

/**
 * Stores the sets of these version maps not yet known to be stored, in their own statement outside the batch's
 * transaction: a set is a fact about the rules, not about the batch, so one left behind by a batch
 * that rolled back is harmless, and batches never wait on each other's uncommitted set (inside
 * their transactions, two batches storing the same new set would, and could deadlock on their
 * records). Idempotent; after the first batch of a rule selection this costs nothing. Whether a
 * statement was sent.
 */
export async function storeRuleVersionSets(db: Knex, versionMaps: Iterable<Readonly<Record<string, number>>>): Promise<boolean> {
  if (db.isTransaction) throw new Error('rule-version sets are stored outside the batch transaction');
  const missing = new Map<string, RuleVersionSet>();
  // A batch's records share a handful of maps: each distinct one looked at once.
  for (const versions of new Set(versionMaps)) {
    const set = ruleVersionSet(versions);
    if (!set.storedIn.has(db)) missing.set(set.id, set);
  }
  if (missing.size === 0) return false;
  const rows = [...missing.values()].map((set) => `{"id":"${set.id}","versions":${set.json}}`).join(',');
  await db.raw('insert into rule_version_sets (id, versions) select id, versions from json_to_recordset(?::json) as s(id text, versions json) on conflict do nothing', [`[${rows}]`]);
  for (const set of missing.values()) set.storedIn.add(db);
  return true;
}
