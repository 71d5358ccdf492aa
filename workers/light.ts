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
  /** Every query of the batch; each worker given the task takes slices of them (see `next`). */
  queries: ScreeningQuery[];
  /**
   * The first query no worker has taken yet, shared by the batch's tasks (one per worker): each
   * takes the next `slice` queries with Atomics.add until none is left, so the workers share the
   * batch evenly whatever else slows one of them, without waiting for the request thread to
   * hand them more.
   */
  next: Int32Array;
  slice: number;
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

/** What one worker screened: the positions (in the task's queries) and their results. */
export interface ScreenedSlices {
  positions: number[];
  results: ScreenedText[];
}

export default function run(task: LightTask): ScreenedSlices {
  const index = indexFor(task.index);
  const { queries, next, slice } = task;
  const done: ScreenedSlices = { positions: [], results: [] };
  for (let start = Atomics.add(next, 0, slice); start < queries.length; start = Atomics.add(next, 0, slice)) {
    for (let position = start; position < Math.min(queries.length, start + slice); position++) {
      const result = index.screen(queries[position]!);
      done.positions.push(position);
      done.results.push({ score: result.score, topics: result.topics, matches: JSON.stringify(result.matches) });
    }
  }
  return done;
}
