import type { DetailSectionProps } from '../backoffice/site.ts';
import type { HitBlockEntry } from './blocks.ts';

/**
 * The web change page's section of screening hits (the `screening_hits` detail block of a
 * customer, a case or an alert): each hit links to its own page, where an officer reviews it.
 */

const SOURCE_LABELS: Record<string, string> = { ofac: 'OFAC', un: 'UN', opensanctions: 'OpenSanctions' };
const AGREEMENT_LABELS: Record<string, string> = { match: 'agrees', mismatch: 'disagrees', unknown: 'unknown' };
const STATUS_LABELS: Record<string, string> = { open: 'Open', confirmed: 'Confirmed', false_positive: 'False positive' };

function Reviewed({ hit }: { hit: HitBlockEntry }) {
  if (!hit.reviewed_at) return <>—</>;
  return (
    <>
      {hit.reviewed_by ?? '—'}, {hit.reviewed_at.replace('T', ' ')}
      {hit.review_rationale ? <div class="screening-hit-rationale">{hit.review_rationale}</div> : null}
    </>
  );
}

export function ScreeningHitSection({ blocks }: DetailSectionProps) {
  const hits = blocks.screening_hits as HitBlockEntry[] | undefined;
  if (!Array.isArray(hits)) return null;
  return (
    <section class="module screening-hits" aria-labelledby="screening-hits-title">
      <h2 id="screening-hits-title">Screening hits</h2>
      {hits.length === 0 ? (
        <p>No sanctions or PEP list matches.</p>
      ) : (
        <table>
          <thead>
            <tr>
              <th scope="col">List entry</th>
              <th scope="col">List</th>
              <th scope="col">Matched name</th>
              <th scope="col">Similarity</th>
              <th scope="col">Birth date</th>
              <th scope="col">Nationality</th>
              <th scope="col">Topics</th>
              <th scope="col">Status</th>
              <th scope="col">Last review</th>
            </tr>
          </thead>
          <tbody>
            {hits.map((hit) => (
              <tr key={hit.id} class={`screening-hit status-${hit.status}`}>
                <th scope="row">
                  <a href={`/admin/screening/screeninghit/${encodeURIComponent(hit.id)}/change/`}>{hit.entry_name}</a>
                </th>
                <td>
                  {SOURCE_LABELS[hit.source] ?? hit.source}{' '}
                  {hit.entry_id === null ? (
                    hit.source_id
                  ) : (
                    <a href={`/admin/screening/sanctionentry/${hit.entry_id}/change/`}>{hit.source_id}</a>
                  )}
                </td>
                <td>{hit.matched_name}</td>
                <td>{hit.similarity.toFixed(1)}</td>
                <td>{AGREEMENT_LABELS[hit.birth_date] ?? hit.birth_date}</td>
                <td>{AGREEMENT_LABELS[hit.nationality] ?? hit.nationality}</td>
                <td>{hit.topics.join(', ') || '—'}</td>
                <td>{STATUS_LABELS[hit.status] ?? hit.status}</td>
                <td>
                  <Reviewed hit={hit} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
