/**
 * Every registered model against every face that reads the registry, enumerated from the bound
 * site (never a hand-written list, so a model registered later is covered the day it lands):
 * - a superuser sees no hidden column's value (a marker put into each one) nor a hidden field's
 *   name in the web changelist and change page, the mobile list, detail and schema, the MCP
 *   tools (search_records, get_record, read_case) and the autocomplete of relation fields;
 * - a user holding every permission except those of one model is refused that model by every
 *   face (web 403, mobile 403, schema 404, MCP "may not view", autocomplete 403), does not find
 *   it in list_models, the mobile schema index and menu or the web index, gets no dashboard card
 *   or block of it and cannot run a report kind that reads it;
 * - the same user, viewing a model that points at the one they may not view, is not told the
 *   related record's name (repr) nor its joined columns in lists, details and change pages.
 * Failures are collected per test and reported as one list: each line names the model, the face
 * and what leaked.
 */
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient } from '../helpers/admin.ts';
import { hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, type TestClock } from '../helpers/mobile.ts';
import { ServiceMcp } from '../../src/gateway/mcp.ts';
import { delegate } from '../../src/modules/ai/delegation.ts';
import { CASE_MODELS } from '../../src/modules/ai/mcp-server.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { permissionFor } from '../../src/modules/backoffice/declare.ts';
import { scopedQuery } from '../../src/modules/backoffice/query.ts';
import type { BoundModel, Row } from '../../src/modules/backoffice/registry.ts';
import type { AdminSite } from '../../src/modules/backoffice/site.ts';
import { CARDS } from '../../src/modules/dashboard/blocks.ts';
import { SESSION_MODEL } from '../../src/modules/videocall/queue.ts';
import { defineEvent } from '../../src/modules/events/service.ts';
import { REPORT_KINDS } from '../../src/modules/reports/kinds.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createGroup, createUser } from '../../src/modules/staff/service.ts';

const DATA = '/api/mobile/data/';
const MOBILE = '/api/mobile/';
const PASSWORD = 'correct horse battery staple 42';
/** How the staff service is called from here; `known` is every codename of the bound site. */
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set<string>() };
/** Any hidden column's marker, and an argon2 hash (a password or API secret), wherever they show. */
const LEAKED = /HIDDEN-[a-z_]+-[a-z_]+|\$argon2/;
/** Dashboard blocks and the model whose view permission each needs (dashboard/routes.ts BLOCK_MODELS). */
const DASHBOARD_BLOCKS: ReadonlyArray<[path: string, model: string]> = [
  ['dashboard/decisions-by-day/', 'transaction.financialevent'],
  ['dashboard/high-volume-customers/', 'transaction.financialevent'],
  ['dashboard/lobby/', SESSION_MODEL],
];

let app: TestApp;
let clock: TestClock;
let site: AdminSite;
let merchant: string;

interface Actor {
  id: string;
  username: string;
  token: string;
  principal: Principal;
  web: ReturnType<typeof adminClient>;
  mcp: ServiceMcp;
}

let root: Actor;
/** Per model key: a user with every permission except those of that model. */
const without = new Map<string, Actor>();
/** Per model key: the row every face is asked about (its hidden columns hold the markers). */
const probe = new Map<string, string>();
/** One report of each kind, by kind. */
const reportOf = new Map<string, number>();
let caseId: string;

const models = (): BoundModel[] => [...site.models.values()];
const path = (model: BoundModel) => `${model.appLabel}/${model.model}/`;
const hiddenNames = (model: BoundModel): string[] => Object.entries(model.fields ?? {}).filter(([, declaration]) => declaration.hidden).map(([name]) => name);
const markerOf = (model: BoundModel, column: string) => `HIDDEN-${model.table}-${column}`;

/** The relation fields whose options autocomplete offers (backoffice/autocomplete.ts relationField). */
function relationFields(model: BoundModel) {
  return model.formFields.filter((field) => (field.type === 'fk' || field.type === 'm2m') && field.related !== null && !field.declaration.hidden);
}

/** Every permission of the model: its four operations and its custom codenames. */
function permissionsOf(model: BoundModel): string[] {
  return [...(['view', 'add', 'change', 'delete'] as const).map((operation) => permissionFor(model, operation)), ...(model.customPermissions ?? []).map((custom) => `${model.appLabel}.${custom.codename}`)];
}

async function actor(username: string, permissions: string[], extra: { is_superuser?: boolean } = {}): Promise<Actor> {
  const user = await createUser(app.database.knex, { username, password: PASSWORD, permissions, ...extra }, operator);
  const [{ accessToken }, web, delegation] = await Promise.all([
    pairDevice(app, clock, user.id),
    (async () => {
      const client = adminClient(app.url);
      const login = await client.login(username, PASSWORD);
      if (login.status !== 302) throw new Error(`web login of ${username} failed: ${login.status}`);
      return client;
    })(),
    delegate(app.context.db, user.id, 3600, clock.now),
  ]);
  const mcp = await ServiceMcp.connect({ url: `${app.url}/api/mcp/`, token: delegation.token }, 10_000);
  return { id: user.id, username, token: accessToken, principal: (await loadPrincipal(app.context.db, user.id))!, web, mcp };
}

async function inBatches<T>(items: readonly T[], size: number, work: (item: T) => Promise<void>): Promise<void> {
  for (let index = 0; index < items.length; index += size) await Promise.all(items.slice(index, index + size).map(work));
}

const mobile = (who: Actor, method: string, url: string, json?: unknown) => app.request(method, url, { token: who.token, ...(json === undefined ? {} : { json }) });

async function ingest(endpoint: string, records: unknown[]) {
  const response = await app.request('POST', endpoint, { token: merchant, json: records });
  if (response.status !== 200) throw new Error(`${endpoint}: ${response.status} ${response.text}`);
  return response.body.data.results as Array<{ id: string; log_id: string; decision: string }>;
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  for (const codename of app.context.backoffice.site.permissionCodenames()) operator.known.add(codename);
  site = app.context.backoffice.site;
  const db = app.context.db;
  merchant = await app.merchantToken();

  // Integration data: a named customer, scored financial and non-financial events, their logs, an alerted case.
  await defineEvent(db, { slug: 'deposit', name: 'Deposit Zeta', type: 1, active: true }, operator.actor);
  await defineEvent(db, { slug: 'login-evt', name: 'Login Zeta', type: 2, active: true }, operator.actor);
  await loadRuleSet(app.context, [
    { code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 },
    { code: 'EVERY_LOGIN', name: 'Every login', target: 'non_financial', expression: { '==': [1, 1] }, score: 60 },
  ]);
  const customers = await app.request('POST', '/api/customer/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'enum-cust-1', first_name: 'Zebulon', last_name: 'Quartermaine', email: 'zebulon@example.com' }],
  });
  if (customers.status !== 200) throw new Error(customers.text);
  const financial = await ingest('/api/transaction/financial/upsert/', [6000, 7000, 100].map((amount, index) => ({
    customer_ref: 'enum-cust-1', event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `enum-tx-${index}`, io_type: 0, event_date: hoursAgo(2),
  })));
  await ingest('/api/transaction/non-financial/upsert/', [{ customer_ref: 'enum-cust-1', event_slug: 'login-evt', transaction_ref: 'enum-nf-0', event_date: hoursAgo(1) }]);
  const alert = await db('alerts').where({ record_id: financial[0]!.id }).first();
  caseId = String(alert.case_id);

  // Staff: a superuser, a maker, an assignee, a signer group.
  const group = await createGroup(db, { name: 'signers-zeta', permissions: ['engine.view_rule'] }, operator);
  root = await actor('aa-root', [], { is_superuser: true });
  const assignee = await createUser(db, { username: 'assignee-zeta', password: null, full_name: 'Assignee Zeta' }, operator);
  await db('cases').where({ id: caseId }).update({ assignee_id: assignee.id });
  const maker = await actor('maker-zeta', ['customer.view_customer', 'customer.change_customer']);

  // A compliance decision through the mobile decision endpoint.
  const decided = await mobile(root, 'POST', `${DATA}transaction/financialevent/${financial[2]!.id}/decision/`, { decision: 'ACCEPT', description: 'looks fine' });
  if (decided.status !== 201) throw new Error(`decision: ${decided.status} ${decided.text}`);

  // The case closed with a clear decision: decisions that name their case.
  const closed = await mobile(root, 'PATCH', `${DATA}engine/watchlist/${caseId}/`, { status: 'closed', rationale: 'enumeration', clear_decision: 'ACCEPT' });
  if (closed.status !== 200) throw new Error(`closure: ${closed.status} ${closed.text}`);

  // A note on the case (engine.casenote).
  const noted = await mobile(root, 'POST', `${DATA}engine/casenote/`, { case_id: caseId, body: 'Note Zeta' });
  if (noted.status !== 201) throw new Error(`note: ${noted.status} ${noted.text}`);

  // A pending approval request on the customer, made by the maker (a superuser's pending list shows it).
  await setApprovalPolicies(db, { model: 'customer.customer', operations: ['change'], signerGroup: 'signers-zeta' });
  const customerId = String((await db('customers').where({ customer_ref: 'enum-cust-1' }).first('id')).id);
  const requested = await mobile(maker, 'PATCH', `${DATA}customer/customer/${customerId}/`, { email: 'zq@example.com' });
  if (requested.status !== 202) throw new Error(`approval request: ${requested.status} ${requested.text}`);
  probe.set('approval.approvalrequest', requested.body.data.approval_request_id);
  probe.set('approval.pendingapprovalrequest', requested.body.data.approval_request_id);

  // Tables without an integration path: rows written as the importers and the service write them.
  await db('sanction_entries').insert({ source: 'ofac', source_id: 'ENUM-1', schema: 'Person', name: 'Sanctioned Zeta' });
  await db('screening_hits').insert({ customer_id: customerId, source: 'ofac', source_id: 'ENUM-1', entry_name: 'Sanctioned Zeta', matched_name: 'Sanctioned Zeta', similarity: 90 });
  await db('verification_flows').insert({ code: 'enum-flow', name: 'Flow Zeta', required_artifact_types: ['selfie'] });
  await db('verification_sessions').insert({
    id: 'enum-session-1', customer_ref: 'enum-kyc-ref', flow_code: 'enum-flow', required_artifact_types: ['selfie'], pending_artifact_types: ['selfie'],
    requires_video_call: false, videocall_token: 'placeholder', created_by: 'merchant:test',
  });
  const artifactId = randomUUID();
  await db('verification_artifacts').insert({ id: artifactId, session_id: 'enum-session-1', artifact_type: 'selfie', content_type: 'image/jpeg', sha256: 'ab'.repeat(32), path: 'placeholder', size: 10 });
  probe.set('document.artifact', artifactId);
  const [credential] = await db('merchant_credentials').insert({ client: 'Marker Merchant', api_key: 'wk_enum_marker', secret_hash: 'placeholder', created_by: 'test' }).returning('id');
  probe.set('merchant.credential', String(credential.id));
  for (const kind of REPORT_KINDS.keys()) {
    const [report] = await db('reports').insert({ name: `Report Zeta ${kind}`, kind, parameters: {}, created_by_id: root.id }).returning('id');
    reportOf.set(kind, report.id);
  }
  const [result] = await db('report_results')
    .insert({ report_id: reportOf.get('customers_by_risk'), status: 'done', row_count: 1, columns: JSON.stringify(['customer_ref']), requested_by_id: root.id, started_at: clock.now, completed_at: clock.now })
    .returning('id');
  probe.set('report.reportresult', String(result.id));

  // A user whose hash is the marker (no one logs in as them) in the signer group, and their phone.
  const markerUser = randomUUID();
  await db('staff_users').insert({ id: markerUser, username: 'marker-zeta', full_name: 'Marker Zeta', password_hash: 'placeholder' });
  await db('staff_user_groups').insert({ user_id: markerUser, group_id: group.id });
  probe.set('auth.user', markerUser);

  // One user per model, holding every permission but that model's; each pairs, logs in and delegates.
  const every = site.permissionCodenames();
  await inBatches(models(), 6, async (model) => {
    const denied = new Set(permissionsOf(model));
    without.set(model.key, await actor(`noview-${model.appLabel}-${model.model}`, every.filter((codename) => !denied.has(codename))));
  });
  // The signer group holds them all (but those it would give a permission they must lack), so the
  // pending requests are theirs to see; and each has a report result of their own, older than the probe's.
  const groupGrants = new Set<string>(await db('staff_group_permissions').where({ group_id: group.id }).pluck('codename'));
  const signers = [...without.entries()].filter(([key]) => !permissionsOf(site.models.get(key)!).some((codename) => groupGrants.has(codename)));
  await db('staff_user_groups').insert(signers.map(([, who]) => ({ user_id: who.id, group_id: group.id })));
  await db('report_results').insert([...without.values()].map((who) => ({
    report_id: reportOf.get('transactions_above'), status: 'done', row_count: 0, rows: JSON.stringify([]), columns: JSON.stringify([]), requested_by_id: who.id, created_at: new Date(Date.now() - 86_400_000),
  })));
  const device = randomUUID();
  await db('mobile_devices').insert({ id: device, user_id: markerUser, name: 'Phone Zeta', platform: 'ios', push_provider: 'fcm', push_enabled: true, push_token: 'placeholder', created_at: new Date(Date.now() + 86_400_000) });
  probe.set('mobile.device', device);
  // Everyone's own notifications (the model shows its owner's only), naming the case by a generic relation.
  await db('notifications').insert([root, ...without.values()].map((who) => ({ user_id: who.id, kind: 'alert', title: 'Notification Zeta', body: 'x', target_model: 'engine.watchlist', target_pk: caseId })));

  // Every model's probe row, and a marker in each hidden column of it: text, json, or a text array.
  for (const model of models()) {
    if (!probe.has(model.key)) {
      const first = (await scopedQuery(db, model, root.principal).orderBy(`t.${model.pk}`).first(`t.${model.pk} as pk`)) as { pk: unknown } | undefined;
      if (first) probe.set(model.key, String(first.pk));
    }
    const pk = probe.get(model.key);
    if (pk === undefined) continue;
    const values: Row = {};
    for (const name of hiddenNames(model)) {
      const column = model.columnTypes.get(name);
      if (!column) continue;
      const marker = markerOf(model, name);
      values[name] = column.udtName === 'json' || column.udtName === 'jsonb' ? JSON.stringify([[marker]]) : column.udtName === '_text' ? [marker] : marker;
    }
    if (Object.keys(values).length) await db(model.table).where(model.pk, pk).update(values);
  }
});

test.after.always(async () => {
  for (const who of [root, ...without.values()]) await who?.mcp.close().catch(() => {});
  await app?.close();
});

/** Problems of one response's text: a hidden value (marker or hash) anywhere in it. */
function leakedValues(face: string, text: string): string[] {
  const found = LEAKED.exec(text);
  return found ? [`${face}: hidden value ${found[0]} in the response`] : [];
}

/** A hidden field's name as a web page would carry it: its form row, input id or name, or a multi-word label. */
function htmlNames(face: string, html: string, model: BoundModel): string[] {
  const problems: string[] = [];
  for (const name of hiddenNames(model)) {
    const label = model.fields?.[name]?.label ?? name.replace(/_/g, ' ');
    const patterns = [`field-${name}`, `id="id_${name}"`, `name="${name}"`, ...(label.includes(' ') ? [`>${label.charAt(0).toUpperCase()}${label.slice(1)}<`] : [])];
    for (const pattern of patterns) if (html.includes(pattern)) problems.push(`${face}: hidden field ${name} shows as ${pattern}`);
  }
  return problems;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A hidden field's name in a JSON answer: as a key (a `rows` list of records is the tools' own key), or as a value (a form field, a column, a filter parameter). */
function jsonNames(face: string, value: unknown, names: readonly string[]): string[] {
  const hidden = new Set(names);
  const problems: string[] = [];
  const walk = (node: unknown, at: string) => {
    if (Array.isArray(node)) {
      node.forEach((item, index) => walk(item, `${at}[${index}]`));
    } else if (isPlainObject(node)) {
      for (const [key, child] of Object.entries(node)) {
        if (hidden.has(key) && !(key === 'rows' && Array.isArray(child) && child.every(isPlainObject))) problems.push(`${face}: hidden field ${key} as a key at ${at}`);
        walk(child, `${at}.${key}`);
      }
    } else if (typeof node === 'string') {
      for (const name of hidden) if (node === name || node.startsWith(`${name}__`)) problems.push(`${face}: hidden field ${name} named at ${at} ("${node}")`);
    }
  };
  walk(value, '$');
  return problems;
}

/** The hidden names of a model and of the models its record's blocks list (inlines). */
function namesAround(model: BoundModel): string[] {
  return [...new Set([...hiddenNames(model), ...(model.inlines ?? []).flatMap((inline) => hiddenNames(site.models.get(inline.model)!))])];
}

/** The text around the first occurrence of a value, for the report of what leaked and where. */
function around(text: string, value: string | RegExp): string {
  const index = typeof value === 'string' ? text.indexOf(value) : text.search(value);
  return index < 0 ? '' : text.slice(Math.max(0, index - 80), index + 60).replace(/\s+/g, ' ');
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

test.serial('every model has a probe row, and every hidden column of it holds its marker', async (t) => {
  const problems: string[] = [];
  for (const model of models()) {
    const pk = probe.get(model.key);
    if (pk === undefined) {
      problems.push(`${model.key}: no row to probe (seed one in test.before)`);
      continue;
    }
    const row = (await app.context.db(model.table).where(model.pk, pk).first()) as Row | undefined;
    for (const name of hiddenNames(model)) {
      if (!model.columnTypes.has(name)) continue;
      if (!JSON.stringify(row?.[name] ?? null).includes(markerOf(model, name))) problems.push(`${model.key}.${name}: no marker (column type ${model.columnTypes.get(name)!.udtName})`);
    }
  }
  t.deepEqual(problems, []);
  // A control that the markers are where the faces would read them: the one endpoint that serves a
  // hidden column by design (a report result's rows, reports/results/<pk>/) shows its marker.
  const rows = site.models.get('report.reportresult')!;
  const served = await mobile(root, 'GET', `${MOBILE}reports/results/${probe.get(rows.key)}/`);
  t.is(served.status, 200, served.text);
  t.true(served.text.includes(markerOf(rows, 'rows')), 'the marker of report_results.rows is served where it is meant to be');
  t.log(`${site.models.size} models, ${models().reduce((sum, model) => sum + hiddenNames(model).filter((name) => model.columnTypes.has(name)).length, 0)} hidden columns marked`);
});

test.serial('a superuser sees no hidden value nor hidden field name of any model through any face', async (t) => {
  const problems: string[] = [];
  let faces = 0;
  await inBatches(models(), 4, async (model) => {
    const pk = probe.get(model.key);
    if (pk === undefined) return;
    const object = encodeURIComponent(pk);
    const names = namesAround(model);
    const hidden = hiddenNames(model);
    const check = (face: string, status: number, expected: number, text: string, kind: 'html' | 'json') => {
      faces++;
      const label = `${model.key} ${face}`;
      if (status !== expected) problems.push(`${label}: status ${status}, expected ${expected}: ${text.slice(0, 200)}`);
      problems.push(...leakedValues(label, text));
      if (kind === 'html') problems.push(...htmlNames(label, text, model));
      else problems.push(...jsonNames(label, parsed(text), names));
    };

    // Web admin: changelist and change page.
    const [changelist, change] = await Promise.all([root.web.get(`/admin/${path(model)}`), root.web.get(`/admin/${path(model)}${object}/change/`)]);
    check('web changelist', changelist.status, 200, changelist.text, 'html');
    // A report result's page shows its rows by design, as reports/results/<pk>/ does (the control above): the rows' marker only, nothing else hidden.
    const rowsByDesign = model.key === 'report.reportresult' ? markerOf(model, 'rows') : null;
    if (rowsByDesign && !change.text.includes(rowsByDesign)) problems.push(`${model.key} web change page: the result's rows are not shown`);
    check('web change page', change.status, 200, rowsByDesign ? change.text.replaceAll(rowsByDesign, '') : change.text, 'html');

    // Mobile data API: list, detail with its inline blocks, schema of the model and of the record.
    const [list, detail, schema, recordSchema] = await Promise.all([
      mobile(root, 'GET', `${DATA}${path(model)}?page_size=200`),
      mobile(root, 'GET', `${DATA}${path(model)}${object}/?include_inlines=1`),
      mobile(root, 'GET', `${MOBILE}schema/${path(model)}`),
      mobile(root, 'GET', `${MOBILE}schema/${path(model)}?object_id=${object}`),
    ]);
    check('mobile list', list.status, 200, list.text, 'json');
    if (hidden.length && !(list.body?.data?.results ?? []).some((row: { pk: string }) => row.pk === pk)) problems.push(`${model.key} mobile list: the probe row ${pk} is not on the page, so its markers were not looked for`);
    // Report results are read at reports/results/<pk>/ (their rows are the point there); the data detail answers 404 for everyone.
    check('mobile detail', detail.status, model.key === 'report.reportresult' ? 404 : 200, detail.text, 'json');
    check('mobile schema', schema.status, 200, schema.text, 'json');
    check('mobile schema of the record', recordSchema.status, 200, recordSchema.text, 'json');
    // A hidden column cannot be asked for as a list field, nor found by searching for its value.
    for (const name of hidden) {
      const asked = await mobile(root, 'GET', `${DATA}${path(model)}?fields=${name}`);
      faces++;
      if (asked.status !== 400) problems.push(`${model.key} mobile list fields=${name}: status ${asked.status}`);
      problems.push(...leakedValues(`${model.key} mobile list fields=${name}`, asked.text));
      if (model.searchFields?.length) {
        const searched = await mobile(root, 'GET', `${DATA}${path(model)}?q=${encodeURIComponent(markerOf(model, name))}`);
        faces++;
        if (searched.status !== 200 || searched.body.data.pagination.total !== 0) problems.push(`${model.key} mobile search for the marker of ${name}: ${searched.status}, ${searched.body?.data?.pagination?.total} found`);
      }
    }

    // MCP tools.
    const [searched, record] = await Promise.all([root.mcp.call('search_records', { model: model.key }, 10_000), root.mcp.call('get_record', { model: model.key, pk }, 10_000)]);
    check('MCP search_records', searched.isError ? 500 : 200, 200, searched.text, 'json');
    if (hidden.length && !searched.isError && !(JSON.parse(searched.text).rows as { pk: string }[]).some((row) => row.pk === pk)) {
      problems.push(`${model.key} MCP search_records: the probe row ${pk} is not on the first page, so its markers were not looked for`);
    }
    check('MCP get_record', record.isError ? 500 : 200, 200, record.text, 'json');
    if (CASE_MODELS.has(model.key)) {
      const read = await root.mcp.call('read_case', { model: model.key, pk: caseId }, 10_000);
      // The case's blocks list other models' rows: none of their hidden names either.
      check('MCP read_case', read.isError ? 500 : 200, 200, read.text, 'json');
      problems.push(...jsonNames(`${model.key} MCP read_case`, parsed(read.text), models().flatMap(hiddenNames)));
    }

    // Autocomplete of each relation field, web and mobile: the options are the target's reprs.
    for (const field of relationFields(model)) {
      const target = site.models.get(field.related!)!;
      const [web, api] = await Promise.all([
        root.web.get(`/admin/${path(model)}autocomplete/?field=${field.name}`),
        mobile(root, 'GET', `${DATA}${path(model)}autocomplete/?field=${field.name}`),
      ]);
      check(`web autocomplete ${field.name}`, web.status, 200, web.text, 'json');
      check(`mobile autocomplete ${field.name}`, api.status, 200, api.text, 'json');
      problems.push(...jsonNames(`${model.key} autocomplete ${field.name}`, parsed(api.text), hiddenNames(target)));
    }
  });
  t.log(`${site.models.size} models, ${faces} responses checked`);
  t.deepEqual(problems, []);
});

test.serial('a superuser sees no hidden value in what the report kinds and the dashboard blocks produce', async (t) => {
  const problems: string[] = [];
  const runs = [...REPORT_KINDS.keys()];
  // At most three runs of one user at a time (REPORT_MAX_ACTIVE_RUNS): in threes, each waited for.
  for (let index = 0; index < runs.length; index += 3) {
    await Promise.all(
      runs.slice(index, index + 3).map(async (kind) => {
        const queued = await mobile(root, 'POST', `${MOBILE}reports/${reportOf.get(kind)}/run/`);
        if (queued.status !== 202) return void problems.push(`report kind ${kind}: run answered ${queued.status} ${queued.text.slice(0, 200)}`);
        const resultId = queued.body.data.result_id as number;
        let result = await mobile(root, 'GET', `${MOBILE}reports/results/${resultId}/?page_size=200`);
        for (let tries = 0; tries < 400 && !['done', 'failed'].includes(result.body?.data?.status); tries++) {
          await new Promise((resolve) => setTimeout(resolve, 25));
          result = await mobile(root, 'GET', `${MOBILE}reports/results/${resultId}/?page_size=200`);
        }
        if (result.body?.data?.status !== 'done') problems.push(`report kind ${kind}: the run ended ${result.body?.data?.status}: ${result.text.slice(0, 200)}`);
        problems.push(...leakedValues(`report kind ${kind} result`, result.text));
        const csv = await mobile(root, 'GET', `${MOBILE}reports/results/${resultId}/csv/`);
        problems.push(...leakedValues(`report kind ${kind} CSV`, csv.text));
      }),
    );
  }
  for (const block of ['dashboard/widgets/', ...DASHBOARD_BLOCKS.map(([block]) => block), 'dashboard/agent-summary/']) {
    const answer = await mobile(root, 'GET', `${MOBILE}${block}`);
    if (answer.status !== 200) problems.push(`${block}: status ${answer.status}`);
    problems.push(...leakedValues(block, answer.text));
    problems.push(...jsonNames(block, parsed(answer.text), models().flatMap(hiddenNames).filter((name) => name !== 'rows')));
  }
  t.log(`${runs.length} report kinds run, ${DASHBOARD_BLOCKS.length + 2} dashboard blocks read`);
  t.deepEqual(problems, []);
});

test.serial('a user without view permission on a model is refused it by every face and never finds it listed', async (t) => {
  const problems: string[] = [];
  let faces = 0;
  await inBatches(models(), 4, async (model) => {
    const user = without.get(model.key)!;
    const pk = probe.get(model.key) ?? '1';
    const object = encodeURIComponent(pk);
    const label = (face: string) => `${model.key} ${face} (${user.username})`;
    /** A refusal: the expected status, and nothing of the model's records (marker, repr) in it. */
    const refused = (face: string, status: number, expected: readonly number[], text: string) => {
      faces++;
      if (!expected.includes(status)) problems.push(`${label(face)}: status ${status}, expected ${expected.join(' or ')}: ${text.slice(0, 200)}`);
      problems.push(...leakedValues(label(face), text));
    };
    const webRefused = (face: string, response: { status: number; location: string | null; text: string }) => {
      if (response.status === 302 && response.location?.startsWith('/admin/login/')) return refused(face, 403, [403], response.text);
      refused(face, response.status, [403], response.text);
    };

    // Web admin: changelist, change page, the model's autocomplete, the index.
    const [changelist, change, history, remove, index] = await Promise.all([
      user.web.get(`/admin/${path(model)}`),
      user.web.get(`/admin/${path(model)}${object}/change/`),
      user.web.get(`/admin/${path(model)}${object}/history/`),
      user.web.get(`/admin/${path(model)}${object}/delete/`),
      user.web.get('/admin/'),
    ]);
    webRefused('web changelist', changelist);
    webRefused('web change page', change);
    webRefused('web history page', history);
    webRefused('web delete page', remove);
    faces++;
    if (index.status !== 200) problems.push(`${label('web index')}: status ${index.status}`);
    if (index.text.includes(`href="/admin/${path(model)}"`)) problems.push(`${label('web index')}: links the model`);

    // Mobile data API and schema.
    const [list, detail, schema, recordSchema, schemaIndex] = await Promise.all([
      mobile(user, 'GET', `${DATA}${path(model)}`),
      mobile(user, 'GET', `${DATA}${path(model)}${object}/`),
      mobile(user, 'GET', `${MOBILE}schema/${path(model)}`),
      mobile(user, 'GET', `${MOBILE}schema/${path(model)}?object_id=${object}`),
      mobile(user, 'GET', `${MOBILE}schema/`),
    ]);
    refused('mobile list', list.status, [403], list.text);
    refused('mobile detail', detail.status, model.key === 'report.reportresult' ? [403, 404] : [403], detail.text);
    // The schema of a model the user may not view reads like one that does not exist (mobile/schema.ts).
    refused('mobile schema', schema.status, [403, 404], schema.text);
    refused('mobile schema of the record', recordSchema.status, [403, 404], recordSchema.text);
    faces++;
    const apps = (schemaIndex.body?.data?.apps ?? []) as { app_label: string; models: { model: string }[] }[];
    const menu = (schemaIndex.body?.data?.menu ?? []) as { items: { app_label?: string; model?: string }[] }[];
    if (schemaIndex.status !== 200) problems.push(`${label('mobile schema index')}: status ${schemaIndex.status}`);
    if (apps.some((entry) => entry.app_label === model.appLabel && entry.models.some((item) => item.model === model.model))) problems.push(`${label('mobile schema index')}: lists the model in apps`);
    if (menu.some((group) => group.items.some((item) => item.app_label === model.appLabel && item.model === model.model))) problems.push(`${label('mobile schema index')}: lists the model in the menu`);
    if (model.key === 'report.reportresult') {
      const [header, csv] = await Promise.all([mobile(user, 'GET', `${MOBILE}reports/results/${object}/`), mobile(user, 'GET', `${MOBILE}reports/results/${object}/csv/`)]);
      refused('mobile reports/results', header.status, [403], header.text);
      refused('mobile reports/results csv', csv.status, [403], csv.text);
    }

    // Autocomplete: the model's own relation fields (no permission on it), and every field of another model that points at it (no view on the target).
    const pointing = models().flatMap((source) => relationFields(source).filter((field) => field.related === model.key).map((field) => [source, field.name] as const));
    for (const [source, field] of [...relationFields(model).map((field) => [model, field.name] as const), ...pointing]) {
      const [web, api] = await Promise.all([
        user.web.get(`/admin/${path(source)}autocomplete/?field=${field}`),
        mobile(user, 'GET', `${DATA}${path(source)}autocomplete/?field=${field}`),
      ]);
      refused(`web autocomplete ${source.key}.${field}`, web.status, [403], web.text);
      refused(`mobile autocomplete ${source.key}.${field}`, api.status, [403], api.text);
    }

    // MCP tools: not listed, and each reading tool says the user may not view it.
    const [listed, searched, record] = await Promise.all([
      user.mcp.call('list_models', {}, 10_000),
      user.mcp.call('search_records', { model: model.key }, 10_000),
      user.mcp.call('get_record', { model: model.key, pk }, 10_000),
    ]);
    faces += 3;
    if (listed.isError || (JSON.parse(listed.text).models as { model: string }[]).some((entry) => entry.model === model.key)) problems.push(`${label('MCP list_models')}: lists the model: ${listed.text.slice(0, 200)}`);
    for (const [face, answer] of [['MCP search_records', searched], ['MCP get_record', record]] as const) {
      if (!answer.isError || !/may not view/.test(answer.text)) problems.push(`${label(face)}: not refused: ${answer.text.slice(0, 200)}`);
      problems.push(...leakedValues(label(face), answer.text));
    }
    if (CASE_MODELS.has(model.key)) {
      const read = await user.mcp.call('read_case', { model: model.key, pk: caseId }, 10_000);
      faces++;
      if (!read.isError || !/may not view/.test(read.text)) problems.push(`${label('MCP read_case')}: not refused: ${read.text.slice(0, 200)}`);
    }

    // Dashboard: no card of the model, no block that needs it.
    const widgets = await mobile(user, 'GET', `${MOBILE}dashboard/widgets/`);
    faces++;
    const cardModels = new Map(CARDS.map((card) => [card.key, card.model]));
    const shown = widgets.status === 200 ? (widgets.body.data.cards as { key: string }[]).map((card) => cardModels.get(card.key)) : [];
    if (widgets.status !== 200 && widgets.status !== 403) problems.push(`${label('dashboard widgets')}: status ${widgets.status}`);
    if (shown.includes(model.key)) problems.push(`${label('dashboard widgets')}: shows the card of the model`);
    for (const [block, needs] of DASHBOARD_BLOCKS.filter(([, needs]) => needs === model.key)) {
      const answer = await mobile(user, 'GET', `${MOBILE}${block}`);
      refused(`dashboard ${block} (needs ${needs})`, answer.status, [403], answer.text);
    }

    // Reports: a kind reading the model cannot be run, and its reports are not offered.
    for (const [kind, spec] of REPORT_KINDS) {
      if (!spec.models.includes(model.key)) continue;
      const run = await mobile(user, 'POST', `${MOBILE}reports/${reportOf.get(kind)}/run/`);
      refused(`report run of kind ${kind}`, run.status, [403], run.text);
      const offered = await mobile(user, 'GET', `${DATA}report/report/`);
      faces++;
      if (offered.status === 200 && (offered.body.data.results as { pk: string }[]).some((row) => row.pk === String(reportOf.get(kind)))) problems.push(`${label('report list')}: offers a report of kind ${kind}`);
    }
  });
  t.log(`${site.models.size} models, ${faces} refusals checked`);
  t.deepEqual(problems, []);
});

/** A relation of a model: a field pointing at one registered model (fk, m2m) or at the model its row names (generic), with the target columns the model joins through it. */
interface Relation {
  field: string;
  target: string | null;
  through?: { table: string; sourceColumn: string; targetColumn: string };
  relatedModelOf?: (row: Row) => string | null;
  joined: Set<string>;
}

function relationsOf(model: BoundModel): Relation[] {
  const relations = new Map<string, Relation>();
  for (const [name, declaration] of Object.entries(model.fields ?? {})) {
    if (declaration.hidden) continue;
    if (declaration.relatedModelOf) relations.set(name, { field: name, target: null, relatedModelOf: declaration.relatedModelOf, joined: new Set() });
    else if (declaration.related) relations.set(name, { field: name, target: declaration.related, through: declaration.through, joined: new Set() });
  }
  const shown = [...model.columns.map((column) => column.name), ...(model.fieldsets ?? []).flatMap((fieldset) => fieldset.fields), ...(model.readonly ?? [])];
  for (const name of shown) {
    if (model.columnTypes.has(name) || !name.includes('__')) continue;
    const [relation = '', column = ''] = name.split('__');
    relations.get(relation)?.joined.add(column);
  }
  return [...relations.values()];
}

/** Text as an HTML page writes it (preact escapes these). */
function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

const DESCRIBES_OTHERS = new Set(['approval.approvalrequest', 'approval.pendingapprovalrequest', 'admin.logentry']);
const SCORED_CONTEXT = new Set(['engine.alert', 'engine.executionlog']);

test.serial("a related record of a model the user may not view is not named to them: no repr, no joined column, in lists, details and change pages", async (t) => {
  const db = app.context.db;
  const problems: string[] = [];
  let pairs = 0;
  const cases: { source: BoundModel; relation: Relation; target: BoundModel; user: Actor; row: Row; related: Row }[] = [];
  for (const source of models()) {
    for (const relation of relationsOf(source)) {
      const candidates = relation.target ? [site.models.get(relation.target)!] : models();
      for (const target of candidates) {
        if (target.key === source.key) continue;
        const user = without.get(target.key)!;
        if (!site.can(user.principal, source, 'view')) continue;
        // A row of the source the user may see, whose relation names a record of the target that exists.
        const rows = (await scopedQuery(db, source, user.principal).select('t.*').orderBy(`t.${source.pk}`).limit(500)) as Row[];
        for (const row of rows) {
          let keys: string[] = [];
          if (relation.through) keys = (await db(relation.through.table).where(relation.through.sourceColumn, row[source.pk] as string).pluck(relation.through.targetColumn)).map(String);
          else if (relation.relatedModelOf ? relation.relatedModelOf(row) === target.key : true) keys = row[relation.field] === null || row[relation.field] === undefined ? [] : [String(row[relation.field])];
          // A relation naming the viewer themselves (their own notifications) tells them nothing about anyone else.
          if (target.key === 'auth.user') keys = keys.filter((key) => key !== user.id);
          const related = keys.length ? ((await db(target.table).whereIn(target.pk, keys).first()) as Row | undefined) : undefined;
          if (related) {
            cases.push({ source, relation, target, user, row, related });
            break;
          }
        }
      }
    }
  }

  await inBatches(cases, 4, async ({ source, relation, target, user, row, related }) => {
    // Records that describe another record as data of their own (README, "Security notes"): an
    // approval request names what it asks to change (its signers must see what they sign) and an
    // audit entry what it records, as Django's LogEntry does.
    if (DESCRIBES_OTHERS.has(source.key)) return;
    pairs++;
    const pk = String(row[source.pk]);
    const label = (face: string) => `${source.key}.${relation.field} -> ${target.key} ${face} (${user.username}, record ${pk})`;
    // What would name the related record: its repr and the columns joined through the relation.
    const repr = target.repr(related);
    const names = [repr, ...[...relation.joined].map((column) => related[column])].filter((value): value is string => typeof value === 'string' && value.length >= 4 && value !== String(related[target.pk]));
    // A declared relation's target text that the source row holds itself (a record's own customer_ref) is the source's own data.
    const own = async (value: string) =>
      Boolean(await db(`${source.table} as t`).whereRaw('t::text like ?', [`%${value.replace(/[\\%_]/g, (character) => `\\${character}`)}%`]).first(db.raw('1')));
    // The scored transaction's own reference to its customer, in the decision context the rules saw.
    if (SCORED_CONTEXT.has(source.key)) names.splice(0, names.length, ...names.filter((value) => value !== related.customer_ref));
    const searched = (await Promise.all(names.map(async (value) => ((await own(value)) ? null : value)))).filter((value): value is string => value !== null);
    const mentions = (face: string, text: string, html: boolean) => {
      for (const value of searched) {
        const written = html ? escapeHtml(value) : JSON.stringify(value).slice(1, -1);
        if (text.includes(written)) problems.push(`${label(face)}: names it ("${value}") in …${around(text, written)}…`);
      }
    };

    const [detail, list, change, changelist, record] = await Promise.all([
      source.key === 'report.reportresult' ? null : mobile(user, 'GET', `${DATA}${path(source)}${encodeURIComponent(pk)}/`),
      mobile(user, 'GET', `${DATA}${path(source)}?page_size=200`),
      user.web.get(`/admin/${path(source)}${encodeURIComponent(pk)}/change/`),
      user.web.get(`/admin/${path(source)}`),
      user.mcp.call('get_record', { model: source.key, pk }, 10_000),
    ]);
    if (detail) {
      if (detail.status !== 200) problems.push(`${label('mobile detail')}: status ${detail.status}`);
      const field = detail.body?.data?.fields?.[relation.field] as { kind?: string; display?: string } | undefined;
      if (field?.kind === 'relation') problems.push(`${label('mobile detail')}: the field is a relation to open`);
      if (field?.display !== undefined && field.display === repr && repr !== String(related[target.pk])) problems.push(`${label('mobile detail')}: the field displays the repr "${repr}"`);
      for (const column of relation.joined) {
        const joined = detail.body?.data?.fields?.[`${relation.field}__${column}`] as { display?: string } | undefined;
        if (joined && related[column] !== null && joined.display === String(related[column])) problems.push(`${label('mobile detail')}: joined ${relation.field}__${column} shows "${joined.display}"`);
      }
      mentions('mobile detail', detail.text, false);
    }
    if (list.status !== 200) problems.push(`${label('mobile list')}: status ${list.status}`);
    for (const result of (list.body?.data?.results ?? []) as { pk: string; cells: Record<string, unknown> }[]) {
      for (const column of relation.joined) {
        const cell = result.cells[`${relation.field}__${column}`];
        if (cell !== undefined && cell !== null && cell !== '') problems.push(`${label('mobile list')}: row ${result.pk} shows joined ${relation.field}__${column} "${String(cell)}"`);
      }
    }
    mentions('mobile list', list.text, false);
    if (change.status !== 200) problems.push(`${label('web change page')}: status ${change.status}`);
    mentions('web change page', change.text, true);
    if (changelist.status !== 200) problems.push(`${label('web changelist')}: status ${changelist.status}`);
    mentions('web changelist', changelist.text, true);
    if (record.isError) problems.push(`${label('MCP get_record')}: ${record.text.slice(0, 200)}`);
    mentions('MCP get_record', record.text, false);
  });
  t.log(`${pairs} (model, relation, target) cases checked: ${cases.map(({ source, relation, target }) => `${source.key}.${relation.field}->${target.key}`).join(', ')}`);
  t.true(pairs > 10, `${pairs} relations checked`);
  t.deepEqual(problems, []);
});

test.serial("a case viewer who may not view customers is not told the customer's name by lists, details, change pages or the MCP tools", async (t) => {
  const caseViewer = await actor('case-viewer-zeta', ['engine.view_watchlist', 'engine.view_alert', 'engine.view_executionlog', 'engine.view_compliancedecision', 'transaction.view_financialevent', 'transaction.view_nonfinancialevent']);
  const db = app.context.db;
  const problems: string[] = [];
  const named = (face: string, text: string) => {
    if (/Zebulon|Quartermaine/.test(text)) problems.push(`${face}: names the customer in …${around(text, /Zebulon|Quartermaine/)}…`);
  };
  try {
    for (const key of ['engine.watchlist', 'engine.alert', 'engine.executionlog', 'transaction.financialevent', 'transaction.nonfinancialevent']) {
      const model = site.models.get(key)!;
      const row = (await db(model.table).orderBy(model.pk).first(model.pk)) as Row;
      const pk = encodeURIComponent(String(row[model.pk]));
      const [list, detail, changelist, change, searched, record] = await Promise.all([
        mobile(caseViewer, 'GET', `${DATA}${path(model)}`),
        mobile(caseViewer, 'GET', `${DATA}${path(model)}${pk}/?include_inlines=1`),
        caseViewer.web.get(`/admin/${path(model)}`),
        caseViewer.web.get(`/admin/${path(model)}${pk}/change/`),
        caseViewer.mcp.call('search_records', { model: key }, 10_000),
        caseViewer.mcp.call('get_record', { model: key, pk: String(row[model.pk]) }, 10_000),
      ]);
      for (const [face, status, text] of [
        ['mobile list', list.status, list.text],
        ['mobile detail', detail.status, detail.text],
        ['web changelist', changelist.status, changelist.text],
        ['web change page', change.status, change.text],
        ['MCP search_records', searched.isError ? 500 : 200, searched.text],
        ['MCP get_record', record.isError ? 500 : 200, record.text],
      ] as const) {
        if (status !== 200) problems.push(`${key} ${face}: status ${status}`);
        named(`${key} ${face}`, text);
      }
    }
    const read = await caseViewer.mcp.call('read_case', { model: 'engine.watchlist', pk: caseId }, 10_000);
    if (read.isError) problems.push(`engine.watchlist MCP read_case: ${read.text}`);
    named('engine.watchlist MCP read_case', read.text);
    const volume = await mobile(caseViewer, 'GET', `${MOBILE}dashboard/high-volume-customers/`);
    named('dashboard high-volume-customers', volume.text);
  } finally {
    await caseViewer.mcp.close();
  }
  // The same pages name the customer to someone who may view customers: the check above looks where the name would be.
  const customerViewer = root;
  const shown = await mobile(customerViewer, 'GET', `${DATA}engine/watchlist/${caseId}/`);
  t.regex(shown.text, /Zebulon/);
  t.deepEqual(problems, []);
});
