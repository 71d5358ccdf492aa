/**
 * Finds MRZ candidates in a photograph: dark glyphs from a local-mean threshold (uneven light),
 * chained left to right into text lines at any angle up to about 20 degrees, then grouped into bands
 * of two or three parallel lines of equal length and even spacing, which is what an MRZ looks like
 * and little else on a document does. Works on a scaled-down copy; results are in the coordinates of
 * the image passed in.
 */
import { components, darkMask, type GrayImage } from './image.ts';

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
  /** The connected component it comes from (a wide one yields several glyphs). */
  component: number;
  minX: number;
  maxX: number;
  minY: number;
  maxY: number;
  cx: number;
  cy: number;
  height: number;
}

/** `scaled` is `image` or a smaller copy of it (see readMrz for the copies searched). */
export function locateBands(image: GrayImage, scaled: GrayImage): Band[] {
  const factor = image.width / scaled.width;
  const side = Math.max(scaled.width, scaled.height);
  const mask = darkMask(scaled, Math.max(15, Math.round(side / 30)), 0.88, 12);
  const glyphs = findGlyphs(mask, scaled.width, scaled.height, side);
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
    if (h < 4 || h > maxHeight || area < 6 || area < 0.1 * w * h) continue;
    // Blur merges neighbouring glyphs (runs of '<' first, whole lines of small print at worst); a wide
    // blob stands in for as many glyphs as fit, provided it is as solid as merged print is.
    if (w > 5 * h && area < 0.3 * w * h) continue;
    const pieces = w > 1.6 * h ? Math.min(60, Math.round(w / (0.9 * h))) : 1;
    for (let piece = 0; piece < pieces; piece++) {
      const left = minX + (piece * w) / pieces;
      const right = minX + ((piece + 1) * w) / pieces - 1;
      glyphs.push({
        component: id,
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

/** Largest gap between linked glyphs, in glyph heights: one glyph too faint to be seen, in blurred print. */
const MAX_GAP = 2;
/** An MRZ line has 30 to 44 glyphs; allowing for some lost to blur, shorter chains are other text. */
const MIN_LINE_GLYPHS = 18;
/** Fewer separate blobs than this is a stripe or an edge, not print, however many glyphs it spans. */
const MIN_LINE_COMPONENTS = 8;
/** OCR-B's '<' is 0.86 of a capital; blur shrinks small glyphs' cores further. */
const MAX_HEIGHT_RATIO = 2.2;

/**
 * Links each glyph to its nearest right neighbour of similar height on about the same row, so text
 * lines come out as connected groups.
 */
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
      const gap = right.minX - left.maxX;
      if (gap > MAX_GAP * MAX_HEIGHT_RATIO * left.height) break;
      const tallest = Math.max(left.height, right.height);
      if (gap > MAX_GAP * tallest || gap >= bestGap || right.cx <= left.cx) continue;
      if (tallest > MAX_HEIGHT_RATIO * Math.min(left.height, right.height)) continue;
      const dx = right.cx - left.cx;
      if (Math.abs(right.cy - left.cy) > 0.36 * dx + 0.2 * tallest) continue;
      best = b;
      bestGap = gap;
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
    if (members.length < MIN_LINE_GLYPHS || new Set(members.map((glyph) => glyph.component)).size < MIN_LINE_COMPONENTS) continue;
    const line = fitLine(members);
    if (line && line.halfLength * 2 >= 16 * line.capHeight) lines.push(line);
  }
  return lines;
}

interface Axis {
  meanX: number;
  meanY: number;
  ux: number;
  uy: number;
}

function principalAxis(members: Glyph[]): Axis {
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
  return { meanX, meanY, ux: Math.cos(angle), uy: Math.sin(angle) };
}

const offsetFrom = (axis: Axis, glyph: Glyph) => Math.abs(-(glyph.cx - axis.meanX) * axis.uy + (glyph.cy - axis.meanY) * axis.ux);

/**
 * Principal axis through the glyph centres, refitted without the glyphs far off it (a photograph
 * or a printed field next to the MRZ can get chained to its end); cap height from the taller glyphs
 * (digits and capitals).
 */
function fitLine(chained: Glyph[]): TextLine | null {
  let members = chained;
  let axis = principalAxis(members);
  for (let round = 0; round < 3; round++) {
    const offsets = members.map((glyph) => offsetFrom(axis, glyph));
    const median = [...offsets].sort((a, b) => a - b)[Math.floor(offsets.length / 2)]!;
    const limit = Math.max(2 * median, 0.15 * medianHeight(members));
    const kept = members.filter((_, index) => offsets[index]! <= limit);
    if (kept.length === members.length || kept.length < MIN_LINE_GLYPHS) break;
    members = kept;
    axis = principalAxis(members);
  }
  const { meanX, meanY, ux, uy } = axis;
  if (Math.abs(Math.atan2(uy, ux)) > (25 * Math.PI) / 180) return null;
  let minS = Infinity;
  let maxS = -Infinity;
  let offsetSum = 0;
  for (const glyph of members) {
    const halfWidth = (glyph.maxX - glyph.minX + 1) / 2;
    const s = (glyph.cx - meanX) * ux + (glyph.cy - meanY) * uy;
    minS = Math.min(minS, s - halfWidth);
    maxS = Math.max(maxS, s + halfWidth);
    offsetSum += offsetFrom(axis, glyph);
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

function medianHeight(members: Glyph[]): number {
  return members.map((glyph) => glyph.height).sort((a, b) => a - b)[Math.floor(members.length / 2)]!;
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

/**
 * The lines of an MRZ start and end together; a line whose end was lost (trimmed with a photograph it
 * touched, or too faint) gets the extent of the others. The strip is cut from it, and its own ink
 * decides where the characters are.
 */
function sharedExtent(lines: TextLine[]): TextLine[] {
  const reference = lines[0]!;
  const along = (line: TextLine, sign: number) =>
    (line.centerX - reference.centerX) * reference.ux + (line.centerY - reference.centerY) * reference.uy + sign * line.halfLength;
  const start = Math.min(...lines.map((line) => along(line, -1)));
  const end = Math.max(...lines.map((line) => along(line, 1)));
  return lines.map((line) => {
    const shift = (start + end) / 2 - (along(line, -1) + along(line, 1)) / 2;
    return { ...line, centerX: line.centerX + shift * line.ux, centerY: line.centerY + shift * line.uy, halfLength: (end - start) / 2 };
  });
}

function groupBands(lines: TextLine[]): Band[] {
  const bands: Band[] = [];
  const lengthScore = (members: TextLine[]) => members.reduce((sum, line) => sum + (2 * line.halfLength) / line.capHeight, 0);
  for (const upper of lines) {
    for (const middle of lines) {
      if (middle === upper) continue;
      const spacing = follows(upper, middle);
      if (spacing === null) continue;
      bands.push({ lines: sharedExtent([upper, middle]), score: lengthScore([upper, middle]) });
      for (const lower of lines) {
        if (lower === upper || lower === middle) continue;
        const next = follows(middle, lower);
        if (next === null || Math.abs(next - spacing) > 0.3 * spacing) continue;
        bands.push({ lines: sharedExtent([upper, middle, lower]), score: lengthScore([upper, middle, lower]) });
      }
    }
  }
  return bands.sort((a, b) => b.score - a.score).slice(0, MAX_CANDIDATES);
}
