import test from 'ava';
import { jwtVerify } from 'jose';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { pushIdentity, websocketUrl } from '../../src/modules/mobile/account.ts';
import { formatTimestamp } from '../../src/timestamps.ts';
import { canonicalReviewCode, newReviewCode } from '../../src/modules/mobile/secrets.ts';
import { AccessTokenError, MobileTokens } from '../../src/modules/mobile/tokens.ts';

const USER = '6f1c3c2e-4a55-4c39-9d7e-0b8f3f1f2a10';
const DEVICE = '0d9a4f0e-8c0b-4b7e-a2a5-5a3f6c1d2e3f';

test('websocket_url follows WARDEN_PUBLIC_URL: ws for http, wss for https, path prefix kept; null when unset', (t) => {
  t.is(websocketUrl(loadConfig({})), null);
  t.is(websocketUrl(loadConfig({ WARDEN_PUBLIC_URL: 'http://localhost:8080' })), 'ws://localhost:8080/api/mobile/ws/');
  t.is(websocketUrl(loadConfig({ WARDEN_PUBLIC_URL: 'https://warden.example.org/' })), 'wss://warden.example.org/api/mobile/ws/');
  t.is(websocketUrl(loadConfig({ WARDEN_PUBLIC_URL: 'https://example.org/warden/' })), 'wss://example.org/warden/api/mobile/ws/');
  for (const bad of ['warden.example.org', 'ftp://example.org', 'https://example.org/?q=1', 'https://']) {
    t.throws(() => loadConfig({ WARDEN_PUBLIC_URL: bad }), { instanceOf: ConfigError, message: /WARDEN_PUBLIC_URL/ }, bad);
  }
  t.is(pushIdentity(loadConfig({})), null);
});

test('timestamps: UTC to the second, no offset, no fraction', (t) => {
  t.is(formatTimestamp(new Date('2026-11-23T10:15:30.987+02:00')), '2026-11-23T08:15:30');
  t.is(formatTimestamp(null), null);
});

test('review codes: 24 Crockford characters in groups of four; typed variants map to one canonical form', (t) => {
  const code = newReviewCode();
  t.regex(code, /^([0-9A-HJKMNP-TV-Z]{4}-){5}[0-9A-HJKMNP-TV-Z]{4}$/);
  t.not(newReviewCode(), code);
  const canonical = canonicalReviewCode(code)!;
  t.is(canonical, code.replace(/-/g, ''));
  t.is(canonicalReviewCode(` ${code.toLowerCase().replace(/-/g, ' ')} `), canonical);
  t.is(canonicalReviewCode('O1IL-0000-0000-0000-0000-0000'), '011100000000000000000000');
  t.is(canonicalReviewCode('ABCD-EFGH'), null);
  t.is(canonicalReviewCode('UUUU-UUUU-UUUU-UUUU-UUUU-UUUU'), null);
});

test('access tokens: valid for exactly one hour of the given clock, bound to user and device, HS256 only', async (t) => {
  const key = new TextEncoder().encode('k'.repeat(32));
  const tokens = new MobileTokens(async () => key);
  const issuedAt = new Date('2026-11-23T10:00:00Z');
  const { token, expiresIn } = await tokens.issue({ userId: USER, deviceId: DEVICE }, issuedAt);
  t.is(expiresIn, 3600);
  // Signed with node's HMAC: a standard HS256 JWT, as jose itself reads it.
  const verified = await jwtVerify(token, key, { algorithms: ['HS256'], issuer: 'warden', audience: 'mobile', currentDate: issuedAt });
  t.deepEqual(verified.protectedHeader, { alg: 'HS256', typ: 'JWT' });
  t.like(verified.payload, { sub: USER, dev: DEVICE, iat: issuedAt.getTime() / 1000, exp: issuedAt.getTime() / 1000 + 3600 });
  t.regex(String(verified.payload.jti), /^[0-9a-f-]{36}$/);
  t.deepEqual(await tokens.verify(token, new Date('2026-11-23T10:59:59Z')), { userId: USER, deviceId: DEVICE });
  await t.throwsAsync(tokens.verify(token, new Date('2026-11-23T11:00:00Z')), { instanceOf: AccessTokenError, message: 'token_expired' });
  const otherKey = new MobileTokens(async () => new TextEncoder().encode('o'.repeat(32)));
  await t.throwsAsync(otherKey.verify(token, issuedAt), { message: 'token_invalid' });
  const [, payload] = token.split('.');
  const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${payload}.`;
  await t.throwsAsync(tokens.verify(none, issuedAt), { message: 'token_invalid' });
});
