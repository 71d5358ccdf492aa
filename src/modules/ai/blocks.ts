import type { AdminSite, DetailBlockProvider } from '../backoffice/site.ts';
import { CASE_MODELS } from './mcp-server.ts';
import { storedAiBlock } from './review.ts';

/**
 * Whether the app a site is bound to has an AI gateway installed: the AI routes register it (they
 * hold the configuration; a detail block is given only the site). A site no app registered reads
 * as without a gateway: the block still shows the stored reviews, with can_run false.
 */
export const gatewayOfSite = new WeakMap<AdminSite, () => boolean>();

/**
 * The `ai` block of a case detail (the spec's AI block): the latest stored review with its
 * feedback, read without the gateway, which only running a review needs. The same block answers
 * at data/<app>/<model>/<pk>/ai/ for polling while a review runs.
 */
export const aiReviewBlocks: DetailBlockProvider = {
  models: [...CASE_MODELS],
  describes: [
    {
      name: 'ai',
      label: 'AI review',
      description:
        'The latest AI review of the case: status (empty, queued, running, done, failed), in_flight, can_run, can_feedback, topic, warnings, result, references, feedback, legacy. Poll data/<app>/<model>/<pk>/ai/ while it runs; run it with ai/run/.',
    },
  ],
  async blocks({ db, site, model, row, principal }) {
    return { ai: await storedAiBlock(db, site, gatewayOfSite.get(site)?.() ?? false, model, principal, row) };
  },
};
