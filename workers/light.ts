/**
 * Piscina entry of the light pool: thin dispatch to pure code in src/. The sanctions index is
 * cached per worker by list version (src/modules/screening/sanctions/shared-index.ts). Rules run
 * on the request thread (src/modules/rules/engine.ts): copying records here cost more than
 * evaluating them.
 */
import type { ScreeningQuery, ScreeningResult } from '../src/modules/screening/sanctions/matcher.ts';
import { indexFor, type SharedSanctionsIndex } from '../src/modules/screening/sanctions/shared-index.ts';

export interface ScreenTask {
  type: 'screen';
  index: SharedSanctionsIndex;
  queries: ScreeningQuery[];
}

export type LightTask = ScreenTask;

export default function run(task: LightTask): ScreeningResult[] {
  const index = indexFor(task.index);
  return task.queries.map((query) => index.screen(query));
}
