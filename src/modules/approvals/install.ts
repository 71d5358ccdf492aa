import type { AppContext } from '../../context.ts';
import { QUEUES } from '../../jobs/queue.ts';
import { installCaseClosure } from '../cases/closing.ts';
import { installDecisionApplier } from '../cases/decisions.ts';
import { notifyDecision } from '../cases/webhook.ts';
import { attachReplayEvidence } from './replay.ts';
import { createApprovalHook } from './service.ts';

/**
 * Case work wired into a context: the write chain's approval hook (a rule change also queues its
 * replay evidence), the appliers of approved decisions, case closure, and the two job workers.
 */
export async function installCaseWork(app: AppContext): Promise<void> {
  app.backoffice.approvalHook = createApprovalHook((model) =>
    model.key === 'engine.rule' ? (trx, requestId) => app.jobs.replayRuleChange(trx, requestId) : null,
  );
  installDecisionApplier(app);
  installCaseClosure(app);
  await app.jobs.work<{ decisionId: string }>(QUEUES.notifyDecision, (job) => notifyDecision(app, job.data.decisionId, job.attempt));
  await app.jobs.work<{ requestId: string }>(QUEUES.replayRuleChange, (job) => attachReplayEvidence(app, job.data.requestId, job.finalAttempt));
}
