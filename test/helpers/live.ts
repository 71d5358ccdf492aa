import { WebSocket } from 'ws';

/** A staff live-socket client that keeps every frame it receives, for tests to wait on. */
export interface LiveClient {
  ws: WebSocket;
  // Frames are JSON objects of several shapes; tests read their fields freely.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  frames: any[];
  /** The first frame (received already or later) matching `predicate`; rejects after `timeoutMs`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  next(predicate: (frame: any) => boolean, timeoutMs?: number): Promise<any>;
  /** Resolves true when no frame matching `predicate` arrives within `ms`. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  silent(predicate: (frame: any) => boolean, ms?: number): Promise<boolean>;
  login(token: string): Promise<{ type: string; token?: string; permissions?: string[] }>;
  closed: Promise<{ code: number }>;
  close(): void;
}

export const LIVE_PATH = '/api/mobile/ws/';

/** Opens a live socket at `path` (the mobile one by default; headers for the web admin's: cookie, origin). */
export async function connectLive(baseUrl: string, options: { path?: string; headers?: Record<string, string> } = {}): Promise<LiveClient> {
  const ws = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}${options.path ?? LIVE_PATH}`, { headers: options.headers });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const frames: any[] = [];
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const waiters: { predicate: (frame: any) => boolean; resolve: (frame: any) => void }[] = [];
  ws.on('message', (data) => {
    const frame = JSON.parse(data.toString());
    frames.push(frame);
    for (const waiter of [...waiters]) {
      if (waiter.predicate(frame)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(frame);
      }
    }
  });
  const closed = new Promise<{ code: number }>((resolve) => ws.on('close', (code) => resolve({ code })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const client: LiveClient = {
    ws,
    frames,
    next(predicate, timeoutMs = 5000) {
      const seen = frames.find(predicate);
      if (seen) {
        frames.splice(frames.indexOf(seen), 1);
        return Promise.resolve(seen);
      }
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching frame within ${timeoutMs} ms; got ${JSON.stringify(frames)}`)), timeoutMs);
        waiters.push({
          predicate,
          resolve: (frame) => {
            clearTimeout(timer);
            frames.splice(frames.indexOf(frame), 1);
            resolve(frame);
          },
        });
      });
    },
    async silent(predicate, ms = 500) {
      try {
        await client.next(predicate, ms);
        return false;
      } catch {
        return true;
      }
    },
    login(token) {
      ws.send(JSON.stringify({ type: 'login', payload: { token } }));
      return client.next((frame) => frame.type === 'login' || frame.type === 'login_failed');
    },
    closed,
    close() {
      ws.close();
    },
  };
  return client;
}
