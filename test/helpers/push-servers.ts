/**
 * Local servers that speak the push providers' protocols, for the push tests:
 * - an OAuth2 token endpoint (the service-account JWT grant: RS256 assertion checked against the
 *   account's public key, issuer, audience and scope) and FCM HTTP v1 messages:send;
 * - APNs over TLS HTTP/2 (node:http2) with a certificate made for the test by openssl, checking
 *   the ES256 provider token, the topic and the push type.
 * Device tokens steer the answers: `unregistered-*` / `gone-*` / `bad-*` are dead tokens,
 * `busy-N-*` answers 429 and `down-N-*` 503 for the first N tries of that token, anything else 200.
 */
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { jwtVerify } from 'jose';

export interface ReceivedPush {
  token: string;
  title: string;
  body: string;
  data: Record<string, unknown>;
}

/** How many of the first tries of a steered token fail, from its name. */
function failuresOf(token: string, kind: 'busy' | 'down'): number {
  const match = new RegExp(`^${kind}-(\\d+)-`).exec(token);
  return match ? Number(match[1]) : 0;
}

function readBody(request: http.IncomingMessage | http2.Http2ServerRequest): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks).toString()));
  });
}

export interface FcmServer {
  url: string;
  serviceAccountFile: string;
  projectId: string;
  tokenRequests: number;
  received: ReceivedPush[];
  attempts: Map<string, number>;
  /** Access tokens issued so far stop working (as when they expire on Google's side). */
  expireAccessTokens(): void;
  close(): Promise<void>;
}

export async function startFcmServer(directory: string, options: { expiresIn?: number } = {}): Promise<FcmServer> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const valid = new Set<string>();
  let issued = 0;
  const state: Omit<FcmServer, 'url' | 'serviceAccountFile' | 'close' | 'expireAccessTokens'> = { projectId: 'warden-test', tokenRequests: 0, received: [], attempts: new Map() };
  const clientEmail = 'warden-push@warden-test.iam.gserviceaccount.com';
  let url = '';
  const server = http.createServer(async (request, response) => {
    const body = await readBody(request);
    const answer = (status: number, payload: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(payload));
    };
    if (request.method === 'POST' && request.url === '/token') {
      state.tokenRequests++;
      const form = new URLSearchParams(body);
      try {
        if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') throw new Error('grant_type');
        const { payload, protectedHeader } = await jwtVerify(form.get('assertion') ?? '', publicKey, { issuer: clientEmail, audience: `${url}/token`, algorithms: ['RS256'] });
        if (payload.scope !== 'https://www.googleapis.com/auth/firebase.messaging' || protectedHeader.kid !== 'key-1') throw new Error('scope or kid');
      } catch (error) {
        answer(400, { error: 'invalid_grant', error_description: (error as Error).message });
        return;
      }
      const token = `ya29.test-${++issued}`;
      valid.add(token);
      answer(200, { access_token: token, expires_in: options.expiresIn ?? 3599, token_type: 'Bearer' });
      return;
    }
    const send = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(request.url ?? '');
    if (request.method === 'POST' && send) {
      const bearer = /^Bearer (.+)$/.exec(request.headers.authorization ?? '')?.[1];
      if (!bearer || !valid.has(bearer)) {
        answer(401, { error: { code: 401, status: 'UNAUTHENTICATED', message: 'Request had invalid authentication credentials.' } });
        return;
      }
      if (send[1] !== state.projectId) {
        answer(404, { error: { code: 404, status: 'NOT_FOUND', message: 'project' } });
        return;
      }
      const message = (JSON.parse(body) as { message: { token: string; notification: { title: string; body: string }; data: Record<string, unknown> } }).message;
      const tries = (state.attempts.get(message.token) ?? 0) + 1;
      state.attempts.set(message.token, tries);
      if (message.token.startsWith('unregistered-')) {
        answer(404, { error: { code: 404, status: 'NOT_FOUND', message: 'Requested entity was not found.', details: [{ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode: 'UNREGISTERED' }] } });
        return;
      }
      if (tries <= failuresOf(message.token, 'busy')) {
        response.setHeader('retry-after', '1');
        answer(429, { error: { code: 429, status: 'RESOURCE_EXHAUSTED', details: [{ errorCode: 'QUOTA_EXCEEDED' }] } });
        return;
      }
      if (tries <= failuresOf(message.token, 'down')) {
        answer(503, { error: { code: 503, status: 'UNAVAILABLE', details: [{ errorCode: 'UNAVAILABLE' }] } });
        return;
      }
      state.received.push({ token: message.token, title: message.notification.title, body: message.notification.body, data: message.data });
      answer(200, { name: `projects/${state.projectId}/messages/${state.received.length}` });
      return;
    }
    answer(404, { error: 'not found' });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const serviceAccountFile = path.join(directory, 'service-account.json');
  fs.writeFileSync(
    serviceAccountFile,
    JSON.stringify({
      type: 'service_account',
      project_id: state.projectId,
      private_key_id: 'key-1',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
      client_email: clientEmail,
      token_uri: `${url}/token`,
    }),
  );
  return Object.assign(state, {
    url,
    serviceAccountFile,
    expireAccessTokens: () => valid.clear(),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }) as FcmServer;
}

export interface ApnsServer {
  url: string;
  ca: string;
  keyFile: string;
  keyId: string;
  teamId: string;
  topic: string;
  received: (ReceivedPush & { headers: Record<string, string> })[];
  attempts: Map<string, number>;
  providerTokens: Set<string>;
  /** The provider tokens seen so far are answered ExpiredProviderToken from now on. */
  expireProviderTokens(): void;
  close(): Promise<void>;
}

/** A self-signed certificate for 127.0.0.1, made with openssl in the given folder. */
function testCertificate(directory: string): { key: string; cert: string } {
  const keyFile = path.join(directory, 'tls-key.pem');
  const certFile = path.join(directory, 'tls-cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost',
  ], { stdio: 'ignore' });
  return { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8') };
}

export async function startApnsServer(directory: string): Promise<ApnsServer> {
  const tls = testCertificate(directory);
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' }) as { privateKey: KeyObject; publicKey: KeyObject };
  const keyFile = path.join(directory, 'AuthKey_TEST123456.p8');
  fs.writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }));
  const expired = new Set<string>();
  const state = { keyId: 'TEST123456', teamId: 'TEAM987654', topic: 'org.example.warden', received: [], attempts: new Map<string, number>(), providerTokens: new Set<string>() } as unknown as ApnsServer;
  const server = http2.createSecureServer({ key: tls.key, cert: tls.cert });
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', async () => {
      const answer = (status: number, reason?: string, extra: Record<string, string> = {}) => {
        stream.respond({ ':status': status, 'apns-id': '00000000-0000-4000-8000-000000000000', ...extra });
        stream.end(reason ? JSON.stringify({ reason }) : undefined);
      };
      const match = /^\/3\/device\/([^/]+)$/.exec(String(headers[':path']));
      if (headers[':method'] !== 'POST' || !match) return answer(405, 'MethodNotAllowed');
      const bearer = /^bearer (.+)$/.exec(String(headers.authorization ?? ''))?.[1];
      if (!bearer) return answer(403, 'MissingProviderToken');
      try {
        const { protectedHeader } = await jwtVerify(bearer, publicKey, { issuer: state.teamId, algorithms: ['ES256'] });
        if (protectedHeader.kid !== state.keyId) throw new Error('kid');
      } catch {
        return answer(403, 'InvalidProviderToken');
      }
      if (expired.has(bearer)) return answer(403, 'ExpiredProviderToken');
      state.providerTokens.add(bearer);
      if (headers['apns-topic'] !== state.topic) return answer(400, 'DeviceTokenNotForTopic');
      if (headers['apns-push-type'] !== 'alert') return answer(400, 'InvalidPushType');
      const token = decodeURIComponent(match[1]!);
      const tries = (state.attempts.get(token) ?? 0) + 1;
      state.attempts.set(token, tries);
      if (token.startsWith('gone-')) return answer(410, 'Unregistered');
      if (token.startsWith('bad-')) return answer(400, 'BadDeviceToken');
      if (tries <= failuresOf(token, 'busy')) return answer(429, 'TooManyRequests', { 'retry-after': '1' });
      if (tries <= failuresOf(token, 'down')) return answer(503, 'ServiceUnavailable');
      const payload = JSON.parse(Buffer.concat(chunks).toString()) as { aps: { alert: { title: string; body: string } } } & Record<string, unknown>;
      const { aps, ...data } = payload;
      state.received.push({
        token,
        title: aps.alert.title,
        body: aps.alert.body,
        data,
        headers: { topic: String(headers['apns-topic']), priority: String(headers['apns-priority']), pushType: String(headers['apns-push-type']) },
      });
      answer(200);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return Object.assign(state, {
    url: `https://127.0.0.1:${(server.address() as AddressInfo).port}`,
    ca: tls.cert,
    keyFile,
    expireProviderTokens: () => {
      for (const token of state.providerTokens) expired.add(token);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

export function temporaryDirectory(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'warden-push-'));
}
