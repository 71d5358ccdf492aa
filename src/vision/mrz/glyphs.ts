/**
 * The glyph tensor contract between the reader and the model (models/mrz/CARD.md): the training-data
 * renderer imports this file, so training crops and reading crops are cut the same way.
 */
import { quantiles, type GrayImage } from './image.ts';

/** Class order of the model's output. */
export const ALPHABET = '<0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** Strips are resampled so an MRZ capital is this many pixels tall. */
export const STRIP_CAP_HEIGHT = 20;
/** Strip rows, with the midline of the text at STRIP_MID_ROW. */
export const STRIP_ROWS = 56;
export const STRIP_MID_ROW = 28;

/** A glyph crop is 1.2 x 1.6 cap heights around the character's centre, at strip resolution. */
export const GLYPH_WIDTH = 24;
export const GLYPH_HEIGHT = 32;
export const GLYPH_PIXELS = GLYPH_WIDTH * GLYPH_HEIGHT;

/** Below this ink-to-paper difference a window is treated as blank rather than stretched into noise. */
const MIN_CONTRAST = 48;

/**
 * Writes one crop per centre into `out` (N x 1 x GLYPH_HEIGHT x GLYPH_WIDTH, ink 1, paper 0). Ink and
 * paper levels come from a window of about five characters around each glyph, which absorbs light
 * that changes along the line.
 */
export function writeGlyphs(strip: GrayImage, centersX: ArrayLike<number>, centersY: ArrayLike<number>, pitch: number, out: Float32Array): void {
  const halfWindow = 2.5 * pitch;
  const halfBand = 0.8 * STRIP_CAP_HEIGHT;
  for (let index = 0; index < centersX.length; index++) {
    const cx = centersX[index]!;
    const cy = centersY[index]!;
    const [ink, paper] = quantiles(strip, cx - halfWindow, cy - halfBand, cx + halfWindow, cy + halfBand, [0.03, 0.9]) as [number, number];
    const range = Math.max(MIN_CONTRAST, paper - ink);
    const base = index * GLYPH_PIXELS;
    for (let row = 0; row < GLYPH_HEIGHT; row++) {
      const y = cy + row + 0.5 - GLYPH_HEIGHT / 2;
      const y0 = Math.floor(y);
      const fy = y - y0;
      const rowAbove = y0 >= 0 && y0 < strip.height ? y0 * strip.width : -1;
      const rowBelow = y0 + 1 >= 0 && y0 + 1 < strip.height ? (y0 + 1) * strip.width : -1;
      for (let column = 0; column < GLYPH_WIDTH; column++) {
        const x = cx + column + 0.5 - GLYPH_WIDTH / 2;
        const x0 = Math.floor(x);
        const fx = x - x0;
        const inLeft = x0 >= 0 && x0 < strip.width;
        const inRight = x0 + 1 >= 0 && x0 + 1 < strip.width;
        // Outside the strip counts as paper-white.
        const a = rowAbove >= 0 && inLeft ? strip.data[rowAbove + x0]! : 255;
        const b = rowAbove >= 0 && inRight ? strip.data[rowAbove + x0 + 1]! : 255;
        const c = rowBelow >= 0 && inLeft ? strip.data[rowBelow + x0]! : 255;
        const d = rowBelow >= 0 && inRight ? strip.data[rowBelow + x0 + 1]! : 255;
        const top = a + (b - a) * fx;
        const value = (paper - (top + (c + (d - c) * fx - top) * fy)) / range;
        out[base + row * GLYPH_WIDTH + column] = value < 0 ? 0 : value > 1 ? 1 : value;
      }
    }
  }
}
