/**
 * The liveness model's own data: camera frames of a face shown live (the public-domain portraits
 * of test/fixtures/faces, photographed directly) or as a presentation attack: the same portrait
 * shown on a screen (a grid of red, green and blue subpixels, greyish blacks, a bluish cast, glare)
 * or printed (halftone dots of three inks on paper), then photographed. Every frame goes through
 * the same camera: placed, turned, lit, blurred, noisy and JPEG-compressed. Seeded: the same seed
 * gives the same frame.
 */
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { random as seededRandom } from '../random.ts';
import { decodeImage, DEFAULT_MAX_PIXELS, type Raster } from '../../src/vision/image.ts';
import { MOSAIC } from '../../src/vision/video.ts';

export type Presentation = 'bona_fide' | 'screen' | 'print';
export const PRESENTATIONS: readonly Presentation[] = ['bona_fide', 'screen', 'print'];
export { seededRandom };
type Random = () => number;

const FACES_DIR = path.resolve(import.meta.dirname, '../../test/fixtures/faces');
/** The colour portraits (cameraman.jpg is grey: no colour to measure). */
export const PORTRAITS = ['astronaut.jpg', 'grace-hopper.jpg'] as const;

export async function loadPortrait(file: string): Promise<Raster> {
  return decodeImage(fs.readFileSync(path.join(FACES_DIR, file)), { channels: 3, maxPixels: DEFAULT_MAX_PIXELS });
}

const between = (random: Random, low: number, high: number) => low + (high - low) * random();
const clamp = (value: number) => (value < 0 ? 0 : value > 255 ? 255 : value);

/** The portrait as a screen shows it, magnified `k` times: each pixel k x k device pixels split into R, G, B stripes. */
function screen(portrait: Raster, random: Random): Raster {
  const k = 3 + Math.floor(random() * 2);
  const width = portrait.width * k;
  const height = portrait.height * k;
  const out = new Uint8Array(width * height * 3);
  const black = between(random, 15, 45);
  const tint = [between(random, 0.85, 1), between(random, 0.92, 1.02), between(random, 1, 1.1)];
  for (let y = 0; y < height; y++) {
    const gap = y % k === k - 1 ? 0.6 : 1;
    for (let x = 0; x < width; x++) {
      const source = (Math.floor(y / k) * portrait.width + Math.floor(x / k)) * 3;
      const lit = Math.floor(((x % k) * 3) / k);
      for (let c = 0; c < 3; c++) {
        const value = c === lit ? black + (portrait.data[source + c]! * (255 - black)) / 255 : black * 0.3;
        out[(y * width + x) * 3 + c] = clamp(value * tint[c]! * gap * 1.15);
      }
    }
  }
  return { width, height, channels: 3, data: out };
}

/** The portrait printed three times larger in halftone: per ink a rotated grid of dots sized by the ink's coverage. */
function print(portrait: Raster, random: Random): Raster {
  const k = 3;
  const width = portrait.width * k;
  const height = portrait.height * k;
  const out = new Uint8Array(width * height * 3);
  const pitch = between(random, 3.5, 7);
  const paper = between(random, 225, 250);
  const angles = [15, 75, 0].map((degrees) => ((degrees + between(random, -5, 5)) * Math.PI) / 180);
  for (let c = 0; c < 3; c++) {
    const cos = Math.cos(angles[c]!);
    const sin = Math.sin(angles[c]!);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        const u = (x * cos + y * sin) / pitch;
        const v = (-x * sin + y * cos) / pitch;
        const du = u - Math.round(u);
        const dv = v - Math.round(v);
        const coverage = 1 - portrait.data[(Math.floor(y / k) * portrait.width + Math.floor(x / k)) * 3 + c]! / 255;
        // A dot of area `coverage` in a unit cell has radius sqrt(coverage / pi).
        const inked = du * du + dv * dv < coverage / Math.PI;
        out[(y * width + x) * 3 + c] = inked ? paper * 0.18 : paper;
      }
    }
  }
  return { width, height, channels: 3, data: out };
}

/** A camera frame (MOSAIC.cell square) of the face as presented. */
export async function presentationFrame(portrait: Raster, kind: Presentation, random: Random): Promise<Raster> {
  const shown = kind === 'screen' ? screen(portrait, random) : kind === 'print' ? print(portrait, random) : portrait;
  const size = MOSAIC.cell;
  // The portrait's face spans about half its width: the face then fills 30 to 60 % of the frame.
  const scale = between(random, 0.6, 1.2);
  const side = Math.round(size * scale);
  const angle = between(random, -10, 10);
  const kernel = (['nearest', 'linear', 'cubic'] as const)[Math.floor(random() * 3)]!;
  let pipeline = sharp(shown.data, { raw: { width: shown.width, height: shown.height, channels: 3 } })
    .resize({ width: side, height: side, fit: 'inside', kernel })
    .rotate(angle, { background: { r: 90, g: 85, b: 80 } })
    .resize({ width: size, height: size, fit: 'contain', background: { r: 90, g: 85, b: 80 } })
    .modulate({ brightness: between(random, 0.75, 1.25) })
    .gamma(between(random, 1, 2.2));
  const blur = between(random, 0, 1.5);
  if (blur >= 0.3) pipeline = pipeline.blur(blur);
  const { data, info } = await pipeline.raw().toBuffer({ resolveWithObject: true });
  const noise = between(random, 1, 7);
  const glare = kind === 'bona_fide' ? 0 : between(random, 0, 70);
  const gx = random() * info.width;
  const gy = random() * info.height;
  const noisy = new Uint8Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const pixel = Math.floor(i / 3);
    const dx = (pixel % info.width) - gx;
    const dy = Math.floor(pixel / info.width) - gy;
    const shine = glare * Math.exp(-(dx * dx + dy * dy) / (2 * (0.25 * info.width) ** 2));
    noisy[i] = clamp(data[i]! + shine + noise * (random() + random() + random() - 1.5));
  }
  const jpeg = await sharp(noisy, { raw: { width: info.width, height: info.height, channels: 3 } })
    .jpeg({ quality: Math.round(between(random, 55, 92)) })
    .toBuffer();
  return decodeImage(jpeg, { channels: 3, maxPixels: DEFAULT_MAX_PIXELS });
}
