/**
 * Piscina entry of the vision pool. sharp gets one thread per worker and ONNX sessions are made
 * once per worker (src/modules/kyc/mrz/model.ts), so workers x threads stays within the cores.
 * Image errors come back as values: a bad image is a fail result, never a crashed worker.
 */
import sharp from 'sharp';
import { warmUp } from '../src/modules/kyc/mrz/model.ts';
import { MrzImageError, readMrz, type MrzReadResult } from '../src/modules/kyc/mrz/read.ts';

sharp.concurrency(1);
// Load the ONNX session in the background when the worker starts. Not awaited: a top-level await
// in a worker entry breaks tsx's module loading in worker threads on Node 20. A failure here shows
// again, as a fail result, on the first image.
void warmUp().catch(() => {});

export interface MrzTask {
  type: 'mrz';
  image: Uint8Array;
}

export type VisionTask = MrzTask;
export type VisionOutcome<T> = { ok: true; result: T } | { ok: false; reason: string; message: string };

export default async function run(task: VisionTask): Promise<VisionOutcome<MrzReadResult>> {
  try {
    return { ok: true, result: await readMrz(Buffer.from(task.image.buffer, task.image.byteOffset, task.image.byteLength)) };
  } catch (error) {
    if (error instanceof MrzImageError) return { ok: false, reason: error.reason, message: error.message };
    return { ok: false, reason: 'image_unreadable', message: `The image could not be processed: ${(error as Error).message}` };
  }
}
