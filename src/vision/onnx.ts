/**
 * ONNX sessions, one per model file per process (per piscina worker), created on first use and
 * reused. The intra-op thread count is set once per process: the vision worker sets it from the
 * pool's configuration so that workers x threads stays within the cores (ARCHITECTURE.md).
 */
import os from 'node:os';
import * as ort from 'onnxruntime-node';

const sessions = new Map<string, Promise<ort.InferenceSession>>();
let intraOpThreads = Math.max(1, os.availableParallelism());

/** Threads each ONNX session may use; call before the first session is made. */
export function setOnnxThreads(threads: number): void {
  intraOpThreads = Math.max(1, Math.floor(threads));
}

export function onnxSession(file: string): Promise<ort.InferenceSession> {
  let session = sessions.get(file);
  if (!session) {
    session = ort.InferenceSession.create(file, {
      intraOpNumThreads: intraOpThreads,
      interOpNumThreads: 1,
      executionMode: 'sequential',
      graphOptimizationLevel: 'all',
      // Idle intra-op threads sleep instead of spinning: a worker holds several sessions, and the
      // main thread and sharp need the cores between runs.
      extra: { session: { intra_op: { allow_spinning: '0' } } },
    });
    // A failed load is retried on the next call instead of being cached.
    session.catch(() => sessions.delete(file));
    sessions.set(file, session);
  }
  return session;
}

export { ort };
