/**
 * The OCR-B glyph classifier (models/mrz/CARD.md), run through the process's shared ONNX sessions.
 */
import path from 'node:path';
import { onnxSession, ort } from '../onnx.ts';
import { ALPHABET, GLYPH_HEIGHT, GLYPH_PIXELS, GLYPH_WIDTH } from './glyphs.ts';

export const MODEL_PATH = path.resolve(import.meta.dirname, '../../../models/mrz/mrz-ocrb.onnx');

/**
 * Loads the model and runs it once ahead of the first read (worker start-up), so the first document
 * does not pay for session creation and the runtime's first-run set-up.
 */
export async function warmUp(): Promise<void> {
  await classify(new Float32Array(GLYPH_PIXELS), 1);
}

/** Class probabilities, `count` rows of ALPHABET.length, for glyph tensors written by writeGlyphs. */
export async function classify(glyphs: Float32Array, count: number): Promise<Float32Array> {
  const model = await onnxSession(MODEL_PATH);
  const input = new ort.Tensor('float32', glyphs.subarray(0, count * GLYPH_PIXELS), [count, 1, GLYPH_HEIGHT, GLYPH_WIDTH]);
  const output = await model.run({ glyphs: input });
  const logits = output.logits!.data as Float32Array;
  const classes = ALPHABET.length;
  const probabilities = new Float32Array(count * classes);
  for (let row = 0; row < count; row++) {
    let max = -Infinity;
    for (let k = 0; k < classes; k++) max = Math.max(max, logits[row * classes + k]!);
    let sum = 0;
    for (let k = 0; k < classes; k++) {
      const value = Math.exp(logits[row * classes + k]! - max);
      probabilities[row * classes + k] = value;
      sum += value;
    }
    for (let k = 0; k < classes; k++) probabilities[row * classes + k]! /= sum;
  }
  return probabilities;
}
