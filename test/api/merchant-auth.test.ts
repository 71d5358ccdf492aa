import test from 'ava';
import { TokenService } from '../../src/auth/tokens.ts';
import { setAllowedIps, setCredentialActive } from '../../src/modules/merchant/service.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const TOKEN = '/api/merchant/auth/token/';
const CHECK = '/api/merchant/auth/check/';
const operator = { type: 'operator', id: 'test' } as const;

let app: TestApp;
test.before(async () => {
  app = await startTestApp();
});
test.after.always(async () => {
  await app?.close();
});

async function login(apiKey: string, apiSecret: string, headers: Record<string, string> = {}) {
  return app.request('POST', TOKEN, { json: { api_key: apiKey, api_secret: apiSecret }, headers });
}

test('issues a JWT access token with its lifetime, and the check endpoint names the client', async (t) => {
  const { apiKey, apiSecret } = await app.credential({ name: 'Acme Payments' });
  const response = await login(apiKey, apiSecret);
  t.is(response.status, 200);
  t.is(response.body.status, true);
  t.is(response.body.data.token_type, 'Bearer');
  t.is(response.body.data.expires_in, 3600);
  const token = response.body.data.access_token as string;
  t.is(token.split('.').length, 3);

  const check = await app.request('GET', CHECK, { token });
  t.is(check.status, 200);
  t.deepEqual(Object.keys(check.body.data).sort(), ['client', 'session_id']);
  t.is(check.body.data.client, 'Acme Payments');
  t.regex(check.body.data.session_id, /^[0-9a-f-]{36}$/);
  t.is(check.body.message, 'Token is valid for client Acme Payments.');
});

test('token endpoint: body that is not JSON is a 400 in the envelope', async (t) => {
  const response = await app.request('POST', TOKEN, { body: '{"api_key": ', headers: { 'content-type': 'application/json' } });
  t.is(response.status, 400);
  t.deepEqual(response.body, { status: false, message: 'Request body is not valid JSON.', data: { reason: 'invalid_json' } });
});

test('token endpoint: JSON that is not an object is a 400', async (t) => {
  for (const json of [[{ api_key: 'a', api_secret: 'b' }], 'text', 42, null]) {
    const response = await app.request('POST', TOKEN, { body: JSON.stringify(json), headers: { 'content-type': 'application/json' } });
    t.is(response.status, 400, JSON.stringify(json));
    t.is(response.body.message, 'A JSON object is required.');
  }
});

test('token endpoint: missing fields are named in the message', async (t) => {
  const both = await app.request('POST', TOKEN, { json: {} });
  t.is(both.status, 400);
  t.is(both.body.message, 'Missing required field(s): api_key, api_secret.');
  const one = await app.request('POST', TOKEN, { json: { api_key: 'wk_x' } });
  t.is(one.status, 400);
  t.is(one.body.message, 'Missing required field(s): api_secret.');
  t.deepEqual(one.body.data.fields, ['api_secret']);
  const wrongType = await app.request('POST', TOKEN, { json: { api_key: 12, api_secret: 'x' } });
  t.is(wrongType.status, 400);
  t.regex(wrongType.body.message, /api_key/);
});

test('token endpoint: a wrong secret and an unknown key are both 401 Invalid credentials provided.', async (t) => {
  const { apiKey } = await app.credential();
  for (const response of [await login(apiKey, 'wrong-secret'), await login('wk_unknown', 'whatever')]) {
    t.is(response.status, 401);
    t.is(response.body.message, 'Invalid credentials provided.');
    t.is(response.body.status, false);
  }
});

test('token endpoint: an inactive credential is 403', async (t) => {
  const { apiKey, apiSecret } = await app.credential();
  await setCredentialActive(app.database.knex, apiKey, false, operator);
  const response = await login(apiKey, apiSecret);
  t.is(response.status, 403);
  t.is(response.body.data.reason, 'credential_inactive');
});

test('token endpoint: IP allow list (empty list allows nobody, CIDR ranges, exact IPs)', async (t) => {
  const nobody = await app.credential({ allowedIps: [] });
  const refused = await login(nobody.apiKey, nobody.apiSecret);
  t.is(refused.status, 403);
  t.is(refused.body.message, 'Access from this IP address is not allowed.');

  const other = await app.credential({ allowedIps: ['10.0.0.1', '192.168.0.0/16'] });
  t.is((await login(other.apiKey, other.apiSecret)).status, 403);

  const range = await app.credential({ allowedIps: ['127.0.0.0/8'] });
  t.is((await login(range.apiKey, range.apiSecret)).status, 200);
  const exact = await app.credential({ allowedIps: ['10.1.1.1', '127.0.0.1'] });
  t.is((await login(exact.apiKey, exact.apiSecret)).status, 200);
});

test('X-Forwarded-For is ignored unless the socket peer is a trusted proxy', async (t) => {
  const { apiKey, apiSecret } = await app.credential({ allowedIps: ['203.0.113.7'] });
  const spoofed = await login(apiKey, apiSecret, { 'x-forwarded-for': '203.0.113.7' });
  t.is(spoofed.status, 403);

  const proxied = await startTestApp({ WARDEN_TRUSTED_PROXIES: '127.0.0.1' });
  try {
    const created = await proxied.credential({ allowedIps: ['203.0.113.7'] });
    const viaProxy = (extra: string) =>
      proxied.request('POST', TOKEN, {
        json: { api_key: created.apiKey, api_secret: created.apiSecret },
        headers: { 'x-forwarded-for': extra },
      });
    t.is((await viaProxy('203.0.113.7')).status, 200);
    // The client wrote its own X-Forwarded-For; the proxy appended the real peer last.
    t.is((await viaProxy('203.0.113.7, 198.51.100.9')).status, 403);
  } finally {
    await proxied.close();
  }
});

test('bodies over the limit are 413, non-JSON content types 415, invalid UTF-8 400', async (t) => {
  const small = await startTestApp({ WARDEN_BODY_LIMIT_BYTES: '100' });
  try {
    const large = await small.request('POST', TOKEN, { json: { api_key: 'k'.repeat(200), api_secret: 's' } });
    t.is(large.status, 413);
    t.is(large.body.status, false);
  } finally {
    await small.close();
  }
  const form = await app.request('POST', TOKEN, { body: 'api_key=a&api_secret=b', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.is(form.status, 415);
  t.is(form.body.data.reason, 'content_type_invalid');
  const missingType = await app.request('POST', TOKEN, { body: '{}' });
  t.is(missingType.status, 415);
  const latin1 = await app.request('POST', TOKEN, {
    body: Buffer.concat([Buffer.from('{"api_key":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","api_secret":"x"}')]),
    headers: { 'content-type': 'application/json' },
  });
  t.is(latin1.status, 400);
  t.is(latin1.body.data.reason, 'invalid_utf8');
});

test('check endpoint: POST is 403', async (t) => {
  const token = await app.merchantToken();
  const response = await app.request('POST', CHECK, { token, json: {} });
  t.is(response.status, 403);
  t.is(response.body.status, false);
});

test('check endpoint: missing, malformed, wrongly signed, expired and other-kind tokens are 401', async (t) => {
  const { id } = await app.credential();
  const missing = await app.request('GET', CHECK);
  t.is(missing.status, 401);
  t.is(missing.body.data.reason, 'token_missing');

  const notBearer = await app.request('GET', CHECK, { headers: { authorization: 'Basic abc' } });
  t.is(notBearer.status, 401);
  const garbage = await app.request('GET', CHECK, { token: 'not.a.jwt' });
  t.is(garbage.status, 401);
  t.is(garbage.body.data.reason, 'token_invalid');

  const otherKey = new TokenService(new TextEncoder().encode('x'.repeat(32)));
  const forged = await otherKey.issue('merchant', id, 600);
  t.is((await app.request('GET', CHECK, { token: forged.token })).body.data.reason, 'token_invalid');

  const expired = await app.context.tokens.issue('merchant', id, -60);
  const expiredResponse = await app.request('GET', CHECK, { token: expired.token });
  t.is(expiredResponse.status, 401);
  t.is(expiredResponse.body.data.reason, 'token_expired');

  const sessionToken = await app.context.tokens.issue('session', id, 600);
  const wrongKind = await app.request('GET', CHECK, { token: sessionToken.token });
  t.is(wrongKind.status, 401);
  t.is(wrongKind.body.data.reason, 'token_wrong_audience');

  const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  const payload = Buffer.from(JSON.stringify({ sub: id, aud: 'merchant', iss: 'warden', jti: 'x', exp: 4102444800 })).toString('base64url');
  const unsigned = await app.request('GET', CHECK, { token: `${header}.${payload}.` });
  t.is(unsigned.status, 401);
});

/**
 * The Bearer middleware caches credentials and drops them on PostgreSQL's NOTIFY, which arrives
 * on its own connection a moment after the writer commits: poll briefly (a cache that ignored
 * the change would keep answering 200 and fail here).
 */
async function checkUntil(token: string, status: number) {
  const deadline = Date.now() + 1000;
  for (;;) {
    const response = await app.request('GET', CHECK, { token });
    if (response.status === status || Date.now() > deadline) return response;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('a deactivated credential or a narrowed IP list stops its live tokens at once', async (t) => {
  const { apiKey, apiSecret } = await app.credential();
  const token = (await login(apiKey, apiSecret)).body.data.access_token;
  t.is((await app.request('GET', CHECK, { token })).status, 200);

  await setAllowedIps(app.database.knex, apiKey, ['10.0.0.0/8'], operator);
  const narrowed = await checkUntil(token, 403);
  t.is(narrowed.status, 403);
  t.is(narrowed.body.message, 'Access from this IP address is not allowed.');

  await setAllowedIps(app.database.knex, apiKey, ['*'], operator);
  t.is((await checkUntil(token, 200)).status, 200);
  await setCredentialActive(app.database.knex, apiKey, false, operator);
  const deactivated = await checkUntil(token, 403);
  t.is(deactivated.status, 403);
  t.is(deactivated.body.data.reason, 'credential_inactive');
});

test('unknown routes are 404 and wrong methods 405, in the envelope', async (t) => {
  const unknown = await app.request('GET', '/api/nothing/here/');
  t.is(unknown.status, 404);
  t.deepEqual(unknown.body, { status: false, message: 'Not found.', data: { reason: 'not_found' } });
  const wrongMethod = await app.request('GET', TOKEN);
  t.is(wrongMethod.status, 405);
  t.is(wrongMethod.body.status, false);
  t.is(wrongMethod.headers.get('allow'), 'POST');
  const noSlash = await app.request('GET', '/api/merchant/auth/check', { token: await app.merchantToken() });
  t.is(noSlash.status, 200);
});

test('health, readiness, metrics and the OpenAPI document', async (t) => {
  t.is((await app.request('GET', '/healthz')).body.status, true);
  const ready = await app.request('GET', '/readyz');
  t.is(ready.status, 200);
  t.is(ready.body.data.database, 'ok');

  await app.request('GET', '/api/nothing/');
  const metrics = await app.request('GET', '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.text, /warden_http_requests_total\{method="POST",route="\/api\/merchant\/auth\/token\/",status="\d+"\} \d+/);
  t.regex(metrics.text, /warden_http_request_duration_seconds_bucket/);

  const openapi = await app.request('GET', '/api/openapi.json');
  t.is(openapi.status, 200);
  t.is(openapi.body.openapi, '3.1.0');
  const tokenRequest = openapi.body.components.schemas.TokenRequest;
  t.deepEqual(tokenRequest.required, ['api_key', 'api_secret']);
  t.truthy(openapi.body.paths['/api/merchant/auth/token/'].post.responses['401']);
});

test('every response carries a request id, and a caller-supplied one is echoed', async (t) => {
  const generated = await app.request('GET', '/healthz');
  t.regex(generated.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  const echoed = await app.request('GET', '/healthz', { headers: { 'x-request-id': 'trace-123' } });
  t.is(echoed.headers.get('x-request-id'), 'trace-123');
});
