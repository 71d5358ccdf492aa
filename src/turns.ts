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
