/**
 * Child process of bench/single-record.ts: a bare HTTP echo (node:http, no framework), the
 * floor's HTTP part. It reads the body, parses it and answers it back in the service's envelope:
 * what any JSON service must do with the same bytes.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const server = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    const body = JSON.stringify({ status: true, message: 'echo', data: { results: Array.isArray(parsed) ? parsed : [parsed] } });
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  });
});
server.keepAliveTimeout = 65_000;
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
process.send!({ type: 'ready', port: (server.address() as AddressInfo).port });
process.once('SIGINT', () => process.exit(0));
