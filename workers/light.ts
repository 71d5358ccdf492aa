/**
 * Piscina entry of the light pool: thin dispatch to pure code in src/. The sanctions index is
 * cached per worker by list version (src/modules/screening/sanctions/shared-index.ts). Rules run
 * on the request thread (src/modules/rules/engine.ts): copying records here cost more than
 * evaluating them.
 */
import type { ScreeningQuery } from '../src/modules/screening/sanctions/matcher.ts';
import { indexFor, type SharedSanctionsIndex } from '../src/modules/screening/sanctions/shared-index.ts';

export interface ScreenTask {
  type: 'screen';
  index: SharedSanctionsIndex;
  queries: ScreeningQuery[];
}

export type LightTask = ScreenTask;

/**
 * A screening result with its matches as JSON text: the request thread only stores them, so it
 * neither receives them as objects (copied field by field) nor serialises them again.
 */
export interface ScreenedText {
  score: number;
  topics: string[];
  matches: string;
}

export default function run(task: LightTask): ScreenedText[] {
  const index = indexFor(task.index);
  return task.queries.map((query) => {
    const result = index.screen(query);
    return { score: result.score, topics: result.topics, matches: JSON.stringify(result.matches) };
  });
}
