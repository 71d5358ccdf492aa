import { discardReceived, readMultipart, type ReceivedFile } from '../../http/multipart.ts';

// The reader (src/http/multipart.ts) is shared with the evidence of case work; this is the KYC upload's shape of it.

export interface ReceivedUpload {
  fields: Record<string, string>;
  file: ReceivedFile | null;
}

/**
 * Reads a KYC upload: text fields, and the `snapshot` file streamed to a temporary file while
 * hashed. A file over `maxFileBytes` is refused (413) as soon as the limit is passed, with nothing
 * more read; a second snapshot part is drained unread; an aborted or broken body leaves no file.
 */
export async function receiveUpload(ctx: Parameters<typeof readMultipart>[0], maxFileBytes: number, temporaryDirectory: string): Promise<ReceivedUpload> {
  const { fields, files } = await readMultipart(ctx, {
    temporaryDirectory,
    fileFields: ['snapshot'],
    maxFiles: 1,
    maxFileBytes,
    tooLargeMessage: `The file is larger than ${maxFileBytes / (1024 * 1024)} MB.`,
    limits: { files: 3, fields: 20, fieldSize: 1024 * 1024, parts: 30 },
  });
  return { fields, file: files[0] ?? null };
}

export async function discard(file: ReceivedFile | null): Promise<void> {
  if (file) await discardReceived([file]);
}
