import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * A turn of the event loop in which timers run too. Work that resumes from a database reply runs
 * in the loop's poll phase; one setImmediate resumes it in the check phase of the same iteration,
 * which lets pending I/O run but no timer, so a timer (a health check's, the event-loop
 * monitor's) would wait through the stretches on both sides. An immediate set from the check
 * phase runs in the next iteration, after its timers and poll phases.
 */
export async function wholeTurn(): Promise<void> {
  await nextTurn();
  await nextTurn();
}

/** The longest stretch a loop over a large batch runs before it gives the event loop a whole turn (Slices). */
const SLICE_MS = 8;

/**
 * Time-sliced loops, for work whose cost per item follows the data (a record's aggregates follow
 * its customer's stored window): a fixed number of items per turn held the thread 15-46 ms once
 * the customers' windows held 100-200 transactions. `due()` is cheap enough to ask every item.
 */
export class Slices {
  private started = performance.now();

  due(): boolean {
    return performance.now() - this.started >= SLICE_MS;
  }

  /** A whole turn, then a new slice. */
  async next(): Promise<void> {
    await wholeTurn();
    this.started = performance.now();
  }
}
