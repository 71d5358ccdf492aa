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
  /**
   * Moves a finished temporary file into the store for a request that may still be refused (its
   * transaction has not committed yet); the request settles the hold once it knows. See HeldFile.
   */
  hold(temporaryPath: string, sha256: string): Promise<HeldFile>;
  /** Stores bytes made on the server (an NFC portrait); returns its key. */
  putBuffer(bytes: Buffer): Promise<string>;
  read(key: string): Promise<Buffer>;
  stream(key: string): NodeJS.ReadableStream;
  /** A folder for files being received. */
  temporaryDirectory(): string;
}

/**
 * A file stored for a request that has not gone through yet. `settle(true)`: the request went
 * through and references the file. `settle(false)`: it was refused, and the file goes again unless
 * the store held the same bytes before (content addressing: another record references them) or
 * another request of this process that holds the same bytes keeps them.
 */
export interface HeldFile {
  key: string;
  settle(keep: boolean): Promise<void>;
}

function artifactKey(sha256: string): string {
  if (!/^[0-9a-f]{64}$/.test(sha256)) throw new Error(`not a SHA-256: ${sha256.slice(0, 80)}`);
  return `artifacts/${sha256.slice(0, 2)}/${sha256.slice(2, 4)}/${sha256}`;
}

/** The requests of this process holding one key: whether one of them added the file, whether one kept it. */
interface Holding {
  holders: number;
  created: boolean;
  kept: boolean;
}

export class LocalFileStore implements FileStore {
  private readonly holdings = new Map<string, Holding>();
  private readonly removals = new Map<string, Promise<void>>();

  constructor(private readonly root: string) {}

  temporaryDirectory(): string {
    return path.join(this.root, 'tmp');
  }

  async put(temporaryPath: string, sha256: string): Promise<string> {
    const key = artifactKey(sha256);
    await this.move(temporaryPath, key);
    return key;
  }

  async hold(temporaryPath: string, sha256: string): Promise<HeldFile> {
    const key = artifactKey(sha256);
    // A refused request's copy of the same bytes still being removed: store ours after it is gone.
    for (let removal = this.removals.get(key); removal; removal = this.removals.get(key)) await removal;
    const holding = this.holdings.get(key) ?? { holders: 0, created: false, kept: false };
    holding.holders += 1;
    this.holdings.set(key, holding);
    let settled = false;
    const settle = async (keep: boolean): Promise<void> => {
      if (settled) return;
      settled = true;
      holding.holders -= 1;
      if (keep) holding.kept = true;
      if (holding.holders > 0) return;
      this.holdings.delete(key);
      if (!holding.created || holding.kept) return;
      const removal = fs.rm(this.resolve(key), { force: true }).finally(() => {
        if (this.removals.get(key) === removal) this.removals.delete(key);
      });
      this.removals.set(key, removal);
      await removal;
    };
    try {
      if (await this.move(temporaryPath, key)) holding.created = true;
    } catch (error) {
      await settle(false);
      throw error;
    }
    return { key, settle };
  }

  /** Moves a temporary file to its key; true when the store did not hold these bytes before. */
  private async move(temporaryPath: string, key: string): Promise<boolean> {
    const target = path.join(this.root, key);
    await fs.mkdir(path.dirname(target), { recursive: true });
    try {
      await fs.access(target);
      await fs.rm(temporaryPath, { force: true });
      return false;
    } catch {
      await fs.rename(temporaryPath, target);
      return true;
    }
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

/** A file kept as evidence (a decision's or a signature's attachment): its name, type, size, hash and store key. */
export interface StoredAttachment {
  name: string;
  content_type: string;
  size: number;
  sha256: string;
  /** The key in the file store. */
  path: string;
}
