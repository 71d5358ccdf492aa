import { canObject, mayName } from '../backoffice/access.ts';
import { scopedQuery } from '../backoffice/query.ts';
import type { Row } from '../backoffice/registry.ts';
import type { DetailBlockProvider } from '../backoffice/site.ts';
import { jsonable } from '../backoffice/write.ts';

/** One hit as the `screening_hits` block lists it. */
export interface HitBlockEntry {
  id: string;
  source: string;
  source_id: string;
  /** The list entry's record, where it is still on the lists and the viewer may view entries. */
  entry_id: number | null;
  entry_name: string;
  matched_name: string;
  similarity: number;
  birth_date: string;
  nationality: string;
  topics: string[];
  status: string;
  reviewed_by: string | null;
  reviewed_at: string | null;
  review_rationale: string | null;
  first_seen_at: string | null;
  /** Whether the viewer may review it (change its status). */
  can_change: boolean;
}

const HIT_COLUMNS = [
  'id', 'customer_id', 'source', 'source_id', 'entry_id', 'entry_name', 'matched_name', 'similarity', 'birth_date_agreement', 'nationality_agreement',
  'topics', 'status', 'reviewed_by', 'reviewed_at', 'review_rationale', 'first_seen_at',
].map((column) => `t.${column}`);

/** Which customer's hits a record shows: the customer itself, a case's or an alert's customer. */
function customerOf(modelKey: string, row: Row): string | null {
  if (modelKey === 'customer.customer') return String(row.id);
  // An alert's hits matter where screening raised it, or where it is the customer's own record (a PEP sent to review by a rule).
  if (modelKey === 'engine.alert' && row.kind !== 'sanctions' && row.target !== 'customer') return null;
  return row.customer_id === null || row.customer_id === undefined ? null : String(row.customer_id);
}

/**
 * The `screening_hits` block of a customer, a case and an alert (their customer's hits, open ones
 * first, then by similarity): for viewers who may view hits, and with the entry's record named only
 * to viewers who may view sanction entries.
 */
export const screeningHitBlocks: DetailBlockProvider = {
  models: ['customer.customer', 'engine.watchlist', 'engine.alert'],
  async blocks({ db, site, model, row, principal }) {
    const hits = site.get('screening', 'screeninghit');
    if (!hits || !site.can(principal, hits, 'view')) return {};
    const customerId = customerOf(model.key, row);
    if (customerId === null) return {};
    const rows = (await scopedQuery(db, hits, principal)
      .where('t.customer_id', customerId)
      .select(HIT_COLUMNS)
      .orderByRaw("t.status = 'open' desc, t.similarity desc, t.first_seen_at, t.id")) as Row[];
    const namesEntries = mayName(site, principal, 'screening.sanctionentry');
    const entries: HitBlockEntry[] = rows.map((hit) => ({
      id: String(hit.id),
      source: String(hit.source),
      source_id: String(hit.source_id),
      entry_id: namesEntries && hit.entry_id !== null ? Number(hit.entry_id) : null,
      entry_name: String(hit.entry_name),
      matched_name: String(hit.matched_name),
      similarity: Number(hit.similarity),
      birth_date: String(hit.birth_date_agreement),
      nationality: String(hit.nationality_agreement),
      topics: (hit.topics as string[]) ?? [],
      status: String(hit.status),
      reviewed_by: (hit.reviewed_by as string | null) ?? null,
      reviewed_at: jsonable(hit.reviewed_at) as string | null,
      review_rationale: (hit.review_rationale as string | null) ?? null,
      first_seen_at: jsonable(hit.first_seen_at) as string | null,
      can_change: canObject(site, principal, hits, 'change', hit),
    }));
    return { screening_hits: entries };
  },
};
