import fs from 'node:fs/promises';
import { MrzImageError, readMrz } from '../modules/kyc/mrz/read.ts';
import { CliError } from './main.ts';

/**
 * `warden verify mrz IMAGE`: the MRZ reader the pipeline's vision workers run, on one file,
 * printing what it saw. Needs no database.
 */
export async function verifyCommand(args: string[]): Promise<unknown> {
  const [kind, file] = args;
  if (kind !== 'mrz' || !file) throw new CliError('Usage: warden verify mrz IMAGE', 2);
  const image = await fs.readFile(file).catch((error: Error) => {
    throw new CliError(`Cannot read ${file}: ${error.message}`);
  });
  try {
    const result = await readMrz(image);
    return { file, found: result.found, lines: result.lines, format: result.format, valid: result.valid, fields: result.fields, invalid_fields: result.invalid_fields, corrections: result.corrections, confidence: result.confidence, timings: result.timings };
  } catch (error) {
    if (error instanceof MrzImageError) throw new CliError(`${file}: ${error.message} (${error.reason})`);
    throw error;
  }
}
