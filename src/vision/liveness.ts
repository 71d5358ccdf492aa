/**
 * Passive liveness: is the face in a liveness video a person in front of the camera, or a
 * presentation attack (a photograph on a screen or on paper held up to it)? Frames sampled from the
 * video (src/vision/video.ts) arrive as one mosaic image; in each frame the largest face is cut
 * out and described by texture measures that recapture changes (the periodic pattern of a screen's
 * pixels or a print's halftone dots in the spectrum, the loss of fine detail, colour and glare),
 * and a logistic model (models/liveness/CARD.md) turns them into the probability of an attack.
 * The video's verdict is the median over its frames.
 */
import fs from 'node:fs';
import path from 'node:path';
import { detectFaces } from './faces.ts';
import { DEFAULT_MAX_PIXELS, decodeImage, resampleRegion, tenths, type Raster } from './image.ts';
import { MOSAIC } from './video.ts';

/** Faces are described at this size (a power of two, for the spectrum). */
export const CROP = 64;

export const FEATURE_NAMES = ['spectral_peak', 'high_frequency', 'detail', 'saturation_mean', 'saturation_spread', 'clipped', 'contrast'] as const;

export interface LivenessModel {
  name: string;
  features: readonly string[];
  /** Standardisation: each feature minus its mean, divided by its scale. */
  mean: number[];
  scale: number[];
  weights: number[];
  bias: number;
  /** A video whose median attack probability reaches this fails. */
  threshold: number;
}

export const DEFAULT_LIVENESS_MODEL = path.resolve(import.meta.dirname, '../../models/liveness/texture-logistic.json');

export function loadLivenessModel(file = DEFAULT_LIVENESS_MODEL): LivenessModel {
  const model = JSON.parse(fs.readFileSync(file, 'utf8')) as LivenessModel;
  const n = FEATURE_NAMES.length;
  if (model.features.join() !== FEATURE_NAMES.join() || [model.mean, model.scale, model.weights].some((values) => values.length !== n)) {
    throw new Error(`${file}: the model's features are not ${FEATURE_NAMES.join(', ')}`);
  }
  return model;
}

/** In-place radix-2 FFT of one row or column (length a power of two). */
function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let size = 2; size <= n; size <<= 1) {
    const step = (-2 * Math.PI) / size;
    for (let start = 0; start < n; start += size) {
      for (let k = 0; k < size / 2; k++) {
        const wr = Math.cos(step * k);
        const wi = Math.sin(step * k);
        const a = start + k;
        const b = a + size / 2;
        const tr = re[b]! * wr - im[b]! * wi;
        const ti = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a]! += tr;
        im[a]! += ti;
      }
    }
  }
}

/** Power spectrum of a square grey image (Hann-windowed, mean removed), zero frequency at [0, 0]. */
function powerSpectrum(gray: Float64Array, size: number): Float64Array {
  let mean = 0;
  for (const value of gray) mean += value;
  mean /= gray.length;
  const re = new Float64Array(size * size);
  const im = new Float64Array(size * size);
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const window = (0.5 - 0.5 * Math.cos((2 * Math.PI * x) / (size - 1))) * (0.5 - 0.5 * Math.cos((2 * Math.PI * y) / (size - 1)));
      re[y * size + x] = (gray[y * size + x]! - mean) * window;
    }
  }
  const rowRe = new Float64Array(size);
  const rowIm = new Float64Array(size);
  for (const pass of ['rows', 'columns'] as const) {
    for (let line = 0; line < size; line++) {
      for (let k = 0; k < size; k++) {
        const index = pass === 'rows' ? line * size + k : k * size + line;
        rowRe[k] = re[index]!;
        rowIm[k] = im[index]!;
      }
      fft(rowRe, rowIm);
      for (let k = 0; k < size; k++) {
        const index = pass === 'rows' ? line * size + k : k * size + line;
        re[index] = rowRe[k]!;
        im[index] = rowIm[k]!;
      }
    }
  }
  const power = new Float64Array(size * size);
  for (let i = 0; i < power.length; i++) power[i] = re[i]! * re[i]! + im[i]! * im[i]!;
  return power;
}

/**
 * Texture measures of a CROP x CROP RGB face crop, in FEATURE_NAMES order:
 * - spectral_peak: log of the strongest high-frequency component over the median one (a screen's
 *   pixel grid and a print's halftone are periodic: isolated peaks; skin and hair are not);
 * - high_frequency: log of the energy at high over middle frequencies;
 * - detail: log of the mean absolute Laplacian over the grey level's spread (recaptures lose fine detail);
 * - saturation_mean, saturation_spread: colour saturation (screens and prints shift it);
 * - clipped: share of nearly white pixels (glare on a screen or glossy paper);
 * - contrast: grey level spread over its mean (a recapture's blacks are greyer).
 */
export function textureFeatures(crop: Raster): number[] {
  if (crop.width !== CROP || crop.height !== CROP || crop.channels !== 3) throw new Error(`expected a ${CROP}x${CROP} RGB crop`);
  const n = CROP * CROP;
  const gray = new Float64Array(n);
  let saturation = 0;
  let saturationSquares = 0;
  let clipped = 0;
  for (let i = 0; i < n; i++) {
    const r = crop.data[i * 3]!;
    const g = crop.data[i * 3 + 1]!;
    const b = crop.data[i * 3 + 2]!;
    gray[i] = 0.299 * r + 0.587 * g + 0.114 * b;
    const max = Math.max(r, g, b);
    const s = max ? (max - Math.min(r, g, b)) / max : 0;
    saturation += s;
    saturationSquares += s * s;
    if (max >= 250) clipped++;
  }
  let mean = 0;
  for (const value of gray) mean += value;
  mean /= n;
  let variance = 0;
  for (const value of gray) variance += (value - mean) ** 2;
  const spread = Math.sqrt(variance / n) + 1;
  let laplacian = 0;
  for (let y = 1; y < CROP - 1; y++) {
    for (let x = 1; x < CROP - 1; x++) {
      const i = y * CROP + x;
      laplacian += Math.abs(4 * gray[i]! - gray[i - 1]! - gray[i + 1]! - gray[i - CROP]! - gray[i + CROP]!);
    }
  }
  laplacian /= (CROP - 2) ** 2;
  const power = powerSpectrum(gray, CROP);
  const half = CROP / 2;
  const high: number[] = [];
  let highEnergy = 1e-9;
  let middleEnergy = 1e-9;
  for (let v = 0; v < CROP; v++) {
    for (let u = 0; u < CROP; u++) {
      const fu = u < half ? u : u - CROP;
      const fv = v < half ? v : v - CROP;
      // The axes carry the leakage of the crop's own edges: left out.
      if (fu === 0 || fv === 0) continue;
      const radius = Math.hypot(fu, fv);
      const p = power[v * CROP + u]!;
      if (radius >= 10 && radius <= half) {
        high.push(p);
        highEnergy += p;
      } else if (radius >= 3 && radius < 10) middleEnergy += p;
    }
  }
  high.sort((a, b) => a - b);
  const median = high[Math.floor(high.length / 2)]! + 1e-9;
  const saturationMean = saturation / n;
  return [
    Math.log((high[high.length - 1]! + 1e-9) / median),
    Math.log(highEnergy / middleEnergy),
    Math.log((laplacian + 0.1) / spread),
    saturationMean,
    Math.sqrt(Math.max(0, saturationSquares / n - saturationMean ** 2)),
    clipped / n,
    spread / (mean + 1),
  ];
}

/** Probability that the features come from a presentation attack. */
export function attackProbability(model: LivenessModel, features: readonly number[]): number {
  let z = model.bias;
  features.forEach((value, i) => (z += model.weights[i]! * ((value - model.mean[i]!) / model.scale[i]!)));
  return 1 / (1 + Math.exp(-z));
}

/**
 * A video's verdict from the attack probabilities of its frames that show a face: no_face when fewer
 * than half of its frames do (a face turned away or hidden most of the time cannot be judged),
 * else attack when the median reaches the threshold.
 */
export function livenessVerdict(frames: number, scores: readonly number[], threshold: number): 'live' | 'attack' | 'no_face' {
  if (scores.length === 0 || scores.length * 2 < frames) return 'no_face';
  const sorted = [...scores].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]! >= threshold ? 'attack' : 'live';
}

/** The square around a face box grown by a fifth (the whole face, little background), at CROP pixels. */
export function faceCrop(frame: Raster, box: { x: number; y: number; width: number; height: number }): Raster {
  const side = Math.max(box.width, box.height) * 1.2;
  const x = Math.max(0, Math.min(frame.width - 1, box.x + box.width / 2 - side / 2));
  const y = Math.max(0, Math.min(frame.height - 1, box.y + box.height / 2 - side / 2));
  const width = Math.min(side, frame.width - x);
  const height = Math.min(side, frame.height - y);
  return resampleRegion(frame, { x, y, width, height }, CROP, CROP);
}

export interface LivenessReadResult {
  /** Frames in the mosaic (cells that are not blank). */
  frames: number;
  frames_with_face: number;
  /** Frames in which more than one face was found. */
  frames_with_several_faces: number;
  /** Attack probability of the largest face in each frame that has one. */
  frame_scores: number[];
  /** Median of frame_scores; null without any face. */
  attack_score: number | null;
  model: string;
  threshold: number;
  timings: { decode_ms: number; analyse_ms: number; total_ms: number };
}

/** Cells of the mosaic that hold a frame; the sampler leaves the rest black. */
function frames(mosaic: Raster): Raster[] {
  const cells: Raster[] = [];
  const cell = Math.floor(mosaic.width / MOSAIC.columns);
  for (let row = 0; row < MOSAIC.rows; row++) {
    for (let column = 0; column < MOSAIC.columns; column++) {
      const frame = resampleRegion(mosaic, { x: column * cell, y: row * cell, width: cell, height: cell }, cell, cell);
      let brightest = 0;
      for (let i = 0; i < frame.data.length && brightest < 16; i += 7) brightest = Math.max(brightest, frame.data[i]!);
      if (brightest >= 16) cells.push(frame);
    }
  }
  return cells;
}

/** Reads a frame mosaic (as written by sampleFrames). Throws ImageError for an unusable image. */
export async function readLiveness(mosaicImage: Buffer | Uint8Array | ArrayBuffer, model: LivenessModel): Promise<LivenessReadResult> {
  const started = performance.now();
  const mosaic = await decodeImage(mosaicImage, { channels: 3, maxPixels: DEFAULT_MAX_PIXELS });
  const decoded = performance.now();
  const cells = frames(mosaic);
  const scores: number[] = [];
  let several = 0;
  for (const frame of cells) {
    const faces = await detectFaces(frame);
    if (faces.length > 1) several++;
    if (faces[0]) scores.push(attackProbability(model, textureFeatures(faceCrop(frame, faces[0].box))));
  }
  const sorted = [...scores].sort((a, b) => a - b);
  const done = performance.now();
  return {
    frames: cells.length,
    frames_with_face: scores.length,
    frames_with_several_faces: several,
    frame_scores: scores.map((score) => Math.round(score * 1000) / 1000),
    attack_score: sorted.length ? Math.round(sorted[Math.floor(sorted.length / 2)]! * 1000) / 1000 : null,
    model: model.name,
    threshold: model.threshold,
    timings: { decode_ms: tenths(decoded - started), analyse_ms: tenths(done - decoded), total_ms: tenths(done - started) },
  };
}
