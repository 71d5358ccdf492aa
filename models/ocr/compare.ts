/**
 * Checks that a rewritten network (fuse.py) computes what the published one does: both run on the
 * same seeded input, and the largest difference of their outputs must stay within float rounding.
 * Prints both timings too (median of 15 runs, 2 intra-op threads).
 *   node --import tsx models/ocr/compare.ts PUBLISHED.onnx REWRITTEN.onnx 8x3x48x320
 */
import * as ort from 'onnxruntime-node';

const TOLERANCE = 1e-4;
const [published, rewritten, shapeText] = process.argv.slice(2);
if (!published || !rewritten || !shapeText) {
  console.error('usage: compare.ts PUBLISHED.onnx REWRITTEN.onnx NxCxHxW');
  process.exit(2);
}
const shape = shapeText.split('x').map(Number);
const options = { intraOpNumThreads: 2, interOpNumThreads: 1, executionMode: 'sequential' as const, graphOptimizationLevel: 'all' as const };
const before = await ort.InferenceSession.create(published, options);
const after = await ort.InferenceSession.create(rewritten, options);
const size = shape.reduce((a, b) => a * b, 1);
let seed = 1;
const random = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
// Smooth structure plus noise, in the models' [-1, 1]-ish input range.
const input = new ort.Tensor('float32', Float32Array.from({ length: size }, (_, i) => Math.sin(i / 37) * 0.6 + (random() - 0.5) * 0.6), shape);
const first = Object.values(await before.run({ x: input }))[0]!.data as Float32Array;
const second = Object.values(await after.run({ x: input }))[0]!.data as Float32Array;
let largest = 0;
for (let i = 0; i < first.length; i++) largest = Math.max(largest, Math.abs(first[i]! - second[i]!));

async function medianMs(session: ort.InferenceSession): Promise<number> {
  for (let i = 0; i < 3; i++) await session.run({ x: input });
  const times: number[] = [];
  for (let i = 0; i < 15; i++) {
    const started = performance.now();
    await session.run({ x: input });
    times.push(performance.now() - started);
  }
  return times.sort((a, b) => a - b)[7]!;
}
console.log(`${rewritten}: largest difference ${largest.toExponential(1)} over ${first.length} outputs; ${(await medianMs(before)).toFixed(1)} ms published, ${(await medianMs(after)).toFixed(1)} ms rewritten (input ${shapeText})`);
if (!(largest <= TOLERANCE) || first.length !== second.length) process.exit(1);
