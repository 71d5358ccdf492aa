/**
 * Text detection and recognition with PaddleOCR's PP-OCRv4 models (models/ocr/CARD.md): the DB
 * detector marks text pixels, connected regions become line boxes, and the CTC recognizer reads
 * each box. Pure apart from sharp and onnxruntime.
 */
import fs from 'node:fs';
import path from 'node:path';
import { resampleRegion, resizeRaster, type Box, type Raster } from './image.ts';
import { onnxSession, ort } from './onnx.ts';

const MODELS_DIR = path.resolve(import.meta.dirname, '../../models/ocr');
const DETECTOR_PATH = path.join(MODELS_DIR, 'ppocrv4-det.onnx');
const RECOGNIZER_PATH = path.join(MODELS_DIR, 'ppocrv4-rec.onnx');
const CLASSIFIER_PATH = path.join(MODELS_DIR, 'ppocr-cls.onnx');

/** Index 0 is the CTC blank; the keys file gives 1..6623, and the last class is a space. */
let characters: string[] | null = null;
function alphabet(): string[] {
  characters ??= ['', ...fs.readFileSync(path.join(MODELS_DIR, 'ppocr-keys-v1.txt'), 'utf8').split('\n').filter((line, index, all) => index < all.length - 1 || line !== ''), ' '];
  return characters;
}

/** Creates the sessions ahead of the first document (worker start-up). */
export async function loadOcrModels(): Promise<void> {
  alphabet();
  await Promise.all([onnxSession(DETECTOR_PATH), onnxSession(RECOGNIZER_PATH), onnxSession(CLASSIFIER_PATH)]);
}

/** PaddleOCR's detector settings (DBPostProcess defaults). */
const TEXT_THRESHOLD = 0.3;
const BOX_THRESHOLD = 0.6;
const UNCLIP_RATIO = 1.5;
const MIN_BOX_SIDE = 3;
const REC_HEIGHT = 48;
const REC_MAX_WIDTH = 960;
/** A batch holds strips within this ratio of widths (padding costs as much as text). */
const REC_BATCH_SPREAD = 1.25;
const REC_BATCH = 8;

export interface TextLine {
  text: string;
  /** Mean probability of the characters read. */
  confidence: number;
  box: Box;
}

/** ImageNet normalisation in the channel order PaddleOCR feeds (BGR, as OpenCV loads images). */
const DET_MEAN = [0.485, 0.456, 0.406];
const DET_STD = [0.229, 0.224, 0.225];
/** The detector's input value of each 8-bit level, per input channel (B, G, R): a lookup instead of a division per sample. */
const DET_NORMALISED = DET_MEAN.map((mean, c) => Float32Array.from({ length: 256 }, (_, level) => (level / 255 - mean) / DET_STD[c]!));

/**
 * Line boxes of the text in an RGB raster, in its pixels. The image is scaled so its long side is
 * `side` (a multiple of 32, as the detector needs).
 */
export async function detectText(image: Raster, side = 960): Promise<Box[]> {
  const scale = Math.min(1, side / Math.max(image.width, image.height));
  const width = Math.max(32, Math.round((image.width * scale) / 32) * 32);
  const height = Math.max(32, Math.round((image.height * scale) / 32) * 32);
  const resized = await resizeRaster(image, width, height, 'fill');
  const plane = width * height;
  const input = new Float32Array(3 * plane);
  const [blue, green, red] = DET_NORMALISED;
  const data = resized.data;
  for (let i = 0; i < plane; i++) {
    input[i] = blue![data[i * 3 + 2]!]!;
    input[plane + i] = green![data[i * 3 + 1]!]!;
    input[2 * plane + i] = red![data[i * 3]!]!;
  }
  const session = await onnxSession(DETECTOR_PATH);
  const output = await session.run({ x: new ort.Tensor('float32', input, [1, 3, height, width]) });
  const probability = Object.values(output)[0]!.data as Float32Array;
  const boxes = regions(probability, width, height);
  const sx = image.width / width;
  const sy = image.height / height;
  return boxes.map((box) => ({ x: box.x * sx, y: box.y * sy, width: box.width * sx, height: box.height * sy }));
}

/** Connected regions of the thresholded map, scored, filtered and grown back to the glyph extent ("unclip"). */
function regions(probability: Float32Array, width: number, height: number): Box[] {
  const label = new Int32Array(width * height);
  const stack = new Int32Array(width * height);
  const boxes: Box[] = [];
  let next = 0;
  for (let start = 0; start < label.length; start++) {
    if (label[start] || probability[start]! <= TEXT_THRESHOLD) continue;
    next++;
    let top = 0;
    stack[top++] = start;
    label[start] = next;
    let x0 = width, y0 = height, x1 = 0, y1 = 0, sum = 0, count = 0;
    while (top > 0) {
      const p = stack[--top]!;
      const x = p % width;
      const y = (p - x) / width;
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
      sum += probability[p]!;
      count++;
      if (x > 0 && !label[p - 1] && probability[p - 1]! > TEXT_THRESHOLD) (label[p - 1] = next), (stack[top++] = p - 1);
      if (x < width - 1 && !label[p + 1] && probability[p + 1]! > TEXT_THRESHOLD) (label[p + 1] = next), (stack[top++] = p + 1);
      if (y > 0 && !label[p - width] && probability[p - width]! > TEXT_THRESHOLD) (label[p - width] = next), (stack[top++] = p - width);
      if (y < height - 1 && !label[p + width] && probability[p + width]! > TEXT_THRESHOLD) (label[p + width] = next), (stack[top++] = p + width);
    }
    const w = x1 - x0 + 1;
    const h = y1 - y0 + 1;
    if (Math.min(w, h) < MIN_BOX_SIDE || sum / count < BOX_THRESHOLD) continue;
    // The detector marks a shrunk core of each line; grow it by area x ratio / perimeter, as DB does.
    const grow = (w * h * UNCLIP_RATIO) / (2 * (w + h));
    const gx0 = Math.max(0, x0 - grow);
    const gy0 = Math.max(0, y0 - grow);
    const gx1 = Math.min(width, x1 + 1 + grow);
    const gy1 = Math.min(height, y1 + 1 + grow);
    boxes.push({ x: gx0, y: gy0, width: gx1 - gx0, height: gy1 - gy0 });
  }
  return boxes;
}

/**
 * A text line cut out at `height` pixels, as wide as `widthOf` says for its natural width at that
 * height; the box is clipped to the raster first.
 */
function lineStrip(image: Raster, box: Box, height: number, widthOf: (natural: number) => number): Raster {
  const x0 = Math.max(0, Math.min(image.width - 1, box.x));
  const y0 = Math.max(0, Math.min(image.height - 1, box.y));
  const x1 = Math.max(x0 + 1, Math.min(image.width, box.x + box.width));
  const y1 = Math.max(y0 + 1, Math.min(image.height, box.y + box.height));
  const region = { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
  return resampleRegion(image, region, widthOf((height * region.width) / region.height), height);
}

/**
 * Writes a strip as the `n`-th image of an NCHW batch whose rows are `rowWidth` wide: BGR (as
 * PaddleOCR's models were trained), scaled to [-1, 1]; what lies right of the strip stays 0, mid
 * grey, PaddleOCR's padding.
 */
function writeStrip(input: Float32Array, n: number, strip: Raster, rowWidth: number): void {
  const plane = strip.height * rowWidth;
  for (let y = 0; y < strip.height; y++) {
    for (let x = 0; x < strip.width; x++) {
      const source = (y * strip.width + x) * 3;
      for (let c = 0; c < 3; c++) input[(n * 3 + c) * plane + y * rowWidth + x] = strip.data[source + (2 - c)]! / 127.5 - 1;
    }
  }
}

/** Lines seen: the direction classifier looks at this many of the widest. */
const CLS_LINES = 8;
const CLS_HEIGHT = 48;
const CLS_WIDTH = 192;

/**
 * How likely the text in these boxes is upside down: PP-OCR's direction classifier (0 or 180
 * degrees) on the widest lines, averaged. 0 when there are no boxes.
 */
export async function upsideDownProbability(image: Raster, boxes: readonly Box[]): Promise<number> {
  const widest = [...boxes].sort((a, b) => b.width - a.width).slice(0, CLS_LINES);
  if (widest.length === 0) return 0;
  const input = new Float32Array(widest.length * 3 * CLS_HEIGHT * CLS_WIDTH);
  widest.forEach((box, n) => writeStrip(input, n, lineStrip(image, box, CLS_HEIGHT, (natural) => Math.min(CLS_WIDTH, Math.max(1, Math.ceil(natural)))), CLS_WIDTH));
  const session = await onnxSession(CLASSIFIER_PATH);
  const output = await session.run({ x: new ort.Tensor('float32', input, [widest.length, 3, CLS_HEIGHT, CLS_WIDTH]) });
  const probabilities = Object.values(output)[0]!.data as Float32Array;
  let sum = 0;
  for (let n = 0; n < widest.length; n++) sum += probabilities[n * 2 + 1]!;
  return sum / widest.length;
}

/** Reads each box of an RGB raster; lines come back in the order of `boxes`. */
export async function recognizeText(image: Raster, boxes: readonly Box[]): Promise<TextLine[]> {
  const keys = alphabet();
  const session = await onnxSession(RECOGNIZER_PATH);
  const strips = boxes.map((box) => lineStrip(image, box, REC_HEIGHT, (natural) => Math.min(REC_MAX_WIDTH, Math.max(REC_HEIGHT / 2, Math.round(natural)))));
  // Batches of similar widths waste little on padding.
  const order = strips.map((_, index) => index).sort((a, b) => strips[a]!.width - strips[b]!.width);
  const lines: TextLine[] = new Array(boxes.length);
  for (let start = 0; start < order.length; ) {
    let end = start + 1;
    while (end < order.length && end - start < REC_BATCH && strips[order[end]!]!.width <= strips[order[start]!]!.width * REC_BATCH_SPREAD) end++;
    const batch = order.slice(start, end);
    start = end;
    const width = Math.max(...batch.map((index) => strips[index]!.width));
    const input = new Float32Array(batch.length * 3 * REC_HEIGHT * width);
    batch.forEach((index, n) => writeStrip(input, n, strips[index]!, width));
    // Only each time step's best class and its probability (models/ocr/fuse.py adds them to the
    // recognizer), not the whole distribution over 6,625 classes.
    const output = await session.run({ x: new ort.Tensor('float32', input, [batch.length, 3, REC_HEIGHT, width]) }, ['best_class', 'best_probability']);
    const best = output.best_class!;
    const steps = best.dims[1]!;
    const classes = best.data as BigInt64Array;
    const probabilities = output.best_probability!.data as Float32Array;
    batch.forEach((index, n) => {
      let text = '';
      let confidence = 0;
      let kept = 0;
      let previous = 0;
      for (let t = n * steps; t < (n + 1) * steps; t++) {
        const character = Number(classes[t]);
        if (character !== 0 && character !== previous) {
          text += keys[character] ?? '';
          confidence += probabilities[t]!;
          kept++;
        }
        previous = character;
      }
      lines[index] = { text: text.trim(), confidence: kept ? confidence / kept : 0, box: boxes[index]! };
    });
  }
  return lines;
}
