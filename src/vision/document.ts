/**
 * Finding the document in a photograph and straightening it. The document's four edges are looked
 * for as straight lines (a Hough transform of the edge map); when two roughly parallel pairs form a
 * large enough quadrilateral, it is warped (a homography) onto a flat card of the nearest ICAO size.
 * Otherwise the document is taken to fill the frame (a scan, a close crop) and only its skew is
 * corrected, from the dominant direction of the strokes. Plain typed arrays, no native calls.
 */
import { resizeRaster, toGray, warp, type Point, type Raster } from './image.ts';

export interface Straightened {
  image: Raster;
  /** How the document was found: its outline (corners in source pixels) or only a skew correction. */
  method: 'outline' | 'deskew' | 'none';
  corners: Point[] | null;
  /** Rotation applied by a deskew, degrees, counter-clockwise positive. */
  angle: number;
}

/** ID-1 cards (TD1, driving licences) and ID-3 passport pages: width / height. */
const ASPECTS = [85.6 / 53.98, 125 / 88];
const ANALYSIS_SIDE = 400;
/** The outline must cover this share of the photograph to be taken for the document. */
const MIN_AREA_SHARE = 0.2;
const OUTPUT_WIDTH = 1400;

/** Solves the 8x8 system for the homography taking `from` onto `to` (four points each); row-major 3x3. */
export function homography(from: readonly Point[], to: readonly Point[]): number[] {
  const a: number[][] = [];
  for (let i = 0; i < 4; i++) {
    const { x, y } = from[i]!;
    const { x: u, y: v } = to[i]!;
    a.push([x, y, 1, 0, 0, 0, -u * x, -u * y, u]);
    a.push([0, 0, 0, x, y, 1, -v * x, -v * y, v]);
  }
  for (let col = 0; col < 8; col++) {
    let pivot = col;
    for (let row = col + 1; row < 8; row++) if (Math.abs(a[row]![col]!) > Math.abs(a[pivot]![col]!)) pivot = row;
    [a[col], a[pivot]] = [a[pivot]!, a[col]!];
    for (let row = 0; row < 8; row++) {
      if (row === col) continue;
      const factor = a[row]![col]! / a[col]![col]!;
      for (let k = col; k < 9; k++) a[row]![k]! -= factor * a[col]![k]!;
    }
  }
  const h = a.map((row, i) => row[8]! / row[i]!);
  return [...h, 1];
}

interface Line {
  theta: number;
  rho: number;
  votes: number;
}

/** Gradient magnitude and direction of a grey image (Sobel), after a 3x3 box blur. */
function gradients(gray: Raster): { magnitude: Float32Array; angle: Float32Array } {
  const { width, height, data } = gray;
  const blurred = new Float32Array(width * height);
  for (let y = 1; y < height - 1; y++) {
    for (let x = 1; x < width - 1; x++) {
      let sum = 0;
      for (let dy = -1; dy <= 1; dy++) for (let dx = -1; dx <= 1; dx++) sum += data[(y + dy) * width + x + dx]!;
      blurred[y * width + x] = sum / 9;
    }
  }
  const magnitude = new Float32Array(width * height);
  const angle = new Float32Array(width * height);
  for (let y = 2; y < height - 2; y++) {
    for (let x = 2; x < width - 2; x++) {
      const i = y * width + x;
      const gx = blurred[i - width + 1]! + 2 * blurred[i + 1]! + blurred[i + width + 1]! - blurred[i - width - 1]! - 2 * blurred[i - 1]! - blurred[i + width - 1]!;
      const gy = blurred[i + width - 1]! + 2 * blurred[i + width]! + blurred[i + width + 1]! - blurred[i - width - 1]! - 2 * blurred[i - width]! - blurred[i - width + 1]!;
      magnitude[i] = Math.hypot(gx, gy);
      angle[i] = Math.atan2(gy, gx);
    }
  }
  return { magnitude, angle };
}

function percentile(values: Float32Array, q: number): number {
  const histogram = new Uint32Array(1024);
  let max = 0;
  for (const value of values) if (value > max) max = value;
  if (max === 0) return 0;
  for (const value of values) histogram[Math.min(1023, Math.floor((value / max) * 1023))]!++;
  let seen = 0;
  for (let bin = 0; bin < 1024; bin++) {
    seen += histogram[bin]!;
    if (seen >= q * values.length) return (bin / 1023) * max;
  }
  return max;
}

/** Strongest straight lines of the edge map, each voted for by edge pixels whose gradient agrees with it. */
function houghLines(width: number, height: number, magnitude: Float32Array, angle: Float32Array, count: number): Line[] {
  const threshold = percentile(magnitude, 0.9);
  const diagonal = Math.ceil(Math.hypot(width, height));
  const thetas = 180;
  const accumulator = new Float32Array(thetas * (2 * diagonal + 1));
  const cos = Float32Array.from({ length: thetas }, (_, t) => Math.cos((t * Math.PI) / thetas));
  const sin = Float32Array.from({ length: thetas }, (_, t) => Math.sin((t * Math.PI) / thetas));
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = y * width + x;
      if (magnitude[i]! <= threshold || threshold === 0) continue;
      // The line's normal is the gradient direction: vote only near it.
      const normal = ((angle[i]! % Math.PI) + Math.PI) % Math.PI;
      const centre = Math.round((normal / Math.PI) * thetas);
      for (let d = -6; d <= 6; d++) {
        const t = (centre + d + thetas) % thetas;
        const rho = Math.round(x * cos[t]! + y * sin[t]!) + diagonal;
        accumulator[t * (2 * diagonal + 1) + rho]! += 1;
      }
    }
  }
  const lines: Line[] = [];
  const rows = 2 * diagonal + 1;
  const taken = new Uint8Array(accumulator.length);
  for (let n = 0; n < count; n++) {
    let best = -1;
    for (let i = 0; i < accumulator.length; i++) if (!taken[i] && (best < 0 || accumulator[i]! > accumulator[best]!)) best = i;
    if (best < 0 || accumulator[best]! < Math.min(width, height) * 0.25) break;
    const t = Math.floor(best / rows);
    const rho = (best % rows) - diagonal;
    lines.push({ theta: (t * Math.PI) / thetas, rho, votes: accumulator[best]! });
    // Suppress the neighbourhood so the next peak is another line.
    for (let dt = -8; dt <= 8; dt++) {
      const tt = (t + dt + thetas) % thetas;
      const flip = t + dt < 0 || t + dt >= thetas ? -1 : 1;
      for (let dr = -12; dr <= 12; dr++) {
        const r = flip * rho + dr + diagonal;
        if (r >= 0 && r < rows) taken[tt * rows + r] = 1;
      }
    }
  }
  return lines;
}

function intersect(a: Line, b: Line): Point | null {
  const det = Math.cos(a.theta) * Math.sin(b.theta) - Math.sin(a.theta) * Math.cos(b.theta);
  if (Math.abs(det) < 1e-6) return null;
  return {
    x: (a.rho * Math.sin(b.theta) - b.rho * Math.sin(a.theta)) / det,
    y: (b.rho * Math.cos(a.theta) - a.rho * Math.cos(b.theta)) / det,
  };
}

function angleBetween(a: number, b: number): number {
  const d = Math.abs(a - b) % Math.PI;
  return Math.min(d, Math.PI - d);
}

function polygonArea(points: readonly Point[]): number {
  let area = 0;
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    const q = points[(i + 1) % points.length]!;
    area += p.x * q.y - q.x * p.y;
  }
  return Math.abs(area) / 2;
}

/** Corners ordered top-left, top-right, bottom-right, bottom-left. */
function orderCorners(points: Point[]): Point[] {
  const cx = points.reduce((sum, p) => sum + p.x, 0) / 4;
  const cy = points.reduce((sum, p) => sum + p.y, 0) / 4;
  const sorted = [...points].sort((a, b) => Math.atan2(a.y - cy, a.x - cx) - Math.atan2(b.y - cy, b.x - cx));
  // atan2 order starts at the left (-pi); rotate so the corner with the smallest x + y leads.
  const start = sorted.reduce((best, p, i) => (p.x + p.y < sorted[best]!.x + sorted[best]!.y ? i : best), 0);
  return [...sorted.slice(start), ...sorted.slice(0, start)];
}

/** The best quadrilateral of two near-parallel line pairs, roughly at right angles to each other. */
function findOutline(gray: Raster): Point[] | null {
  const { magnitude, angle } = gradients(gray);
  const lines = houghLines(gray.width, gray.height, magnitude, angle, 12);
  const margin = 0.08 * Math.max(gray.width, gray.height);
  const minArea = MIN_AREA_SHARE * gray.width * gray.height;
  let best: { corners: Point[]; score: number } | null = null;
  for (let i = 0; i < lines.length; i++) {
    for (let j = i + 1; j < lines.length; j++) {
      const a1 = lines[i]!;
      const a2 = lines[j]!;
      if (angleBetween(a1.theta, a2.theta) > 0.35) continue;
      for (let k = 0; k < lines.length; k++) {
        for (let l = k + 1; l < lines.length; l++) {
          if ([i, j].includes(k) || [i, j].includes(l)) continue;
          const b1 = lines[k]!;
          const b2 = lines[l]!;
          if (angleBetween(b1.theta, b2.theta) > 0.35) continue;
          if (Math.abs(angleBetween(a1.theta, b1.theta) - Math.PI / 2) > 0.45) continue;
          const corners = [intersect(a1, b1), intersect(a1, b2), intersect(a2, b2), intersect(a2, b1)];
          if (corners.some((p) => !p || p.x < -margin || p.y < -margin || p.x > gray.width + margin || p.y > gray.height + margin)) continue;
          const area = polygonArea(corners as Point[]);
          if (area < minArea) continue;
          const score = a1.votes + a2.votes + b1.votes + b2.votes;
          if (!best || score > best.score) best = { corners: corners as Point[], score };
        }
      }
    }
  }
  return best ? orderCorners(best.corners) : null;
}

/** Skew of the strokes in degrees (-45..45), from a magnitude-weighted histogram of gradient directions mod 90. */
function dominantSkew(gray: Raster): number {
  const { magnitude, angle } = gradients(gray);
  const bins = new Float32Array(180);
  const threshold = percentile(magnitude, 0.8);
  for (let i = 0; i < magnitude.length; i++) {
    if (magnitude[i]! <= threshold || threshold === 0) continue;
    const degrees = (((angle[i]! * 180) / Math.PI) % 90 + 90) % 90; // 0..90
    bins[Math.floor(degrees * 2) % 180]! += magnitude[i]!;
  }
  let best = 0;
  for (let b = 0; b < 180; b++) {
    const smoothed = (k: number) => bins[(k + 179) % 180]! + 2 * bins[k]! + bins[(k + 1) % 180]!;
    if (smoothed(b) > smoothed(best)) best = b;
  }
  const degrees = best / 2 + 0.25;
  return degrees > 45 ? degrees - 90 : degrees;
}

/** Finds and straightens the document of an RGB photograph. */
export async function straightenDocument(image: Raster): Promise<Straightened> {
  const scale = Math.min(1, ANALYSIS_SIDE / Math.max(image.width, image.height));
  const small = scale < 1 ? await resizeRaster(image, Math.max(1, Math.round(image.width * scale)), Math.max(1, Math.round(image.height * scale)), 'fill') : image;
  const gray = toGray(small);
  const sx = image.width / gray.width;
  const sy = image.height / gray.height;
  const outline = findOutline(gray);
  if (outline) {
    const corners = outline.map((p) => ({ x: p.x * sx, y: p.y * sy }));
    const top = Math.hypot(corners[1]!.x - corners[0]!.x, corners[1]!.y - corners[0]!.y);
    const bottom = Math.hypot(corners[2]!.x - corners[3]!.x, corners[2]!.y - corners[3]!.y);
    const left = Math.hypot(corners[3]!.x - corners[0]!.x, corners[3]!.y - corners[0]!.y);
    const right = Math.hypot(corners[2]!.x - corners[1]!.x, corners[2]!.y - corners[1]!.y);
    let quad = corners;
    let measured = (top + bottom) / (left + right);
    // A document photographed on its side: turn so that it reads left to right in landscape.
    if (measured < 1) {
      quad = [corners[3]!, corners[0]!, corners[1]!, corners[2]!];
      measured = 1 / measured;
    }
    const aspect = ASPECTS.reduce((nearest, candidate) => (Math.abs(candidate - measured) < Math.abs(nearest - measured) ? candidate : nearest));
    const width = Math.min(OUTPUT_WIDTH, Math.round(Math.max(top, bottom, left, right)));
    const height = Math.round(width / aspect);
    const target = [
      { x: 0, y: 0 },
      { x: width, y: 0 },
      { x: width, y: height },
      { x: 0, y: height },
    ];
    return { image: warp(image, homography(target, quad), width, height), method: 'outline', corners: quad, angle: 0 };
  }
  const skew = dominantSkew(gray);
  if (Math.abs(skew) < 1) return { image, method: 'none', corners: null, angle: 0 };
  // Rotate about the centre by the skew, onto a canvas that keeps the whole document.
  const radians = (skew * Math.PI) / 180;
  const cos = Math.cos(radians);
  const sin = Math.sin(radians);
  const width = Math.round(Math.abs(image.width * cos) + Math.abs(image.height * sin));
  const height = Math.round(Math.abs(image.width * sin) + Math.abs(image.height * cos));
  // destination -> source: rotate back by the skew around the centres.
  const cx = image.width / 2;
  const cy = image.height / 2;
  const dx = width / 2;
  const dy = height / 2;
  const h = [cos, -sin, cx - cos * dx + sin * dy, sin, cos, cy - sin * dx - cos * dy, 0, 0, 1];
  return { image: warp(image, h, width, height), method: 'deskew', corners: null, angle: skew };
}
