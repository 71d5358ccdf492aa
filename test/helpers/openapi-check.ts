/**
 * Checks the service's answers against its own OpenAPI document (/api/openapi.json), the one
 * merchants generate their clients from: a response whose status, content type or body the
 * document does not declare is a client that breaks. Every test app records its answers here
 * (test/helpers/app.ts); test/run.ts reports what the run recorded and fails on a violation.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { Context, Next } from 'koa';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';

export const OPENAPI_PATH = '/api/openapi.json';
/** The folder test/run.ts gives every worker for its record (one file per process). */
export const RECORD_DIR_VARIABLE = 'WARDEN_OPENAPI_CHECK_DIR';

export interface Exchange {
  method: string;
  path: string;
  status: number;
  /** The Content-Type header, parameters included; empty when there is no body. */
  contentType: string;
  /** The parsed JSON body, the text of another body, or undefined for none (or a stream, not read). */
  body: unknown;
}

export interface CheckResult {
  /** "METHOD /template/" of the documented operation, or undefined when no documented path matches. */
  operation: string | undefined;
  violations: string[];
}

export interface OpenApiCheck {
  operations: string[];
  check(exchange: Exchange): CheckResult;
}

interface Operation {
  id: string;
  method: string;
  pattern: RegExp;
  /** Literal segments: a path that two templates match belongs to the more specific one. */
  literals: number;
  pointer: string;
  responses: Record<string, { content?: Record<string, unknown> }>;
}

type Document = { paths: Record<string, Record<string, { responses: Operation['responses'] }>> };

const METHODS = new Set(['get', 'post', 'put', 'patch', 'delete']);
const DOCUMENT_ID = 'https://warden.invalid/openapi.json';

export function compileOpenApiCheck(document: unknown): OpenApiCheck {
  const doc = document as Document;
  // validateFormats off: the check is about shapes and types, what a generated client relies on.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ ...(document as object), $id: DOCUMENT_ID });
  const validators = new Map<string, ValidateFunction>();
  const validatorAt = (pointer: string) => {
    let validate = validators.get(pointer);
    if (!validate) {
      validate = ajv.getSchema(`${DOCUMENT_ID}#${pointer}`);
      if (!validate) throw new Error(`no schema at ${pointer}`);
      validators.set(pointer, validate);
    }
    return validate;
  };

  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(doc.paths)) {
    const segments = template.split('/');
    // The app adds the trailing slash the spec leaves off a few paths (devices/push-token).
    const slash = template.endsWith('/') ? '' : '/?';
    const pattern = new RegExp(`^${segments.map((s) => (s.startsWith('{') ? '[^/]+' : escapeRegExp(s))).join('/')}${slash}$`);
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.has(method)) continue;
      operations.push({
        id: `${method.toUpperCase()} ${template}`,
        method: method.toUpperCase(),
        pattern,
        literals: segments.filter((s) => !s.startsWith('{')).length,
        pointer: `/paths/${pointerToken(template)}/${method}`,
        responses: operation.responses,
      });
    }
  }
  operations.sort((a, b) => b.literals - a.literals);

  return {
    operations: operations.map((operation) => operation.id),
    check(exchange) {
      // HEAD and OPTIONS are the router's, on every path: not operations of the document.
      if (!METHODS.has(exchange.method.toLowerCase())) return { operation: undefined, violations: [] };
      const candidates = operations.filter((operation) => operation.pattern.test(exchange.path));
      if (!candidates.length) return { operation: undefined, violations: [] };
      const matching = candidates.filter((candidate) => candidate.method === exchange.method);
      if (!matching.length) {
        // The router's answer to a method the path does not have (with Allow) needs no operation.
        const violations = exchange.status === 405 ? [] : [`${exchange.method} ${candidates[0]!.id.split(' ')[1]} is not documented`];
        return { operation: undefined, violations };
      }
      // A path two templates match (data/engine/watchlist/actions/take/: the generic action, or
      // take with pk "actions") is answered by one of them: the first whose declaration it fits.
      const results = matching.map((operation) => ({ operation: operation.id, violations: checkResponse(operation, exchange, validatorAt) }));
      return results.find((result) => !result.violations.length) ?? results[0]!;
    },
  };
}

function checkResponse(operation: Operation, exchange: Exchange, validatorAt: (pointer: string) => ValidateFunction): string[] {
  const status = String(exchange.status);
  const response = operation.responses[status];
  if (!response) return [`status ${status} is not declared`];
  const mediaType = exchange.contentType.split(';')[0]!.trim().toLowerCase();
  if (!response.content) return mediaType ? [`status ${status} declares no body, the service sent ${mediaType}`] : [];
  if (!mediaType) return [`status ${status} declares ${Object.keys(response.content).join(', ')}, the service sent no body`];
  if (!(mediaType in response.content)) return [`status ${status} declares ${Object.keys(response.content).join(', ')}, the service sent ${mediaType}`];
  if (mediaType !== 'application/json' || exchange.body === undefined) return [];
  const validate = validatorAt(`${operation.pointer}/responses/${status}/content/${pointerToken(mediaType)}/schema`);
  if (validate(exchange.body)) return [];
  return (validate.errors ?? []).slice(0, 5).map((error) => `status ${status} body${error.instancePath} ${error.message}${paramsText(error.params)}`);
}

function paramsText(params: Record<string, unknown>): string {
  const detail = params.additionalProperty ?? params.missingProperty ?? params.allowedValues ?? params.allowedValue;
  return detail === undefined ? '' : ` (${JSON.stringify(detail)})`;
}

function pointerToken(value: string): string {
  return encodeURIComponent(value.replaceAll('~', '~0').replaceAll('/', '~1'));
}

function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** What one process recorded: the operations the document has, those answered, and the violations. */
export interface CheckRecord {
  operations: string[];
  answered: Record<string, number>;
  violations: Record<string, { count: number; example: string }>;
}

/**
 * Koa middleware that checks every answer of the app it wraps (outermost, so it sees what the
 * client gets) once `load` has the document. It records only when test/run.ts asks for a record.
 */
export function openApiRecorder() {
  const directory = process.env[RECORD_DIR_VARIABLE];
  let checker: OpenApiCheck | undefined;
  return {
    load(document: unknown) {
      if (directory) checker = cachedCheck(document);
    },
    async middleware(ctx: Context, next: Next) {
      await next();
      if (!checker) return;
      const exchange: Exchange = { method: ctx.method, path: ctx.path, status: ctx.status, contentType: ctx.response.get('Content-Type'), body: bodyOf(ctx.body) };
      const { operation, violations } = checker.check(exchange);
      const record = processRecord(directory!, checker.operations);
      if (operation) record.answered[operation] = (record.answered[operation] ?? 0) + 1;
      for (const violation of violations) {
        const key = `${operation ?? `${exchange.method} ${exchange.path}`}: ${violation}`;
        const entry = (record.violations[key] ??= { count: 0, example: JSON.stringify(exchange.body)?.slice(0, 300) ?? '' });
        entry.count += 1;
      }
    },
  };
}

/** The body as the client reads it: JSON through a round trip (dates become strings), streams unread. */
function bodyOf(body: unknown): unknown {
  if (body === undefined || body === null || body instanceof Readable) return undefined;
  if (Buffer.isBuffer(body)) return body.toString('utf8');
  if (typeof body === 'string') return body;
  return JSON.parse(JSON.stringify(body));
}

let cached: { text: string; check: OpenApiCheck } | undefined;
function cachedCheck(document: unknown): OpenApiCheck {
  const text = JSON.stringify(document);
  if (cached?.text !== text) cached = { text, check: compileOpenApiCheck(document) };
  return cached.check;
}

let record: CheckRecord | undefined;
function processRecord(directory: string, operations: string[]): CheckRecord {
  if (!record) {
    const created: CheckRecord = { operations, answered: {}, violations: {} };
    record = created;
    process.on('exit', () => fs.writeFileSync(path.join(directory, `${process.pid}.json`), JSON.stringify(created)));
  }
  return record;
}

/** Merges the records of a run's processes (test/run.ts). */
export function readRecords(directory: string): CheckRecord {
  const merged: CheckRecord = { operations: [], answered: {}, violations: {} };
  const operations = new Set<string>();
  for (const name of fs.readdirSync(directory)) {
    const one = JSON.parse(fs.readFileSync(path.join(directory, name), 'utf8')) as CheckRecord;
    for (const operation of one.operations) operations.add(operation);
    for (const [operation, count] of Object.entries(one.answered)) merged.answered[operation] = (merged.answered[operation] ?? 0) + count;
    for (const [key, { count, example }] of Object.entries(one.violations)) {
      const entry = (merged.violations[key] ??= { count: 0, example });
      entry.count += count;
    }
  }
  merged.operations = [...operations].sort();
  return merged;
}
