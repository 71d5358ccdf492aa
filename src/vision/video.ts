/**
 * Frames of a video for the liveness check, decoded by the operator's ffmpeg (WARDEN_FFMPEG or
 * `ffmpeg` on the PATH; no video decoder ships with the service). ffmpeg samples two frames a second
 * from the start, fits each into a square cell and tiles them into one PNG mosaic (MOSAIC), so the vision worker gets a single image and no decoder of its own.
 */
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, constants } from 'node:fs';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The mosaic written: this many cells, each a square frame of `cell` pixels, row by row, unused cells black. */
export const MOSAIC = { columns: 4, rows: 2, cell: 360 } as const;

/** Frames per second sampled: 8 cells hold the first four seconds. */
const FPS = 2;
/** A video ffmpeg cannot turn into frames within this is refused. */
const TIMEOUT_MS = 30_000;

/** The video could not be decoded: `message` carries ffmpeg's own words. */
export class VideoError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VideoError';
  }
}

/** The ffmpeg to use, or null when there is none: an explicit path must be executable, else the PATH is searched. */
export function findFfmpeg(explicit: string | undefined, searchPath = process.env.PATH ?? ''): string | null {
  const candidates = explicit ? [explicit] : searchPath.split(path.delimiter).filter(Boolean).map((dir) => path.join(dir, 'ffmpeg'));
  return candidates.find((candidate) => {
    try {
      accessSync(candidate, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  }) ?? null;
}

/** The PNG mosaic of a video's first frames. Throws VideoError when ffmpeg cannot read the video. */
export async function sampleFrames(ffmpeg: string, video: Uint8Array): Promise<Buffer> {
  // A file, not a pipe: MP4 files often keep their index at the end, which a pipe cannot seek to.
  const file = path.join(os.tmpdir(), `warden-liveness-${randomUUID()}`);
  await fs.writeFile(file, video);
  const { cell, columns, rows } = MOSAIC;
  const filter = `fps=${FPS},scale=${cell}:${cell}:force_original_aspect_ratio=decrease,pad=${cell}:${cell}:(ow-iw)/2:(oh-ih)/2,tile=${columns}x${rows}`;
  try {
    const { stdout } = await run(ffmpeg, ['-nostdin', '-v', 'error', '-i', file, '-vf', filter, '-frames:v', '1', '-f', 'image2pipe', '-c:v', 'png', 'pipe:1'], {
      encoding: 'buffer',
      maxBuffer: 64 * 1024 * 1024,
      timeout: TIMEOUT_MS,
    });
    if (stdout.length === 0) throw new VideoError('ffmpeg found no frames in the video');
    return stdout;
  } catch (error) {
    if (error instanceof VideoError) throw error;
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    throw new VideoError(`The video could not be decoded (${stderr || (error as Error).message})`);
  } finally {
    await fs.rm(file, { force: true });
  }
}
