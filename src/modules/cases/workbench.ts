import type { DetailBlockProvider } from '../backoffice/site.ts';
import { caseEvidence } from './evidence.ts';
import { caseTimeline } from './timeline.ts';

/**
 * The case workbench's blocks on a case's detail (the web case page and the mobile detail alike):
 * `timeline`, the first page of the case's timeline (timeline.ts), and `evidence`, the customer
 * and the alerted records with their rules (evidence.ts).
 */
export const caseWorkbenchBlocks: DetailBlockProvider = {
  models: ['engine.watchlist'],
  describes: [
    {
      name: 'timeline',
      label: 'Timeline',
      description:
        'Newest first: {entries: [{at, kind (opened, alert, change, decision, approval_request, signature, ai_review, note), title, actor, text, details: [{label, value}], link: {model, pk} | null, attachments: [{name, content_type, size}]}], total, page, pages, can_note (whether the viewer may add a note: POST data/engine/casenote/ with case_id and body)}. Further pages: data/engine/watchlist/<pk>/timeline/?page=N.',
    },
    {
      name: 'evidence',
      label: 'Evidence',
      description:
        '{context: {alert, record_ref, data: {transaction, customer, aggregates, event}} | null (the newest alert\'s decision context), customer: {pk, repr, fields: [{name, label, value}]} | null, kyc: [{pk, status, flow, created_at}] | null, records: [{alert: {pk, kind, decision, score, status, raised_at}, record: {model, pk, ref, fields} | null, rules: [{code, name, score, decision}]}] | null, alerts_total}. Parts the viewer may not view are null.',
    },
  ],
  async blocks({ db, site, row, principal }) {
    const [timeline, evidence] = await Promise.all([caseTimeline(db, site, principal, row), caseEvidence(db, site, principal, row)]);
    const notes = site.models.get('engine.casenote');
    return { timeline: { ...timeline, can_note: Boolean(notes && site.can(principal, notes, 'add')) }, evidence };
  },
};
