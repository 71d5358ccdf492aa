/**
 * Trains models/liveness/texture-logistic.json: a logistic regression on the texture measures of
 * src/vision/liveness.ts, fitted on frames rendered by models/liveness/synthetic.ts from both
 * colour portraits (bench/eval-liveness.ts evaluates on other seeds, and fits on one portrait to
 * test on the other to show how far it generalises). Deterministic.
 *
 *   node --import tsx models/liveness/train.ts [FRAMES_PER_PRESENTATION_AND_PORTRAIT]
 */
import fs from 'node:fs';
import path from 'node:path';
import { detectFaces } from '../../src/vision/faces.ts';
import { faceCrop, FEATURE_NAMES, textureFeatures, type LivenessModel } from '../../src/vision/liveness.ts';
import { loadPortrait, PORTRAITS, presentationFrame, PRESENTATIONS, seededRandom, type Presentation } from './synthetic.ts';

const OUT = path.resolve(import.meta.dirname, 'texture-logistic.json');
/** Training seeds (per portrait, presentation and frame); bench/eval-liveness.ts uses others. */
export const TRAINING_SEED = 1;
const L2 = 0.01;
const STEPS = 3000;
const RATE = 0.5;

export interface Sample {
  kind: Presentation;
  features: number[];
}

/** Frames of one portrait, `perKind` of each presentation, seeds from `seed`; frames without a face are left out. */
export async function renderSamples(portraitFile: string, perKind: number, seed: number): Promise<{ samples: Sample[]; noFace: Record<Presentation, number> }> {
  const portrait = await loadPortrait(portraitFile);
  const samples: Sample[] = [];
  const noFace: Record<Presentation, number> = { bona_fide: 0, screen: 0, print: 0 };
  for (const [k, kind] of PRESENTATIONS.entries()) {
    for (let index = 0; index < perKind; index++) {
      const frame = await presentationFrame(portrait, kind, seededRandom(seed + k * 100_000 + index));
      const face = (await detectFaces(frame))[0];
      if (!face) {
        noFace[kind]++;
        continue;
      }
      samples.push({ kind, features: textureFeatures(faceCrop(frame, face.box)) });
    }
  }
  return { samples, noFace };
}

export function fit(samples: Sample[]): LivenessModel {
  const n = FEATURE_NAMES.length;
  const mean = Array.from({ length: n }, (_, i) => samples.reduce((sum, s) => sum + s.features[i]!, 0) / samples.length);
  const scale = Array.from({ length: n }, (_, i) => Math.sqrt(samples.reduce((sum, s) => sum + (s.features[i]! - mean[i]!) ** 2, 0) / samples.length) || 1);
  const x = samples.map((s) => s.features.map((value, i) => (value - mean[i]!) / scale[i]!));
  const y = samples.map((s) => (s.kind === 'bona_fide' ? 0 : 1));
  // Each class weighs the same, however many frames it has.
  const attacks = y.filter(Boolean).length;
  const weight = y.map((label) => (label ? samples.length / (2 * attacks) : samples.length / (2 * (samples.length - attacks))));
  const w = new Array<number>(n).fill(0);
  let b = 0;
  for (let step = 0; step < STEPS; step++) {
    const gradient = new Array<number>(n).fill(0);
    let gradientB = 0;
    x.forEach((row, j) => {
      const p = 1 / (1 + Math.exp(-(b + row.reduce((sum, value, i) => sum + value * w[i]!, 0))));
      const error = (p - y[j]!) * weight[j]!;
      row.forEach((value, i) => (gradient[i]! += error * value));
      gradientB += error;
    });
    for (let i = 0; i < n; i++) w[i]! -= RATE * (gradient[i]! / samples.length + L2 * w[i]!);
    b -= (RATE * gradientB) / samples.length;
  }
  const round = (value: number) => Math.round(value * 1e6) / 1e6;
  return { name: 'texture-logistic-v1', features: [...FEATURE_NAMES], mean: mean.map(round), scale: scale.map(round), weights: w.map(round), bias: round(b), threshold: 0.5 };
}

async function main(): Promise<void> {
  const perKind = Number(process.argv[2] ?? '100');
  const samples: Sample[] = [];
  for (const [p, portrait] of PORTRAITS.entries()) {
    const rendered = await renderSamples(portrait, perKind, TRAINING_SEED + p * 1_000_000);
    samples.push(...rendered.samples);
    console.log(`${portrait}: ${rendered.samples.length} frames with a face (none found: ${JSON.stringify(rendered.noFace)})`);
  }
  const model = fit(samples);
  fs.writeFileSync(OUT, `${JSON.stringify(model, null, 2)}\n`);
  console.log(`wrote ${OUT}: ${JSON.stringify(model)}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
