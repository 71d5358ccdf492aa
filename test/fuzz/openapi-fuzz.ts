/**
 * A fuzzer generated from the service's own OpenAPI document: for every operation it builds
 * fast-check arbitraries from the documented request (path parameters, JSON body, multipart form)
 * and mixes in what attackers and careless clients send: NUL and lone surrogates, prototype names,
 * huge and tiny numbers, deep nesting, thousands of keys, wrong types, broken JSON, wrong content
 * types, duplicated and foreign multipart parts, and tokens of every kind. With a staff target
 * (test/fuzz/staff.ts) the mobile operations carry staff identities' live tokens and name the
 * registry's real models and rows (test/fuzz/registry-fuzz.ts), and the web admin's pages and
 * forms are fuzzed beside them (test/fuzz/admin-fuzz.ts). Used by the fixed-seed run in `npm test`
 * (test/fuzz/api.test.ts) and the long run of `npm run fuzz` (bench/fuzz.ts).
 */
import fc from 'fast-check';
import { adminRequests } from './admin-fuzz.ts';
import { knownOr, modelBody, modelQuery, staffAuthorization, staffPath, type FuzzModel, type StaffFuzzTarget } from './registry-fuzz.ts';
import { anyJson, corrupt, encodePairs, HOSTILE_KEYS, hostileString, LIVE_PLACEHOLDER, nestedText, percentEncode } from './values.ts';

type Schema = Record<string, unknown>;
export type OpenApiDocument = { paths: Record<string, Record<string, Operation>>; components?: { schemas?: Record<string, Schema> } };
interface Operation {
  security?: unknown[];
  tags?: string[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses?: Record<string, unknown>;
}

/** Credentials the fuzzer may put where a token goes; each is one of several choices, never always the right one. */
export interface FuzzTokens {
  merchant: string;
  /** Session (endpoint) tokens: uploads. */
  session: string[];
  /** Agent tokens: end-kyc-session. */
  agent: string[];
}

/** What requests are generated for: the integration side's tokens and images, and the staff side when there is one. */
export interface FuzzTarget {
  tokens: FuzzTokens;
  files: Uint8Array[];
  staff?: StaffFuzzTarget;
}

export interface FuzzRequest {
  method: string;
  /** May hold live placeholders (values.ts), as may header values and the body. */
  path: string;
  /** The documented path, for reports. */
  route: string;
  headers: Record<string, string>;
  body?: string | FormData;
  /** Statuses of 500 or more the operation documents (the AI endpoints' 503 without a gateway): answers, not failures. */
  documented?: number[];
}

/** Where generation reads schemas and live values from. */
interface Source {
  document: OpenApiDocument;
  staff?: StaffFuzzTarget;
}

function resolve(schema: Schema, { document }: Source): Schema {
  let current = schema;
  for (let hops = 0; typeof current.$ref === 'string' && hops < 10; hops++) {
    const name = (current.$ref as string).split('/').at(-1)!;
    current = document.components?.schemas?.[name] ?? {};
  }
  return current;
}

/** Values valid for the schema as documented (most of the time), so requests get past the first check. */
function validValue(schema: Schema, source: Source, depth = 0): fc.Arbitrary<unknown> {
  const resolved = resolve(schema, source);
  const alternatives = (resolved.anyOf ?? resolved.oneOf) as Schema[] | undefined;
  if (alternatives?.length) return fc.oneof(...alternatives.map((alternative) => validValue(alternative, source, depth)));
  if (Array.isArray(resolved.enum) && resolved.enum.length) return fc.constantFrom(...(resolved.enum as unknown[]));
  if ('const' in resolved) return fc.constant(resolved.const);
  const types = Array.isArray(resolved.type) ? (resolved.type as string[]) : resolved.type ? [resolved.type as string] : [];
  if (types.length > 1) return fc.oneof(...types.map((type) => validValue({ ...resolved, type }, source, depth)));
  switch (types[0]) {
    case 'string':
      return stringFor(resolved);
    case 'integer':
      return fc.integer({ min: (resolved.minimum as number | undefined) ?? -1000, max: (resolved.maximum as number | undefined) ?? 1_000_000 });
    case 'number':
      return fc.double({ min: (resolved.minimum as number | undefined) ?? 0, max: (resolved.maximum as number | undefined) ?? 1_000_000, noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'array': {
      const items = (resolved.items as Schema | undefined) ?? {};
      const minLength = (resolved.minItems as number | undefined) ?? 0;
      return fc.array(depth > 3 ? anyJson : validValue(items, source, depth + 1), { minLength, maxLength: Math.max(minLength, Math.min(4, (resolved.maxItems as number | undefined) ?? 4)) });
    }
    case 'object':
      return objectFor(resolved, source, depth);
    default:
      return anyJson;
  }
}

function stringFor(schema: Schema): fc.Arbitrary<string> {
  const max = Math.min((schema.maxLength as number | undefined) ?? 30, 60);
  switch (schema.format) {
    case 'date':
      return fc.date({ min: new Date('1900-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((date) => date.toISOString().slice(0, 10));
    case 'date-time':
      return fc.date({ min: new Date('1990-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((date) => date.toISOString());
    case 'email':
      return fc.emailAddress();
    case 'binary':
      return fc.constant('binary');
  }
  const description = String(schema.description ?? '');
  if (description.includes('ISO 4217')) return fc.constantFrom('EUR', 'USD', 'TRY', 'eur', 'XXX', 'ZZZ');
  if (description.includes('alpha-3')) return fc.constantFrom('DEU', 'NLD', 'TUR', 'de', 'XX', 'ZZZ');
  if (description.includes('IPv4')) return fc.oneof(fc.ipV4(), fc.ipV6());
  return fc.string({ minLength: (schema.minLength as number | undefined) ?? 1, maxLength: Math.max(1, max) });
}

/** The documented properties, each sometimes a known live value of its name (a real refresh token, the current password). */
function objectFor(schema: Schema, source: Source, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const properties = (schema.properties as Record<string, Schema> | undefined) ?? {};
  const required = new Set((schema.required as string[] | undefined) ?? []);
  const shape: Record<string, fc.Arbitrary<unknown>> = {};
  for (const [name, property] of Object.entries(properties)) shape[name] = knownOr(source.staff, name, validValue(property, source, depth + 1));
  return fc.record(shape, { requiredKeys: Object.keys(properties).filter((name) => required.has(name)) });
}

/** A JSON body for the schema: valid, corrupted, hostile as a whole, or not JSON at all. */
function jsonBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<{ text: string; contentType: string }> {
  const asJson = (value: unknown) => ({ text: JSON.stringify(value) ?? 'null', contentType: 'application/json' });
  return fc.oneof(
    { arbitrary: valid.map(asJson), weight: 3 },
    { arbitrary: valid.chain(corrupt).map(asJson), weight: 6 },
    { arbitrary: valid.chain(corrupt).chain(corrupt).map(asJson), weight: 3 },
    { arbitrary: anyJson.map(asJson), weight: 2 },
    {
      arbitrary: fc.constantFrom(
        '',
        '{',
        '[]',
        'null',
        '"x"',
        '{"a":1,"a":2}',
        '\ufeff{}',
        '{"customer_ref": "\\ud800"}',
        '{"customer_ref": "\\u0000"}',
        '[' + '{}, '.repeat(1001) + '{}]',
        nestedText(10_000, 'array'),
        nestedText(5_000, 'object'),
        `{${Array.from({ length: 5000 }, (_, key) => `"k${key}":1`).join(',')},"customer_ref":"many"}`,
        '{"amount": 1e999}',
        '{"api_key": "k", "api_secret": "s", "__proto__": {"admin": true}}',
      ).map((text) => ({ text, contentType: 'application/json' })),
      weight: 2,
    },
    { arbitrary: fc.tuple(valid, fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', '')).map(([value, contentType]) => ({ text: JSON.stringify(value) ?? '', contentType })), weight: 1 },
    { arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ text: Buffer.from(bytes).toString('latin1'), contentType: 'application/json' })), weight: 1 },
  );
}

const JPEG_HEAD = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]);

/** A multipart form from the documented fields: tokens, artifact types, extra_data and files of every sort. */
function multipartBody(schema: Schema, source: Source, target: FuzzTarget): fc.Arbitrary<FormData> {
  const { tokens, files } = target;
  const properties = (resolve(schema, source).properties as Record<string, Schema> | undefined) ?? {};
  const fileField = Object.entries(properties).find(([, property]) => resolve(property, source).format === 'binary')?.[0] ?? 'file';
  const textFields = Object.keys(properties).filter((name) => name !== fileField);
  const tokenValue = fc.oneof(fc.constantFrom(...tokens.session, ...tokens.agent, tokens.merchant), hostileString);
  const fieldValue = (name: string) => {
    if (name === 'token') return tokenValue;
    if (name === 'extra_data') return fc.oneof(anyJson.map((value) => JSON.stringify(value) ?? ''), hostileString);
    return fc.oneof(validValue(properties[name]!, source), hostileString).map((value) => (typeof value === 'string' ? value : JSON.stringify(value) ?? ''));
  };
  const fileBytes = fc.oneof(
    fc.constantFrom(...files),
    fc.uint8Array({ maxLength: 256 }),
    fc.uint8Array({ maxLength: 128 }).map((bytes) => new Uint8Array(Buffer.concat([JPEG_HEAD, bytes]))),
    fc.constant(new Uint8Array(0)),
  );
  return fc
    .record({
      fields: fc.record(Object.fromEntries(textFields.map((name) => [name, fieldValue(name)])), { requiredKeys: [] }),
      extraFields: fc.array(fc.tuple(fc.constantFrom(...HOSTILE_KEYS.filter(Boolean), 'token', 'artifact_type'), hostileString), { maxLength: 2 }),
      files: fc.array(fc.tuple(fc.constantFrom(fileField, fileField, 'other', '__proto__'), fileBytes, fc.constantFrom('a.jpg', '', '../x.png', 'a\u0000.jpg')), { maxLength: 3 }),
    })
    .map(({ fields, extraFields, files: parts }) => {
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) form.append(name, value as string);
      for (const [name, value] of extraFields) form.append(name, value);
      for (const [name, bytes, filename] of parts) form.append(name, new Blob([new Uint8Array(bytes)], { type: 'application/octet-stream' }), filename);
      return form;
    });
}

function pathFor(template: string): fc.Arbitrary<string> {
  const names = [...template.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]!);
  if (!names.length) return fc.constant(template);
  const segment = fc.oneof(fc.constantFrom('customer', 'customer.customer', '1', '00000000-0000-0000-0000-000000000000', 'x'), hostileString.filter((text) => text.length > 0));
  const encoded = fc.oneof({ arbitrary: segment.map(percentEncode), weight: 5 }, { arbitrary: fc.constantFrom('%ff', '%c0%af', '%00', '%2e%2e', '..', '%'), weight: 1 });
  return fc.array(encoded, { minLength: names.length, maxLength: names.length }).map((values) =>
    names.reduce((path, name, index) => path.replace(`{${name}}`, values[index]!), template),
  );
}

function authorization(operation: Operation, tokens: FuzzTokens): fc.Arbitrary<Record<string, string>> {
  const bearer = fc.oneof(
    { arbitrary: fc.constant(tokens.merchant), weight: operation.security ? 6 : 1 },
    { arbitrary: fc.constantFrom(...tokens.session, ...tokens.agent), weight: 1 },
    { arbitrary: hostileString.filter((text) => /^[\x21-\x7e]+$/.test(text)), weight: 1 },
    { arbitrary: fc.constant(`${tokens.merchant.slice(0, -2)}xx`), weight: 1 },
  );
  return fc.oneof(
    { arbitrary: bearer.map((token) => ({ authorization: `Bearer ${token}` })), weight: 8 },
    { arbitrary: fc.constant({}), weight: 1 },
    { arbitrary: fc.constantFrom({ authorization: 'Basic abc' }, { authorization: 'Bearer' }, { authorization: 'Bearer a b' }), weight: 1 },
  );
}

const INTEGRATION_QUERIES = fc.option(fc.constantFrom('?p=0', '?page_size=999999', '?q=%00', '?__proto__[x]=1', '?o=-id&o=x'), { nil: '' });

/** The request body of an operation; on a data write whose documented body is any object, the chosen model's form fields. */
function bodyFor(operation: Operation, source: Source, target: FuzzTarget, model: FuzzModel | null): fc.Arbitrary<{ body?: FuzzRequest['body']; contentType?: string }> {
  const content = operation.requestBody?.content ?? {};
  const json = content['application/json']?.schema;
  const multipart = content['multipart/form-data']?.schema;
  const modelJson = json && source.staff && !resolve(json, source).properties ? modelBody(model, source.staff) : null;
  const jsonText = json ? jsonBody(modelJson ?? validValue(json, source)) : null;
  if (multipart) {
    return fc.oneof(
      { arbitrary: multipartBody(multipart, source, target).map((form) => ({ body: form })), weight: 6 },
      { arbitrary: (jsonText ?? fc.constant({ text: '{}', contentType: 'application/json' })).map(({ text, contentType }) => ({ body: text, contentType })), weight: 1 },
      { arbitrary: fc.constantFrom('--x\r\n', '--x\r\nContent-Disposition: form-data; name="token"\r\n\r\nabc').map((text) => ({ body: text, contentType: 'multipart/form-data; boundary=x' })), weight: 1 },
    );
  }
  return jsonText ? jsonText.map(({ text, contentType }) => ({ body: text, ...(contentType ? { contentType } : {}) })) : fc.constant({});
}

/**
 * One arbitrary over every operation of the document, and with a staff target over the web
 * admin's pages too. Without staff credentials the mobile operations mostly end at the token
 * check, so they get a small share; with them, the data layer (every model, its rows, its forms)
 * gets the largest.
 */
export function requestsFrom(document: OpenApiDocument, target: FuzzTarget): fc.Arbitrary<FuzzRequest> {
  const staff = target.staff;
  const integration: Source = { document };
  const staffSide: Source = { document, ...(staff ? { staff } : {}) };
  const operations: Array<{ arbitrary: fc.Arbitrary<FuzzRequest>; weight: number }> = [];
  for (const [route, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const mobile = operation.tags?.includes('mobile') ?? false;
      const onStaff = mobile && staff !== undefined;
      // Staff values (real refresh tokens, device ids, passwords) go only into staff requests.
      const source = onStaff ? staffSide : integration;
      const documented = Object.keys(operation.responses ?? {}).map(Number).filter((status) => status >= 500);
      const path = onStaff ? staffPath(route, staff) : pathFor(route).map((text) => ({ path: text, model: null }));
      const headers = onStaff && operation.security
        ? fc.oneof({ arbitrary: staffAuthorization(staff), weight: 12 }, { arbitrary: authorization(operation, target.tokens), weight: 1 })
        : authorization(operation, target.tokens);
      // The AI and assistant endpoints answer their documented 503 without a gateway: a small share.
      const weight = !mobile ? 12 : !staff ? 2 : documented.length ? 1 : route.includes('/data/{app}/{model}/') ? 10 : 3;
      operations.push({
        weight,
        arbitrary: path.chain(({ path: sentPath, model }) =>
          fc
            .record({
              headers,
              body: bodyFor(operation, source, target, model),
              query: onStaff ? modelQuery(model).map((pairs) => (pairs.length ? `?${encodePairs(pairs)}` : '')) : INTEGRATION_QUERIES,
            })
            .map(({ headers: sentHeaders, body: { body: payload, contentType }, query }) => ({
              method: method.toUpperCase(),
              path: sentPath + query,
              route: `${method.toUpperCase()} ${route}`,
              headers: { ...sentHeaders, ...(contentType !== undefined && contentType !== '' ? { 'content-type': contentType } : {}) },
              ...(payload !== undefined ? { body: payload } : {}),
              ...(documented.length ? { documented } : {}),
            })),
        ),
      });
    }
  }
  const api = fc.oneof(...operations);
  if (!staff) return api;
  return fc.oneof({ arbitrary: api, weight: 3 }, { arbitrary: adminRequests(staff, (route) => formFor(route, staffSide)), weight: 1 });
}

/** The documented JSON body of a mobile route as a web form's fields (the web's decision and approval forms take the same fields). */
function formFor(route: string, source: Source): fc.Arbitrary<Array<[string, string]>> {
  const schema = Object.values(source.document.paths[route] ?? {})[0]?.requestBody?.content['application/json']?.schema;
  const properties = schema ? ((resolve(schema, source).properties as Record<string, Schema> | undefined) ?? {}) : {};
  const fields = Object.entries(properties).map(([name, property]) =>
    fc.option(fc.oneof({ arbitrary: validValue(property, source).map((value) => (typeof value === 'string' ? value : JSON.stringify(value) ?? '')), weight: 4 }, { arbitrary: hostileString, weight: 1 }), { nil: undefined }).map((value) => [name, value] as const),
  );
  return fc.tuple(...fields).map((pairs) => pairs.filter((pair): pair is [string, string] => pair[1] !== undefined));
}

/**
 * Live values of a running service: fills a request's placeholders when it is sent, hears how it
 * was answered (a lost credential is replaced), and takes a checkpoint between batches (rows
 * re-read, identities checked). test/fuzz/staff.ts implements it.
 */
export interface FuzzCredentials {
  fill(request: FuzzRequest): Promise<{ request: FuzzRequest; lease: unknown }>;
  answered(lease: unknown, status: number, location: string | null): Promise<void>;
  checkpoint(): Promise<void>;
}

export interface FuzzOutcome {
  requests: number;
  byStatus: Map<number, number>;
  /** Statuses by side of the service: integration (/api/ outside the mobile API), mobile, web (/admin/). */
  bySurface: Map<string, Map<number, number>>;
  /** Responses of 500 or more the operation does not document, and requests that got no response at all, with what was sent. */
  failures: Array<{ route: string; status: number | 'no response'; sample: string }>;
  /** Documented responses of 500 or more (the AI endpoints without a gateway), by route. */
  documented: Map<string, number>;
}

function surfaceOf(route: string): string {
  return route.includes(' /admin/') ? 'web' : route.includes(' /api/mobile/') ? 'mobile' : 'integration';
}

/** Statuses in ascending order, as `200: 12, 400: 3`. */
export function statusLine(statuses: Map<number, number>): string {
  return [...statuses].sort(([a], [b]) => a - b).map(([status, times]) => `${status}: ${times}`).join(', ');
}

/** Replaces every placeholder of a text by `value(name)`. */
export function fillText(text: string, value: (name: string) => string): string {
  return text.includes('{{') ? text.replace(LIVE_PLACEHOLDER, (_, name: string) => value(name)) : text;
}

/** Sends `count` requests drawn with `seed`, `concurrency` at a time; never throws for a bad answer, records it. */
export async function runFuzz(
  baseUrl: string,
  arbitrary: fc.Arbitrary<FuzzRequest>,
  options: {
    seed: number;
    count: number;
    concurrency: number;
    credentials?: FuzzCredentials;
    /** Stop at the next batch after this time (ms since the epoch). */
    deadline?: number;
    onBatch?: (outcome: FuzzOutcome) => void;
  },
): Promise<FuzzOutcome> {
  const outcome: FuzzOutcome = { requests: 0, byStatus: new Map(), bySurface: new Map(), failures: [], documented: new Map() };
  const batch = 250;
  for (let offset = 0; offset < options.count; offset += batch) {
    if (options.deadline !== undefined && Date.now() > options.deadline) break;
    await options.credentials?.checkpoint();
    const size = Math.min(batch, options.count - offset);
    const requests = fc.sample(arbitrary, { seed: options.seed + offset, numRuns: size });
    let next = 0;
    const worker = async () => {
      while (next < requests.length) {
        const generated = requests[next++]!;
        const { request, lease } = options.credentials ? await options.credentials.fill(generated) : { request: generated, lease: null };
        let status: number | 'no response';
        let location: string | null = null;
        try {
          const response = await fetch(baseUrl + request.path, {
            method: request.method,
            headers: request.headers,
            // The web admin answers with redirects (a lost session is one to the login page): seen, not followed.
            redirect: 'manual',
            ...(request.body !== undefined && request.method !== 'GET' ? { body: request.body } : {}),
          });
          await response.arrayBuffer();
          status = response.status;
          location = response.headers.get('location');
        } catch {
          status = 'no response';
        }
        outcome.requests++;
        if (typeof status === 'number') {
          outcome.byStatus.set(status, (outcome.byStatus.get(status) ?? 0) + 1);
          const surface = surfaceOf(request.route);
          if (!outcome.bySurface.has(surface)) outcome.bySurface.set(surface, new Map());
          const statuses = outcome.bySurface.get(surface)!;
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          await options.credentials?.answered(lease, status, location);
        }
        if (typeof status === 'number' && request.documented?.includes(status)) {
          outcome.documented.set(request.route, (outcome.documented.get(request.route) ?? 0) + 1);
        } else if (status === 'no response' || status >= 500) {
          const sample = typeof request.body === 'string' ? request.body.slice(0, 300) : request.body instanceof FormData ? `multipart: ${[...(request.body as unknown as { keys(): Iterable<string> }).keys()].join(',')}` : '';
          outcome.failures.push({ route: request.route, status, sample: `${request.method} ${request.path} ${JSON.stringify(request.headers)} ${sample}` });
        }
      }
    };
    await Promise.all(Array.from({ length: options.concurrency }, worker));
    options.onBatch?.(outcome);
  }
  return outcome;
}
