/**
 * What raising alerts adds to a financial batch of 1000: the same batch (30 rules incl.
 * aggregates at one point each, plus one rule that sends a record to REVIEW when its payment_method
 * says so) stored
 * once with every record ACCEPTed and once with every record raising an alert (1000 alerts, the
 * cases of 200 customers opened or extended), alternating in one run. The difference is the cost
 * of the alerts: their statement and the transaction around the batch write.
 */
import os from 'node:os';
import { loadRules } from '../src/modules/rules/store.ts';
import { parseRuleFile } from '../src/modules/rules/definitions.ts';
import { FINANCIAL, upsertTransactions } from '../src/modules/transaction/service.ts';
import { benchmarkRules, financialRecords } from './fixture-data.ts';
import { machineLine, writeSection } from './results.ts';
import { BENCH_ACTOR as system, withScoringService } from './scoring-service.ts';

const CUSTOMERS = 200;
const RUNS = 10;
const WARMUP = 2;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export async function benchAlerts(): Promise<void> {
  await withScoringService(CUSTOMERS, async ({ app, knex }) => {
    const alerting = parseRuleFile({ rules: [{ code: 'BENCH_ALERT', name: 'Alert on demand', target: 'financial', expression: { '==': [{ var: 'record.payment_method' }, 'alert'] }, score: 60 }] });
    // The benchmark's 30 financial rules at one point each and no forced decision, so that no record reaches REVIEW by them.
    const quiet30 = (await benchmarkRules(30)).filter((rule) => rule.target === 'financial').map((rule) => ({ ...rule, score: 1, decision: null }));
    await loadRules(knex, [...quiet30, ...alerting], system, { deactivateMissing: true });
    const quiet: number[] = [];
    const raising: number[] = [];
    let alertsPerBatch = 0;
    for (let run = 0; run < RUNS + WARMUP; run++) {
      for (const raise of [false, true]) {
        const records = financialRecords(1000, CUSTOMERS, `alerts-${run}-${raise}`, 11 + run, 20).map((record) => ({ ...record, payment_method: raise ? 'alert' : 'card' }));
        const before = Number((await knex('alerts').count('* as n').first())!.n);
        const started = performance.now();
        const results = await upsertTransactions(app, FINANCIAL, records, system, Date.now());
        const elapsed = performance.now() - started;
        const raised = Number((await knex('alerts').count('* as n').first())!.n) - before;
        if (results.some((result) => result.action !== 'created')) throw new Error('benchmark batch was not stored');
        if (raise && raised !== 1000) throw new Error(`expected 1000 alerts, got ${raised}`);
        if (!raise && raised !== 0) throw new Error(`expected no alerts, got ${raised}`);
        if (run < WARMUP) continue;
        (raise ? raising : quiet).push(elapsed);
        if (raise) alertsPerBatch = raised;
      }
    }
    const cases = Number((await knex('cases').count('* as n').first())!.n);
    const [withAlerts, without] = [median(raising), median(quiet)];
    console.log(`batch without alerts ${without.toFixed(1)} ms, with 1000 alerts ${withAlerts.toFixed(1)} ms`);
    await writeSection(
      'alerts',
      `## Alerts raised in the batch's transaction

Machine: ${machineLine()}, load average ${os.loadavg()[0]!.toFixed(1)} at the end (other work shares the cores). PostgreSQL on the same machine. ${CUSTOMERS} customers; 30 financial rules incl. aggregates (one point each) plus one rule that sends a record to REVIEW on demand; the same batch shape with every record accepted, then with every record raising an alert, alternating (${RUNS} runs each after ${WARMUP} warm-ups). Command: \`npm run bench alerts\`.

| financial batch of 1000 | median ms |
|---|---|
| no alerts (no transaction around the write) | ${without.toFixed(1)} |
| ${alertsPerBatch} alerts, cases of ${CUSTOMERS} customers opened or extended, one transaction | ${withAlerts.toFixed(1)} |
| cost of the alerts | ${(withAlerts - without).toFixed(1)} (${(((withAlerts - without) / without) * 100).toFixed(1)} %) |

Open cases at the end: ${cases} (one per customer, extended by every later batch).`,
    );
  });
}
