import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import Busboy from 'busboy';
import type { Context } from 'koa';
import { KycError } from './errors.ts';

export interface ReceivedFile {
  temporaryPath: string;
  size: number;
  sha256: string;
  /** The first bytes, for judging the type by content. */
  head: Buffer;
  declaredType: string;
}

export interface ReceivedUpload {
  fields: Record<string, string>;
  file: ReceivedFile | null;
}

const HEAD_BYTES = 4100;

/**
 * Streams a multipart upload: text fields into memory (small limits), the `snapshot` file to a
 * temporary file while hashing it. A file over `maxFileBytes` is refused as soon as the limit is
 * passed, with nothing more read, so an oversized upload is never held in memory or on disk.
 */
export async function receiveUpload(ctx: Context, maxFileBytes: number, temporaryDirectory: string): Promise<ReceivedUpload> {
  if (!ctx.is('multipart/form-data')) {
    throw new KycError(415, 'content_type_invalid', 'Send the upload as multipart/form-data.');
  }
  await fs.mkdir(temporaryDirectory, { recursive: true });
  const fields: Record<string, string> = {};
  let file: ReceivedFile | null = null;
  const written: string[] = [];

  let parser: Busboy.Busboy;
  try {
    parser = Busboy({
      headers: ctx.req.headers,
      limits: { fileSize: maxFileBytes, files: 3, fields: 20, fieldSize: 1024 * 1024, parts: 30 },
    });
  } catch (error) {
    throw new KycError(400, 'multipart_invalid', `Malformed multipart request: ${(error as Error).message}`);
  }

  const done = new Promise<void>((resolve, reject) => {
    const fileWrites: Promise<void>[] = [];
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'snapshot' || file) {
        stream.resume();
        return;
      }
      const temporaryPath = path.join(temporaryDirectory, `${randomUUID()}.part`);
      written.push(temporaryPath);
      const hash = createHash('sha256');
      const headChunks: Buffer[] = [];
      let headLength = 0;
      let size = 0;
      const meter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          size += chunk.length;
          hash.update(chunk);
          if (headLength < HEAD_BYTES) {
            headChunks.push(chunk.subarray(0, HEAD_BYTES - headLength));
            headLength += Math.min(chunk.length, HEAD_BYTES - headLength);
          }
          callback(null, chunk);
        },
      });
      stream.on('limit', () => reject(new KycError(413, 'file_too_large', `The file is larger than ${maxFileBytes / (1024 * 1024)} MB.`)));
      fileWrites.push(
        pipeline(stream, meter, createWriteStream(temporaryPath)).then(() => {
          file = { temporaryPath, size, sha256: hash.digest('hex'), head: Buffer.concat(headChunks), declaredType: info.mimeType };
        }),
      );
    });
    parser.on('error', (error: Error) => reject(new KycError(400, 'multipart_invalid', `Malformed multipart request: ${error.message}`)));
    parser.on('close', () => Promise.all(fileWrites).then(() => resolve(), reject));
  });

  ctx.req.pipe(parser);
  try {
    await done;
  } catch (error) {
    ctx.req.unpipe(parser);
    // Stop reading: the rest of an oversized or broken body is not wanted. The connection closes after the answer.
    ctx.req.pause();
    ctx.set('Connection', 'close');
    await Promise.all(written.map((temporary) => fs.rm(temporary, { force: true })));
    throw error;
  }
  return { fields, file };
}

export async function discard(file: ReceivedFile | null): Promise<void> {
  if (file) await fs.rm(file.temporaryPath, { force: true });
}
