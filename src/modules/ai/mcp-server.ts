import type Router from '@koa/router';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { Context } from 'koa';
import { z } from 'zod';
import type { AppContext } from '../../context.ts';
import { UnauthorizedError } from '../../http/errors.ts';
import { readJsonBody } from '../../http/json-body.ts';
import { ALIAS, getRow, inlineBlocks, listRows, QueryError, scopedQuery, validPk, type InlineBlock } from '../backoffice/query.ts';
import type { BoundModel, Row } from '../backoffice/registry.ts';
import { detailBlocks, type AdminSite } from '../backoffice/site.ts';
import { visibleRow } from '../backoffice/access.ts';
import { saveObject, type WriteOrigin } from '../backoffice/write.ts';
import { ChainError, PermissionDenied, ValidationFailed } from '../backoffice/errors.ts';
import { cleanDecision, submitDecision } from '../cases/decisions.ts';
import type { Principal } from '../staff/principal.ts';
import { delegatedPrincipal } from './delegation.ts';

export const MCP_PATH = '/api/mcp/';
export const SERVER_NAME = 'warden-backoffice';
/** The models an AI review reads as a case. */
export const CASE_MODELS = new Set(['engine.watchlist']);
const CUSTOMER_MODEL = 'customer.customer';
const RELATED_ROWS = 50;

/** Where a record opens in the mobile panel: the navigate address of the assistant's messages. */
export function panelAddress(model: BoundModel, pk: string): string {
  return `data/${model.appLabel}/${model.model}/${encodeURIComponent(pk)}/`;
}

/** A tool's refusal: the model sees the reason as text; nothing of the record is in it. */
class ToolRefusal extends Error {}

function blocks(site: AdminSite, principal: Principal, list: InlineBlock[]) {
  return list.map((block) => ({ model: block.model.key, label: block.label, total: block.total, rows: block.rows.map((row) => visibleRow(site, principal, block.model, row)) }));
}

/** Reading tools give their JSON; refusals and validation errors become tool errors, never exceptions to the client. */
async function answer(work: () => Promise<Record<string, unknown>>) {
  try {
    const value = await work();
    return { content: [{ type: 'text' as const, text: JSON.stringify(value) }], structuredContent: value };
  } catch (error) {
    let message: string;
    if (error instanceof ToolRefusal || error instanceof QueryError) message = error.message;
    else if (error instanceof ValidationFailed) message = `Validation failed: ${JSON.stringify(error.errors)}`;
    else if (error instanceof PermissionDenied) message = 'You do not have permission to do that.';
    else if (error instanceof ChainError) message = error.message;
    else throw error;
    return { content: [{ type: 'text' as const, text: message }], isError: true };
  }
}

/** The MCP server of one request, bound to the delegated user: every tool sees only what that user may. */
function buildServer(app: AppContext, principal: Principal): McpServer {
  const site = app.backoffice.site;
  const server = new McpServer({ name: SERVER_NAME, version: '1' });
  const origin = (tool: string, args: unknown): WriteOrigin => ({ channel: 'mcp', mcp: { tool, arguments: args, user: principal.user.username } });

  /** A model the user may view, or a refusal that does not say whether it exists. */
  const viewable = (key: string): BoundModel => {
    const model = site.models.get(key);
    if (!model || !site.can(principal, model, 'view')) throw new ToolRefusal(`You may not view ${key.slice(0, 100)} (or it is not a model).`);
    return model;
  };
  const record = async (model: BoundModel, pk: string): Promise<Row> => {
    const row = validPk(model, pk) ? await getRow(app.db, model, principal, pk) : undefined;
    if (!row) throw new ToolRefusal(`No ${model.verboseName} ${pk.slice(0, 100)}.`);
    return row;
  };

  server.registerTool(
    'list_models',
    { description: 'The back-office models you may view, with what you may do on each.', inputSchema: {}, annotations: { readOnlyHint: true } },
    () => answer(async () => ({ models: site.visibleModels(principal).map((model) => ({ model: model.key, name: model.verboseName, plural: model.verboseNamePlural, permissions: site.perms(principal, model) })) })),
  );

  server.registerTool(
    'search_records',
    {
      description: "Search and filter a model's records (the back office's list: search text, filter parameters such as status__exact, page).",
      inputSchema: { model: z.string().describe('app.model, from list_models'), search: z.string().max(200).optional(), filters: z.record(z.string(), z.string()).optional(), page: z.number().int().min(1).optional() },
      annotations: { readOnlyHint: true },
    },
    (args) =>
      answer(async () => {
        const model = viewable(args.model);
        const result = await listRows(site, app.db, model, principal, { page: args.page ?? 1, pageSize: 20, search: args.search ?? '', order: [], filters: args.filters ?? {} });
        return {
          model: model.key,
          total: result.total,
          page: result.page,
          pages: result.pages,
          rows: result.rows.map((row) => ({ pk: String(row[model.pk]), repr: model.repr(row), ...visibleRow(site, principal, model, row) })),
        };
      }),
  );

  server.registerTool(
    'get_record',
    { description: 'Read one record with its related blocks (inlines).', inputSchema: { model: z.string(), pk: z.string() }, annotations: { readOnlyHint: true } },
    (args) =>
      answer(async () => {
        const model = viewable(args.model);
        const row = await record(model, args.pk);
        return { model: model.key, pk: args.pk, repr: model.repr(row), address: panelAddress(model, args.pk), record: visibleRow(site, principal, model, row), inlines: blocks(site, principal, await inlineBlocks(site, app.db, model, principal, row)) };
      }),
  );

  server.registerTool(
    'read_case',
    {
      description: "Read a case with its alerts, decisions, the customer's transactions, screening hits and KYC results.",
      inputSchema: { model: z.string().default('engine.watchlist'), pk: z.string() },
      annotations: { readOnlyHint: true },
    },
    (args) =>
      answer(async () => {
        if (!CASE_MODELS.has(args.model)) throw new ToolRefusal(`${args.model.slice(0, 100)} is not a case model.`);
        const model = viewable(args.model);
        const row = await record(model, args.pk);
        const related: Record<string, unknown>[] = [];
        const customerModel = site.models.get(CUSTOMER_MODEL);
        const customer = customerModel && site.can(principal, customerModel, 'view') && row.customer_id ? await getRow(app.db, customerModel, principal, String(row.customer_id)) : undefined;
        if (customer && customerModel) {
          related.push(...blocks(site, principal, await inlineBlocks(site, app.db, customerModel, principal, customer)));
          // Screening hits, KYC sessions and whatever else the registry holds per customer: every
          // model the user may view with a customer column that no inline above already covers.
          const covered = new Set([...(model.inlines ?? []), ...(customerModel.inlines ?? [])].map((inline) => inline.model));
          for (const other of site.visibleModels(principal)) {
            if (covered.has(other.key) || other.key === CUSTOMER_MODEL || other.key === model.key) continue;
            const column = other.columnTypes.has('customer_id') ? 'customer_id' : other.columnTypes.has('customer_ref') ? 'customer_ref' : null;
            if (!column) continue;
            const value = column === 'customer_id' ? customer.id : customer.customer_ref;
            const base = scopedQuery(app.db, other, principal).where(`${ALIAS}.${column}`, String(value));
            const [rows, counted] = await Promise.all([
              base.clone().select(`${ALIAS}.*`).orderBy(`${ALIAS}.${other.pk}`, 'desc').limit(RELATED_ROWS) as Promise<Row[]>,
              base.clone().count('* as count') as Promise<{ count: string }[]>,
            ]);
            if (rows.length) related.push({ model: other.key, label: other.verboseNamePlural, total: Number(counted[0]?.count ?? rows.length), rows: rows.map((related) => visibleRow(site, principal, other, related)) });
          }
        }
        return {
          model: model.key,
          pk: args.pk,
          address: panelAddress(model, args.pk),
          case: visibleRow(site, principal, model, row),
          case_blocks: blocks(site, principal, await inlineBlocks(site, app.db, model, principal, row)),
          // The case page's own blocks (timeline with rationales and notes, evidence), as this principal may see them.
          case_detail: await detailBlocks(app.db, site, model, row, principal),
          customer: customer && customerModel ? visibleRow(site, principal, customerModel, customer) : null,
          customer_blocks: related,
        };
      }),
  );

  server.registerTool(
    'update_record',
    {
      description: 'Change fields of a record through the back office (maker-checker may turn it into an approval request).',
      inputSchema: { model: z.string(), pk: z.string(), changes: z.record(z.string(), z.unknown()) },
      annotations: { readOnlyHint: false },
    },
    (args) =>
      answer(async () => {
        const model = viewable(args.model);
        const outcome = await saveObject(app.backoffice, model, principal, args.pk, args.changes, { partial: true, origin: origin('update_record', args) });
        return { status: outcome.status, pk: outcome.pk, approval_request_id: outcome.approvalRequestId ?? null, messages: outcome.messages, address: panelAddress(model, args.pk) };
      }),
  );

  server.registerTool(
    'change_case',
    {
      description: 'Change a case (status, flagged, account_action, assignee, postponement) with a rationale; closing may carry clear_decision.',
      inputSchema: { pk: z.string(), changes: z.record(z.string(), z.unknown()), rationale: z.string().min(1) },
      annotations: { readOnlyHint: false },
    },
    (args) =>
      answer(async () => {
        const model = viewable('engine.watchlist');
        const outcome = await saveObject(app.backoffice, model, principal, args.pk, { ...args.changes, rationale: args.rationale }, { partial: true, origin: origin('change_case', args) });
        return { status: outcome.status, pk: outcome.pk, approval_request_id: outcome.approvalRequestId ?? null, messages: outcome.messages, address: panelAddress(model, args.pk) };
      }),
  );

  server.registerTool(
    'add_decision',
    {
      description: 'Record a compliance decision (ACCEPT, REVIEW, REJECT) on a transaction or execution log, with a description and an optional score 0-100.',
      inputSchema: { model: z.string(), pk: z.string(), decision: z.string(), description: z.string(), score: z.number().min(0).max(100).optional() },
      annotations: { readOnlyHint: false },
    },
    (args) =>
      answer(async () => {
        const model = viewable(args.model);
        const input = cleanDecision({ decision: args.decision, description: args.description, score: args.score });
        const outcome = await submitDecision(app, model, principal, args.pk, input, [], origin('add_decision', args));
        return { status: outcome.status, approval_request_id: outcome.status === 'pending' ? outcome.approvalRequestId : null, address: panelAddress(model, args.pk) };
      }),
  );
  return server;
}

async function authenticate(app: AppContext, ctx: Context): Promise<Principal> {
  const token = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get('authorization'))?.[1];
  const principal = token ? await delegatedPrincipal(app.db, token, app.now?.() ?? new Date()) : null;
  if (!principal) throw new UnauthorizedError('The delegated token is missing, unknown or expired.', 'delegation_invalid');
  return principal;
}

/**
 * The back office as an MCP server (streamable HTTP, stateless: one server per request, so a
 * request runs as the user its token delegates and nothing is shared between users).
 */
export function registerMcpServer(router: Router, app: AppContext): void {
  router.post(MCP_PATH, async (ctx) => {
    const principal = await authenticate(app, ctx);
    const body = await readJsonBody(ctx, 1024 * 1024);
    const server = buildServer(app, principal);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    ctx.respond = false;
    ctx.res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await transport.handleRequest(ctx.req, ctx.res, body);
  });
  // Stateless: no server-initiated stream and no session to end.
  for (const method of ['get', 'delete'] as const) {
    router[method](MCP_PATH, async (ctx) => {
      await authenticate(app, ctx);
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      ctx.body = { jsonrpc: '2.0', error: { code: -32000, message: 'Method not allowed: this MCP server is stateless (POST only).' }, id: null };
    });
  }
}
