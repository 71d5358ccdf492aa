import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { onConnection, runStatement } from '../../db/knex.ts';
import type { Principal } from '../staff/principal.ts';
import type { ScreeningMatch } from './sanctions/matcher.ts';

/**
 * Screening hits: one record per customer and list entry that screening matched (a sanctions or a
 * PEP list alike), reviewed by an officer. A hit marked false positive keeps the fingerprint of
 * what it was judged on, and the entry stops counting on that customer (its score, its topics, its
 * alerts) until the entry or the customer's name, birth date or nationality change.
 *
 * Only customers whose screening returned matches reach anything here: a customer batch without
 * a match pays no statement for hits.
 */

export const HIT_STATUSES = ['open', 'confirmed', 'false_positive'] as const;
export type HitStatus = (typeof HIT_STATUSES)[number];

/** What of a customer a false positive was judged on (birth_date as YYYY-MM-DD text). */
export interface FingerprintSubject {
  first_name: string | null;
  last_name: string | null;
  company_name: string | null;
  birth_date: string | null;
  nationality: string | null;
}

/** What of a list entry a false positive was judged on, as its sanction_entries row holds it. */
export interface FingerprintEntry {
  name: string;
  aliases: string[];
  birth_dates: string[];
  nationalities: string[];
}

/** Case and spacing of a name are no change of who it names. */
function nameKey(value: string | null | undefined): string {
  return (value ?? '').normalize('NFC').trim().replace(/\s+/g, ' ').toLowerCase();
}

function sortedKeys(values: readonly string[] | null | undefined): string[] {
  return [...(values ?? [])].map(nameKey).sort();
}

/** The fingerprint of a judgement: an entry gone from the lists fingerprints as no entry. */
export function matchFingerprint(entry: FingerprintEntry | null, customer: FingerprintSubject): string {
  const canonical = JSON.stringify([
    entry ? [nameKey(entry.name), sortedKeys(entry.aliases), sortedKeys(entry.birth_dates), sortedKeys(entry.nationalities)] : null,
    [nameKey(customer.first_name), nameKey(customer.last_name), nameKey(customer.company_name), customer.birth_date ?? '', nameKey(customer.nationality)],
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}

/** A customer's sanction_score and sanction_topic from the matches that count: the best score (0 when none is left), their topics best match first. */
export function sanctionSummary(matches: readonly ScreeningMatch[]): { score: number; topics: string[] } {
  let score = 0;
  const topics: string[] = [];
  for (const match of matches) {
    if (match.score > score) score = match.score;
    for (const topic of match.topics) if (!topics.includes(topic)) topics.push(topic);
  }
  return { score, topics };
}

function matchKey(source: string, sourceId: string): string {
  return `${source}\u0000${sourceId}`;
}

/** A screened customer of a batch whose screening returned matches. */
export interface MatchedSubject {
  ref: string;
  subject: FingerprintSubject;
  matches: readonly ScreeningMatch[];
}

const DISMISSED = `
  select c.customer_ref, h.source, h.source_id, h.fingerprint, e.name, e.aliases, e.birth_dates, e.nationalities
  from customers c
  join screening_hits h on h.customer_id = c.id and h.status = 'false_positive'
  left join sanction_entries e on e.source = h.source and e.source_id = h.source_id
  where c.customer_ref = any($1::text[])`;

/** A false-positive hit of the batch, with its entry's row as stored now (null where the entry left the lists). */
interface DismissedRow {
  customer_ref: string;
  source: string;
  source_id: string;
  fingerprint: string | null;
  name: string | null;
  aliases: string[] | null;
  birth_dates: string[] | null;
  nationalities: string[] | null;
}

/**
 * Of each customer's matches, those still dismissed: a false-positive hit of the same customer and
 * entry whose fingerprint equals the one the entry's stored row and the customer as sent now give.
 * One statement for the batch. Returns, by ref, the keys (see matchKey) of the matches to drop.
 */
export async function dismissedMatches(db: Knex, subjects: readonly MatchedSubject[]): Promise<Map<string, Set<string>>> {
  const byRef = new Map(subjects.map((subject) => [subject.ref, subject]));
  const rows = await onConnection(db, async (connection) => (await runStatement<DismissedRow>(connection, { text: DISMISSED, values: [[...byRef.keys()]] })).rows);
  const dismissed = new Map<string, Set<string>>();
  for (const row of rows) {
    const subject = byRef.get(row.customer_ref);
    if (!subject || row.fingerprint === null) continue;
    const entry = row.name === null ? null : { name: row.name, aliases: row.aliases ?? [], birth_dates: row.birth_dates ?? [], nationalities: row.nationalities ?? [] };
    if (matchFingerprint(entry, subject.subject) !== row.fingerprint) continue;
    let keys = dismissed.get(row.customer_ref);
    if (!keys) dismissed.set(row.customer_ref, (keys = new Set()));
    keys.add(matchKey(row.source, row.source_id));
  }
  return dismissed;
}

/** The matches that still count: those whose entry is not among `dismissed` (keys of dismissedMatches). */
export function withoutDismissed(matches: readonly ScreeningMatch[], dismissed: ReadonlySet<string>): ScreeningMatch[] {
  return matches.filter((match) => !dismissed.has(matchKey(match.source, match.source_id)));
}

/**
 * One hit per (customer, source, source_id) of the batch's matches, in one statement: a new one
 * opens; an open or confirmed one is refreshed (similarity, names, agreements, topics, last seen);
 * a false positive that screening reports again (its fingerprint no longer holds, or the check
 * would have dropped the match) is opened again, its last review kept. In key order, so two
 * batches sharing customers lock their hits in the same order.
 */
const UPSERT_HITS = `
  insert into screening_hits as h
    (customer_id, source, source_id, entry_id, entry_name, matched_name, similarity, birth_date_agreement, nationality_agreement, features, topics)
  select distinct on (c.customer_id, m.source, m.source_id)
    c.customer_id, m.source, m.source_id, e.id, m.name, m.matched_name, m.score,
    coalesce(m.features->>'birth_date', 'unknown'), coalesce(m.features->>'nationality', 'unknown'), coalesce(m.features, '{}'), coalesce(m.topics, '{}')
  from jsonb_to_recordset(?::jsonb) as c(customer_id uuid, matches jsonb)
  cross join lateral jsonb_to_recordset(c.matches) as m(source text, source_id text, name text, matched_name text, score numeric, topics text[], features jsonb)
  left join sanction_entries e on e.source = m.source and e.source_id = m.source_id
  order by c.customer_id, m.source, m.source_id, m.score desc
  on conflict (customer_id, source, source_id) do update set
    entry_id = excluded.entry_id, entry_name = excluded.entry_name, matched_name = excluded.matched_name, similarity = excluded.similarity,
    birth_date_agreement = excluded.birth_date_agreement, nationality_agreement = excluded.nationality_agreement,
    features = excluded.features, topics = excluded.topics,
    status = case when h.status = 'false_positive' then 'open' else h.status end,
    fingerprint = null, last_seen_at = now(), updated_at = now()`;

/** A stored customer and its matches as JSON text (the screening's sanction_matches, never empty here). */
export interface StoredMatches {
  customerId: string;
  matches: string;
}

export async function upsertHits(db: Knex | Knex.Transaction, customers: readonly StoredMatches[]): Promise<void> {
  if (!customers.length) return;
  // The matches are JSON already (the workers' text): spliced in, not parsed and serialised again.
  const payload = `[${customers.map((customer) => `{"customer_id":${JSON.stringify(customer.customerId)},"matches":${customer.matches}}`).join(',')}]`;
  await db.raw(UPSERT_HITS, [payload]);
}

/**
 * The job of a large batch: the hits of these customers from their matches as stored now (a later
 * batch's, if one came in between: the hits follow the customer, not the batch).
 */
export async function upsertHitsOfCustomers(db: Knex, customerIds: readonly string[]): Promise<void> {
  const rows = (await db('customers').whereIn('id', [...customerIds]).whereRaw(`sanction_matches <> '[]'::jsonb`).select('id', db.raw('sanction_matches::text as matches'))) as { id: string; matches: string }[];
  await upsertHits(db, rows.map((row) => ({ customerId: row.id, matches: row.matches })));
}

/** A stored hit as the review needs it. */
export interface HitRow {
  id: string;
  customer_id: string;
  source: string;
  source_id: string;
  entry_name: string;
  matched_name: string;
  similarity: string | number;
  features: ScreeningMatch['features'] | null;
  topics: string[];
  status: string;
}

/** The fingerprint of a hit now: its entry's stored row and its customer's stored row. */
export async function currentFingerprint(trx: Knex.Transaction, hit: Pick<HitRow, 'customer_id' | 'source' | 'source_id'>): Promise<string> {
  const [customer, entry] = await Promise.all([
    trx('customers').where({ id: hit.customer_id }).first(trx.raw("first_name, last_name, company_name, to_char(birth_date, 'YYYY-MM-DD') as birth_date, nationality")),
    trx('sanction_entries').where({ source: hit.source, source_id: hit.source_id }).first('name', 'aliases', 'birth_dates', 'nationalities'),
  ]);
  return matchFingerprint((entry as FingerprintEntry | undefined) ?? null, customer as FingerprintSubject);
}

/** The screening match a hit records (to count it again on its customer). */
function matchOf(hit: HitRow): ScreeningMatch {
  return {
    source: hit.source as ScreeningMatch['source'],
    source_id: hit.source_id,
    name: hit.entry_name,
    matched_name: hit.matched_name,
    score: Number(hit.similarity),
    topics: hit.topics,
    features: hit.features ?? { name_similarity: 0, phonetic: 0, birth_date: 'unknown', nationality: 'unknown' },
  };
}

/**
 * A review that moves a hit into or out of false_positive, applied to its customer at once: the
 * entry's match leaves (or rejoins) the customer's sanction_matches, and sanction_score and
 * sanction_topic are recomputed from what is left. Inside the write chain's transaction.
 */
export async function applyReviewToCustomer(trx: Knex.Transaction, hit: HitRow, principal: Principal): Promise<void> {
  const customer = (await trx('customers').where({ id: hit.customer_id }).forUpdate().first('sanction_matches')) as { sanction_matches: ScreeningMatch[] } | undefined;
  if (!customer) return;
  const others = (customer.sanction_matches ?? []).filter((match) => matchKey(match.source, match.source_id) !== matchKey(hit.source, hit.source_id));
  const matches = hit.status === 'false_positive' ? others : [...others, matchOf(hit)].sort((a, b) => b.score - a.score);
  const { score, topics } = sanctionSummary(matches);
  await trx('customers')
    .where({ id: hit.customer_id })
    .update({ sanction_matches: JSON.stringify(matches), sanction_score: score, sanction_topic: topics, updated_by: `staff:${principal.user.id}`, updated_at: trx.fn.now() });
}
