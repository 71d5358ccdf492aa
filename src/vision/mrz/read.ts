/**
 * readMrz: photograph in, MRZ lines and fields out. Pure apart from sharp and onnxruntime, so it runs
 * the same in a piscina worker, the CLI and the tests.
 *
 * sharp.concurrency is left to the process that owns the threads: the vision worker entry sets
 * `sharp.concurrency(1)` (ARCHITECTURE.md: intra-op threads times workers must not exceed the cores);
 * setting it here would also throttle sharp in the main thread of whoever imports this module.
 */
import sharp from 'sharp';
import { asBuffer, decodeImage, DEFAULT_MAX_PIXELS, inspectImage } from '../image.ts';
import { decode, emptyFields, type Correction, type Decoded, type MrzFields, type MrzFormat } from './decode.ts';
import { GLYPH_PIXELS, STRIP_CAP_HEIGHT, writeGlyphs } from './glyphs.ts';
import type { GrayImage } from './image.ts';
import { locateBands, type Band } from './locate.ts';
import { classify } from './model.ts';
import { cutStrip, fitGrid, type GlyphGrid, type LineStrip } from './segment.ts';

export type { MrzFields, MrzFormat, Correction };

export interface MrzReadOptions {
  /** Refuse images with more pixels than this (decompression bombs); default 40 megapixels. */
  maxPixels?: number;
  /**
   * Photographs at least four times this on their long side are read at the largest power-of-two
   * reduction that keeps it (so 1000 to 2000 px): sharp then decodes a JPEG at half size or less,
   * much faster than in full. Smaller ones are read as they are, since a reduction by two costs more
   * than it saves. Default 1000.
   */
  minSide?: number;
}

export interface MrzReadResult {
  found: boolean;
  lines: string[];
  format: MrzFormat | null;
  /** Every check digit holds (per the `mrz` library). */
  valid: boolean;
  fields: MrzFields;
  invalid_fields: string[];
  /** Characters changed from the model's first choice to its runner-up to satisfy a check digit. */
  corrections: Correction[];
  /** Mean model probability of the characters read, 0 when nothing was found. */
  confidence: number;
  timings: { decode_ms: number; locate_ms: number; recognize_ms: number; parse_ms: number; total_ms: number };
}

const DEFAULT_READ_SIDE = 1000;
/** Below these a read is taken for text that merely looks like an MRZ band. */
const MIN_CONFORMITY = 0.85;
const MIN_CONFIDENCE = 0.6;
/** Mean distance of glyphs from the fitted grid, in pitches, under which the character count is clear. */
const CLEAR_FIT = 0.12;
/** Enough for the MRZ and a few look-alike bands; bounds the time spent on photographs without one. */
const MAX_ATTEMPTS = 10;

/**
 * Reads the MRZ of a document photograph (JPEG, PNG, WebP, TIFF, ...). Throws ImageError for an
 * image that cannot be used; an image without a readable MRZ gives `found: false`. Accepts the
 * ArrayBuffer a piscina task receives through `Piscina.move()` as well as a Buffer.
 */
export async function readMrz(image: Buffer | Uint8Array | ArrayBuffer, options: MrzReadOptions = {}): Promise<MrzReadResult> {
  const started = performance.now();
  const bytes = asBuffer(image);
  const gray = await decodeGray(bytes, options.maxPixels ?? DEFAULT_MAX_PIXELS, options.minSide ?? DEFAULT_READ_SIDE);
  const decoded = performance.now();
  const search: Search = { best: null, attempts: 0, tried: [], locate: 0, recognize: 0, parse: 0 };
  let found: Decoded | null = null;
  for (const copy of searchCopies(gray)) {
    const locateStart = performance.now();
    const bands = locateBands(gray, await copy());
    search.locate += performance.now() - locateStart;
    found = await readBands(gray, bands, search);
    if (found) break;
  }
  const best = found ?? search.best;
  const total = performance.now() - started;
  const timings = {
    decode_ms: round(decoded - started),
    locate_ms: round(search.locate),
    recognize_ms: round(search.recognize),
    parse_ms: round(search.parse),
    total_ms: round(total),
  };
  if (!best) {
    return { found: false, lines: [], format: null, valid: false, fields: emptyFields(), invalid_fields: [], corrections: [], confidence: 0, timings };
  }
  return {
    found: true,
    lines: best.lines,
    format: best.format,
    valid: best.valid,
    fields: best.fields,
    invalid_fields: best.invalid_fields,
    corrections: best.corrections,
    confidence: round(best.confidence, 3),
    timings,
  };
}

/**
 * Large photographs are read at the largest power-of-two reduction that keeps `minSide` on the long
 * side: sharp then decodes a JPEG at half size or less, much faster than in full.
 */
async function decodeGray(input: Buffer, maxPixels: number, minSide: number): Promise<GrayImage> {
  const metadata = await inspectImage(input, { maxPixels });
  const longSide = Math.max(metadata.width ?? 0, metadata.height ?? 0);
  const reduction = longSide >= 4 * minSide ? 2 ** Math.floor(Math.log2(longSide / minSide)) : 1;
  const raster = await decodeImage(input, { channels: 1, maxPixels, maxSide: reduction > 1 ? Math.ceil(longSide / reduction) : undefined });
  return { width: raster.width, height: raster.height, data: raster.data };
}

/** Coarse search copies are halved until their long side is below this. */
const COARSE_BELOW = 1000;
/** The fine search copy's long side at most. */
const FINE_SIDE = 1600;

/**
 * The copies of the photograph the locator searches, coarse first: halved (2 x 2 pixel means) until
 * the long side is under 1000 px, which is quick and enough for an MRZ whose capitals are 9 px or
 * more in the photograph; then, when that was a reduction, the photograph itself (shrunk to 1600 px
 * by libvips when larger), which finds capitals of only a few pixels.
 */
function searchCopies(image: GrayImage): (() => Promise<GrayImage>)[] {
  let coarse = image;
  while (Math.max(coarse.width, coarse.height) >= COARSE_BELOW) coarse = halve(coarse);
  if (coarse === image) return [async () => image];
  return [async () => coarse, () => shrink(image, FINE_SIDE)];
}

/** Each pixel the mean of a 2 x 2 block: cheaper than a libvips resize, which costs a thread round trip and more. */
function halve(image: GrayImage): GrayImage {
  const width = image.width >> 1;
  const height = image.height >> 1;
  const out = new Uint8Array(width * height);
  const { data, width: stride } = image;
  for (let y = 0; y < height; y++) {
    let source = 2 * y * stride;
    let target = y * width;
    for (let x = 0; x < width; x++, source += 2, target++) {
      out[target] = (data[source]! + data[source + 1]! + data[source + stride]! + data[source + stride + 1]! + 2) >> 2;
    }
  }
  return { width, height, data: out };
}

/** libvips resamples several times faster than JavaScript, and off the event loop. */
async function shrink(image: GrayImage, longSide: number): Promise<GrayImage> {
  if (Math.max(image.width, image.height) <= longSide) return image;
  const { data, info } = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: 1 } })
    .resize({ width: longSide, height: longSide, fit: 'inside' })
    .greyscale()
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.channels !== 1) throw new Error(`expected one channel, got ${info.channels}`);
  return { width: info.width, height: info.height, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
}

interface Search {
  /** The most confident MRZ-like read whose check digits fail, kept in case nothing better turns up. */
  best: Decoded | null;
  attempts: number;
  tried: Band[];
  locate: number;
  recognize: number;
  parse: number;
}

/**
 * Reads bands best first, each as shown and then turned 180 degrees, and for two-line bands as 44 and
 * as 36 characters (the count whose grid fits the glyphs first). Returns the first read whose check
 * digits hold; bands already read at another scale are skipped.
 */
async function readBands(image: GrayImage, bands: Band[], search: Search): Promise<Decoded | null> {
  for (const band of bands) {
    if (search.tried.some((tried) => sameBand(tried, band))) continue;
    search.tried.push(band);
    for (const reversed of [false, true]) {
      if (search.attempts >= MAX_ATTEMPTS) return null;
      const recognizeStart = performance.now();
      const ordered = reversed ? [...band.lines].reverse() : band.lines;
      const strips: LineStrip[] = [];
      for (const line of ordered) {
        const strip = cutStrip(image, line, reversed);
        if (strip) strips.push(strip);
      }
      search.recognize += performance.now() - recognizeStart;
      if (strips.length !== ordered.length) continue;
      const counts = strips.length === 3 ? [30] : [44, 36];
      const layouts = counts
        .map((count) => ({ count, grids: strips.map((strip) => fitGrid(strip, count)) }))
        .filter(({ grids }) => grids.every((grid) => plausiblePitch(grid)))
        .sort((a, b) => misfit(a.grids) - misfit(b.grids));
      // When one count puts the grid on the glyphs, a worse-fitting count is not worth a model run.
      const fitting = layouts.filter(({ grids }, index) => index === 0 || misfit(grids) < CLEAR_FIT || misfit(layouts[0]!.grids) >= CLEAR_FIT);
      for (const { count, grids } of fitting) {
        search.attempts++;
        const read = await recognize(strips, grids, count, search);
        // Check digits alone are weak evidence (one in ten holds by chance); the read must also look like an MRZ.
        if (!read || read.conformity < MIN_CONFORMITY || read.confidence < MIN_CONFIDENCE) continue;
        if (read.valid) return read;
        if (!search.best || read.confidence > search.best.confidence) search.best = read;
      }
    }
  }
  return null;
}

function sameBand(a: Band, b: Band): boolean {
  if (a.lines.length !== b.lines.length) return false;
  return a.lines.every((line, index) => {
    const other = b.lines[index]!;
    return Math.hypot(line.centerX - other.centerX, line.centerY - other.centerY) < 0.5 * line.capHeight;
  });
}

/** OCR-B on documents: the pitch is about 0.9 to 1.4 cap heights; a grid outside that has the wrong count. */
function plausiblePitch(grid: GlyphGrid): boolean {
  return grid.pitch >= 0.85 * STRIP_CAP_HEIGHT && grid.pitch <= 1.5 * STRIP_CAP_HEIGHT;
}

function misfit(grids: GlyphGrid[]): number {
  return grids.reduce((sum, grid) => sum + grid.misfit, 0) / grids.length;
}

async function recognize(strips: LineStrip[], grids: GlyphGrid[], count: number, timing: Pick<Search, 'recognize' | 'parse'>): Promise<Decoded | null> {
  const started = performance.now();
  const glyphs = new Float32Array(strips.length * count * GLYPH_PIXELS);
  strips.forEach((line, index) => {
    const grid = grids[index]!;
    writeGlyphs(line.strip, grid.centersX, grid.centersY, grid.pitch, glyphs.subarray(index * count * GLYPH_PIXELS));
  });
  const probabilities = await classify(glyphs, strips.length * count);
  const classified = performance.now();
  timing.recognize += classified - started;
  const read = decode(probabilities, strips.length, count);
  timing.parse += performance.now() - classified;
  return read;
}

function round(value: number, digits = 1): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

