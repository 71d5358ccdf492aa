/**
 * Finds MRZ candidates in a photograph: dark glyphs from a local-mean threshold (uneven light),
 * chained left to right into text lines at any angle up to about 20 degrees, then grouped into bands
 * of two or three parallel lines of equal length and even spacing, which is what an MRZ looks like
 * and little else on a document does. Works on a scaled-down copy; results are in the coordinates of
 * the image passed in.
 */
import { components, darkMask, downscale, type GrayImage } from './image.ts';

const MAX_CANDIDATES = 8;

export interface TextLine {
  /** Midpoint of the line's midline. */
  centerX: number;
  centerY: number;
  /** Unit reading direction (left to right as the image shows it). */
  ux: number;
  uy: number;
  /** Ink extent along the direction, from the midpoint. */
  halfLength: number;
  /** Rough cap height; the reader measures it again on the rectified strip. */
  capHeight: number;
  glyphs: number;
}

export interface Band {
  /** Top to bottom as the image shows them. */
  lines: TextLine[];
  score: number;
}

interface Glyph {
  minX: number;
  maxX: number;
  minY: number;
  maxY: number;
  cx: number;
  cy: number;
  height: number;
}

/**
 * Long sides of the copies searched, coarse first: the coarse copy is quick and enough for a document
 * that fills much of the photograph; the fine one finds an MRZ whose capitals are only a few pixels tall.
 */
export const LOCATE_SIDES = [800, 1600] as const;

export function locateBands(image: GrayImage, longSide: number = LOCATE_SIDES[0]): Band[] {
  const factor = Math.max(1, Math.max(image.width, image.height) / longSide);
  const small = downscale(image, factor);
  const side = Math.max(small.width, small.height);
  const mask = darkMask(small, Math.max(15, Math.round(side / 30)), 0.88, 12);
  const glyphs = findGlyphs(mask, small.width, small.height, side);
  const lines = chainLines(glyphs).map((line) => scaleLine(line, factor));
  return groupBands(lines);
}

function findGlyphs(mask: Uint8Array, width: number, height: number, longSide: number): Glyph[] {
  const found = components(mask, width, height);
  const glyphs: Glyph[] = [];
  const maxHeight = longSide / 12;
  for (let id = 0; id < found.count; id++) {
    const minX = found.minX[id]!;
    const w = found.maxX[id]! - minX + 1;
    const h = found.maxY[id]! - found.minY[id]! + 1;
    const area = found.area[id]!;
    if (h < 5 || h > maxHeight || area < 8 || area < 0.1 * w * h || w > 12 * h) continue;
    if (w > 5 * h && area < 0.2 * w * h) continue;
    // Blur merges neighbouring glyphs (runs of '<' first); a wide blob stands in for as many glyphs as fit.
    const pieces = w > 1.6 * h ? Math.round(w / (0.9 * h)) : 1;
    for (let piece = 0; piece < pieces; piece++) {
      const left = minX + (piece * w) / pieces;
      const right = minX + ((piece + 1) * w) / pieces - 1;
      glyphs.push({
        minX: left,
        maxX: right,
        minY: found.minY[id]!,
        maxY: found.maxY[id]!,
        cx: (left + right) / 2,
        cy: (found.minY[id]! + found.maxY[id]!) / 2,
        height: h,
      });
    }
  }
  return glyphs.sort((a, b) => a.minX - b.minX);
}

/** Links each glyph to its nearest right neighbour of similar height on about the same row. */
function chainLines(glyphs: Glyph[]): TextLine[] {
  const parent = glyphs.map((_, index) => index);
  const find = (index: number): number => {
    while (parent[index] !== index) {
      parent[index] = parent[parent[index]!]!;
      index = parent[index]!;
    }
    return index;
  };
  for (let a = 0; a < glyphs.length; a++) {
    const left = glyphs[a]!;
    let best = -1;
    let bestGap = Infinity;
    for (let b = a + 1; b < glyphs.length; b++) {
      const right = glyphs[b]!;
      const tallest = Math.max(left.height, right.height);
      if (right.minX - left.maxX > 1.2 * tallest) break;
      if (right.cx <= left.cx) continue;
      if (tallest > 2.2 * Math.min(left.height, right.height)) continue;
      const dx = right.cx - left.cx;
      if (Math.abs(right.cy - left.cy) > 0.36 * dx + 0.2 * tallest) continue;
      const gap = right.minX - left.maxX;
      if (gap < bestGap) {
        bestGap = gap;
        best = b;
      }
    }
    if (best >= 0) parent[find(best)] = find(a);
  }
  const groups = new Map<number, Glyph[]>();
  for (let index = 0; index < glyphs.length; index++) {
    const root = find(index);
    const group = groups.get(root);
    if (group) group.push(glyphs[index]!);
    else groups.set(root, [glyphs[index]!]);
  }
  const lines: TextLine[] = [];
  for (const members of groups.values()) {
    if (members.length < 10) continue;
    const line = fitLine(members);
    if (line && line.halfLength * 2 >= 16 * line.capHeight) lines.push(line);
  }
  return lines;
}

/** Principal axis through the glyph centres; cap height from the taller glyphs (digits and capitals). */
function fitLine(members: Glyph[]): TextLine | null {
  let meanX = 0;
  let meanY = 0;
  for (const glyph of members) {
    meanX += glyph.cx;
    meanY += glyph.cy;
  }
  meanX /= members.length;
  meanY /= members.length;
  let sxx = 0;
  let sxy = 0;
  let syy = 0;
  for (const glyph of members) {
    const dx = glyph.cx - meanX;
    const dy = glyph.cy - meanY;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  const angle = 0.5 * Math.atan2(2 * sxy, sxx - syy);
  const ux = Math.cos(angle);
  const uy = Math.sin(angle);
  if (Math.abs(angle) > (25 * Math.PI) / 180) return null;
  let minS = Infinity;
  let maxS = -Infinity;
  let offsetSum = 0;
  for (const glyph of members) {
    const halfWidth = (glyph.maxX - glyph.minX + 1) / 2;
    const s = (glyph.cx - meanX) * ux + (glyph.cy - meanY) * uy;
    minS = Math.min(minS, s - halfWidth);
    maxS = Math.max(maxS, s + halfWidth);
    offsetSum += Math.abs(-(glyph.cx - meanX) * uy + (glyph.cy - meanY) * ux);
  }
  const heights = members.map((glyph) => glyph.height).sort((a, b) => a - b);
  const tall = heights[Math.floor(heights.length * 0.75)]!;
  // A bounding box of a tilted glyph is taller than the glyph; width is about 0.6 cap heights.
  const capHeight = tall / (Math.abs(ux) + 0.6 * Math.abs(uy));
  if (offsetSum / members.length > 0.45 * capHeight) return null;
  const middle = (minS + maxS) / 2;
  return {
    centerX: meanX + middle * ux,
    centerY: meanY + middle * uy,
    ux,
    uy,
    halfLength: (maxS - minS) / 2,
    capHeight,
    glyphs: members.length,
  };
}

function scaleLine(line: TextLine, factor: number): TextLine {
  return {
    ...line,
    centerX: (line.centerX + 0.5) * factor - 0.5,
    centerY: (line.centerY + 0.5) * factor - 0.5,
    halfLength: line.halfLength * factor,
    capHeight: line.capHeight * factor,
  };
}

/** Lines in the same band: parallel, of about the same length, one under the other at 1.2 to 3.5 cap heights. */
function follows(upper: TextLine, lower: TextLine): number | null {
  const cross = upper.ux * lower.uy - upper.uy * lower.ux;
  if (Math.abs(cross) > Math.sin((5 * Math.PI) / 180)) return null;
  const cap = (upper.capHeight + lower.capHeight) / 2;
  if (Math.max(upper.capHeight, lower.capHeight) > 1.5 * Math.min(upper.capHeight, lower.capHeight)) return null;
  const dx = lower.centerX - upper.centerX;
  const dy = lower.centerY - upper.centerY;
  const across = -dx * upper.uy + dy * upper.ux;
  const along = dx * upper.ux + dy * upper.uy;
  if (across < 1.2 * cap || across > 3.5 * cap) return null;
  const longer = Math.max(upper.halfLength, lower.halfLength);
  if (Math.min(upper.halfLength, lower.halfLength) < 0.75 * longer) return null;
  if (Math.abs(along) + Math.abs(upper.halfLength - lower.halfLength) > 0.4 * longer) return null;
  return across / cap;
}

function groupBands(lines: TextLine[]): Band[] {
  const bands: Band[] = [];
  const lengthScore = (members: TextLine[]) => members.reduce((sum, line) => sum + (2 * line.halfLength) / line.capHeight, 0);
  for (const upper of lines) {
    for (const middle of lines) {
      if (middle === upper) continue;
      const spacing = follows(upper, middle);
      if (spacing === null) continue;
      bands.push({ lines: [upper, middle], score: lengthScore([upper, middle]) });
      for (const lower of lines) {
        if (lower === upper || lower === middle) continue;
        const next = follows(middle, lower);
        if (next === null || Math.abs(next - spacing) > 0.3 * spacing) continue;
        bands.push({ lines: [upper, middle, lower], score: lengthScore([upper, middle, lower]) });
      }
    }
  }
  return bands.sort((a, b) => b.score - a.score).slice(0, MAX_CANDIDATES);
}
