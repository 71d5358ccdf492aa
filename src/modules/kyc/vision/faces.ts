/**
 * Faces: BlazeFace detection (models/face/blazeface.onnx), alignment of the eyes, nose and mouth to
 * the embedding model's template, and the embedding itself with whichever model the configuration
 * names (models/face/*.json, see CARD.md there). Pure apart from sharp and onnxruntime.
 */
import path from 'node:path';
import { MODELS_DIR, type EmbedderSpec } from './embedder.ts';
import { boxTuple, DEFAULT_MAX_PIXELS, decodeImage, resizeRaster, tapsFor, tenths, warp, type Box, type Point, type Raster } from './image.ts';
import { onnxSession, ort } from './onnx.ts';

const DETECTOR_PATH = path.join(MODELS_DIR, 'blazeface.onnx');
const DETECTOR_SIZE = 256;
/** Detections below this score are not faces; 0.75 is MediaPipe's default for this model. */
const MIN_FACE_SCORE = 0.75;
const NMS_IOU = 0.3;

export interface Face {
  /** Box in image pixels. */
  box: Box;
  score: number;
  /** The subject's right eye, left eye, nose tip, mouth centre (image left to right for the eyes). */
  landmarks: { right_eye: Point; left_eye: Point; nose: Point; mouth: Point };
}

/** SSD anchors of the 256x256 BlazeFace: 2 per cell of the 16x16 grid, then 6 per cell of the 8x8 grid. */
const ANCHORS: Float32Array = (() => {
  const anchors: number[] = [];
  for (const [stride, count] of [
    [16, 2],
    [32, 6],
  ] as const) {
    const cells = DETECTOR_SIZE / stride;
    for (let y = 0; y < cells; y++) for (let x = 0; x < cells; x++) for (let n = 0; n < count; n++) anchors.push(stride * (x + 0.5), stride * (y + 0.5));
  }
  return Float32Array.from(anchors);
})();

function iou(a: Box, b: Box): number {
  const x0 = Math.max(a.x, b.x);
  const y0 = Math.max(a.y, b.y);
  const x1 = Math.min(a.x + a.width, b.x + b.width);
  const y1 = Math.min(a.y + a.height, b.y + b.height);
  const overlap = Math.max(0, x1 - x0) * Math.max(0, y1 - y0);
  return overlap / (a.width * a.height + b.width * b.height - overlap);
}

/** Creates the detector's and the embedder's sessions ahead of the first image (worker start-up). */
export async function loadFaceModels(spec: EmbedderSpec): Promise<void> {
  await Promise.all([onnxSession(DETECTOR_PATH), onnxSession(spec.path)]);
}

/**
 * Faces in an RGB raster, largest first (on a passport page the portrait, before its small
 * "ghost" copy; in a selfie the person in front). The image is fitted into the detector's square (letterboxed,
 * so its proportions hold) and the boxes and landmarks are mapped back to image pixels.
 */
export async function detectFaces(image: Raster, minScore = MIN_FACE_SCORE): Promise<Face[]> {
  const fitted = await resizeRaster(image, DETECTOR_SIZE, DETECTOR_SIZE);
  const input = new Float32Array(3 * DETECTOR_SIZE * DETECTOR_SIZE);
  const plane = DETECTOR_SIZE * DETECTOR_SIZE;
  // Outside the fitted image the input stays 0 (mid grey in the model's [-1, 1] range).
  for (let y = 0; y < fitted.height; y++) {
    for (let x = 0; x < fitted.width; x++) {
      const source = (y * fitted.width + x) * 3;
      const target = y * DETECTOR_SIZE + x;
      input[target] = fitted.data[source]! / 127.5 - 1;
      input[plane + target] = fitted.data[source + 1]! / 127.5 - 1;
      input[2 * plane + target] = fitted.data[source + 2]! / 127.5 - 1;
    }
  }
  const session = await onnxSession(DETECTOR_PATH);
  const output = await session.run({ image: new ort.Tensor('float32', input, [1, 3, DETECTOR_SIZE, DETECTOR_SIZE]) });
  const scores = output.scores!.data as Float32Array;
  const regressors = output.regressors!.data as Float32Array;
  const sx = image.width / fitted.width;
  const sy = image.height / fitted.height;

  const candidates: Face[] = [];
  for (let i = 0; i < scores.length; i++) {
    if (scores[i]! < minScore) continue;
    const r = i * 16;
    const ax = ANCHORS[2 * i]!;
    const ay = ANCHORS[2 * i + 1]!;
    const cx = ax + regressors[r]!;
    const cy = ay + regressors[r + 1]!;
    const w = regressors[r + 2]!;
    const h = regressors[r + 3]!;
    const point = (k: number): Point => ({ x: (ax + regressors[r + 4 + 2 * k]!) * sx, y: (ay + regressors[r + 5 + 2 * k]!) * sy });
    candidates.push({
      box: { x: (cx - w / 2) * sx, y: (cy - h / 2) * sy, width: w * sx, height: h * sy },
      score: scores[i]!,
      landmarks: { right_eye: point(0), left_eye: point(1), nose: point(2), mouth: point(3) },
    });
  }
  candidates.sort((a, b) => b.score - a.score);
  const faces: Face[] = [];
  for (const candidate of candidates) if (faces.every((face) => iou(face.box, candidate.box) < NMS_IOU)) faces.push(candidate);
  return faces.sort((a, b) => b.box.width * b.box.height - a.box.width * a.box.height);
}

/**
 * InsightFace's ArcFace template in its 112x112 crop: the subject's right eye, left eye, nose tip,
 * and the mouth centre (the middle of its two mouth corners; BlazeFace gives the centre).
 */
const ARCFACE_TEMPLATE: readonly Point[] = [
  { x: 38.2946, y: 51.6963 },
  { x: 73.5318, y: 51.5014 },
  { x: 56.0252, y: 71.7366 },
  { x: 56.1396, y: 92.2848 },
];

/**
 * Least-squares similarity transform (rotation, uniform scale, translation) taking `from` onto `to`,
 * as a row-major 3x3 matrix.
 */
export function similarityTransform(from: readonly Point[], to: readonly Point[]): number[] {
  const n = from.length;
  let fx = 0, fy = 0, tx = 0, ty = 0;
  for (let i = 0; i < n; i++) {
    fx += from[i]!.x / n;
    fy += from[i]!.y / n;
    tx += to[i]!.x / n;
    ty += to[i]!.y / n;
  }
  let a = 0, b = 0, norm = 0;
  for (let i = 0; i < n; i++) {
    const px = from[i]!.x - fx;
    const py = from[i]!.y - fy;
    const qx = to[i]!.x - tx;
    const qy = to[i]!.y - ty;
    a += px * qx + py * qy;
    b += px * qy - py * qx;
    norm += px * px + py * py;
  }
  a /= norm;
  b /= norm;
  return [a, -b, tx - a * fx + b * fy, b, a, ty - b * fx - a * fy, 0, 0, 1];
}

function invertSimilarity(m: readonly number[]): number[] {
  const [a, , c, b, , f] = m as [number, number, number, number, number, number];
  const det = a * a + b * b;
  return [a / det, b / det, -(a * c + b * f) / det, -b / det, a / det, (b * c - a * f) / det, 0, 0, 1];
}

/**
 * The face cut out and rotated upright, eyes level, at the model's input size (RGB raster). A face
 * more than twice the input size is averaged over several samples per pixel, so it does not alias.
 */
export function alignFace(image: Raster, face: Face, spec: Pick<EmbedderSpec, 'input_size' | 'template_scale'>): Raster {
  const size = spec.input_size;
  const factor = (spec.template_scale * size) / 112;
  const template = ARCFACE_TEMPLATE.map((p) => ({ x: (p.x - 56) * factor + size / 2, y: (p.y - 56) * factor + size / 2 }));
  const { right_eye, left_eye, nose, mouth } = face.landmarks;
  const toImage = invertSimilarity(similarityTransform([right_eye, left_eye, nose, mouth], template));
  const large = Math.max(face.box.width, face.box.height) > 2 * size;
  const taps = large ? tapsFor(Math.hypot(toImage[0]!, toImage[3]!)) : 1;
  return warp(image, toImage, size, size, { x: taps, y: taps });
}

/** Unit-length embeddings of aligned faces, one per crop. */
export async function embedFaces(crops: readonly Raster[], spec: EmbedderSpec): Promise<Float32Array[]> {
  if (crops.length === 0) return [];
  const size = spec.input_size;
  const plane = size * size;
  const input = new Float32Array(crops.length * 3 * plane);
  const order = spec.channel_order === 'rgb' ? [0, 1, 2] : [2, 1, 0];
  crops.forEach((crop, n) => {
    for (let i = 0; i < plane; i++) {
      for (let c = 0; c < 3; c++) input[(n * 3 + c) * plane + i] = (crop.data[i * 3 + order[c]!]! - spec.mean) / spec.std;
    }
  });
  const session = await onnxSession(spec.path);
  const output = await session.run({ [spec.input_name]: new ort.Tensor('float32', input, [crops.length, 3, size, size]) });
  const values = output[spec.output_name]!.data as Float32Array;
  const length = values.length / crops.length;
  return crops.map((_, n) => {
    const vector = values.slice(n * length, (n + 1) * length);
    let sum = 0;
    for (const value of vector) sum += value * value;
    const norm = Math.sqrt(sum) || 1;
    for (let i = 0; i < vector.length; i++) vector[i]! /= norm;
    return vector;
  });
}

export function cosineSimilarity(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i]! * b[i]!;
    na += a[i]! * a[i]!;
    nb += b[i]! * b[i]!;
  }
  return dot / (Math.sqrt(na * nb) || 1);
}

export interface FaceReadResult {
  /** Every face found, largest first: box in image pixels and detector score. */
  faces: { box: [number, number, number, number]; score: number }[];
  /** Embedding of the largest face, unit length; null when there is none. */
  embedding: number[] | null;
  timings: { decode_ms: number; detect_ms: number; embed_ms: number; total_ms: number };
}

/** Photographs are analysed at this long side at most: faces stay far above the detector's size. */
const FACE_READ_SIDE = 1280;

/** Finds the faces of a photograph and embeds the largest. Throws ImageError for an unusable image. */
export async function readFaces(input: Buffer | Uint8Array | ArrayBuffer, spec: EmbedderSpec): Promise<FaceReadResult> {
  const started = performance.now();
  const image = await decodeImage(input, { channels: 3, maxPixels: DEFAULT_MAX_PIXELS, maxSide: FACE_READ_SIDE });
  const decoded = performance.now();
  const faces = await detectFaces(image);
  const detected = performance.now();
  const embedding = faces[0] ? Array.from((await embedFaces([alignFace(image, faces[0], spec)], spec))[0]!) : null;
  const done = performance.now();
  return {
    faces: faces.map((face) => ({ box: boxTuple(face.box), score: Math.round(face.score * 1000) / 1000 })),
    embedding,
    timings: { decode_ms: tenths(decoded - started), detect_ms: tenths(detected - decoded), embed_ms: tenths(done - detected), total_ms: tenths(done - started) },
  };
}
