/**
 * Vision pool benchmark on the project's own fixtures (runs on a fresh clone): the doc_front task
 * (decode, straighten, OCR, fields, portrait) and the faces task (detect, align, embed) as the
 * service runs them, latency one at a time and throughput with a queue of work, for the two ways
 * of spending 2 cores (1 worker x 2 ONNX threads, 2 workers x 1 thread), with the process's
 * resident memory once the models are loaded.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { createPools, runVision } from '../src/pools.ts';
import type { VisionTask } from '../workers/vision.ts';
import { machineLine, writeSection } from './results.ts';

const FIXTURES = path.resolve(import.meta.dirname, '../test/fixtures');
const DOCUMENT = fs.readFileSync(path.join(FIXTURES, 'docfront/card-photo.jpg'));
const FACE = fs.readFileSync(path.join(FIXTURES, 'faces/astronaut.jpg'));
const SEQUENTIAL = 20;
const QUEUED = 20;
const BUDGET_MS = 400;

const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

interface Measured {
  setting: string;
  documentP50: number;
  documentP95: number;
  documentsPerSecond: number;
  faceP50: number;
  facesPerSecond: number;
  rssMb: number;
}

async function measure(workers: number, threads: number): Promise<Measured> {
  const config = loadConfig({ LOG_LEVEL: 'silent', WARDEN_VISION_WORKERS: String(workers), WARDEN_ONNX_THREADS: String(threads) });
  const pools = createPools(config);
  const run = async (type: VisionTask['type'], image: Buffer) => {
    // A copy each time: the task takes the bytes it is given.
    const bytes = Buffer.from(image);
    const started = performance.now();
    const outcome = await runVision(pools.vision, type, bytes);
    if (!outcome.ok) throw new Error(outcome.message);
    return performance.now() - started;
  };
  try {
    // Every worker loads its models and runs once before anything is timed.
    await Promise.all(Array.from({ length: workers }, () => run('docfront', DOCUMENT)));
    await Promise.all(Array.from({ length: workers }, () => run('faces', FACE)));
    const rssMb = process.memoryUsage().rss / 2 ** 20;
    const documents: number[] = [];
    for (let i = 0; i < SEQUENTIAL; i++) documents.push(await run('docfront', DOCUMENT));
    const faces: number[] = [];
    for (let i = 0; i < SEQUENTIAL; i++) faces.push(await run('faces', FACE));
    let started = performance.now();
    await Promise.all(Array.from({ length: QUEUED }, () => run('docfront', DOCUMENT)));
    const documentsPerSecond = QUEUED / ((performance.now() - started) / 1000);
    started = performance.now();
    await Promise.all(Array.from({ length: QUEUED }, () => run('faces', FACE)));
    const facesPerSecond = QUEUED / ((performance.now() - started) / 1000);
    return {
      setting: `${workers} worker${workers > 1 ? 's' : ''} x ${threads} thread${threads > 1 ? 's' : ''}`,
      documentP50: quantile(documents, 0.5),
      documentP95: quantile(documents, 0.95),
      documentsPerSecond,
      faceP50: quantile(faces, 0.5),
      facesPerSecond,
      rssMb,
    };
  } finally {
    await pools.close();
  }
}

export async function benchVision(): Promise<void> {
  const cores = os.availableParallelism();
  const settings: [number, number][] = cores >= 2 ? [[1, cores], [cores, 1]] : [[1, 1]];
  const rows: Measured[] = [];
  for (const [workers, threads] of settings) rows.push(await measure(workers, threads));
  const defaultRow = rows[0]!;
  const markdown = [
    '## Vision pool: doc_front and faces (project fixtures)',
    '',
    machineLine(),
    '',
    `\`npm run bench vision\`: test/fixtures/docfront/card-photo.jpg (a rendered ID card photographed at an angle, 1280x960) as a doc_front task and test/fixtures/faces/astronaut.jpg (512x512) as a faces task, through the vision pool (pool round trip, file moved to the worker). Latency: ${SEQUENTIAL} tasks one after another; throughput: ${QUEUED} tasks submitted at once. RSS: the whole process once every worker has loaded its models.`,
    '',
    '| setting | doc_front p50 / p95 ms | doc_front per s (queued) | faces p50 ms | faces per s (queued) | RSS MB |',
    '|---|---|---|---|---|---|',
    ...rows.map((row) => `| ${row.setting} | ${row.documentP50.toFixed(0)} / ${row.documentP95.toFixed(0)} | ${row.documentsPerSecond.toFixed(2)} | ${row.faceP50.toFixed(0)} | ${row.facesPerSecond.toFixed(1)} | ${row.rssMb.toFixed(0)} |`),
    '',
    `Budget (issue 15): doc_front ${BUDGET_MS} ms or less on 2 cores with the default setting (${defaultRow.setting}): p95 ${defaultRow.documentP95.toFixed(0)} ms ${defaultRow.documentP95 <= BUDGET_MS ? '(met)' : '(not met)'}.`,
    '',
    `Load average at the end: ${os.loadavg().map((value) => value.toFixed(2)).join(' ')} (2 cores; the benchmark lock keeps other benchmarks out, not tests or builds).`,
    '',
  ].join('\n');
  console.log(markdown);
  await writeSection('bench-vision', markdown);
}
