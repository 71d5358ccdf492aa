import fs from 'node:fs/promises';
import Busboy from 'busboy';
import { fileTypeFromBuffer } from 'file-type';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { spoolToFile, type SpooledFile } from '../../http/spool.ts';

/**
 * Evidence files of compliance decisions and approval signatures: up to ten per request, streamed
 * to temporary files while hashed (never held whole in memory), judged by their bytes rather than
 * their names, and kept in the same file store as KYC uploads. The limits are the KYC uploads':
 * 25 MB a file, images and videos, plus PDF documents (the usual form of compliance evidence).
 */

export const MAX_ATTACHMENTS = 10;
export const MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024;

export interface StoredAttachment {
  name: string;
  content_type: string;
  size: number;
  sha256: string;
  /** The key in the file store. */
  path: string;
}

interface Received extends SpooledFile {
  name: string;
}

export interface ReceivedForm {
  fields: Record<string, string>;
  files: Received[];
}

/** The evidence allowlist: the KYC uploads' images and videos, and PDF. */
export function allowedEvidenceType(mime: string): boolean {
  return mime.startsWith('image/') || mime.startsWith('video/') || mime === 'application/pdf';
}

/** The type of a file by its first bytes, or a 400 naming the file when it is not on the allowlist. */
export async function sniffEvidence(name: string, head: Buffer): Promise<string> {
  const detected = await fileTypeFromBuffer(head);
  if (!detected || !allowedEvidenceType(detected.mime)) {
    throw new HttpError(400, `${name.slice(0, 100) || 'An attachment'} is not an accepted file: only images, videos and PDF documents are (the content decides, not the name).`, 'file_type_not_allowed');
  }
  return detected.mime;
}

/**
 * Reads a multipart body: text fields, and files under `attachments[]` (or `attachments`). An
 * eleventh file, an oversized one or a broken body is refused (400/413) with nothing kept.
 */
export async function receiveForm(ctx: Context, temporaryDirectory: string): Promise<ReceivedForm> {
  await fs.mkdir(temporaryDirectory, { recursive: true });
  const fields: Record<string, string> = {};
  const files: Received[] = [];
  const written: string[] = [];
  let parser: Busboy.Busboy;
  try {
    parser = Busboy({ headers: ctx.req.headers, limits: { fileSize: MAX_ATTACHMENT_BYTES, files: MAX_ATTACHMENTS + 1, fields: 20, fieldSize: 64 * 1024, parts: MAX_ATTACHMENTS + 25 } });
  } catch (error) {
    throw new HttpError(400, `Malformed multipart request: ${(error as Error).message}`, 'multipart_invalid');
  }
  const done = new Promise<void>((resolve, reject) => {
    const writes: Promise<void>[] = [];
    let count = 0;
    parser.on('field', (name, value) => {
      fields[name] = value;
    });
    parser.on('file', (field, stream, info) => {
      if (field !== 'attachments[]' && field !== 'attachments') {
        stream.resume();
        return;
      }
      count += 1;
      if (count > MAX_ATTACHMENTS) {
        stream.resume();
        reject(new HttpError(400, `At most ${MAX_ATTACHMENTS} attachments may be sent.`, 'too_many_attachments'));
        return;
      }
      const position = count - 1;
      const { temporaryPath, written: spooled } = spoolToFile(stream, temporaryDirectory);
      written.push(temporaryPath);
      stream.on('limit', () => reject(new HttpError(413, `An attachment is larger than ${MAX_ATTACHMENT_BYTES / (1024 * 1024)} MB.`, 'file_too_large')));
      writes.push(
        spooled.then((file) => {
          files[position] = { name: info.filename ?? '', ...file };
        }),
      );
    });
    parser.on('filesLimit', () => reject(new HttpError(400, `At most ${MAX_ATTACHMENTS} attachments may be sent.`, 'too_many_attachments')));
    parser.on('error', (error: Error) => reject(new HttpError(400, `Malformed multipart request: ${error.message}`, 'multipart_invalid')));
    parser.on('close', () => Promise.all(writes).then(() => resolve(), reject));
  });
  ctx.req.pipe(parser);
  try {
    await done;
  } catch (error) {
    ctx.req.unpipe(parser);
    ctx.req.pause();
    ctx.set('Connection', 'close');
    await Promise.allSettled(written.map((temporary) => fs.rm(temporary, { force: true })));
    throw error;
  }
  return { fields, files: files.filter(Boolean) };
}

/** Checks every received file (empty, type by content) before any is stored; then stores them all. */
export async function storeAttachments(app: Pick<AppContext, 'files'>, files: Received[]): Promise<StoredAttachment[]> {
  try {
    const types: string[] = [];
    for (const file of files) {
      if (file.size === 0) throw new HttpError(400, `${file.name.slice(0, 100) || 'An attachment'} is empty.`, 'file_empty');
      types.push(await sniffEvidence(file.name, file.head));
    }
    const stored: StoredAttachment[] = [];
    for (const [index, file] of files.entries()) {
      const key = await app.files.put(file.temporaryPath, file.sha256);
      stored.push({ name: file.name.slice(0, 255), content_type: types[index]!, size: file.size, sha256: file.sha256, path: key });
    }
    return stored;
  } finally {
    await Promise.allSettled(files.map((file) => fs.rm(file.temporaryPath, { force: true })));
  }
}
