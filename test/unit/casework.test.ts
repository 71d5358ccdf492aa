import { readFileSync } from 'node:fs';
import test from 'ava';
import { parseRuleFile, type EvaluationInput, type RuleDefinition } from '../../src/modules/rules/definitions.ts';
import { DecisionContextWriter, evaluateRecords } from '../../src/modules/rules/evaluate.ts';
import { proposedRules, replayInput, unflatten } from '../../src/modules/approvals/replay.ts';
import { alertKind } from '../../src/modules/cases/alerts.ts';
import { cleanDecision } from '../../src/modules/cases/decisions.ts';
import { actionCode, type RequestRow } from '../../src/modules/approvals/service.ts';
import { ValidationFailed } from '../../src/modules/backoffice/errors.ts';
import type { Principal } from '../../src/modules/staff/principal.ts';

const THRESHOLDS = { review: 50, reject: 80 };

function input(record: Record<string, unknown>): EvaluationInput {
  return {
    target: 'financial',
    record: { amount: 12000, currency: 'EUR', io_type: 1, geo: { country: 'TR', lat: 41.0 }, tags: ['vip', 'new'], ...record },
    customer: { customer_ref: 'c-1', sanction_score: 42.5, sanction_topic: ['sanction', 'role.pep'], email_risk_score: 0 },
    event: { slug: 'withdrawal', name: 'Withdrawal', type: 1 },
    aggregates: { count_1h: 3, sum_debit_24h: 15000.5, distinct_ips_30d: 4, avg_amount_30d: null },
  };
}

test('a stored decision context replays to the same rule results as the input it was written from', (t) => {
  const rules = parseRuleFile(JSON.parse(readFileSync(new URL('../../rules/examples/aml-fraud.json', import.meta.url), 'utf8'))).map((rule) => ({ ...rule, version: 1 }));
  const extra: RuleDefinition[] = [
    { code: 'GEO', name: 'geo', target: 'financial', event_slugs: [], expression: { '==': [{ var: 'record.geo.country' }, 'TR'] }, score: 10, decision: null, active: true, version: 1 },
    { code: 'PEP', name: 'pep', target: 'financial', event_slugs: [], expression: { in: ['role.pep', { var: 'customer.sanction_topic' }] }, score: 15, decision: null, active: true, version: 1 },
  ];
  const writer = new DecisionContextWriter();
  for (const amount of [10, 900, 12000, 60000]) {
    const original = input({ amount });
    const stored = JSON.parse(writer.json(original));
    const replayed = replayInput(stored);
    const [expected, actual] = [evaluateRecords([...rules, ...extra], [original], THRESHOLDS)[0]!, evaluateRecords([...rules, ...extra], [replayed], THRESHOLDS)[0]!];
    t.is(actual.score, expected.score);
    t.is(actual.decision, expected.decision);
    t.deepEqual(actual.matched.map((rule) => rule.code), expected.matched.map((rule) => rule.code));
  }
  t.true(evaluateRecords(extra, [replayInput(JSON.parse(writer.json(input({}))))], THRESHOLDS)[0]!.matched.length === 2);
});

test('unflatten restores nesting and arrays from dotted keys', (t) => {
  t.deepEqual(unflatten({ a: 1, 'geo.country': 'DE', 'geo.lat': 1.5, 'tags.0': 'x', 'tags.1': 'y', 'm.0.k': 2 }), { a: 1, geo: { country: 'DE', lat: 1.5 }, tags: ['x', 'y'], m: [{ k: 2 }] });
});

test('the proposed rule set replaces, adds or removes the rule of the request', (t) => {
  const active: RuleDefinition[] = [
    { code: 'A', name: 'A', target: 'financial', event_slugs: [], expression: true, score: 10, decision: null, active: true, version: 3 },
    { code: 'B', name: 'B', target: 'financial', event_slugs: [], expression: true, score: 20, decision: null, active: true, version: 1 },
  ];
  const changed = proposedRules(active, { operation: 'change', object_id: 'A', payload: { input: { score: '35.00' } } }, { code: 'A', name: 'A', target: 'financial', event_slugs: [], expression: true, score: '10.00', decision: null, version: 3 });
  t.deepEqual(changed.map((rule) => [rule.code, rule.score, rule.version]), [['B', 20, 1], ['A', 35, 4]]);
  t.deepEqual(proposedRules(active, { operation: 'delete', object_id: 'B', payload: {} }, null).map((rule) => rule.code), ['A']);
  t.deepEqual(proposedRules(active, { operation: 'change', object_id: 'B', payload: { input: { active: false } } }, { ...active[1] }).map((rule) => rule.code), ['A']);
  const added = proposedRules(active, { operation: 'add', object_id: null, payload: { input: { code: 'C', name: 'C', target: 'financial', expression: { '>': [{ var: 'record.amount' }, 1] }, score: '5' } } }, null);
  t.deepEqual(added.map((rule) => rule.code), ['A', 'B', 'C']);
});

test('alerts: REVIEW and REJECT raise rule alerts; a customer sanctions score from the threshold raises a sanctions alert', (t) => {
  const base = { target: 'financial' as const, recordId: 'r', recordRef: 'x', customerId: 'c', logId: 'l', score: 10, ruleCodes: [] };
  t.is(alertKind({ ...base, decision: 'ACCEPT' }, { sanctionThreshold: 50 }), null);
  t.is(alertKind({ ...base, decision: 'REVIEW' }, { sanctionThreshold: 50 }), 'rules');
  t.is(alertKind({ ...base, decision: 'REJECT' }, { sanctionThreshold: 50 }), 'rules');
  t.is(alertKind({ ...base, target: 'customer', decision: 'ACCEPT', sanctionScore: 50 }, { sanctionThreshold: 50 }), 'sanctions');
  t.is(alertKind({ ...base, target: 'customer', decision: 'ACCEPT', sanctionScore: 49.99 }, { sanctionThreshold: 50 }), null);
});

test('decision input: choices, required description, score 0-100 with 2 decimals, text limits', (t) => {
  t.deepEqual(cleanDecision({ decision: 'REJECT', description: ' ok ', score: '99.5' }), { decision: 'REJECT', description: 'ok', score: 99.5, document_description: '' });
  t.is(cleanDecision({ decision: 'ACCEPT', description: 'x', score: '' }).score, null);
  for (const [body, field] of [
    [{ decision: 'reject', description: 'x' }, 'decision'],
    [{ description: 'x' }, 'decision'],
    [{ decision: 'ACCEPT', description: '   ' }, 'description'],
    [{ decision: 'ACCEPT', description: 'x', score: 101 }, 'score'],
    [{ decision: 'ACCEPT', description: 'x', score: -1 }, 'score'],
    [{ decision: 'ACCEPT', description: 'x', score: '1e2' }, 'score'],
    [{ decision: 'ACCEPT', description: 'x', document_description: 5 }, 'document_description'],
  ] as const) {
    const error = t.throws(() => cleanDecision(body as Record<string, unknown>)) as ValidationFailed;
    t.truthy(error.errors[field], JSON.stringify(body));
  }
});

test('the action code of a request depends on the viewer', (t) => {
  const viewer = (id: string) => ({ user: { id } }) as unknown as Principal;
  const request = { status: 'pending', maker_id: 'maker', stage: 2, evidence_status: null } as unknown as RequestRow;
  t.is(actionCode(request, null, viewer('maker'), true), 'withdraw');
  t.is(actionCode(request, 1, viewer('early'), true), 'forwarded', 'signed at an earlier stage');
  t.is(actionCode(request, 2, viewer('now'), true), 'signed', 'signed at this stage');
  t.is(actionCode(request, null, viewer('other'), true), 'review');
  t.is(actionCode(request, null, viewer('other'), false), 'not_authorized');
  t.is(actionCode({ ...request, evidence_status: 'running' }, null, viewer('other'), true), 'waiting_stage');
  t.is(actionCode({ ...request, status: 'approved' }, null, viewer('maker'), true), 'processed');
});
