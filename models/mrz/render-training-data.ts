/**
 * Renders synthetic OCR-B MRZ text lines, degrades them the way phone photographs and scans do, and
 * cuts glyph crops with the reader's own code (src/vision/mrz/glyphs.ts), so the model is trained
 * on exactly the tensors it will see.
 *
 *   node --import tsx models/mrz/render-training-data.ts OUT_DIR [TRAIN_LINES] [VALIDATION_LINES]
 *
 * Writes OUT_DIR/{train,validation}.{x,y}.bin: x is N x 32 x 24 uint8 (ink 255), y is N class indices.
 * Uses the OCR-B fonts shipped in models/mrz/fonts (see the README there).
 */
import fs from 'node:fs';
import path from 'node:path';
import { createCanvas, GlobalFonts, type SKRSContext2D } from '@napi-rs/canvas';
import sharp from 'sharp';
import {
  ALPHABET,
  GLYPH_HEIGHT,
  GLYPH_PIXELS,
  GLYPH_WIDTH,
  STRIP_CAP_HEIGHT,
  STRIP_MID_ROW,
  STRIP_ROWS,
  writeGlyphs,
} from '../../src/vision/mrz/glyphs.ts';
import { rectify, type GrayImage } from '../../src/vision/mrz/image.ts';
import { random as seededRandom } from '../random.ts';

const FONT_DIR = path.resolve(import.meta.dirname, 'fonts');
/** The plain and the sharp-cornered cuts; the others in the package are outline, inverted or oblique. */
const FONT_FILES = { OCRB: 'OCRB.otf', OCRBS: 'OCRBS.otf' } as const;
const LINE_LENGTH = 18;

export type Random = () => number;

/** The project's one seeded PRNG (mulberry32), shared with the benchmarks. */
export { seededRandom };

const uniform = (random: Random, low: number, high: number): number => low + (high - low) * random();
const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const gaussian = (random: Random): number => Math.sqrt(-2 * Math.log(random() + 1e-12)) * Math.cos(2 * Math.PI * random());

let registered = false;

export function registerOcrbFonts(): (keyof typeof FONT_FILES)[] {
  const families = Object.keys(FONT_FILES) as (keyof typeof FONT_FILES)[];
  if (registered) return families;
  for (const family of families) {
    const file = path.join(FONT_DIR, FONT_FILES[family]);
    GlobalFonts.registerFromPath(file, family);
  }
  registered = true;
  return families;
}

/** Cap height of OCR-B as a fraction of the font size, measured once from the font. */
export function capHeightRatio(family: string): number {
  const context = createCanvas(10, 10).getContext('2d');
  context.font = `100px ${family}`;
  return context.measureText('H').actualBoundingBoxAscent / 100;
}

const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const DIGITS = '0123456789';
/** Characters OCR-B tells apart by small details; drawn more often so the model sees them side by side. */
const CONFUSABLE = 'O0DQ8B1I5S2Z6GUV';

/** Text with the mix MRZ lines have: uniform characters, names split by '<', digit runs, filler runs. */
function lineText(random: Random, length: number): string {
  let text = '';
  while (text.length < length) {
    const kind = random();
    if (kind < 0.35) text += ALPHABET[Math.floor(random() * ALPHABET.length)];
    else if (kind < 0.45) text += pick(random, [...CONFUSABLE]);
    else if (kind < 0.65) for (let i = 0, n = 2 + Math.floor(random() * 7); i < n; i++) text += pick(random, [...LETTERS]);
    else if (kind < 0.85) for (let i = 0, n = 2 + Math.floor(random() * 6); i < n; i++) text += pick(random, [...DIGITS]);
    else text += '<'.repeat(1 + Math.floor(random() * 6));
  }
  return text.slice(0, length);
}

function paintBackground(context: SKRSContext2D, random: Random, width: number, height: number, paper: number): void {
  const gradient = context.createLinearGradient(0, 0, width * uniform(random, 0.3, 1), height * uniform(random, -1, 1));
  const shade = (value: number) => `rgb(${value},${value},${value})`;
  gradient.addColorStop(0, shade(paper));
  gradient.addColorStop(1, shade(Math.max(0, Math.round(paper - uniform(random, 0, 50)))));
  context.fillStyle = gradient;
  context.fillRect(0, 0, width, height);
  const curves = random() < 0.6 ? Math.floor(uniform(random, 1, 8)) : 0;
  for (let curve = 0; curve < curves; curve++) {
    const tone = Math.round(paper - uniform(random, 10, 70));
    context.strokeStyle = shade(Math.max(0, tone));
    context.lineWidth = uniform(random, 0.4, 2);
    const amplitude = uniform(random, 2, height / 2);
    const period = uniform(random, 20, 200);
    const phase = uniform(random, 0, 6.3);
    const offset = uniform(random, 0, height);
    context.beginPath();
    for (let x = 0; x <= width; x += 3) {
      const y = offset + amplitude * Math.sin(x / period + phase);
      if (x === 0) context.moveTo(x, y);
      else context.lineTo(x, y);
    }
    context.stroke();
  }
}

function toGray(data: Uint8ClampedArray, width: number, height: number): Float32Array {
  const gray = new Float32Array(width * height);
  for (let i = 0; i < gray.length; i++) gray[i] = 0.299 * data[i * 4]! + 0.587 * data[i * 4 + 1]! + 0.114 * data[i * 4 + 2]!;
  return gray;
}

export function gaussianBlur(pixels: Float32Array, width: number, height: number, sigma: number): Float32Array {
  if (sigma < 0.3) return pixels;
  const radius = Math.ceil(sigma * 3);
  const kernel = Array.from({ length: 2 * radius + 1 }, (_, i) => Math.exp(-((i - radius) ** 2) / (2 * sigma * sigma)));
  const total = kernel.reduce((a, b) => a + b, 0);
  const weights = kernel.map((k) => k / total);
  const pass = (input: Float32Array, horizontal: boolean): Float32Array => {
    const output = new Float32Array(input.length);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        let sum = 0;
        for (let k = -radius; k <= radius; k++) {
          const sx = horizontal ? Math.min(width - 1, Math.max(0, x + k)) : x;
          const sy = horizontal ? y : Math.min(height - 1, Math.max(0, y + k));
          sum += weights[k + radius]! * input[sy * width + sx]!;
        }
        output[y * width + x] = sum;
      }
    }
    return output;
  };
  return pass(pass(pixels, true), false);
}

async function jpegRoundTrip(pixels: Uint8Array, width: number, height: number, quality: number): Promise<Uint8Array> {
  const jpeg = await sharp(pixels, { raw: { width, height, channels: 1 } }).jpeg({ quality }).toBuffer();
  const { data } = await sharp(jpeg).greyscale().raw().toBuffer({ resolveWithObject: true });
  return new Uint8Array(data.buffer, data.byteOffset, data.length);
}

export interface RenderedLine {
  image: GrayImage;
  text: string;
  centersX: number[];
  midY: number;
  capHeight: number;
  pitch: number;
}

/** One degraded line of OCR-B text with the exact centre of each character. */
export async function renderLine(random: Random, families: readonly string[], capRatios: Record<string, number>): Promise<RenderedLine> {
  const family = pick(random, families);
  const capHeight = Math.exp(uniform(random, Math.log(8), Math.log(38)));
  const pitch = capHeight * uniform(random, 0.95, 1.3);
  const text = lineText(random, LINE_LENGTH);
  const margin = 2 * pitch;
  const width = Math.ceil(LINE_LENGTH * pitch + 2 * margin);
  const height = Math.ceil(5 * capHeight);
  const midY = height / 2 + uniform(random, -0.3, 0.3) * capHeight;
  const canvas = createCanvas(width, height);
  const context = canvas.getContext('2d');
  const paper = Math.round(uniform(random, 140, 255));
  paintBackground(context, random, width, height, paper);
  const ink = Math.round(uniform(random, 0, Math.max(10, Math.min(110, paper - 80))));
  context.fillStyle = `rgb(${ink},${ink},${ink})`;
  context.strokeStyle = context.fillStyle;
  context.font = `${capHeight / capRatios[family]!}px ${family}`;
  context.textAlign = 'center';
  context.textBaseline = 'alphabetic';
  const bold = random() < 0.35 ? uniform(random, 0.02, 0.1) * capHeight : 0;
  context.lineWidth = bold;
  const startX = margin + pitch / 2;
  const centersX: number[] = [];
  const drawRow = (row: string, baseline: number, record: boolean) => {
    for (let i = 0; i < row.length; i++) {
      const x = startX + i * pitch + gaussian(random) * 0.015 * pitch;
      context.fillText(row[i]!, x, baseline);
      if (bold > 0) context.strokeText(row[i]!, x, baseline);
      if (record) centersX.push(x);
    }
  };
  drawRow(text, midY + capHeight / 2, true);
  if (random() < 0.5) {
    const spacing = uniform(random, 1.45, 2.2) * capHeight;
    drawRow(lineText(random, LINE_LENGTH), midY - spacing + capHeight / 2, false);
    drawRow(lineText(random, LINE_LENGTH), midY + spacing + capHeight / 2, false);
  }
  const rgba = context.getImageData(0, 0, width, height).data;
  let pixels = toGray(rgba, width, height);
  pixels = gaussianBlur(pixels, width, height, random() < 0.8 ? uniform(random, 0, 0.13) * capHeight + uniform(random, 0, 0.5) : 0);
  if (random() < 0.3) {
    // Ink spread or thinning: a soft threshold moves stroke edges, as over- or under-exposure does.
    const level = uniform(random, ink + 0.3 * (paper - ink), ink + 0.7 * (paper - ink));
    const softness = uniform(random, 0.04, 0.15) * (paper - ink);
    for (let i = 0; i < pixels.length; i++) pixels[i] = ink + (paper - ink) / (1 + Math.exp(-(pixels[i]! - level) / softness));
  }
  const shadow = random() < 0.4;
  const shadowAngle = uniform(random, 0, Math.PI * 2);
  const shadowDepth = uniform(random, 0.2, 0.6);
  // Keep the text legible to a person: at least 60 grey levels of contrast, noise well below it.
  const contrast = uniform(random, Math.min(1, 60 / (paper - ink)), 1.1);
  const noise = random() < 0.8 ? uniform(random, 0, Math.min(14, (contrast * (paper - ink)) / 6)) : 0;
  const bytes = new Uint8Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let value = 128 + (pixels[y * width + x]! - 128) * contrast;
      if (shadow) {
        const along = (x / width) * Math.cos(shadowAngle) + (y / height) * Math.sin(shadowAngle);
        value *= 1 - shadowDepth * Math.max(0, Math.min(1, along));
      }
      value += noise * gaussian(random);
      bytes[y * width + x] = value < 0 ? 0 : value > 255 ? 255 : Math.round(value);
    }
  }
  const degraded = random() < 0.75 ? await jpegRoundTrip(bytes, width, height, Math.round(uniform(random, 25, 95))) : bytes;
  return { image: { width, height, data: degraded }, text, centersX, midY, capHeight, pitch };
}

/**
 * Cuts the glyphs of a rendered line the way the reader does after locating it, with the errors the
 * locator makes: cap height off by up to 10 %, the angle by 1.5 degrees, centres by a tenth of a pitch.
 */
export function cutGlyphs(random: Random, line: RenderedLine, out: Float32Array): void {
  const assumedCap = line.capHeight * uniform(random, 0.9, 1.1);
  const scale = assumedCap / STRIP_CAP_HEIGHT;
  const angle = (uniform(random, -1.5, 1.5) * Math.PI) / 180;
  const ux = Math.cos(angle);
  const uy = Math.sin(angle);
  const first = line.centersX[0]!;
  const last = line.centersX[line.centersX.length - 1]!;
  const middleX = (first + last) / 2;
  const middleY = line.midY + uniform(random, -0.08, 0.08) * line.capHeight;
  const halfLength = (last - first) / 2 + 1.5 * line.pitch;
  const frame = { originX: middleX - halfLength * ux, originY: middleY - halfLength * uy, ux, uy, scale };
  const stripWidth = Math.ceil((2 * halfLength) / scale);
  const strip = rectify(line.image, frame, stripWidth, STRIP_ROWS, STRIP_MID_ROW);
  const centersX: number[] = [];
  const centersY: number[] = [];
  const stripPitch = line.pitch / scale;
  for (const x of line.centersX) {
    const dx = x - frame.originX;
    const dy = line.midY - frame.originY;
    centersX.push((dx * ux + dy * uy) / scale + uniform(random, -0.1, 0.1) * stripPitch);
    centersY.push((-dx * uy + dy * ux) / scale + STRIP_MID_ROW + uniform(random, -0.06, 0.06) * STRIP_CAP_HEIGHT);
  }
  writeGlyphs(strip, centersX, centersY, stripPitch, out);
}

async function writeSet(outDir: string, name: string, lines: number, seed: number, families: readonly string[], capRatios: Record<string, number>): Promise<number> {
  const random = seededRandom(seed);
  const x = Buffer.alloc(lines * LINE_LENGTH * GLYPH_PIXELS);
  const y = Buffer.alloc(lines * LINE_LENGTH);
  const glyphs = new Float32Array(LINE_LENGTH * GLYPH_PIXELS);
  for (let index = 0; index < lines; index++) {
    const line = await renderLine(random, families, capRatios);
    cutGlyphs(random, line, glyphs);
    const base = index * LINE_LENGTH;
    for (let i = 0; i < glyphs.length; i++) x[base * GLYPH_PIXELS + i] = Math.round(glyphs[i]! * 255);
    for (let i = 0; i < LINE_LENGTH; i++) y[base + i] = ALPHABET.indexOf(line.text[i]!);
  }
  fs.writeFileSync(path.join(outDir, `${name}.x.bin`), x);
  fs.writeFileSync(path.join(outDir, `${name}.y.bin`), y);
  return lines * LINE_LENGTH;
}

async function main(): Promise<void> {
  const [outDir, trainLines = '7000', validationLines = '700'] = process.argv.slice(2);
  if (!outDir) throw new Error('usage: render-training-data.ts OUT_DIR [TRAIN_LINES] [VALIDATION_LINES]');
  fs.mkdirSync(outDir, { recursive: true });
  const families = registerOcrbFonts();
  const capRatios = Object.fromEntries(families.map((family) => [family, capHeightRatio(family)]));
  const started = Date.now();
  const train = await writeSet(outDir, 'train', Number(trainLines), 1, families, capRatios);
  const validation = await writeSet(outDir, 'validation', Number(validationLines), 2, families, capRatios);
  const meta = { height: GLYPH_HEIGHT, width: GLYPH_WIDTH, classes: ALPHABET, train, validation };
  fs.writeFileSync(path.join(outDir, 'meta.json'), JSON.stringify(meta));
  console.log(`rendered ${train} training and ${validation} validation glyphs in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
