import fs from 'node:fs/promises';
import { readMrz } from '../vision/mrz/read.ts';
import { readDocumentFront } from '../vision/docfront.ts';
import { DEFAULT_EMBEDDER, loadEmbedderSpec } from '../vision/embedder.ts';
import { faceScore, readFaces } from '../vision/faces.ts';
import { ImageError } from '../vision/image.ts';
import { CliError } from './options.ts';

const USAGE = 'Usage: warden verify mrz IMAGE | warden verify doc-front IMAGE | warden verify face IMAGE_A IMAGE_B';

async function readImage(file: string): Promise<Buffer> {
  return fs.readFile(file).catch((error: Error) => {
    throw new CliError(`Cannot read ${file}: ${error.message}`);
  });
}

async function describe<T>(file: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof ImageError) throw new CliError(`${file}: ${error.message} (${error.reason})`);
    throw error;
  }
}

/**
 * `warden verify mrz|doc-front|face ...`: the readers the pipeline's vision workers run, on local
 * files, printing what they saw. Needs no database. The face model and threshold follow
 * WARDEN_FACE_MODEL and WARDEN_FACE_THRESHOLD as the service does.
 */
export async function verifyCommand(args: string[]): Promise<unknown> {
  const [kind, ...files] = args;
  if (kind === 'mrz' && files.length === 1) {
    const file = files[0]!;
    const result = await describe(file, async () => readMrz(await readImage(file)));
    return { file, found: result.found, lines: result.lines, format: result.format, valid: result.valid, fields: result.fields, invalid_fields: result.invalid_fields, corrections: result.corrections, confidence: result.confidence, timings: result.timings };
  }
  if (kind === 'doc-front' && files.length === 1) {
    const file = files[0]!;
    const { result } = await describe(file, async () => readDocumentFront(await readImage(file)));
    return { file, ...result };
  }
  if (kind === 'face' && files.length === 2) {
    let spec;
    try {
      spec = loadEmbedderSpec(process.env.WARDEN_FACE_MODEL || DEFAULT_EMBEDDER);
    } catch (error) {
      throw new CliError(`WARDEN_FACE_MODEL: ${(error as Error).message}`);
    }
    const threshold = process.env.WARDEN_FACE_THRESHOLD ? Number(process.env.WARDEN_FACE_THRESHOLD) : spec.threshold;
    if (!Number.isFinite(threshold) || threshold < -1 || threshold > 1) throw new CliError('WARDEN_FACE_THRESHOLD must be a number from -1 to 1');
    const reads = [];
    for (const file of files) reads.push({ file, ...(await describe(file, async () => readFaces(await readImage(file), spec))) });
    const [first, second] = reads as [(typeof reads)[0], (typeof reads)[0]];
    const similarity = first.embedding && second.embedding ? Math.round(faceScore(first.embedding, second.embedding, spec.metric) * 10000) / 10000 : null;
    const match = similarity !== null && similarity >= threshold;
    const faceless = reads.filter((read) => read.embedding === null && !read.too_small).map((read) => read.file);
    const small = reads.filter((read) => read.too_small).map((read) => read.file);
    return {
      model: spec.name,
      // The score the websocket's face_verification_result reports, on the model's scale.
      metric: spec.metric === 'cosine' ? 'cosine similarity' : '1 - Euclidean distance',
      images: reads.map(({ embedding, ...rest }) => ({ ...rest, face_found: embedding !== null, face_count: rest.faces.length })),
      similarity,
      threshold,
      match,
      verdict: faceless.length ? `no face found in ${faceless.join(' and ')}` : small.length ? `face too small to compare in ${small.join(' and ')}` : match ? 'same person' : 'different people',
    };
  }
  throw new CliError(USAGE, 2);
}
