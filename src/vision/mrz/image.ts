/**
 * Grayscale raster helpers for the MRZ reader: plain typed arrays, no native calls, so the same code
 * runs in a piscina worker, in the tests and in the training-data renderer (models/mrz/).
 */

export interface GrayImage {
  readonly width: number;
  readonly height: number;
  readonly data: Uint8Array;
}

export function createGray(width: number, height: number): GrayImage {
  return { width, height, data: new Uint8Array(width * height) };
}

/** Bilinear sample with edge clamping. */
export function sample(image: GrayImage, x: number, y: number): number {
  const maxX = image.width - 1;
  const maxY = image.height - 1;
  const cx = x < 0 ? 0 : x > maxX ? maxX : x;
  const cy = y < 0 ? 0 : y > maxY ? maxY : y;
  const x0 = Math.floor(cx);
  const y0 = Math.floor(cy);
  const x1 = x0 < maxX ? x0 + 1 : x0;
  const y1 = y0 < maxY ? y0 + 1 : y0;
  const fx = cx - x0;
  const fy = cy - y0;
  const row0 = y0 * image.width;
  const row1 = y1 * image.width;
  const top = image.data[row0 + x0]! + (image.data[row0 + x1]! - image.data[row0 + x0]!) * fx;
  const bottom = image.data[row1 + x0]! + (image.data[row1 + x1]! - image.data[row1 + x0]!) * fx;
  return top + (bottom - top) * fy;
}

/**
 * A text line in image coordinates: `origin` lies on the line's midline where the strip starts, `ux, uy`
 * is the unit reading direction, and `scale` is source pixels per strip pixel.
 */
export interface LineFrame {
  originX: number;
  originY: number;
  ux: number;
  uy: number;
  scale: number;
}

/**
 * Resamples a rotated band of the image into an axis-aligned strip whose row `midRow` is the line's
 * midline. With `supersample`, shrinking averages several taps per pixel so small strokes blend in
 * instead of aliasing.
 */
export function rectify(image: GrayImage, frame: LineFrame, width: number, height: number, midRow: number, supersample = true): GrayImage {
  const out = createGray(width, height);
  const { originX, originY, ux, uy, scale } = frame;
  const taps = supersample ? Math.min(4, Math.max(1, Math.ceil(scale - 0.25))) : 1;
  const weight = 1 / (taps * taps);
  const maxX = image.width - 1;
  const maxY = image.height - 1;
  const { data } = image;
  const stride = image.width;
  if (taps === 1) {
    rectifyOneTap(image, frame, out, midRow);
    return out;
  }
  for (let row = 0; row < height; row++) {
    for (let column = 0; column < width; column++) {
      let sum = 0;
      for (let ty = 0; ty < taps; ty++) {
        const dy = (row - midRow + (ty + 0.5) / taps - 0.5) * scale;
        for (let tx = 0; tx < taps; tx++) {
          const dx = (column + (tx + 0.5) / taps - 0.5) * scale;
          let x = originX + dx * ux - dy * uy;
          let y = originY + dx * uy + dy * ux;
          x = x < 0 ? 0 : x > maxX ? maxX : x;
          y = y < 0 ? 0 : y > maxY ? maxY : y;
          const x0 = x | 0;
          const y0 = y | 0;
          const fx = x - x0;
          const fy = y - y0;
          const i = y0 * stride + x0;
          const right = x0 < maxX ? 1 : 0;
          const down = y0 < maxY ? stride : 0;
          const top = data[i]! + (data[i + right]! - data[i]!) * fx;
          const bottom = data[i + down]! + (data[i + down + right]! - data[i + down]!) * fx;
          sum += top + (bottom - top) * fy;
        }
      }
      out.data[row * width + column] = Math.round(sum * weight);
    }
  }
  return out;
}

/** rectify's common case (no supersampling) as one straight loop: the general one is several times slower. */
function rectifyOneTap(image: GrayImage, frame: LineFrame, out: GrayImage, midRow: number): void {
  const { originX, originY, ux, uy, scale } = frame;
  const { data, width: stride } = image;
  const maxX = stride - 1;
  const maxY = image.height - 1;
  const stepX = scale * ux;
  const stepY = scale * uy;
  const target = out.data;
  let index = 0;
  for (let row = 0; row < out.height; row++) {
    const dy = (row - midRow) * scale;
    const rowX = originX - dy * uy;
    const rowY = originY + dy * ux;
    for (let column = 0; column < out.width; column++, index++) {
      let x = rowX + column * stepX;
      let y = rowY + column * stepY;
      x = x < 0 ? 0 : x > maxX ? maxX : x;
      y = y < 0 ? 0 : y > maxY ? maxY : y;
      const x0 = x | 0;
      const y0 = y | 0;
      const fx = x - x0;
      const fy = y - y0;
      const i = y0 * stride + x0;
      const right = x0 < maxX ? 1 : 0;
      const down = y0 < maxY ? stride : 0;
      const a = data[i]!;
      const c = data[i + down]!;
      const top = a + (data[i + right]! - a) * fx;
      const bottom = c + (data[i + down + right]! - c) * fx;
      target[index] = top + (bottom - top) * fy + 0.5;
    }
  }
}

/** Value at a quantile (0..1) of the pixels in a rectangle, from a 256-bin histogram. */
export function quantiles(image: GrayImage, left: number, top: number, right: number, bottom: number, qs: readonly number[]): number[] {
  const histogram = new Uint32Array(256);
  const x0 = Math.max(0, Math.floor(left));
  const x1 = Math.min(image.width, Math.ceil(right));
  const y0 = Math.max(0, Math.floor(top));
  const y1 = Math.min(image.height, Math.ceil(bottom));
  let count = 0;
  for (let y = y0; y < y1; y++) {
    const row = y * image.width;
    for (let x = x0; x < x1; x++) histogram[image.data[row + x]!]!++;
    count += Math.max(0, x1 - x0);
  }
  return qs.map((q) => {
    const target = q * count;
    let seen = 0;
    for (let value = 0; value < 256; value++) {
      seen += histogram[value]!;
      if (seen > target) return value;
    }
    return 255;
  });
}

/**
 * Dark-on-light mask by comparison with the local mean, which copes with uneven light; `minContrast`
 * keeps flat noisy regions out. Window sums slide (a column sum per x, updated row by row, then a
 * running sum along the row): a few loads per pixel from arrays one row long, where a full integral
 * image costs four scattered loads from megabytes. Compares sums instead of dividing per pixel.
 */
export function darkMask(image: GrayImage, window: number, ratio: number, minContrast: number): Uint8Array {
  const { width, height, data } = image;
  const half = Math.max(1, Math.floor(window / 2));
  const mask = new Uint8Array(width * height);
  // Exact integers: a column sum is at most 255 x height, a window sum 255 x window^2.
  const columns = new Int32Array(width);
  for (let y = 0; y < Math.min(height, half + 1); y++) {
    for (let x = 0; x < width; x++) columns[x]! += data[y * width + x]!;
  }
  // Columns whose window lies wholly inside the image take the branch-free loop.
  const innerStart = Math.min(width, half + 1);
  const innerEnd = Math.max(innerStart, width - half);
  for (let y = 0; y < height; y++) {
    if (y > 0) {
      const added = y + half;
      const removed = y - half - 1;
      if (added < height) for (let x = 0, i = added * width; x < width; x++, i++) columns[x]! += data[i]!;
      if (removed >= 0) for (let x = 0, i = removed * width; x < width; x++, i++) columns[x]! -= data[i]!;
    }
    const rows = Math.min(height - 1, y + half) - Math.max(0, y - half) + 1;
    const row = y * width;
    let sum = 0;
    for (let x = 0; x < Math.min(width, half); x++) sum += columns[x]!;
    // Window [x - half, x + half] clamped to the image; `sum` holds the columns in it.
    for (let x = 0; x < innerStart; x++) {
      if (x + half < width) sum += columns[x + half]!;
      if (x - half - 1 >= 0) sum -= columns[x - half - 1]!;
      const area = (Math.min(width - 1, x + half) - Math.max(0, x - half) + 1) * rows;
      const scaled = data[row + x]! * area;
      if (scaled < sum * ratio && sum - scaled > minContrast * area) mask[row + x] = 1;
    }
    const area = (2 * half + 1) * rows;
    const contrast = minContrast * area;
    for (let x = innerStart; x < innerEnd; x++) {
      sum += columns[x + half]! - columns[x - half - 1]!;
      const scaled = data[row + x]! * area;
      if (scaled < sum * ratio && sum - scaled > contrast) mask[row + x] = 1;
    }
    for (let x = innerEnd; x < width; x++) {
      if (x + half < width) sum += columns[x + half]!;
      if (x - half - 1 >= 0) sum -= columns[x - half - 1]!;
      const area = (Math.min(width - 1, x + half) - Math.max(0, x - half) + 1) * rows;
      const scaled = data[row + x]! * area;
      if (scaled < sum * ratio && sum - scaled > minContrast * area) mask[row + x] = 1;
    }
  }
  return mask;
}

export interface Components {
  count: number;
  minX: Int32Array;
  maxX: Int32Array;
  minY: Int32Array;
  maxY: Int32Array;
  area: Int32Array;
  sumX: Float64Array;
  sumY: Float64Array;
}

/** 8-connected components of a 0/1 mask, with bounding boxes, areas and centroid sums. */
export function components(mask: Uint8Array, width: number, height: number): Components {
  const labels = new Int32Array(width * height);
  const parent: number[] = [0];
  const stats = { minX: [0], maxX: [0], minY: [0], maxY: [0], area: [0], sumX: [0], sumY: [0] };
  const find = (label: number): number => {
    let root = label;
    while (parent[root] !== root) root = parent[root]!;
    while (parent[label] !== root) {
      const next = parent[label]!;
      parent[label] = root;
      label = next;
    }
    return root;
  };
  const union = (a: number, b: number): number => {
    const ra = find(a);
    const rb = find(b);
    if (ra === rb) return ra;
    const [keep, drop] = ra < rb ? [ra, rb] : [rb, ra];
    parent[drop] = keep;
    return keep;
  };
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const index = y * width + x;
      if (!mask[index]) continue;
      let label = x > 0 ? labels[index - 1]! : 0;
      if (y > 0) {
        const upLeft = x > 0 ? labels[index - width - 1]! : 0;
        const up = labels[index - width]!;
        const upRight = x < width - 1 ? labels[index - width + 1]! : 0;
        if (upLeft) label = label && label !== upLeft ? union(label, upLeft) : upLeft;
        if (up) label = label && label !== up ? union(label, up) : up;
        if (upRight) label = label && label !== upRight ? union(label, upRight) : upRight;
      }
      if (label === 0) {
        label = parent.length;
        parent.push(label);
        stats.minX.push(x);
        stats.maxX.push(x);
        stats.minY.push(y);
        stats.maxY.push(y);
        stats.area.push(0);
        stats.sumX.push(0);
        stats.sumY.push(0);
      }
      labels[index] = label;
      if (x < stats.minX[label]!) stats.minX[label] = x;
      if (x > stats.maxX[label]!) stats.maxX[label] = x;
      if (y > stats.maxY[label]!) stats.maxY[label] = y;
      stats.area[label]!++;
      stats.sumX[label]! += x;
      stats.sumY[label]! += y;
    }
  }
  const compact = new Int32Array(parent.length);
  let count = 0;
  for (let label = 1; label < parent.length; label++) if (find(label) === label) compact[label] = count++;
  const result: Components = {
    count,
    minX: new Int32Array(count).fill(width),
    maxX: new Int32Array(count).fill(-1),
    minY: new Int32Array(count).fill(height),
    maxY: new Int32Array(count).fill(-1),
    area: new Int32Array(count),
    sumX: new Float64Array(count),
    sumY: new Float64Array(count),
  };
  for (let label = 1; label < parent.length; label++) {
    const id = compact[find(label)]!;
    result.minX[id] = Math.min(result.minX[id]!, stats.minX[label]!);
    result.maxX[id] = Math.max(result.maxX[id]!, stats.maxX[label]!);
    result.minY[id] = Math.min(result.minY[id]!, stats.minY[label]!);
    result.maxY[id] = Math.max(result.maxY[id]!, stats.maxY[label]!);
    result.area[id]! += stats.area[label]!;
    result.sumX[id]! += stats.sumX[label]!;
    result.sumY[id]! += stats.sumY[label]!;
  }
  return result;
}
