import type { AppContext } from '../../context.ts';
import { outboundPolicy } from '../../net/outbound.ts';
import { deliverSigned } from '../../webhooks.ts';

const TARGET_TABLES: Readonly<Record<string, { table: string; record: string }>> = {
  financialevent: { table: 'financial_transactions', record: 'financial' },
  nonfinancialevent: { table: 'non_financial_events', record: 'non_financial' },
};

/**
 * The notify-decision job: tells the merchant whose record a compliance decision changed, signed
 * as the KYC flow notifications are (`X-Warden-Signature` with the merchant's webhook secret),
 * every attempt logged in decision_deliveries; a failure throws so the queue retries with backoff.
 * A merchant without a webhook is not told (nothing to retry).
 */
export async function notifyDecision(app: AppContext, decisionId: string, attempt: number): Promise<void> {
  const decision = await app.db('compliance_decisions').where({ id: decisionId }).first();
  if (!decision) return;
  let table = TARGET_TABLES[decision.target_model]?.table;
  let recordType = TARGET_TABLES[decision.target_model]?.record;
  let recordId = decision.target_id as string;
  if (decision.target_model === 'executionlog') {
    const log = await app.db('execution_logs').where({ id: decision.target_id }).first('target', 'record_id');
    if (!log) return;
    recordType = log.target;
    table = log.target === 'customer' ? 'customers' : log.target === 'financial' ? 'financial_transactions' : 'non_financial_events';
    recordId = log.record_id;
  }
  if (!table) return;
  const record = await app.db(table).where({ id: recordId }).first();
  if (!record || typeof record.created_by !== 'string' || !record.created_by.startsWith('merchant:')) return;
  const webhook = await app.db('merchant_decision_webhooks').where({ credential_id: record.created_by.slice('merchant:'.length) }).first();
  if (!webhook) return;
  const body = JSON.stringify({
    event: 'compliance_decision.created',
    decision_id: decision.id,
    record_type: recordType,
    record_id: record.id,
    ...(record.transaction_ref !== undefined ? { transaction_ref: record.transaction_ref } : {}),
    customer_ref: record.customer_ref,
    decision: decision.decision,
    score: decision.score === null ? (record.score === null ? null : Number(record.score)) : Number(decision.score),
    original_decision: decision.original_decision,
    original_score: decision.original_score === null ? null : Number(decision.original_score),
    description: decision.description,
    decided_at: (decision.created_at as Date).toISOString().slice(0, 19),
  });
  const delivery = await deliverSigned(webhook.url, webhook.secret, body, outboundPolicy(app.config));
  await app.db('decision_deliveries').insert({ decision_id: decisionId, url: webhook.url, attempt, ...delivery });
  if (delivery.error) throw new Error(`decision notification to ${webhook.url} failed: ${delivery.error}`);
}
