import { fileTypeFromBuffer } from 'file-type';
import type { Context } from 'koa';
import type { AppContext } from '../../context.ts';
import { HttpError } from '../../http/errors.ts';
import { discardReceived, readMultipart, type ReceivedFile } from '../../http/multipart.ts';
import type { HeldFile, StoredAttachment } from '../kyc/storage.ts';

/**
 * Evidence files of compliance decisions and approval signatures: up to ten per request, streamed
 * to temporary files while hashed (never held whole in memory), judged by their bytes rather than
 * their names, and kept in the same file store as KYC uploads. The limits are the KYC uploads':
 * 25 MB a file, images and videos, plus PDF documents (the usual form of compliance evidence).
 */

export const MAX_ATTACHMENTS = 10;
export const MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024;

/** An attachment as received: a temporary file, not stored yet. */
export type ReceivedAttachment = ReceivedFile;

export interface ReceivedForm {
  fields: Record<string, string>;
  files: ReceivedAttachment[];
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
 * Reads a multipart body with the service's one multipart reader: text fields, and files under
 * `attachments[]` (or `attachments`). An eleventh file, an oversized one, a broken or aborted body
 * is refused (400/413) with nothing kept. The files are temporary until withStoredAttachments.
 */
export function receiveForm(ctx: Context, temporaryDirectory: string): Promise<ReceivedForm> {
  return readMultipart(ctx, {
    temporaryDirectory,
    fileFields: ['attachments[]', 'attachments'],
    maxFiles: MAX_ATTACHMENTS,
    tooManyFiles: () => new HttpError(400, `At most ${MAX_ATTACHMENTS} attachments may be sent.`, 'too_many_attachments'),
    maxFileBytes: MAX_ATTACHMENT_BYTES,
    tooLargeMessage: `An attachment is larger than ${MAX_ATTACHMENT_BYTES / (1024 * 1024)} MB.`,
    limits: { files: MAX_ATTACHMENTS + 1, fields: 20, fieldSize: 64 * 1024, parts: MAX_ATTACHMENTS + 25 },
  });
}

/**
 * Checks every received file (empty, type by content) before any is stored; stores them all; runs
 * `work` (the decision or signature that references them, in its transaction). The files stay only
 * when `work` succeeds: a refusal inside it (a 409 race, a validation, a failed write) removes
 * every file this request added to the store, and the temporary files go in every case.
 */
export async function withStoredAttachments<T>(app: Pick<AppContext, 'files'>, files: ReceivedAttachment[], work: (attachments: StoredAttachment[]) => Promise<T>): Promise<T> {
  const held: HeldFile[] = [];
  let succeeded = false;
  try {
    const types: string[] = [];
    for (const file of files) {
      if (file.size === 0) throw new HttpError(400, `${file.filename.slice(0, 100) || 'An attachment'} is empty.`, 'file_empty');
      types.push(await sniffEvidence(file.filename, file.head));
    }
    const stored: StoredAttachment[] = [];
    for (const [index, file] of files.entries()) {
      const hold = await app.files.hold(file.temporaryPath, file.sha256);
      held.push(hold);
      stored.push({ name: file.filename.slice(0, 255), content_type: types[index]!, size: file.size, sha256: file.sha256, path: hold.key });
    }
    const result = await work(stored);
    succeeded = true;
    return result;
  } finally {
    await discardReceived(files);
    await Promise.allSettled(held.map((hold) => hold.settle(succeeded)));
  }
}
