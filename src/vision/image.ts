/**
 * Image intake for every vision reader (MRZ, document front, faces): one place that decides which
 * images are usable and turns them into 8-bit rasters. sharp does the decoding, EXIF orientation,
 * colour conversion (CMYK, 16-bit, palette, alpha) and resizing; an unusable image becomes an
 * ImageError with a stable reason, which the pipeline turns into a fail result.
 */
import sharp, { type Metadata } from 'sharp';

export type ImageErrorReason = 'image_empty' | 'image_unreadable' | 'image_too_large' | 'image_too_small' | 'image_animated';

/** The image itself is unusable; `reason` is stable for callers to map onto their error results. */
export class ImageError extends Error {
  constructor(
    readonly reason: ImageErrorReason,
    message: string,
  ) {
    super(message);
    this.name = 'ImageError';
  }
}

export interface Point {
  x: number;
  y: number;
}

/** An axis-aligned rectangle in pixels. */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A box as reported in results: [x, y, width, height] in whole pixels. */
export function boxTuple(box: Box): [number, number, number, number] {
  return [Math.round(box.x), Math.round(box.y), Math.round(box.width), Math.round(box.height)];
}

/** Milliseconds as reported in results: to a tenth. */
export function tenths(ms: number): number {
  return Math.round(ms * 10) / 10;
}

/** A decoded raster: `channels` bytes per pixel, rows top to bottom. */
export interface Raster {
  readonly width: number;
  readonly height: number;
  readonly channels: 1 | 3;
  readonly data: Uint8Array;
}

export interface DecodeOptions {
  /** 1 for grey, 3 for RGB. */
  channels: 1 | 3;
  /** Refuse images with more pixels than this (decompression bombs). */
  maxPixels: number;
  /** Shrink so the long side is at most this (never enlarged). */
  maxSide?: number;
  /** Refuse images whose short side is below this. */
  minSide?: number;
}

export const DEFAULT_MAX_PIXELS = 40_000_000;
/** Smaller than this nothing on a document or a face can be read. */
export const DEFAULT_MIN_SIDE = 64;

export function asBuffer(image: Buffer | Uint8Array | ArrayBuffer): Buffer {
  if (image instanceof ArrayBuffer) return Buffer.from(image);
  return Buffer.isBuffer(image) ? image : Buffer.from(image.buffer, image.byteOffset, image.byteLength);
}

/** Reads the header only, so size and frame count are judged before anything is decoded. */
export async function inspectImage(image: Buffer, options: Pick<DecodeOptions, 'maxPixels' | 'minSide' | 'maxSide'>): Promise<Metadata> {
  if (image.length === 0) throw new ImageError('image_empty', 'The image is empty');
  let metadata: Metadata;
  try {
    metadata = await sharp(image, { limitInputPixels: false }).metadata();
  } catch (error) {
    throw new ImageError('image_unreadable', `The file is not a readable image (${(error as Error).message})`);
  }
  const width = metadata.width ?? 0;
  const height = metadata.height ?? 0;
  if ((metadata.pages ?? 1) > 1 && metadata.format !== 'heif') {
    throw new ImageError('image_animated', `The image has ${metadata.pages} frames; send a single still photograph`);
  }
  if (width * height > options.maxPixels) {
    throw new ImageError('image_too_large', `The image has ${width}x${height} pixels, more than the ${options.maxPixels} allowed`);
  }
  const minSide = options.minSide ?? DEFAULT_MIN_SIDE;
  if (Math.min(width, height) < minSide) {
    throw new ImageError('image_too_small', `The image is ${width}x${height} pixels; at least ${minSide} on each side is needed`);
  }
  // A strip (64 x 200000) would keep almost nothing of its short side once shrunk to be read.
  const shrink = options.maxSide ? Math.min(1, options.maxSide / Math.max(width, height)) : 1;
  if (Math.min(width, height) * shrink < minSide) {
    throw new ImageError('image_too_small', `The image is ${width}x${height} pixels; proportions this narrow leave less than ${minSide} pixels across once it is scaled to be read`);
  }
  return metadata;
}

/**
 * Decodes to an upright 8-bit raster: EXIF rotation applied, CMYK and 16-bit converted to sRGB,
 * alpha dropped. Throws ImageError for anything unusable.
 */
export async function decodeImage(input: Buffer | Uint8Array | ArrayBuffer, options: DecodeOptions): Promise<Raster> {
  const image = asBuffer(input);
  const metadata = await inspectImage(image, options);
  try {
    const pipeline = sharp(image, { limitInputPixels: options.maxPixels, failOn: 'truncated' }).rotate();
    const longSide = Math.max(metadata.width ?? 0, metadata.height ?? 0);
    if (options.maxSide && longSide > options.maxSide) pipeline.resize({ width: options.maxSide, height: options.maxSide, fit: 'inside' });
    if (options.channels === 1) pipeline.toColourspace('b-w');
    else pipeline.toColourspace('srgb').removeAlpha();
    const { data, info } = await pipeline.raw({ depth: 'uchar' }).toBuffer({ resolveWithObject: true });
    if (info.channels !== options.channels) throw new Error(`expected ${options.channels} channels, got ${info.channels}`);
    return { width: info.width, height: info.height, channels: options.channels, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
  } catch (error) {
    const message = (error as Error).message;
    if (/pixel limit/i.test(message)) throw new ImageError('image_too_large', `The image is too large (${message})`);
    throw new ImageError('image_unreadable', `The image could not be decoded (${message})`);
  }
}

/** Resizes a raster with libvips (several times faster than JavaScript); `fit: 'inside'` keeps the aspect. */
export async function resizeRaster(image: Raster, width: number, height: number, fit: 'inside' | 'fill' = 'inside'): Promise<Raster> {
  const { data, info } = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels } })
    .resize({ width, height, fit, kernel: 'linear' })
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { width: info.width, height: info.height, channels: image.channels, data: new Uint8Array(data.buffer, data.byteOffset, data.length) };
}

/** Grey copy of an RGB raster (ITU-R BT.601 weights). */
export function toGray(image: Raster): Raster {
  if (image.channels === 1) return image;
  const gray = new Uint8Array(image.width * image.height);
  const { data } = image;
  for (let i = 0, j = 0; i < gray.length; i++, j += 3) gray[i] = (data[j]! * 299 + data[j + 1]! * 587 + data[j + 2]! * 114 + 500) / 1000;
  return { width: image.width, height: image.height, channels: 1, data: gray };
}

/** JPEG of a raster, for crops kept as artifacts (the document portrait). */
export async function encodeJpeg(image: Raster, quality = 90): Promise<Buffer> {
  return sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels } }).jpeg({ quality }).toBuffer();
}

/**
 * Samples `source` through a 3x3 homography `h` (destination pixel -> source pixel, row-major)
 * into a width x height raster, bilinear, with edge clamping. With `taps` above 1, each output pixel
 * averages taps x taps samples spread over it, so that shrinking does not alias thin strokes. Used
 * to straighten documents, align faces and cut text lines (an affine map is a homography with a
 * last row of 0 0 1).
 */
export function warp(source: Raster, h: ArrayLike<number>, width: number, height: number, taps: { x: number; y: number } = { x: 1, y: 1 }): Raster {
  if (taps.x === 1 && taps.y === 1) return warpOneTap(source, h, width, height);
  const { channels, data } = source;
  const out = new Uint8Array(width * height * channels);
  const maxX = source.width - 1;
  const maxY = source.height - 1;
  const stride = source.width * channels;
  const weight = 1 / (taps.x * taps.y);
  // Affine maps (all but document straightening) skip the perspective term.
  const affine = h[6] === 0 && h[7] === 0 && h[8] === 1;
  const sum = new Float64Array(channels);
  let o = 0;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      sum.fill(0);
      for (let ty = 0; ty < taps.y; ty++) {
        const py = y + (ty + 0.5) / taps.y;
        for (let tx = 0; tx < taps.x; tx++) {
          const px = x + (tx + 0.5) / taps.x;
          const w = affine ? 1 : h[6]! * px + h[7]! * py + h[8]!;
          let sx = (h[0]! * px + h[1]! * py + h[2]!) / w - 0.5;
          let sy = (h[3]! * px + h[4]! * py + h[5]!) / w - 0.5;
          sx = sx < 0 ? 0 : sx > maxX ? maxX : sx;
          sy = sy < 0 ? 0 : sy > maxY ? maxY : sy;
          const x0 = sx | 0;
          const y0 = sy | 0;
          const fx = sx - x0;
          const fy = sy - y0;
          const i = y0 * stride + x0 * channels;
          const right = x0 < maxX ? channels : 0;
          const down = y0 < maxY ? stride : 0;
          for (let c = 0; c < channels; c++) {
            const top = data[i + c]! + (data[i + right + c]! - data[i + c]!) * fx;
            const bottom = data[i + down + c]! + (data[i + down + right + c]! - data[i + down + c]!) * fx;
            sum[c]! += top + (bottom - top) * fy;
          }
        }
      }
      for (let c = 0; c < channels; c++) out[o++] = sum[c]! * weight + 0.5;
    }
  }
  return { width, height, channels, data: out };
}

/**
 * `warp` with one sample per output pixel (straightening a document, cutting a portrait): the same
 * arithmetic per pixel, without the loops and the accumulator that averaging needs, which made
 * straightening a passport page (1187 x 836) cost 48 ms instead of 21. The per-sample lines repeat
 * warp's on purpose: a shared helper per sample is what this path avoids.
 */
function warpOneTap(source: Raster, h: ArrayLike<number>, width: number, height: number): Raster {
  const { channels, data } = source;
  const out = new Uint8Array(width * height * channels);
  const maxX = source.width - 1;
  const maxY = source.height - 1;
  const stride = source.width * channels;
  const [h0, h1, h2, h3, h4, h5, h6, h7, h8] = Array.from({ length: 9 }, (_, index) => h[index]!);
  const affine = h6 === 0 && h7 === 0 && h8 === 1;
  let o = 0;
  for (let y = 0; y < height; y++) {
    const py = y + 0.5;
    for (let x = 0; x < width; x++) {
      const px = x + 0.5;
      const w = affine ? 1 : h6! * px + h7! * py + h8!;
      let sx = (h0! * px + h1! * py + h2!) / w - 0.5;
      let sy = (h3! * px + h4! * py + h5!) / w - 0.5;
      sx = sx < 0 ? 0 : sx > maxX ? maxX : sx;
      sy = sy < 0 ? 0 : sy > maxY ? maxY : sy;
      const x0 = sx | 0;
      const y0 = sy | 0;
      const fx = sx - x0;
      const fy = sy - y0;
      const i = y0 * stride + x0 * channels;
      const right = x0 < maxX ? channels : 0;
      const down = y0 < maxY ? stride : 0;
      for (let c = 0; c < channels; c++) {
        const top = data[i + c]! + (data[i + right + c]! - data[i + c]!) * fx;
        const bottom = data[i + down + c]! + (data[i + down + right + c]! - data[i + down + c]!) * fx;
        out[o++] = top + (bottom - top) * fy + 0.5;
      }
    }
  }
  return { width, height, channels, data: out };
}

/** Samples per output pixel and axis when a source span of `scale` pixels falls on one output pixel. */
export function tapsFor(scale: number): number {
  return Math.max(1, Math.min(4, Math.ceil(scale - 0.25)));
}

/**
 * The rectangle `box` of a raster resampled to width x height, averaging when shrinking. For the
 * many small crops of a page (text lines) this is cheaper than a libvips pipeline per crop.
 */
export function resampleRegion(image: Raster, box: Box, width: number, height: number): Raster {
  const sx = box.width / width;
  const sy = box.height / height;
  const taps = { x: tapsFor(sx), y: tapsFor(sy) };
  if (taps.x > 1 || taps.y > 1) return warp(image, [sx, 0, box.x, 0, sy, box.y, 0, 0, 1], width, height, taps);
  return enlargeRegion(image, box, width, height);
}

/**
 * resampleRegion's common case, a text line enlarged to the recognizer's height: the same bilinear
 * samples as `warp` (pixel centres, edges clamped), with each column's source position and weight
 * computed once instead of once per pixel (about four times faster on a page's lines).
 */
function enlargeRegion(image: Raster, box: Box, width: number, height: number): Raster {
  const { channels, data } = image;
  const out = new Uint8Array(width * height * channels);
  const maxX = image.width - 1;
  const maxY = image.height - 1;
  const stride = image.width * channels;
  const columns = new Int32Array(width);
  const rights = new Int32Array(width);
  const fractions = new Float64Array(width);
  for (let x = 0; x < width; x++) {
    let source = (box.width / width) * (x + 0.5) + box.x - 0.5;
    source = source < 0 ? 0 : source > maxX ? maxX : source;
    const x0 = source | 0;
    columns[x] = x0 * channels;
    rights[x] = x0 < maxX ? channels : 0;
    fractions[x] = source - x0;
  }
  let o = 0;
  for (let y = 0; y < height; y++) {
    let source = (box.height / height) * (y + 0.5) + box.y - 0.5;
    source = source < 0 ? 0 : source > maxY ? maxY : source;
    const y0 = source | 0;
    const fy = source - y0;
    const row = y0 * stride;
    const down = y0 < maxY ? stride : 0;
    for (let x = 0; x < width; x++) {
      const i = row + columns[x]!;
      const right = rights[x]!;
      const fx = fractions[x]!;
      for (let c = 0; c < channels; c++) {
        const top = data[i + c]! + (data[i + right + c]! - data[i + c]!) * fx;
        const bottom = data[i + down + c]! + (data[i + down + right + c]! - data[i + down + c]!) * fx;
        out[o++] = top + (bottom - top) * fy + 0.5;
      }
    }
  }
  return { width, height, channels, data: out };
}

/** The raster turned clockwise by a quarter turn or a half turn. */
export function rotateRaster(image: Raster, degrees: 90 | 180): Raster {
  const { width, height, channels, data } = image;
  const out = new Uint8Array(data.length);
  const [outWidth, outHeight] = degrees === 90 ? [height, width] : [width, height];
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const [tx, ty] = degrees === 90 ? [height - 1 - y, x] : [width - 1 - x, height - 1 - y];
      const source = (y * width + x) * channels;
      const target = (ty * outWidth + tx) * channels;
      for (let c = 0; c < channels; c++) out[target + c] = data[source + c]!;
    }
  }
  return { width: outWidth, height: outHeight, channels, data: out };
}
