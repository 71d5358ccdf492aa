/**
 * A coturn TURN server for tests (Debian's `turnserver`), on loopback with the TURN REST API's
 * shared secret, as WARDEN_TURN_URLS / WARDEN_TURN_SECRET describe it. Without turnserver the
 * tests that need it say so and skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import fs from 'node:fs';

export const TURNSERVER = process.env.WARDEN_TURNSERVER ?? '/usr/bin/turnserver';
export const turnAvailable = fs.existsSync(TURNSERVER);

export interface Coturn {
  /** For WARDEN_TURN_URLS. */
  url: string;
  /** For WARDEN_TURN_SECRET. */
  secret: string;
  /** What the server printed (for a failing test's message). */
  log(): string;
  close(): Promise<void>;
}

/** A UDP port nobody holds right now (the OS picks it). */
async function freeUdpPort(): Promise<number> {
  const socket = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const { port } = socket.address();
  await new Promise<void>((resolve) => socket.close(() => resolve()));
  return port;
}

/** Whether a STUN server answers a binding request (RFC 5389) on 127.0.0.1:port within 300 ms. */
async function answersStun(port: number): Promise<boolean> {
  const socket = dgram.createSocket('udp4');
  const request = Buffer.alloc(20);
  request.writeUInt16BE(0x0001, 0); // binding request, no attributes
  request.writeUInt32BE(0x2112a442, 4); // magic cookie
  randomBytes(12).copy(request, 8);
  try {
    return await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 300);
      socket.once('message', (reply) => {
        clearTimeout(timer);
        resolve(reply.readUInt16BE(0) === 0x0101 && reply.subarray(8, 20).equals(request.subarray(8, 20)));
      });
      socket.once('error', () => resolve(false));
      socket.send(request, port, '127.0.0.1');
    });
  } finally {
    socket.close();
  }
}

export async function startCoturn(): Promise<Coturn> {
  const port = await freeUdpPort();
  const secret = randomBytes(24).toString('hex');
  const args = [
    '-n', '--listening-port', String(port), '--listening-ip', '127.0.0.1', '--relay-ip', '127.0.0.1',
    '--use-auth-secret', '--static-auth-secret', secret, '--realm', 'warden',
    '--no-tls', '--no-dtls', '--allow-loopback-peers', '--cli-password=x', '--no-cli',
    // Logs to stdout only (no log file, no pid file under /var).
    '--log-file', 'stdout', '--pidfile', '', '--simple-log',
  ];
  const child: ChildProcess = spawn(TURNSERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Ready once it answers a STUN binding request on its port (it logs no line for its listeners).
  const deadline = Date.now() + 15_000;
  while (!(await answersStun(port))) {
    if (child.exitCode !== null) throw new Error(`turnserver exited (${child.exitCode}):\n${output}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`turnserver did not start within 15 s:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url: `turn:127.0.0.1:${port}?transport=udp`,
    secret,
    log: () => output,
    async close() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 3000))]);
      if (child.exitCode === null) child.kill('SIGKILL');
    },
  };
}
