import type { AppContext } from '../../context.ts';
import type { DetailBlockProvider } from '../backoffice/site.ts';
import { mayName } from '../backoffice/access.ts';
import { decisionContextOf, decisionContextOfLog, viewableDecisionContext } from '../rules/decision-context.ts';
import { DECISION_TARGETS, markBlock } from './decisions.ts';

/**
 * Case work's blocks on record details: data_context on alerts and execution logs, and the mark
 * block (the decision form's settings) on the three models decisions are made on.
 */
export const caseWorkBlocks: DetailBlockProvider = {
  models: ['engine.alert', ...Object.keys(DECISION_TARGETS)],
  async blocks({ db, site, model, row, principal }) {
    const blocks: Record<string, unknown> = {};
    const context = model.key === 'engine.alert' ? await decisionContextOfLog(db, row.log_id as string | null) : model.key === 'engine.executionlog' ? decisionContextOf(row.data_context) : undefined;
    if (context !== undefined) blocks.data_context = context && viewableDecisionContext(context, (key) => mayName(site, principal, key));
    if (DECISION_TARGETS[model.key]) blocks.mark = await markBlock({ db } as Pick<AppContext, 'db'>, model, row, principal);
    return blocks;
  },
};
