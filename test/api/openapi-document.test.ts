import SwaggerParser from '@apidevtools/swagger-parser';
import test, { type ExecutionContext } from 'ava';
import { startTestApp, type RequestOptions, type TestApp } from '../helpers/app.ts';
import { installClock, pairDevice, staffUser } from '../helpers/mobile.ts';
import { compileOpenApiCheck, OPENAPI_PATH, type OpenApiCheck } from '../helpers/openapi-check.ts';

/**
 * /api/openapi.json is what merchants generate their clients from: it must be valid, declare every
 * path parameter and a body for every success, and match what the service answers. Every test
 * file's answers are checked against it too (test/helpers/openapi-check.ts); here each operation
 * is called at least once, so a new one cannot go unchecked.
 */

/** Documented only to say the service refuses it (the spec's CSRF answer): no success to declare. */
const REFUSED = new Set(['POST /api/merchant/auth/check/']);

type Operation = { parameters?: { name: string; in: string }[]; responses: Record<string, { content?: Record<string, unknown> }> };
type Document = { openapi: string; paths: Record<string, Record<string, Operation>> };

let app: TestApp;
let document: Document;
let checker: OpenApiCheck;

test.before(async () => {
  app = await startTestApp();
  document = (await app.request('GET', OPENAPI_PATH)).body;
  checker = compileOpenApiCheck(document);
});
test.after.always(async () => app?.close());

function operations(): [id: string, template: string, method: string, operation: Operation][] {
  return Object.entries(document.paths).flatMap(([template, item]) =>
    Object.entries(item).map(([method, operation]) => [`${method.toUpperCase()} ${template}`, template, method.toUpperCase(), operation] as [string, string, string, Operation]),
  );
}

/** Calls the service and checks the answer against the operation it must belong to. */
async function call(t: ExecutionContext, operation: string, method: string, path: string, options: RequestOptions = {}) {
  const response = await app.request(method, path, options);
  const body = response.text && response.headers.get('content-type')?.includes('json') ? response.body : response.text || undefined;
  const result = checker.check({ method, path, status: response.status, contentType: response.headers.get('content-type') ?? '', body });
  t.is(result.operation, operation, `${method} ${path} is answered by the operation`);
  t.deepEqual(result.violations, [], `${method} ${path} -> ${response.status} matches the document`);
  return response;
}

test('the document is valid OpenAPI 3.1', async (t) => {
  t.is(document.openapi, '3.1.0');
  // The validator dereferences in place: it gets a copy.
  await t.notThrowsAsync(SwaggerParser.validate(structuredClone(document) as never));
});

test('every operation declares its path parameters, and a body for its success', (t) => {
  for (const [id, template, , operation] of operations()) {
    const names = [...template.matchAll(/\{(\w+)\}/g)].map((match) => match[1]);
    const declared = (operation.parameters ?? []).filter((parameter) => parameter.in === 'path').map((parameter) => parameter.name);
    t.deepEqual(declared.sort(), names.sort(), `${id} declares its path parameters`);
    const successes = Object.entries(operation.responses).filter(([status]) => status.startsWith('2'));
    t.is(successes.length > 0, !REFUSED.has(id), `${id} declares a success`);
    for (const [status, response] of successes) t.true(status === '204' || Boolean(response.content), `${id} ${status} declares its body`);
  }
});

test('the operational endpoints are documented', (t) => {
  for (const path of ['/healthz', '/readyz', '/metrics']) t.truthy(document.paths[path]?.get, path);
});

test('every operation refuses a caller without credentials as documented', async (t) => {
  // Bearer endpoints answer 401 before reading anything else; the others refuse an empty JSON object.
  for (const [id, template, method, operation] of operations()) {
    if (['/healthz', '/readyz', '/metrics'].includes(template)) continue;
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'pk' || name === 'id' ? '1' : 'x'));
    const bearer = Boolean((operation as { security?: unknown[] }).security?.length);
    const response = await call(t, id, method, path, bearer ? {} : { json: {} });
    t.true(response.status >= 400, `${id} refuses: ${response.status}`);
  }
});

test('representative successes match the document', async (t) => {
  await call(t, 'GET /healthz', 'GET', '/healthz');
  await call(t, 'GET /readyz', 'GET', '/readyz');
  await call(t, 'GET /metrics', 'GET', '/metrics');

  // The integration API.
  const merchant = await app.merchantToken();
  await call(t, 'GET /api/merchant/auth/check/', 'GET', '/api/merchant/auth/check/', { token: merchant });
  const upserted = await call(t, 'POST /api/customer/upsert/', 'POST', '/api/customer/upsert/', {
    token: merchant,
    json: { customer_ref: 'openapi-1', first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' },
  });
  await call(t, 'POST /api/transaction/financial/upsert/', 'POST', '/api/transaction/financial/upsert/', { token: merchant, json: [{ transaction_ref: 'missing-fields' }] });
  await call(t, 'POST /api/transaction/non-financial/upsert/', 'POST', '/api/transaction/non-financial/upsert/', { token: merchant, json: [{ transaction_ref: 'missing-fields' }] });

  // The mobile API, as a superuser.
  const clock = installClock(app);
  const admin = await staffUser(app, { is_superuser: true });
  const paired = await pairDevice(app, clock, admin.id);
  const token = paired.accessToken;
  const mobile = (relative: string) => `/api/mobile/${relative}`;
  await call(t, 'POST /api/mobile/auth/refresh/', 'POST', mobile('auth/refresh/'), { json: { device_id: paired.deviceId, refresh_token: paired.refreshToken } });
  const fresh = await pairDevice(app, clock, admin.id, 'Second phone');
  const bearer = { token: fresh.accessToken };
  for (const relative of ['me/', 'me/preferences/', 'schema/', 'schema/customer/customer/', 'data/customer/customer/', 'notifications/', 'notifications/unread-count/', 'dashboard/widgets/', 'dashboard/decisions-by-day/', 'dashboard/high-volume-customers/', 'dashboard/lobby/', 'dashboard/agent-summary/', 'assistant/status/']) {
    await call(t, `GET /api/mobile/${relative.replace('customer/customer/', '{app}/{model}/')}`, 'GET', mobile(relative), bearer);
  }
  const customerId = upserted.body.data.results[0].id as string;
  await call(t, 'GET /api/mobile/data/{app}/{model}/{pk}/', 'GET', mobile(`data/customer/customer/${customerId}/`), bearer);
  await call(t, 'PATCH /api/mobile/me/preferences/', 'PATCH', mobile('me/preferences/'), { ...bearer, json: { language: 'en' } });
  await call(t, 'POST /api/mobile/notifications/read-all/', 'POST', mobile('notifications/read-all/'), bearer);
  await call(t, 'DELETE /api/mobile/devices/push-token', 'DELETE', mobile('devices/push-token'), bearer);
  await call(t, 'POST /api/mobile/data/engine/watchlist/next/', 'POST', mobile('data/engine/watchlist/next/'), bearer);
  await call(t, 'POST /api/mobile/auth/logout/', 'POST', mobile('auth/logout/'), { token });
});
