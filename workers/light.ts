/**
 * Piscina entry of the light pool: thin dispatch to pure code in src/. The sanctions index is
 * cached per worker by list version (src/modules/screening/sanctions/shared-index.ts). Rules run
 * on the request thread (src/modules/rules/engine.ts): copying records here cost more than
 * evaluating them.
 */
import type { MessagePort } from 'node:worker_threads';
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
  /** Where each slice's results go as soon as it is screened (ScreenedSlice), so the request thread can go on with them. */
  port: MessagePort;
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

/** The results of the queries from `start` on, one slice. */
export interface ScreenedSlice {
  start: number;
  results: ScreenedText[];
}

/** Screens slices of the task's queries until none is left; returns how many this worker screened. */
export default function run(task: LightTask): number {
  const index = indexFor(task.index);
  const { queries, next, slice, port } = task;
  let screened = 0;
  for (let start = Atomics.add(next, 0, slice); start < queries.length; start = Atomics.add(next, 0, slice)) {
    const results: ScreenedText[] = [];
    for (let position = start; position < Math.min(queries.length, start + slice); position++) {
      const result = index.screen(queries[position]!);
      results.push({ score: result.score, topics: result.topics, matches: JSON.stringify(result.matches) });
    }
    port.postMessage({ start, results } satisfies ScreenedSlice);
    screened += results.length;
  }
  return screened;
}
