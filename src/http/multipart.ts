import fs from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import Busboy from 'busboy';
import type { Context } from 'koa';
import { HttpError, RequestAbortedError } from './errors.ts';
import { spoolToFile, type SpooledFile } from './spool.ts';

/**
 * The one multipart reader of the service (KYC uploads, evidence of case work): text fields into
 * memory under small limits, file parts streamed to temporary `.part` files while hashed, never
 * held whole in memory. Whatever goes wrong while reading (a file over its limit, too many files,
 * a broken body, a client that disconnects mid-upload) stops the reading and removes every
 * temporary file the request wrote before the error is thrown; nothing of it stays on disk.
 */

export interface ReceivedFile extends SpooledFile {
  /** The form field the part came in. */
  field: string;
  /** The file name the client gave ('' when none). */
  filename: string;
  /** The type the client declared; the content decides, this is only reported. */
  declaredType: string;
}

export interface ReceivedMultipart {
  fields: Record<string, string>;
  /** In the order they came. */
  files: ReceivedFile[];
}

export interface MultipartOptions {
  temporaryDirectory: string;
  /** The fields whose file parts are kept; the parts of any other field are drained unread. */
  fileFields: readonly string[];
  /** How many file parts are kept. */
  maxFiles: number;
  /** A file part past `maxFiles`: refused with this error, or, when absent, drained unread. */
  tooManyFiles?: () => HttpError;
  /** A file over this size is refused (413) as soon as the limit is passed, with nothing more read. */
  maxFileBytes: number;
  /** The 413 message. */
  tooLargeMessage: string;
  /** busboy's limits on the whole body: file parts (of any field), fields, a field's size, parts. */
  limits: { files: number; fields: number; fieldSize: number; parts: number };
}

function malformed(message: string): HttpError {
  return new HttpError(400, `Malformed multipart request: ${message}`, 'multipart_invalid');
}

/** Reads a multipart/form-data body (415 for any other type); see the module's comment. */
export async function readMultipart(ctx: Context, options: MultipartOptions): Promise<ReceivedMultipart> {
  if (!ctx.is('multipart/form-data')) {
    throw new HttpError(415, 'Send the request as multipart/form-data.', 'content_type_invalid');
  }
  let parser: Busboy.Busboy;
  try {
    parser = Busboy({ headers: ctx.req.headers, limits: { fileSize: options.maxFileBytes, ...options.limits } });
  } catch (error) {
    throw malformed((error as Error).message);
  }
  if (ctx.req.destroyed && !ctx.req.complete) throw new RequestAbortedError();
  await fs.mkdir(options.temporaryDirectory, { recursive: true });

  const fields: Record<string, string> = {};
  const files: ReceivedFile[] = [];
  const written: string[] = [];
  const pendingWrites: Promise<void>[] = [];
  const fileStreams: Readable[] = [];
  let onClose: (() => void) | undefined;

  const done = new Promise<void>((resolve, reject) => {
    // Counted when a part starts, not when its write ends: a part past the limit arriving while
    // earlier ones are still being written is never written to a temporary file of its own.
    let taken = 0;
    // A client that goes away mid-body: busboy would wait for the rest for ever.
    onClose = () => {
      if (!ctx.req.complete) reject(new RequestAbortedError());
    };
    ctx.req.once('close', onClose);
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (field, stream, info) => {
      if (!options.fileFields.includes(field)) {
        stream.resume();
        return;
      }
      if (taken >= options.maxFiles) {
        stream.resume();
        if (options.tooManyFiles) reject(options.tooManyFiles());
        return;
      }
      const position = taken;
      taken += 1;
      const { temporaryPath, written: spooled } = spoolToFile(stream, options.temporaryDirectory);
      written.push(temporaryPath);
      fileStreams.push(stream);
      stream.on('limit', () => reject(new HttpError(413, options.tooLargeMessage, 'file_too_large')));
      const write = spooled.then((file) => {
        files[position] = { ...file, field, filename: info.filename ?? '', declaredType: info.mimeType };
      });
      pendingWrites.push(write);
      write.catch(reject);
    });
    parser.on('filesLimit', () => {
      if (options.tooManyFiles) reject(options.tooManyFiles());
    });
    parser.on('error', (error: Error) => reject(malformed(error.message)));
    parser.on('close', () => Promise.all(pendingWrites).then(() => resolve(), reject));
  });

  ctx.req.pipe(parser);
  try {
    await done;
  } catch (error) {
    ctx.req.unpipe(parser);
    // Stop reading: the rest of an oversized, refused or broken body is not wanted. The connection closes after the answer.
    ctx.req.pause();
    ctx.set('Connection', 'close');
    // A write still in flight (an aborted or refused body) is stopped and settles before its file is removed.
    for (const stream of fileStreams) stream.destroy();
    await Promise.allSettled(pendingWrites);
    await removeTemporary(written);
    throw error;
  } finally {
    if (onClose) ctx.req.off('close', onClose);
  }
  return { fields, files: files.filter(Boolean) };
}

/** Removes the temporary files of received parts (those already moved into a store are gone already). */
export async function discardReceived(files: readonly Pick<SpooledFile, 'temporaryPath'>[]): Promise<void> {
  await removeTemporary(files.map((file) => file.temporaryPath));
}

async function removeTemporary(paths: readonly string[]): Promise<void> {
  await Promise.allSettled(paths.map((temporary) => fs.rm(temporary, { force: true })));
}

/**
 * A request whose multipart body is refused before it is read: the connection closes after the
 * answer, so the rest of the body (up to hundreds of MB) is neither read nor stored.
 */
export function refuseUnreadBody(ctx: Context): void {
  if (ctx.is('multipart/form-data') && !ctx.req.complete) ctx.set('Connection', 'close');
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
