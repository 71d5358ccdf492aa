import fs from 'node:fs/promises';
import { readMrz } from '../modules/kyc/mrz/read.ts';
import { readDocumentFront } from '../modules/kyc/vision/docfront.ts';
import { DEFAULT_EMBEDDER, loadEmbedderSpec } from '../modules/kyc/vision/embedder.ts';
import { cosineSimilarity, readFaces } from '../modules/kyc/vision/faces.ts';
import { ImageError } from '../modules/kyc/vision/image.ts';
import { CliError } from './main.ts';

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
    const similarity = first.embedding && second.embedding ? Math.round(cosineSimilarity(first.embedding, second.embedding) * 10000) / 10000 : null;
    return {
      model: spec.name,
      images: reads.map(({ embedding, ...rest }) => ({ ...rest, face_found: embedding !== null, face_count: rest.faces.length })),
      similarity,
      threshold,
      match: similarity !== null && similarity >= threshold,
    };
  }
  throw new CliError(USAGE, 2);
}
