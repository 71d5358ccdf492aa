/** The outgoing-URL address policy (src/net/outbound.ts) and the signed delivery built on it. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import test from 'ava';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { OutboundPolicy, OutboundRefused, outboundPolicy, refusedRange, STRICT_OUTBOUND } from '../../src/net/outbound.ts';
import { deliverSigned } from '../../src/webhooks.ts';

test('address ranges: every refused IPv4 and IPv6 range is named; public addresses pass', (t) => {
  const refused: Record<string, string> = {
    '127.0.0.1': 'loopback',
    '127.255.255.254': 'loopback',
    '10.0.0.1': 'private',
    '172.16.0.1': 'private',
    '172.31.255.255': 'private',
    '192.168.0.1': 'private',
    '169.254.169.254': 'cloud metadata',
    '169.254.1.1': 'link-local',
    '100.100.100.200': 'cloud metadata',
    '100.64.0.1': 'carrier-grade NAT',
    '100.127.255.255': 'carrier-grade NAT',
    '0.0.0.0': 'unspecified',
    '0.1.2.3': 'unspecified',
    '224.0.0.1': 'multicast',
    '239.255.255.250': 'multicast',
    '255.255.255.255': 'broadcast',
    '240.0.0.1': 'reserved',
    '192.0.0.170': 'reserved',
    '198.18.0.1': 'benchmarking',
    '192.0.2.1': 'documentation',
    '::': 'unspecified',
    '::1': 'loopback',
    '::ffff:127.0.0.1': 'loopback',
    '::ffff:a9fe:a9fe': 'cloud metadata',
    '::ffff:10.1.1.1': 'private',
    '64:ff9b::7f00:1': 'NAT64 of a loopback',
    '64:ff9b::192.168.1.1': 'NAT64 of a private',
    '64:ff9b:1::1': 'local-use NAT64',
    '2002:7f00:1::1': '6to4 of a loopback',
    '2002:a9fe:a9fe::': '6to4 of a cloud metadata',
    '::7f00:1': 'IPv4-compatible (deprecated)',
    '::808:808': 'IPv4-compatible (deprecated)',
    'fc00::1': 'private (unique local)',
    'fd12:3456::1': 'private (unique local)',
    'fd00:ec2::254': 'cloud metadata',
    'fe80::1': 'link-local',
    'fec0::1': 'site-local',
    'ff02::1': 'multicast',
    '2001:db8::1': 'documentation',
    '2001:0:4136:e378::1': 'Teredo',
    '100::1': 'reserved',
    '::ffff:0:7f00:1': 'reserved',
    'not-an-ip': 'not an IP address',
  };
  for (const [address, range] of Object.entries(refused)) t.is(refusedRange(address), range, address);
  for (const address of ['8.8.8.8', '1.1.1.1', '100.63.255.255', '100.128.0.1', '172.32.0.1', '192.169.0.1', '223.255.255.255', '2001:4860:4860::8888', '2a00:1450::1', '64:ff9b::808:808', '2002:808:808::1', '::ffff:8.8.8.8']) {
    t.is(refusedRange(address), null, address);
  }
});

test('WARDEN_OUTBOUND_ALLOW: addresses and ranges it names pass, nothing else does; "*" allows nothing', (t) => {
  const policy = new OutboundPolicy(['127.0.0.1', '10.20.0.0/16', 'fd00::/8']);
  t.is(policy.refusal('127.0.0.1'), null);
  t.is(policy.refusal('::ffff:127.0.0.1'), null);
  t.is(policy.refusal('127.0.0.2'), 'loopback');
  t.is(policy.refusal('10.20.3.4'), null);
  t.is(policy.refusal('10.21.0.1'), 'private');
  t.is(policy.refusal('fd00::5'), null);
  t.is(policy.refusal('::1'), 'loopback');
  t.true(policy.allowsLiteral('127.0.0.1'));
  t.true(policy.allowsLiteral('[fd00::5]'));
  t.false(policy.allowsLiteral('localhost'));
  // localhost is loopback in both families: allowing one of them is not enough.
  t.is(policy.hostRefusal('localhost'), 'loopback');
  t.is(new OutboundPolicy(['127.0.0.0/8', '::1']).hostRefusal('localhost'), null);
  t.is(new OutboundPolicy(['*']).refusal('127.0.0.1'), 'loopback');
});

test('save-time URL check: obscure literal forms are read as the WHATWG parser reads them', (t) => {
  for (const [url, host] of [
    ['https://0x7f000001/', '127.0.0.1'],
    ['https://2130706433/', '127.0.0.1'],
    ['https://0177.0.0.1/', '127.0.0.1'],
    ['https://127.1/', '127.0.0.1'],
    ['https://0x7f.1/', '127.0.0.1'],
    ['https://127.0.0.1./', '127.0.0.1'],
    ['https://%31%32%37.0.0.1/', '127.0.0.1'],
    ['https://0/', '0.0.0.0'],
    ['https://[0:0:0:0:0:ffff:7f00:1]/', '[::ffff:7f00:1]'],
    ['https://[::ffff:169.254.169.254]/', '[::ffff:a9fe:a9fe]'],
    ['https://LocalHost./', 'localhost.'],
    ['https://metadata.google.internal./', 'metadata.google.internal.'],
  ] as const) {
    const error = t.throws(() => STRICT_OUTBOUND.checkUrl(url), { instanceOf: OutboundRefused }, url);
    t.true(error!.message.startsWith(`${host} is a `), `${url}: ${error!.message}`);
  }
  t.throws(() => STRICT_OUTBOUND.checkUrl('ftp://example.com/'), { message: /http or https/ });
  t.throws(() => STRICT_OUTBOUND.checkUrl('not a url'), { message: /not a URL/ });
  t.is(STRICT_OUTBOUND.checkUrl('https://Merchant.Example/hook').toString(), 'https://merchant.example/hook');
  t.is(STRICT_OUTBOUND.checkUrl('https://0x08080808/hook').toString(), 'https://8.8.8.8/hook');
});

test('the config reads WARDEN_OUTBOUND_ALLOW (default empty) and refuses what is not an IP or CIDR range', (t) => {
  t.deepEqual(loadConfig({}).outboundAllow, []);
  const config = loadConfig({ WARDEN_OUTBOUND_ALLOW: '127.0.0.1, 10.0.0.0/8,::1' });
  t.deepEqual(config.outboundAllow, ['127.0.0.1', '10.0.0.0/8', '::1']);
  t.true(Object.isFrozen(config.outboundAllow));
  t.is(outboundPolicy(config), outboundPolicy(config), 'built once per config');
  t.is(outboundPolicy(config).refusal('10.9.9.9'), null);
  for (const value of ['localhost', '*', '10.0.0.0/33']) {
    const error = t.throws(() => loadConfig({ WARDEN_OUTBOUND_ALLOW: value }), { instanceOf: ConfigError });
    t.regex(error!.message, /WARDEN_OUTBOUND_ALLOW/);
  }
});

async function server(answer: (request: http.IncomingMessage, response: http.ServerResponse) => void) {
  const seen: http.IncomingMessage[] = [];
  const listening = http.createServer((request, response) => {
    seen.push(request);
    request.resume();
    request.on('end', () => answer(request, response));
  });
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', () => resolve()));
  return { seen, port: (listening.address() as AddressInfo).port, close: () => new Promise<void>((resolve) => listening.close(() => resolve())) };
}

test('delivery: a name is refused when ANY address it resolves to is refused; nothing is sent', async (t) => {
  const local = await server((_, response) => response.writeHead(204).end());
  t.teardown(local.close);
  const policy = new OutboundPolicy(['127.0.0.1'], { resolve: async () => ['127.0.0.1', '10.0.0.7'] });
  const attempt = await deliverSigned(`http://mixed.test:${local.port}/hook`, 'secret', '{}', policy);
  t.is(attempt.status_code, null);
  t.is(attempt.error, 'refused: mixed.test resolves to 10.0.0.7, a private address');
  const metadata = new OutboundPolicy([], { resolve: async () => ['169.254.169.254'] });
  t.regex((await deliverSigned('https://innocent.example/hook', 'secret', '{}', metadata)).error!, /cloud metadata/);
  const nothing = new OutboundPolicy([], { resolve: async () => [] });
  t.regex((await deliverSigned('https://empty.example/hook', 'secret', '{}', nothing)).error!, /no address/);
  t.regex((await deliverSigned(`http://[::1]:${local.port}/hook`, 'secret', '{}', STRICT_OUTBOUND)).error!, /loopback/);
  t.regex((await deliverSigned(`http://localhost:${local.port}/hook`, 'secret', '{}', STRICT_OUTBOUND)).error!, /loopback/);
  t.is(local.seen.length, 0);
});

test('delivery: the name is resolved once and the request goes to that address, with the URL\'s Host (no rebinding)', async (t) => {
  const local = await server((_, response) => response.writeHead(200).end('ok'));
  t.teardown(local.close);
  const answers = [['127.0.0.1'], ['10.0.0.1']];
  let lookups = 0;
  const policy = new OutboundPolicy(['127.0.0.1'], { resolve: async () => answers[lookups++]! });
  const attempt = await deliverSigned(`http://rebind.test:${local.port}/hook?x=1`, 'secret', '{"a":1}', policy);
  t.like(attempt, { status_code: 200, error: null });
  t.is(lookups, 1);
  t.is(local.seen.length, 1);
  t.is(local.seen[0]!.headers.host, `rebind.test:${local.port}`);
  t.is(local.seen[0]!.url, '/hook?x=1');
  t.is(local.seen[0]!.method, 'POST');
  t.regex(String(local.seen[0]!.headers['x-warden-signature']), /^t=\d+,v1=[0-9a-f]{64}$/);
});

test('delivery: a redirect is not followed; a non-2xx and an unreachable receiver are failed attempts', async (t) => {
  const target = await server((_, response) => response.writeHead(204).end());
  t.teardown(target.close);
  const policy = new OutboundPolicy(['127.0.0.1']);
  for (const status of [301, 302, 303, 307, 308]) {
    const redirecting = await server((_, response) => response.writeHead(status, { location: `http://127.0.0.1:${target.port}/stolen` }).end());
    const attempt = await deliverSigned(`http://127.0.0.1:${redirecting.port}/hook`, 'secret', '{}', policy);
    await redirecting.close();
    t.is(attempt.status_code, status);
    t.is(attempt.error, `HTTP ${status} (redirects are not followed)`);
  }
  t.is(target.seen.length, 0);
  const failing = await server((_, response) => response.writeHead(500).end());
  t.teardown(failing.close);
  t.like(await deliverSigned(`http://127.0.0.1:${failing.port}/hook`, 'secret', '{}', policy), { status_code: 500, error: 'HTTP 500' });
  await failing.close();
  const gone = await deliverSigned(`http://127.0.0.1:${failing.port}/hook`, 'secret', '{}', policy);
  t.is(gone.status_code, null);
  t.regex(gone.error!, /ECONNREFUSED/);
});

/** A self-signed certificate for `name`, made with openssl (as the push tests make theirs). */
function certificateFor(name: string): { key: string; cert: string } {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'warden-outbound-tls-'));
  try {
    const keyFile = path.join(directory, 'key.pem');
    const certFile = path.join(directory, 'cert.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile,
      '-days', '1', '-subj', `/CN=${name}`, '-addext', `subjectAltName=DNS:${name}`,
    ], { stdio: 'ignore' });
    return { key: fs.readFileSync(keyFile, 'utf8'), cert: fs.readFileSync(certFile, 'utf8') };
  } finally {
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

test('delivery over https: connects to the vetted address, and the certificate is checked against the URL\'s name', async (t) => {
  const tls = certificateFor('hooks.merchant.test');
  const seen: Array<{ host: string | undefined; servername: string | false | null }> = [];
  const receiver = https.createServer(tls, (request, response) => {
    seen.push({ host: request.headers.host, servername: (request.socket as TLSSocket).servername });
    request.resume();
    request.on('end', () => response.writeHead(202).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(() => new Promise<void>((resolve) => receiver.close(() => resolve())));
  const port = (receiver.address() as AddressInfo).port;
  const resolve = async () => ['127.0.0.1'];
  const trusting = new OutboundPolicy(['127.0.0.1'], { resolve, ca: tls.cert });
  t.like(await deliverSigned(`https://hooks.merchant.test:${port}/hook`, 'secret', '{}', trusting), { status_code: 202, error: null });
  t.deepEqual(seen, [{ host: `hooks.merchant.test:${port}`, servername: 'hooks.merchant.test' }]);
  // Another name on the same address: the certificate does not match it.
  const mismatch = await deliverSigned(`https://other.merchant.test:${port}/hook`, 'secret', '{}', trusting);
  t.is(mismatch.status_code, null);
  t.regex(mismatch.error!, /other\.merchant\.test|altnames/i);
  // The system's trust: a self-signed receiver is not accepted.
  const strictTrust = await deliverSigned(`https://hooks.merchant.test:${port}/hook`, 'secret', '{}', new OutboundPolicy(['127.0.0.1'], { resolve }));
  t.is(strictTrust.status_code, null);
  t.regex(strictTrust.error!, /self[- ]signed/i);
  t.is(seen.length, 1);
});

test('delivery: a receiver that never answers, or a name that never resolves, fails within the time given', async (t) => {
  const silent = await server(() => {});
  t.teardown(async () => {
    for (const request of silent.seen) request.socket.destroy();
    await silent.close();
  });
  const policy = new OutboundPolicy(['127.0.0.1']);
  const started = Date.now();
  await t.throwsAsync(policy.post(`http://127.0.0.1:${silent.port}/hook`, { headers: {}, body: '{}', timeoutMs: 300 }), { message: /300 ms/ });
  const hanging = new OutboundPolicy([], { resolve: () => new Promise(() => {}) });
  await t.throwsAsync(hanging.post('https://slow-dns.example/hook', { headers: {}, body: '{}', timeoutMs: 300 }), { message: /300 ms/ });
  t.true(Date.now() - started < 5000);
});
