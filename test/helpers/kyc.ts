import sharp from 'sharp';
import { io, type Socket } from 'socket.io-client';
import type { AppContext } from '../../src/context.ts';
import { defineFlow } from '../../src/modules/kyc/flows.ts';
import type { TestApp } from './app.ts';

export async function defineTestFlow(app: AppContext, code: string, artifacts: string[], options: { default?: boolean; videoCall?: boolean; active?: boolean; notifyUrl?: string } = {}) {
  return defineFlow(
    app.db,
    { code, artifacts, videoCall: options.videoCall ?? false, isDefault: options.default ?? false, active: options.active ?? true, notifyUrl: options.notifyUrl ?? null },
    { type: 'operator', id: 'test' },
  );
}

export async function openSession(app: TestApp, token: string, body: Record<string, unknown>) {
  const response = await app.request('POST', '/api/document/create-session/', { token, json: body });
  if (response.status !== 200) throw new Error(`create-session: ${response.text}`);
  return response.body.data.session as {
    session_id: string;
    endpoint_token: string;
    attempt_no: number;
    pending_artifact_types: string[];
    succeeded_artifact_types: string[];
  };
}

/** A small real image of the given format. */
export function image(format: 'jpeg' | 'png' = 'jpeg', size = 32): Promise<Buffer> {
  return sharp({ create: { width: size, height: size, channels: 3, background: '#7a8' } })[format]().toBuffer();
}

export interface UploadParts {
  token?: string;
  artifact_type?: string;
  file?: { bytes: Buffer; name: string; type: string };
  extra_data?: string;
}

/** POSTs multipart/form-data the way a browser's FormData does. */
export async function upload(app: TestApp, path: string, parts: UploadParts) {
  const form = new FormData();
  if (parts.token !== undefined) form.set('token', parts.token);
  if (parts.artifact_type !== undefined) form.set('artifact_type', parts.artifact_type);
  if (parts.extra_data !== undefined) form.set('extra_data', parts.extra_data);
  if (parts.file) form.set('snapshot', new Blob([new Uint8Array(parts.file.bytes)], { type: parts.file.type }), parts.file.name);
  const response = await fetch(app.url + path, { method: 'POST', body: form });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text), text };
}

/** A documents-websocket client registered with `token`; resolves with its first reply. */
export async function registeredClient(url: string, token: string): Promise<{ socket: Socket; reply: { event: string; data: Record<string, unknown> }; messages: unknown[] }> {
  const socket = io(`${url}/documents`, { transports: ['websocket'], forceNew: true });
  const messages: unknown[] = [];
  const reply = await new Promise<{ event: string; data: Record<string, unknown> }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no reply to register')), 10_000);
    socket.once('connect_error', reject);
    socket.on('message', (message: { event: string; data: Record<string, unknown> }) => {
      if (message.event === 'registered' || message.event === 'error') {
        clearTimeout(timer);
        resolve(message);
      } else messages.push(message);
    });
    socket.on('connect', () => socket.send({ event: 'register', token }));
  });
  return { socket, reply, messages };
}

export async function waitFor<T>(check: () => Promise<T | undefined> | T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
