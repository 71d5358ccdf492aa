import type { ExecutionContext } from 'ava';
import sharp from 'sharp';
import WebSocket from 'ws';
import { io, type Socket } from 'socket.io-client';
import type { AppContext } from '../../src/context.ts';
import { defineFlow } from '../../src/modules/kyc/flows.ts';
import { DOCUMENTS_PATH } from '../../src/realtime/documents.ts';
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

/** A frame of the documents socket; tests read its fields freely. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type DocumentsFrame = { event: string; type?: string; data: Record<string, any> } & Record<string, any>;

export interface PlainDocumentsClient {
  ws: WebSocket;
  /** Every frame received, the registration reply included. */
  frames: DocumentsFrame[];
  /** The first frame after the ones already taken that matches (20 s at most). */
  next(predicate?: (frame: DocumentsFrame) => boolean): Promise<DocumentsFrame>;
  send(frame: object): void;
  closed: Promise<number>;
}

/** A plain WebSocket client of `url`'s documents socket (/ws/documents/); frames are collected as they come. */
export async function documentsClient(url: string, t?: ExecutionContext): Promise<PlainDocumentsClient> {
  const ws = new WebSocket(url.replace(/^http/, 'ws') + DOCUMENTS_PATH);
  const frames: DocumentsFrame[] = [];
  ws.on('message', (data) => frames.push(JSON.parse(data.toString()) as DocumentsFrame));
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  t?.teardown(() => ws.terminate());
  let seen = 0;
  return {
    ws,
    frames,
    closed,
    async next(predicate = () => true) {
      const frame = await waitFor(() => frames.slice(seen).find(predicate), 20_000);
      seen = frames.indexOf(frame) + 1;
      return frame;
    },
    send: (frame) => ws.send(JSON.stringify(frame)),
  };
}

/** A documents socket client registered with a session's endpoint token (the reply asserted). */
export async function registeredDocumentsClient(url: string, token: string, t: ExecutionContext): Promise<PlainDocumentsClient> {
  const client = await documentsClient(url, t);
  client.send({ event: 'register', token });
  const reply = await client.next();
  t.is(reply.event, 'registered', JSON.stringify(reply));
  return client;
}

