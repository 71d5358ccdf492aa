/**
 * Rule-change replay (the evidence a checker sees on a rule change under approval): 100,000 stored
 * financial events, each with the execution log the batch wrote for it, replayed through the rule
 * set in force (30 financial rules incl. aggregates) and a proposed set with one rule changed.
 * The events are stored through the real batch path, so the replay reads the contexts exactly as
 * the service stores them. Budget: 10 s on 2 cores.
 */
import os from 'node:os';
import { loadRules } from '../src/modules/rules/store.ts';
import { FINANCIAL, upsertTransactions } from '../src/modules/transaction/service.ts';
import { replay, type ReplayEvidence } from '../src/modules/approvals/replay.ts';
import { benchmarkRules, financialRecords } from './fixture-data.ts';
import { machineLine, writeSection } from './results.ts';
import { BENCH_ACTOR as system, withScoringService } from './scoring-service.ts';

const EVENTS = 100_000;
const CUSTOMERS = 2000;
const RUNS = 5;

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

export async function benchReplay(): Promise<void> {
  await withScoringService(CUSTOMERS, async ({ app, knex, config }) => {
    await loadRules(knex, await benchmarkRules(30), system, { deactivateMissing: true });
    const seeded = performance.now();
    for (let batch = 0; batch < EVENTS / 1000; batch++) {
      // Within the last 23 hours: older records are stored unscored (no execution log), and the replay reads scored ones.
      await upsertTransactions(app, FINANCIAL, financialRecords(1000, CUSTOMERS, `replay-${batch}`, 100 + batch, 23), system, Date.now());
    }
    await knex.raw('vacuum analyze financial_transactions, execution_logs');
    console.log(`seeded ${EVENTS} events in ${((performance.now() - seeded) / 1000).toFixed(1)} s`);

    const current = await app.rules.active();
    // The proposal: the first financial rule scores 25 more, which moves records between outcomes.
    const changed = current.find((rule) => rule.target === 'financial')!;
    const proposed = current.map((rule) => (rule === changed ? { ...rule, score: rule.score + 25, version: rule.version + 1 } : rule));
    const to = new Date();
    const window = { from: new Date(to.getTime() - 30 * 86_400_000), to, days: 30 };
    const times: number[] = [];
    let evidence: ReplayEvidence | null = null;
    for (let run = 0; run < RUNS + 1; run++) {
      const started = performance.now();
      evidence = await replay(knex, current, proposed, config.thresholds, window);
      const elapsed = performance.now() - started;
      if (evidence.events !== EVENTS) throw new Error(`replayed ${evidence.events} events, expected ${EVENTS}`);
      if (run > 0) times.push(elapsed);
      console.log(`replay ${run === 0 ? '(warm-up) ' : ''}${(elapsed / 1000).toFixed(2)} s, ${evidence.changed} changed`);
    }
    const sorted = [...times].sort((a, b) => a - b);
    await writeSection(
      'replay',
      `## Rule-change replay (approval evidence)

Machine: ${machineLine()}, load average ${os.loadavg()[0]!.toFixed(1)} at the end (other work shares the cores). PostgreSQL on the same machine. ${EVENTS.toLocaleString('en')} financial events of ${CUSTOMERS} customers stored through the batch path (with their execution logs), 30 financial rules incl. aggregates; the proposal raises one rule's score by 25. Command: \`npm run bench replay\`.

| measurement | median | slowest | budget |
|---|---|---|---|
| replay of ${EVENTS.toLocaleString('en')} events through both rule sets (${RUNS} runs after a warm-up) | ${(median(times) / 1000).toFixed(2)} s | ${(sorted[sorted.length - 1]! / 1000).toFixed(2)} s | 10 s |

Throughput at the median: ${Math.round(EVENTS / (median(times) / 1000)).toLocaleString('en')} events/s. Outcome changes: ${evidence!.changed.toLocaleString('en')} (alerts added ${evidence!.alerts_added}, removed ${evidence!.alerts_removed}).`,
    );
  });
}
