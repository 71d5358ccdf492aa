import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import path from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';

/** How many leading bytes are kept for judging a file's type by its content (file-type reads 4100). */
const HEAD_BYTES = 4100;

/** A file part of a multipart request, written to a temporary file and measured on the way. */
export interface SpooledFile {
  temporaryPath: string;
  size: number;
  sha256: string;
  /** The first bytes, for judging the type by content. */
  head: Buffer;
}

/**
 * Starts writing an uploaded file part to a new `.part` file in `directory`, hashing it as it goes
 * (never held whole in memory). The path is known at once, so a request that fails or is aborted
 * can remove it whether or not the write finished; `written` settles when the part has ended.
 */
export function spoolToFile(stream: Readable, directory: string): { temporaryPath: string; written: Promise<SpooledFile> } {
  const temporaryPath = path.join(directory, `${randomUUID()}.part`);
  const hash = createHash('sha256');
  const head: Buffer[] = [];
  let headLength = 0;
  let size = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      size += chunk.length;
      hash.update(chunk);
      if (headLength < HEAD_BYTES) {
        head.push(chunk.subarray(0, HEAD_BYTES - headLength));
        headLength += Math.min(chunk.length, HEAD_BYTES - headLength);
      }
      callback(null, chunk);
    },
  });
  const written = pipeline(stream, meter, createWriteStream(temporaryPath)).then(() => ({
    temporaryPath,
    size,
    sha256: hash.digest('hex'),
    head: Buffer.concat(head),
  }));
  return { temporaryPath, written };
}
