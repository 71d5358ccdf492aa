/**
 * Piscina entry of the vision pool: MRZ reading, document fronts and faces. sharp gets one thread
 * per worker and each ONNX session the intra-op threads the pool was given (workerData), so that
 * workers x threads stays within the cores. Sessions are made once per worker and reused. Image
 * errors come back as values (a bad image is a fail result); other errors reject the task, and a
 * rejected task never takes the worker down.
 */
import { workerData } from 'node:worker_threads';
import { Piscina, transferableSymbol, valueSymbol } from 'piscina';
import sharp from 'sharp';
import { warmUp } from '../src/vision/mrz/model.ts';
import { readMrz, type MrzReadResult } from '../src/vision/mrz/read.ts';
import { readDocumentFront, type DocumentFrontResult } from '../src/vision/docfront.ts';
import { DEFAULT_EMBEDDER, loadEmbedderSpec, type EmbedderSpec } from '../src/vision/embedder.ts';
import { loadFaceModels, readFaces, type FaceReadResult } from '../src/vision/faces.ts';
import { ImageError } from '../src/vision/image.ts';
import { loadLivenessModel, readLiveness, type LivenessModel, type LivenessReadResult } from '../src/vision/liveness.ts';
import { loadOcrModels } from '../src/vision/ocr.ts';
import { setOnnxThreads } from '../src/vision/onnx.ts';

export interface VisionWorkerData {
  onnxThreads: number;
  /** The embedding model's description file (models/face/*.json). */
  faceModel: string;
}

const settings = workerData as VisionWorkerData | undefined;
sharp.concurrency(1);
if (settings) setOnnxThreads(settings.onnxThreads);
const embedder: EmbedderSpec = loadEmbedderSpec(settings?.faceModel ?? DEFAULT_EMBEDDER);

// Load the models in the background when the worker starts, so the first document does not wait
// for session creation. Not awaited: a top-level await in a worker entry breaks tsx's module
// loading in worker threads on Node 20. A failure here shows again, as a fail result, on first use.
void Promise.all([warmUp(), loadOcrModels(), loadFaceModels(embedder)]).catch(() => {});

/** `liveness` takes the frame mosaic of a video (src/vision/video.ts), not the video. */
export type VisionTask =
  | { type: 'mrz'; image: Uint8Array }
  | { type: 'docfront'; image: Uint8Array }
  | { type: 'faces'; image: Uint8Array }
  | { type: 'liveness'; image: Uint8Array };

export interface DocumentFrontOutput {
  result: DocumentFrontResult;
  /** JPEG of the portrait, when a face was found. */
  portrait: Uint8Array | null;
}

export type VisionOutcome<T> = { ok: true; result: T } | { ok: false; reason: string; message: string };

/** Loaded on first use: most deployments leave liveness off. */
let livenessModel: LivenessModel | null = null;

export default async function run(task: VisionTask): Promise<VisionOutcome<MrzReadResult | DocumentFrontOutput | FaceReadResult | LivenessReadResult>> {
  const image = Buffer.from(task.image.buffer, task.image.byteOffset, task.image.byteLength);
  try {
    switch (task.type) {
      case 'mrz':
        return { ok: true, result: await readMrz(image) };
      case 'docfront': {
        const { result, portrait } = await readDocumentFront(image);
        if (!portrait) return { ok: true, result: { result, portrait: null } };
        // The portrait goes back to the main thread moved, not copied.
        const bytes = new Uint8Array(portrait.buffer, portrait.byteOffset, portrait.byteLength);
        const copy = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength ? bytes : bytes.slice();
        const outcome: VisionOutcome<DocumentFrontOutput> = { ok: true, result: { result, portrait: copy } };
        return Piscina.move({ [transferableSymbol]: copy.buffer, [valueSymbol]: outcome }) as unknown as VisionOutcome<DocumentFrontOutput>;
      }
      case 'faces':
        return { ok: true, result: await readFaces(image, embedder) };
      case 'liveness':
        livenessModel ??= loadLivenessModel();
        return { ok: true, result: await readLiveness(image, livenessModel) };
    }
  } catch (error) {
    // A bad image is the uploader's to fix: a fail result. Anything else (a model that would not
    // load, memory) is ours: it is thrown, so the job is retried and recorded only on its last attempt.
    if (error instanceof ImageError) return { ok: false, reason: error.reason, message: error.message };
    throw error;
  }
}
