/**
 * The resampling primitives the document reader is built on: one-sample warps (straightening,
 * portraits) and enlarged text lines give exactly the bilinear samples a plain per-pixel
 * implementation gives, so their fast paths cannot drift from what the models were evaluated on.
 */
import test from 'ava';
import { resampleRegion, warp, type Raster } from '../../src/vision/image.ts';

/** A deterministic noisy RGB raster. */
function raster(width: number, height: number): Raster {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < data.length; i++) data[i] = (i * 2654435761) % 251;
  return { width, height, channels: 3, data };
}

/** Bilinear sampling at pixel centres with clamped edges, written out per pixel. */
function reference(source: Raster, h: number[], width: number, height: number): Uint8Array {
  const out = new Uint8Array(width * height * source.channels);
  const at = (x: number, y: number, c: number) => source.data[(y * source.width + x) * source.channels + c]!;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const px = x + 0.5;
      const py = y + 0.5;
      const w = h[6]! * px + h[7]! * py + h[8]!;
      const sx = Math.min(source.width - 1, Math.max(0, (h[0]! * px + h[1]! * py + h[2]!) / w - 0.5));
      const sy = Math.min(source.height - 1, Math.max(0, (h[3]! * px + h[4]! * py + h[5]!) / w - 0.5));
      const x0 = Math.floor(sx);
      const y0 = Math.floor(sy);
      const x1 = Math.min(source.width - 1, x0 + 1);
      const y1 = Math.min(source.height - 1, y0 + 1);
      for (let c = 0; c < source.channels; c++) {
        const top = at(x0, y0, c) + (at(x1, y0, c) - at(x0, y0, c)) * (sx - x0);
        const bottom = at(x0, y1, c) + (at(x1, y1, c) - at(x0, y1, c)) * (sx - x0);
        out[(y * width + x) * source.channels + c] = Math.floor(top + (bottom - top) * (sy - y0) + 0.5);
      }
    }
  }
  return out;
}

test('a one-sample warp (perspective, affine, reaching past the edges) is plain bilinear sampling', (t) => {
  const source = raster(120, 80);
  for (const h of [
    [1.3, 0.1, 5, -0.05, 0.9, 3, 0.0004, -0.0002, 1],
    [0.7, 0, 10, 0, 0.7, 12, 0, 0, 1],
    [1, 0.2, -20, 0.1, 1, 60, 0, 0, 1],
  ]) {
    t.deepEqual(warp(source, h, 100, 70).data, reference(source, h, 100, 70));
  }
});

test('an enlarged text line is the same as warping its box, and a shrunk one averages', (t) => {
  const source = raster(200, 60);
  const box = { x: 10.4, y: 7.2, width: 90.3, height: 21.7 };
  const enlarged = resampleRegion(source, box, 200, 48);
  t.deepEqual(enlarged.data, warp(source, [box.width / 200, 0, box.x, 0, box.height / 48, box.y, 0, 0, 1], 200, 48).data);
  t.deepEqual(enlarged.data, reference(source, [box.width / 200, 0, box.x, 0, box.height / 48, box.y, 0, 0, 1], 200, 48));
  // Shrinking by three takes several samples per pixel: no longer a single bilinear sample.
  const shrunk = resampleRegion(source, { x: 0, y: 0, width: 150, height: 60 }, 50, 20);
  t.notDeepEqual(shrunk.data, reference(source, [3, 0, 0, 0, 3, 0, 0, 0, 1], 50, 20));
});
