import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';

/**
 * Where uploaded documents live, outside the database. Paths are content addressed (by SHA-256),
 * so the same file uploaded twice is stored once. An S3-compatible store implements the same
 * interface with the key as object name.
 */
export interface FileStore {
  /** Moves a finished temporary file into the store; returns its key. */
  put(temporaryPath: string, sha256: string): Promise<string>;
  /** Stores bytes made on the server (an NFC portrait); returns its key. */
  putBuffer(bytes: Buffer): Promise<string>;
  read(key: string): Promise<Buffer>;
  stream(key: string): NodeJS.ReadableStream;
  /** A folder for files being received. */
  temporaryDirectory(): string;
}

export class LocalFileStore implements FileStore {
  constructor(private readonly root: string) {}

  temporaryDirectory(): string {
    return path.join(this.root, 'tmp');
  }

  async put(temporaryPath: string, sha256: string): Promise<string> {
    const key = `artifacts/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`;
    const target = path.join(this.root, key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    try {
      await fs.access(target);
      await fs.rm(temporaryPath, { force: true });
    } catch {
      await fs.rename(temporaryPath, target);
    }
    return key;
  }

  async putBuffer(bytes: Buffer): Promise<string> {
    const temporary = path.join(this.temporaryDirectory(), `${randomUUID()}.part`);
    await fs.mkdir(this.temporaryDirectory(), { recursive: true });
    await fs.writeFile(temporary, bytes);
    return this.put(temporary, createHash('sha256').update(bytes).digest('hex'));
  }

  read(key: string): Promise<Buffer> {
    return fs.readFile(this.resolve(key));
  }

  stream(key: string): NodeJS.ReadableStream {
    return createReadStream(this.resolve(key));
  }

  private resolve(key: string): string {
    const resolved = path.resolve(this.root, key);
    if (!resolved.startsWith(path.resolve(this.root) + path.sep)) throw new Error(`key outside the store: ${key}`);
    return resolved;
  }
}
