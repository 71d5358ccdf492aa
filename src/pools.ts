import path from 'node:path';
import { Piscina } from 'piscina';
import type { Config } from './config.ts';
import type { LightTask } from '../workers/light.ts';
import type { VisionOutcome, VisionTask, VisionWorkerData } from '../workers/vision.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

/**
 * Worker threads load TypeScript through tsx like the main thread. When the main thread was
 * started without `--import tsx` (the CLI registers tsx programmatically), add it.
 */
function workerExecArgv(): string[] {
  return process.execArgv.some((argument) => argument.includes('tsx')) ? process.execArgv : [...process.execArgv, '--import', 'tsx'];
}

export interface Pools {
  /** Sanctions screening: CPU work over plain data, one task per chunk of records (rules run on the request thread). */
  light: Piscina<LightTask, unknown>;
  /** Image work (MRZ, document fronts, faces): ONNX with `onnxThreads` threads and sharp with one, per worker. */
  vision: Piscina<VisionTask, unknown>;
  close(): Promise<void>;
}

export function createPools(config: Config): Pools {
  const light = new Piscina<LightTask, unknown>({
    filename: path.join(ROOT, 'workers', 'light.ts'),
    minThreads: config.lightWorkers,
    maxThreads: config.lightWorkers,
    idleTimeout: 60_000,
    execArgv: workerExecArgv(),
  });
  const vision = new Piscina<VisionTask, unknown>({
    filename: path.join(ROOT, 'workers', 'vision.ts'),
    workerData: { onnxThreads: config.onnxThreads, faceModel: config.face.model.specPath } satisfies VisionWorkerData,
    minThreads: 0,
    maxThreads: config.visionWorkers,
    idleTimeout: 120_000,
    execArgv: workerExecArgv(),
  });
  return {
    light,
    vision,
    async close() {
      await Promise.all([light.destroy(), vision.destroy()]);
    },
  };
}

/**
 * Runs a vision task on image bytes, moved to the worker rather than copied. A Buffer that shares
 * its memory (Node pools small ones) cannot be moved and is copied first; either way the caller's
 * bytes are not usable afterwards.
 */
export async function runVision<T>(pool: Pools['vision'], type: VisionTask['type'], image: Uint8Array): Promise<VisionOutcome<T>> {
  const owned = image.byteOffset === 0 && image.byteLength === image.buffer.byteLength;
  const bytes = owned ? new Uint8Array(image.buffer, 0, image.byteLength) : new Uint8Array(image);
  return (await pool.run({ type, image: bytes }, { transferList: [bytes.buffer as ArrayBuffer] })) as VisionOutcome<T>;
}
