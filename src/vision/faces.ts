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

/** Candidates of one detector pass over `image`, mapped to the coordinates of the image it was cut from (offset by `dx`, `dy`). */
async function detectPass(image: Raster, minScore: number, dx: number, dy: number): Promise<Face[]> {
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
    const point = (k: number): Point => ({ x: (ax + regressors[r + 4 + 2 * k]!) * sx + dx, y: (ay + regressors[r + 5 + 2 * k]!) * sy + dy });
    candidates.push({
      box: { x: (cx - w / 2) * sx + dx, y: (cy - h / 2) * sy + dy, width: w * sx, height: h * sy },
      score: scores[i]!,
      landmarks: { right_eye: point(0), left_eye: point(1), nose: point(2), mouth: point(3) },
    });
  }
  return candidates;
}

/** The rectangle `box` (whole pixels inside the raster) copied out of it. */
function cropRaster(image: Raster, box: { x: number; y: number; width: number; height: number }): Raster {
  const { channels } = image;
  const data = new Uint8Array(box.width * box.height * channels);
  for (let y = 0; y < box.height; y++) {
    const from = ((box.y + y) * image.width + box.x) * channels;
    data.set(image.data.subarray(from, from + box.width * channels), y * box.width * channels);
  }
  return { width: box.width, height: box.height, channels, data };
}

/** Beyond this ratio of long to short side, the detector also looks at square tiles (see detectFaces). */
const TILE_ASPECT = 1.5;

/** Share of the smaller box inside the larger from which two detections are one face. */
function containment(a: Box, b: Box): number {
  const x0 = Math.max(a.x, b.x);
  const y0 = Math.max(a.y, b.y);
  const x1 = Math.min(a.x + a.width, b.x + b.width);
  const y1 = Math.min(a.y + a.height, b.y + b.height);
  return (Math.max(0, x1 - x0) * Math.max(0, y1 - y0)) / Math.min(a.width * a.height, b.width * b.height);
}

/**
 * Faces in an RGB raster, largest first (on a passport page the portrait, before its small
 * "ghost" copy; in a selfie the person in front). The image is fitted into the detector's square (letterboxed,
 * so its proportions hold) and the boxes and landmarks are mapped back to image pixels. A tall or
 * wide image (a full-length phone photograph) shrinks its face to a few pixels in that square, and a
 * face cut by the frame edge then falls below the score: such an image is also searched in
 * overlapping square tiles along its long side, and the detections of all passes merged.
 */
export async function detectFaces(image: Raster, minScore = MIN_FACE_SCORE): Promise<Face[]> {
  const candidates = await detectPass(image, minScore, 0, 0);
  const long = Math.max(image.width, image.height);
  const short = Math.min(image.width, image.height);
  if (long / short > TILE_ASPECT) {
    const tiles = Math.ceil((2 * long) / short) - 1;
    for (let n = 0; n < tiles; n++) {
      const from = Math.round(((long - short) * n) / (tiles - 1));
      const box = image.width > image.height ? { x: from, y: 0, width: short, height: short } : { x: 0, y: from, width: short, height: short };
      candidates.push(...(await detectPass(cropRaster(image, box), minScore, box.x, box.y)));
    }
  }
  candidates.sort((a, b) => b.score - a.score);
  const faces: Face[] = [];
  for (const candidate of candidates) {
    if (faces.every((face) => iou(face.box, candidate.box) < NMS_IOU && containment(face.box, candidate.box) < 0.5)) faces.push(candidate);
  }
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
 * dlib's mean face shape (the table in dlib's get_face_chip_details, unit square) at the same four
 * points: the centres of the eye contours (points 36-41 and 42-47), the nose tip (30), and the mean
 * of the lip points (48-67) for BlazeFace's mouth centre. dlib's ResNet was trained on chips that
 * put this shape, with a margin of `padding` on each side, into the 150-pixel input; placing the
 * face as the ArcFace template does (eyes a fifth of the crop lower, forehead in, chin out) costs
 * most of the model's separation (models/face/CARD.md).
 */
const DLIB_MEAN_FACE: readonly Point[] = [
  { x: 0.225492, y: 0.21599 },
  { x: 0.754761, y: 0.21599 },
  { x: 0.490127, y: 0.515625 },
  { x: 0.490127, y: 0.804225 },
];

/** Where the four landmarks go in the model's input crop, in its pixels. */
export function alignmentTemplate(spec: Pick<EmbedderSpec, 'input_size' | 'template' | 'template_scale' | 'padding'>): Point[] {
  const size = spec.input_size;
  if (spec.template === 'dlib') return DLIB_MEAN_FACE.map((p) => ({ x: ((spec.padding + p.x) / (1 + 2 * spec.padding)) * size, y: ((spec.padding + p.y) / (1 + 2 * spec.padding)) * size }));
  const factor = (spec.template_scale * size) / 112;
  return ARCFACE_TEMPLATE.map((p) => ({ x: (p.x - 56) * factor + size / 2, y: (p.y - 56) * factor + size / 2 }));
}

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
export function alignFace(image: Raster, face: Face, spec: Pick<EmbedderSpec, 'input_size' | 'template' | 'template_scale' | 'padding'>): Raster {
  const size = spec.input_size;
  const template = alignmentTemplate(spec);
  const { right_eye, left_eye, nose, mouth } = face.landmarks;
  const toImage = invertSimilarity(similarityTransform([right_eye, left_eye, nose, mouth], template));
  const large = Math.max(face.box.width, face.box.height) > 2 * size;
  const taps = large ? tapsFor(Math.hypot(toImage[0]!, toImage[3]!)) : 1;
  return warp(image, toImage, size, size, { x: taps, y: taps });
}

/**
 * Embeddings of aligned faces, one per crop: scaled to unit length for the cosine metric, as the
 * model gives them for the Euclidean one (whose distances the model was trained on).
 */
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
    if (spec.metric === 'euclidean') return vector;
    let sum = 0;
    for (const value of vector) sum += value * value;
    const norm = Math.sqrt(sum) || 1;
    for (let i = 0; i < vector.length; i++) vector[i]! /= norm;
    return vector;
  });
}

/**
 * The score of two embeddings on the model's scale (its `metric`), the number held against the
 * threshold and reported: cosine similarity, or 1 minus the Euclidean distance.
 */
export function faceScore(a: ArrayLike<number>, b: ArrayLike<number>, metric: EmbedderSpec['metric']): number {
  if (metric === 'cosine') return cosineSimilarity(a, b);
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += (a[i]! - b[i]!) ** 2;
  return 1 - Math.sqrt(sum);
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
  /** Embedding of the largest face (unit length for cosine models); null when there is none or it is too small. */
  embedding: number[] | null;
  /** Distance between the largest face's eyes in the image as read (pixels); null without a face. */
  eye_distance: number | null;
  /** Set when the largest face was found but not embedded: its eyes are closer than MIN_EYE_DISTANCE pixels. */
  too_small: boolean;
  timings: { decode_ms: number; detect_ms: number; embed_ms: number; total_ms: number };
}

/** The crop's mirror image: the same face, which the model embeds slightly differently. */
function mirrored(crop: Raster): Raster {
  const { width, height, channels, data } = crop;
  const out = new Uint8Array(data.length);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const from = (y * width + x) * channels;
      const to = (y * width + width - 1 - x) * channels;
      for (let c = 0; c < channels; c++) out[to + c] = data[from + c]!;
    }
  }
  return { width, height, channels, data: out };
}

/**
 * The embedding of an aligned face: the mean of the crop's and its mirror image's (one batch of
 * two), which steadies the vector against lighting from one side and small alignment errors.
 */
async function embedAligned(crop: Raster, spec: EmbedderSpec): Promise<number[]> {
  const [plain, flipped] = await embedFaces([crop, mirrored(crop)], spec);
  const mean = Array.from(plain!, (value, i) => (value + flipped![i]!) / 2);
  if (spec.metric === 'euclidean') return mean;
  const norm = Math.hypot(...mean) || 1;
  return mean.map((value) => value / norm);
}

/**
 * Faces whose eyes are closer than this (in the photograph as read, at most FACE_READ_SIDE) are not
 * compared: dlib's chip puts the eyes 53 px apart, and below about 30 the enlarged crop holds too
 * little of the face for its identity; on the evaluation set such faces gave the highest
 * different-person and the lowest same-person scores (models/face/CARD.md). ISO/IEC 19794-5 asks
 * for 60 px or more in a token portrait.
 */
export const MIN_EYE_DISTANCE = 32;

/** Photographs are analysed at this long side at most: faces stay far above the detector's size. */
const FACE_READ_SIDE = 1280;

/** Finds the faces of a photograph and embeds the largest. Throws ImageError for an unusable image. */
export async function readFaces(input: Buffer | Uint8Array | ArrayBuffer, spec: EmbedderSpec): Promise<FaceReadResult> {
  const started = performance.now();
  const image = await decodeImage(input, { channels: 3, maxPixels: DEFAULT_MAX_PIXELS, maxSide: FACE_READ_SIDE });
  const decoded = performance.now();
  const faces = await detectFaces(image);
  const detected = performance.now();
  const largest = faces[0];
  const eyes = largest ? Math.hypot(largest.landmarks.left_eye.x - largest.landmarks.right_eye.x, largest.landmarks.left_eye.y - largest.landmarks.right_eye.y) : null;
  const tooSmall = eyes !== null && eyes < MIN_EYE_DISTANCE;
  const embedding = largest && !tooSmall ? await embedAligned(alignFace(image, largest, spec), spec) : null;
  const done = performance.now();
  return {
    faces: faces.map((face) => ({ box: boxTuple(face.box), score: Math.round(face.score * 1000) / 1000 })),
    embedding,
    eye_distance: eyes === null ? null : tenths(eyes),
    too_small: tooSmall,
    timings: { decode_ms: tenths(decoded - started), detect_ms: tenths(detected - decoded), embed_ms: tenths(done - detected), total_ms: tenths(done - started) },
  };
}
