/**
 * The face embedding model in force: a JSON description beside its ONNX file (models/face/CARD.md),
 * chosen by WARDEN_FACE_MODEL. Kept apart from faces.ts so the configuration can read it without
 * loading onnxruntime in the main thread.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';

export const MODELS_DIR = path.resolve(import.meta.dirname, '../../models/face');

/** The embedding model's description, a JSON file beside the ONNX file (models/face/CARD.md). */
const embedderSpecSchema = z.object({
  name: z.string(),
  file: z.string(),
  input_name: z.string().default('image'),
  output_name: z.string().default('embedding'),
  /** Square input side in pixels: 112 for ArcFace-style models, 150 for dlib's. */
  input_size: z.number().int().min(32).max(512),
  /** Pixel value fed to the model: (value - mean) / std, per RGB channel value 0..255. */
  mean: z.number().default(0),
  std: z.number().positive().default(1),
  /** "rgb" or "bgr" channel order. */
  channel_order: z.enum(['rgb', 'bgr']).default('rgb'),
  /**
   * Where the eyes, nose and mouth go in the crop, as the model was trained: "arcface" (InsightFace's
   * 112-pixel 5-point template, scaled to input_size) or "dlib" (dlib's get_face_chip_details: its
   * mean face shape with `padding` around it; dlib's ResNet was trained on such chips).
   */
  template: z.enum(['arcface', 'dlib']).default('arcface'),
  /** "arcface" only: how much of the template the face fills; below 1 leaves more margin. */
  template_scale: z.number().positive().default(1),
  /** "dlib" only: margin around the mean face shape, as a fraction of its size (dlib uses 0.25 for this model). */
  padding: z.number().min(0).max(1).default(0.25),
  /**
   * How two embeddings are compared, giving the score reported and held against the threshold:
   * "cosine" (cosine similarity of the vectors) or "euclidean" (1 minus the Euclidean distance of
   * the raw vectors, for models trained on that distance, such as dlib's, whose "same person below
   * distance 0.6" is a score of 0.4).
   */
  metric: z.enum(['cosine', 'euclidean']).default('cosine'),
  /** Score at or above which two faces are taken for the same person. */
  threshold: z.number().min(-1).max(1),
});

/** `path` is the ONNX file, `specPath` the description it was read from. */
export type EmbedderSpec = z.infer<typeof embedderSpecSchema> & { path: string; specPath: string };

export const DEFAULT_EMBEDDER = path.join(MODELS_DIR, 'dlib-resnet-v1.json');

/** Reads and checks a description file; throws an Error naming the file and the problem. */
export function loadEmbedderSpec(specPath: string): EmbedderSpec {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(specPath, 'utf8'));
  } catch (error) {
    throw new Error(`${specPath}: ${(error as Error).message}`);
  }
  const parsed = embedderSpecSchema.safeParse(raw);
  if (!parsed.success) throw new Error(`${specPath}: ${parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`).join('; ')}`);
  const modelPath = path.resolve(path.dirname(specPath), parsed.data.file);
  if (!fs.existsSync(modelPath)) throw new Error(`${specPath}: the model file ${modelPath} does not exist`);
  return { ...parsed.data, path: modelPath, specPath: path.resolve(specPath) };
}

