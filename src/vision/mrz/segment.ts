/**
 * Turns a located text line into a rectified strip and the centres of its fixed-pitch characters.
 * Two passes: the first strip measures the real cap height, residual tilt and ink extent; the second
 * is cut with those, so glyphs reach the model at the scale the model was trained on.
 */
import { STRIP_CAP_HEIGHT, STRIP_MID_ROW, STRIP_ROWS } from './glyphs.ts';
import { components, darkMask, rectify, type GrayImage } from './image.ts';
import type { TextLine } from './locate.ts';

/** Extra strip on each side of the ink, in cap heights, so the first and last glyph keep their context. */
const MARGIN = 1.5;

export interface LineStrip {
  strip: GrayImage;
  blobs: Blob[];
  /** Ink extent of the line in strip columns. */
  left: number;
  right: number;
}

interface Blob {
  minX: number;
  maxX: number;
  minY: number;
  maxY: number;
}

export interface GlyphGrid {
  centersX: number[];
  centersY: number[];
  pitch: number;
  /** Mean distance of the separately seen glyphs from the grid, in pitches: small when the count is right. */
  misfit: number;
}

/** `reversed` reads the line rotated by 180 degrees (an upside-down document). */
export function cutStrip(image: GrayImage, line: TextLine, reversed: boolean): LineStrip | null {
  let { centerX, centerY, halfLength, capHeight } = line;
  let ux = reversed ? -line.ux : line.ux;
  let uy = reversed ? -line.uy : line.uy;
  for (let pass = 0; pass < 2; pass++) {
    const scale = capHeight / STRIP_CAP_HEIGHT;
    const reach = halfLength + MARGIN * capHeight;
    const width = Math.max(8, Math.ceil((2 * reach) / scale));
    const frame = { originX: centerX - reach * ux, originY: centerY - reach * uy, ux, uy, scale };
    // The first pass only measures, so it skips supersampling.
    const strip = rectify(image, frame, width, STRIP_ROWS, STRIP_MID_ROW, pass === 1);
    const measured = measure(strip);
    if (!measured) return null;
    if (pass === 1) return { strip, blobs: measured.blobs, left: measured.left, right: measured.right };
    const tilt = Math.atan(measured.slope);
    const middleColumn = (measured.left + measured.right) / 2;
    const dx = middleColumn * scale - reach;
    const dy = (measured.midRowAt(middleColumn) - STRIP_MID_ROW) * scale;
    centerX += dx * ux - dy * uy;
    centerY += dx * uy + dy * ux;
    const cos = Math.cos(tilt);
    const sin = Math.sin(tilt);
    [ux, uy] = [ux * cos - uy * sin, ux * sin + uy * cos];
    halfLength = ((measured.right - measured.left) / 2) * scale;
    capHeight = (measured.capHeight / STRIP_CAP_HEIGHT) * capHeight;
  }
  return null;
}

interface Measurement {
  blobs: Blob[];
  left: number;
  right: number;
  capHeight: number;
  slope: number;
  midRowAt(column: number): number;
}

/**
 * Glyph blobs near the midline, the longest run of them without a gap wider than 2.2 caps (the MRZ
 * has no spaces, so such a gap is at most one glyph too faint to see; whatever lies beyond a wider
 * one is not part of it), and a line through the centres of the full-height glyphs for tilt and
 * vertical position.
 */
function measure(strip: GrayImage): Measurement | null {
  // A local-mean threshold, because light changes along a line (shadows, a curved page); the mask is
  // kept near the midline so the next line or a table beyond the document's edge cannot join glyphs.
  const mask = darkMask(strip, 2 * STRIP_CAP_HEIGHT + 1, 0.85, 15);
  mask.fill(0, 0, (STRIP_MID_ROW - STRIP_CAP_HEIGHT) * strip.width);
  mask.fill(0, (STRIP_MID_ROW + STRIP_CAP_HEIGHT) * strip.width);
  const found = components(mask, strip.width, strip.height);
  const candidates: Blob[] = [];
  for (let id = 0; id < found.count; id++) {
    const blob = { minX: found.minX[id]!, maxX: found.maxX[id]!, minY: found.minY[id]!, maxY: found.maxY[id]! };
    const height = blob.maxY - blob.minY + 1;
    if (height < 0.3 * STRIP_CAP_HEIGHT || height > 1.7 * STRIP_CAP_HEIGHT) continue;
    if (blob.minY > STRIP_MID_ROW + 0.25 * STRIP_CAP_HEIGHT || blob.maxY < STRIP_MID_ROW - 0.25 * STRIP_CAP_HEIGHT) continue;
    if (found.area[id]! < 6) continue;
    candidates.push(blob);
  }
  if (candidates.length < 5) return null;
  candidates.sort((a, b) => a.minX - b.minX);
  let best: Blob[] = [];
  let run: Blob[] = [];
  let reach = -Infinity;
  for (const blob of candidates) {
    if (blob.minX - reach > 2.2 * STRIP_CAP_HEIGHT) run = [];
    run.push(blob);
    reach = Math.max(reach, blob.maxX);
    if (extent(run) > extent(best)) best = run.slice();
  }
  const heights = best.map((blob) => blob.maxY - blob.minY + 1).sort((a, b) => a - b);
  // Capitals and digits, not the shorter '<' (0.86 of a capital in OCR-B), set the cap height.
  const tallest = heights[Math.floor(heights.length * 0.9)]!;
  const tall = best.filter((blob) => blob.maxY - blob.minY + 1 >= 0.9 * tallest);
  const fit = fitLine(tall.map((blob) => [(blob.minX + blob.maxX) / 2, (blob.minY + blob.maxY) / 2]));
  // Fewer than three glyphs give no trustworthy tilt: a level line through their mean height.
  const tilted = fit.n >= 3 && fit.slope !== null;
  const slope = tilted ? fit.slope! : 0;
  const intercept = tilted ? fit.intercept! : fit.meanY;
  const capHeights = tall.map((blob) => blob.maxY - blob.minY + 1).sort((a, b) => a - b);
  return {
    blobs: best,
    left: best[0]!.minX,
    right: Math.max(...best.map((blob) => blob.maxX)),
    capHeight: capHeights[Math.floor(capHeights.length / 2)]!,
    slope,
    midRowAt: (column) => intercept + slope * column,
  };
}

function extent(run: Blob[]): number {
  if (run.length === 0) return -1;
  return Math.max(...run.map((blob) => blob.maxX)) - run[0]!.minX;
}

/** Average OCR-B glyph width in cap heights: the first and last centres sit this far inside the ink. */
const HALF_GLYPH = 0.31 * STRIP_CAP_HEIGHT;

/**
 * Places `count` characters on a fixed pitch across the ink: first from the ink ends, then by least
 * squares over the blobs that are one glyph each (blur merges some; those are left out).
 */
export function fitGrid(line: LineStrip, count: number): GlyphGrid {
  let start = line.left + HALF_GLYPH;
  let pitch = (line.right - line.left - 2 * HALF_GLYPH) / (count - 1);
  for (let iteration = 0; iteration < 3; iteration++) {
    const fit = fitOnce(line.blobs, count, start, pitch);
    if (!fit) break;
    ({ start, pitch } = fit);
  }
  const centersX = Array.from({ length: count }, (_, index) => start + index * pitch);
  return { centersX, centersY: centersX.map(() => STRIP_MID_ROW), pitch, misfit: misfitOf(line.blobs, count, start, pitch) };
}

function singleGlyphs(blobs: Blob[], pitch: number): number[] {
  return blobs.filter((blob) => blob.maxX - blob.minX + 1 <= 1.15 * pitch).map((blob) => (blob.minX + blob.maxX) / 2);
}

/** Least-squares line y = intercept + slope x; slope and intercept null when the xs do not vary. */
function fitLine(points: readonly (readonly [number, number])[]): { n: number; slope: number | null; intercept: number | null; meanY: number } {
  let sx = 0;
  let sy = 0;
  let sxx = 0;
  let sxy = 0;
  for (const [x, y] of points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const n = points.length;
  const denominator = n * sxx - sx * sx;
  const slope = denominator > 0 ? (n * sxy - sx * sy) / denominator : null;
  return { n, slope, intercept: slope === null ? null : (sy - slope * sx) / n, meanY: sy / n };
}

/** Least-squares start and pitch over the glyphs within 0.35 pitch of their grid position. */
function fitOnce(blobs: Blob[], count: number, start: number, pitch: number): { start: number; pitch: number } | null {
  const placed: [number, number][] = [];
  for (const x of singleGlyphs(blobs, pitch)) {
    const k = Math.round((x - start) / pitch);
    if (k >= 0 && k < count && Math.abs(x - (start + k * pitch)) <= 0.35 * pitch) placed.push([k, x]);
  }
  const fit = fitLine(placed);
  if (fit.n < 4 || fit.slope === null) return null;
  return { start: fit.intercept!, pitch: fit.slope };
}

/** Mean distance of the single glyphs from their nearest grid position, in pitches; 1 when too few are seen. */
function misfitOf(blobs: Blob[], count: number, start: number, pitch: number): number {
  const xs = singleGlyphs(blobs, pitch);
  if (xs.length < 4) return 1;
  let total = 0;
  for (const x of xs) {
    const k = Math.min(count - 1, Math.max(0, Math.round((x - start) / pitch)));
    total += Math.abs(x - (start + k * pitch));
  }
  return total / xs.length / pitch;
}
