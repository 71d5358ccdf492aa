import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import Busboy from 'busboy';
import type { Context } from 'koa';
import { RequestAbortedError } from '../../http/errors.ts';
import { spoolToFile, type SpooledFile } from '../../http/spool.ts';
import { KycError } from './errors.ts';

export interface ReceivedFile extends SpooledFile {
  declaredType: string;
}

export interface ReceivedUpload {
  fields: Record<string, string>;
  file: ReceivedFile | null;
}

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
  const pendingWrites: Promise<void>[] = [];
  const fileStreams: Readable[] = [];

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
    // Set when the first snapshot part starts, not when its write ends: a second part arriving
    // meanwhile is drained, never written to a temporary file of its own.
    let snapshotTaken = false;
    // A client that goes away mid-body: busboy would wait for the rest for ever.
    ctx.req.once('close', () => {
      if (!ctx.req.complete) reject(new RequestAbortedError());
    });
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (name, stream, info) => {
      if (name !== 'snapshot' || snapshotTaken) {
        stream.resume();
        return;
      }
      snapshotTaken = true;
      const { temporaryPath, written: spooled } = spoolToFile(stream, temporaryDirectory);
      written.push(temporaryPath);
      stream.on('limit', () => reject(new KycError(413, 'file_too_large', `The file is larger than ${maxFileBytes / (1024 * 1024)} MB.`)));
      fileStreams.push(stream);
      const write = spooled.then((spooledFile) => {
        file = { ...spooledFile, declaredType: info.mimeType };
      });
      pendingWrites.push(write);
      write.catch(reject);
    });
    parser.on('error', (error: Error) => reject(new KycError(400, 'multipart_invalid', `Malformed multipart request: ${error.message}`)));
    parser.on('close', () => Promise.all(pendingWrites).then(() => resolve(), reject));
  });

  ctx.req.pipe(parser);
  try {
    await done;
  } catch (error) {
    ctx.req.unpipe(parser);
    // Stop reading: the rest of an oversized or broken body is not wanted. The connection closes after the answer.
    ctx.req.pause();
    ctx.set('Connection', 'close');
    // A write still in flight (an aborted or refused body) is stopped and settles before its file is removed.
    for (const stream of fileStreams) stream.destroy();
    await Promise.allSettled(pendingWrites);
    await Promise.all(written.map((temporary) => fs.rm(temporary, { force: true })));
    throw error;
  }
  return { fields, file };
}

/** Temporary uploads older than this at start-up belong to no request of a live process. */
const ORPHAN_AGE_MS = 60 * 60 * 1000;

/**
 * Removes `.part` files a killed process left in the temporary folder. Called at start-up; a
 * file younger than an hour is left alone, since another process on the machine may be writing it.
 */
export async function sweepTemporaryUploads(temporaryDirectory: string, now = Date.now()): Promise<number> {
  let names: string[];
  try {
    names = await fs.readdir(temporaryDirectory);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
  let removed = 0;
  for (const name of names) {
    if (!name.endsWith('.part')) continue;
    const file = path.join(temporaryDirectory, name);
    const stat = await fs.stat(file).catch(() => null);
    if (stat && now - stat.mtimeMs > ORPHAN_AGE_MS) {
      await fs.rm(file, { force: true });
      removed++;
    }
  }
  return removed;
}

export async function discard(file: ReceivedFile | null): Promise<void> {
  if (file) await fs.rm(file.temporaryPath, { force: true });
}
