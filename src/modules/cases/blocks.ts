import type { AppContext } from '../../context.ts';
import type { DetailBlockProvider } from '../backoffice/site.ts';
import { decisionContextOf, decisionContextOfLog } from './context.ts';
import { DECISION_TARGETS, markBlock } from './decisions.ts';

/**
 * Case work's blocks on record details: data_context on alerts and execution logs, and the mark
 * block (the decision form's settings) on the three models decisions are made on.
 */
export const caseWorkBlocks: DetailBlockProvider = {
  models: ['engine.alert', ...Object.keys(DECISION_TARGETS)],
  async blocks({ db, model, row, principal }) {
    const blocks: Record<string, unknown> = {};
    if (model.key === 'engine.alert') blocks.data_context = await decisionContextOfLog(db, row.log_id as string | null);
    if (model.key === 'engine.executionlog') blocks.data_context = decisionContextOf(row.data_context);
    if (DECISION_TARGETS[model.key]) blocks.mark = await markBlock({ db } as Pick<AppContext, 'db'>, model, row, principal);
    return blocks;
  },
};
