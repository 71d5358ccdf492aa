/**
 * Every write path against every approval policy, for users with and without the permissions the
 * write needs: a table of (path, policy, user) whose outcome class is computed from the intended
 * rules (cases/decisions.ts clearDecision, cases/closing.ts, the write chain's approval hook) and
 * checked twice, in the response and in the database:
 * - written: the decision rows (compliance_decisions) or the record's change are stored;
 * - pending: an approval request is opened (202 / status pending) and nothing else changes;
 * - refused: 403 (permission), 409 (a pending request locks it) or 400 approval_required (a
 *   closure a decision policy covers), and nothing at all changes.
 * The rules: a decision needs the decision permission (change on the model plus
 * engine.add_compliancedecision) on the door's model and on the record it rules on; a pending
 * request on either (or on an execution log of the ruled record) locks it; a decision policy of
 * either turns it into a request, and refuses a case closure with clear_decision; a change policy
 * turns a change (a case closure included) into a request and does not cover decisions; a change
 * is refused by a pending request on the record itself.
 * Each (path, policy, user) works on records of its own, so rows of one policy run side by side.
 */
import test, { type ExecutionContext } from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, type TestClock } from '../helpers/mobile.ts';
import { ServiceMcp } from '../../src/gateway/mcp.ts';
import { delegate } from '../../src/modules/ai/delegation.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { loadPrincipal, type Principal } from '../../src/modules/staff/principal.ts';
import { createUser } from '../../src/modules/staff/service.ts';

const DATA = '/api/mobile/data/';
const PASSWORD = 'correct horse battery staple 42';
/** How the staff service is called from here; `known` is every codename of the bound site. */
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set<string>() };

const FIN = 'transaction.financialevent';
const NONFIN = 'transaction.nonfinancialevent';
const LOG = 'engine.executionlog';
const CASE = 'engine.watchlist';
const DECIDE = 'engine.add_compliancedecision';

let app: TestApp;
let clock: TestClock;
let merchant: string;
let otherMaker: string;

interface User {
  name: string;
  id: string;
  username: string;
  token: string;
  principal: Principal;
  web: ReturnType<typeof adminClient>;
  csrf: string;
  mcp: ServiceMcp;
  /** The web session's messages are read once by the next page: one web write of a user at a time. */
  webTurn: Promise<unknown>;
}

/** Runs a web form post and the read of its answer in the user's session alone. */
function inWebTurn<T>(user: User, work: () => Promise<T>): Promise<T> {
  const turn = user.webTurn.then(work, work);
  user.webTurn = turn.catch(() => {});
  return turn;
}

const VIEW = [`transaction.view_financialevent`, 'transaction.view_nonfinancialevent', 'engine.view_executionlog', 'engine.view_watchlist', 'engine.view_alert', 'engine.view_compliancedecision'];
const CHANGE = ['transaction.change_financialevent', 'transaction.change_nonfinancialevent', 'engine.change_executionlog', 'engine.change_watchlist'];
/** The users of the table: the permissions each holds. */
const USERS: Record<string, string[]> = {
  decider: [...VIEW, ...CHANGE, DECIDE],
  'no decision permission': [...VIEW, ...CHANGE],
  'no change on events': [...VIEW, 'engine.change_executionlog', 'engine.change_watchlist', DECIDE],
  viewer: [...VIEW],
};
const users = new Map<string, User>();

async function makeUser(name: string, permissions: string[]): Promise<User> {
  const username = `wm-${name.replace(/\s+/g, '-')}`;
  const created = await createUser(app.database.knex, { username, password: PASSWORD, permissions }, operator);
  const { accessToken } = await pairDevice(app, clock, created.id);
  const web = adminClient(app.url);
  const login = await web.login(username, PASSWORD);
  if (login.status !== 302) throw new Error(`login of ${username}: ${login.status}`);
  const csrf = csrfTokenIn((await web.get('/admin/engine/watchlist/')).text);
  const { token } = await delegate(app.context.db, created.id, 3600, clock.now);
  const mcp = await ServiceMcp.connect({ url: `${app.url}/api/mcp/`, token }, 10_000);
  return { name, id: created.id, username, token: accessToken, principal: (await loadPrincipal(app.context.db, created.id))!, web, csrf, mcp, webTurn: Promise.resolve() };
}

// ---------------------------------------------------------------- records

type Target = 'fin' | 'nonfin' | 'logfin' | 'lognonfin' | 'case';
type Kind = 'decision' | 'closure' | 'change';

/** The records one row writes on: the door's record, the records a decision there rules on, and their execution logs. */
interface Records {
  door: { model: string; pk: string };
  ruled: { model: string; pk: string }[];
  logs: string[];
  caseId?: string;
}

let sequence = 0;
const next = () => `${process.pid}-${++sequence}`;

function financial(customer: string, amount: number) {
  return { customer_ref: customer, event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `wm-tx-${next()}`, io_type: 0, event_date: hoursAgo(1) };
}

async function post(endpoint: string, records: unknown[]) {
  const results: Array<{ id: string; log_id: string }> = [];
  for (let index = 0; index < records.length; index += 1000) {
    const response = await app.request('POST', endpoint, { token: merchant, json: records.slice(index, index + 1000) });
    if (response.status !== 200) throw new Error(`${endpoint}: ${response.status} ${response.text}`);
    results.push(...(response.body.data.results as Array<{ id: string; log_id: string }>));
  }
  return results;
}

/** Fresh records for each row, ingested in a few batches through the integration API. */
async function provision(rows: Row[]): Promise<void> {
  const plain = rows.filter((row) => row.path.target === 'fin' || row.path.target === 'logfin');
  const events = rows.filter((row) => row.path.target === 'nonfin' || row.path.target === 'lognonfin');
  const cases = rows.filter((row) => row.path.target === 'case');
  const customers = cases.map(() => `wm-case-${next()}`);
  const upsert = await app.request('POST', '/api/customer/upsert/', { token: merchant, json: customers.map((customer_ref) => ({ customer_ref })) });
  if (customers.length && upsert.status !== 200) throw new Error(upsert.text);
  // A closed case's alerted transactions: two per case; a case changed without closing: one.
  const caseTransactions = cases.flatMap((row, index) => Array.from({ length: row.path.kind === 'closure' ? 2 : 1 }, (_, n) => ({ row, record: financial(customers[index]!, 6000 + n) })));
  const fin = await post('/api/transaction/financial/upsert/', [...plain.map(() => financial('wm-plain', 100)), ...caseTransactions.map((entry) => entry.record)]);
  const nonfin = await post('/api/transaction/non-financial/upsert/', events.map(() => ({ customer_ref: 'wm-plain', event_slug: 'login-evt', transaction_ref: `wm-nf-${next()}`, event_date: hoursAgo(1) })));
  plain.forEach((row, index) => {
    const { id, log_id } = fin[index]!;
    row.records = row.path.target === 'fin' ? { door: { model: FIN, pk: id }, ruled: [{ model: FIN, pk: id }], logs: [log_id] } : { door: { model: LOG, pk: log_id }, ruled: [{ model: FIN, pk: id }], logs: [log_id] };
  });
  events.forEach((row, index) => {
    const { id, log_id } = nonfin[index]!;
    row.records = row.path.target === 'nonfin' ? { door: { model: NONFIN, pk: id }, ruled: [{ model: NONFIN, pk: id }], logs: [log_id] } : { door: { model: LOG, pk: log_id }, ruled: [{ model: NONFIN, pk: id }], logs: [log_id] };
  });
  const alerted = fin.slice(plain.length);
  const byRow = new Map<Row, { id: string; log_id: string }[]>();
  caseTransactions.forEach((entry, index) => byRow.set(entry.row, [...(byRow.get(entry.row) ?? []), alerted[index]!]));
  await Promise.all(
    cases.map(async (row) => {
      const transactions = byRow.get(row)!;
      const alert = await app.context.db('alerts').where({ record_id: transactions[0]!.id }).first('case_id');
      if (!alert?.case_id) throw new Error('no case for the alerted transaction');
      const caseId = String(alert.case_id);
      row.records = { door: { model: CASE, pk: caseId }, ruled: transactions.map((transaction) => ({ model: FIN, pk: transaction.id })), logs: transactions.map((transaction) => transaction.log_id), caseId };
    }),
  );
}

// ---------------------------------------------------------------- paths

type Outcome = 'written' | 'pending' | 403 | 409 | 400 | 'approval_required' | `other ${string}`;

interface Path {
  name: string;
  kind: Kind;
  target: Target;
  run(user: User, records: Records): Promise<Outcome>;
}

const MODEL_PATHS: Record<string, string> = { [FIN]: 'transaction/financialevent', [NONFIN]: 'transaction/nonfinancialevent', [LOG]: 'engine/executionlog', [CASE]: 'engine/watchlist' };
const DECISION = { decision: 'REJECT', description: 'matrix decision' };
const CLOSE = { status: 'closed', rationale: 'matrix closure', clear_decision: 'ACCEPT' };
const CLOSE_FORM = { status: 'closed', flagged: '', account_action: 'none', postponed_until: '', assignee_id: '', rationale: 'matrix closure', clear_decision: 'ACCEPT', clear_score: '' };
const FLAG_FORM = { status: 'open', flagged: 'on', account_action: 'none', postponed_until: '', assignee_id: '', rationale: 'matrix flag', clear_decision: '', clear_score: '' };
const EVENT_CHANGE = { status: 'checked', event_description: 'matrix change' };

function mobileOutcome(response: { status: number; body: { data?: { errors?: Record<string, { code: string }[]> } } | undefined; text: string }): Outcome {
  if (response.status === 200 || response.status === 201) return 'written';
  if (response.status === 202) return 'pending';
  if (response.status === 400 && response.body?.data?.errors?.clear_decision?.[0]?.code === 'approval_required') return 'approval_required';
  if (response.status === 403 || response.status === 409 || response.status === 400) return response.status;
  return `other ${response.status} ${response.text.slice(0, 200)}`;
}

function mcpOutcome(answer: { text: string; isError: boolean }): Outcome {
  if (!answer.isError) {
    const status = (JSON.parse(answer.text) as { status: string }).status;
    return status === 'pending' ? 'pending' : status === 'created' || status === 'updated' ? 'written' : `other ${answer.text.slice(0, 200)}`;
  }
  if (/permission|may not view/i.test(answer.text)) return 403;
  if (/waiting for approval/.test(answer.text)) return 409;
  if (/approval_required/.test(answer.text)) return 'approval_required';
  if (/^Validation failed/.test(answer.text)) return 400;
  return `other ${answer.text.slice(0, 200)}`;
}

/** A web form's answer: its status, or for a redirect the message the next page shows. */
async function webOutcome(user: User, response: { status: number; location: string | null; text: string }): Promise<Outcome> {
  if (response.status === 403 || response.status === 409) return response.status;
  if (response.status === 400) return /An approval policy covers decisions/.test(response.text) ? 'approval_required' : 400;
  if (response.status !== 302 || !response.location) return `other ${response.status} ${response.text.slice(0, 200)}`;
  const page = await user.web.get(response.location);
  const messages = /<ul class="messages">([\s\S]*?)<\/ul>/.exec(page.text)?.[1] ?? '';
  if (/submitted for approval/.test(messages)) return 'pending';
  if (/waiting for approval/.test(messages)) return 409;
  if (/An approval policy covers decisions/.test(messages)) return 'approval_required';
  if (/recorded|changed successfully/.test(messages)) return 'written';
  return `other redirect to ${response.location}: ${messages.replace(/<[^>]+>/g, ' ').trim().slice(0, 200)}`;
}

const decisionPaths = (['fin', 'nonfin', 'logfin', 'lognonfin'] as const).flatMap((target): Path[] => [
  {
    name: `mobile decision endpoint (${target})`,
    kind: 'decision',
    target,
    run: async (user, { door }) => mobileOutcome(await app.request('POST', `${DATA}${MODEL_PATHS[door.model]}/${door.pk}/decision/`, { token: user.token, json: DECISION })),
  },
  {
    name: `web decision form (${target})`,
    kind: 'decision',
    target,
    run: (user, { door }) => inWebTurn(user, async () => webOutcome(user, await user.web.post(`/admin/${MODEL_PATHS[door.model]}/${door.pk}/decision/`, { csrfmiddlewaretoken: user.csrf, ...DECISION }))),
  },
  {
    name: `MCP add_decision (${target})`,
    kind: 'decision',
    target,
    run: async (user, { door }) => mcpOutcome(await user.mcp.call('add_decision', { model: door.model, pk: door.pk, ...DECISION }, 10_000)),
  },
]);

const closurePaths: Path[] = [
  {
    name: 'case closure with clear_decision: mobile PATCH',
    kind: 'closure',
    target: 'case',
    run: async (user, { door }) => mobileOutcome(await app.request('PATCH', `${DATA}engine/watchlist/${door.pk}/`, { token: user.token, json: CLOSE })),
  },
  {
    name: 'case closure with clear_decision: web change form',
    kind: 'closure',
    target: 'case',
    run: (user, { door }) => inWebTurn(user, async () => webOutcome(user, await user.web.post(`/admin/engine/watchlist/${door.pk}/change/`, { csrfmiddlewaretoken: user.csrf, ...CLOSE_FORM }))),
  },
  {
    name: 'case closure with clear_decision: MCP change_case',
    kind: 'closure',
    target: 'case',
    run: async (user, { door }) => mcpOutcome(await user.mcp.call('change_case', { pk: door.pk, changes: { status: 'closed', clear_decision: 'ACCEPT' }, rationale: 'matrix closure' }, 10_000)),
  },
  {
    name: 'case closure with clear_decision: MCP update_record',
    kind: 'closure',
    target: 'case',
    run: async (user, { door }) => mcpOutcome(await user.mcp.call('update_record', { model: CASE, pk: door.pk, changes: CLOSE }, 10_000)),
  },
];

const changePaths: Path[] = [
  {
    name: 'event change: mobile PATCH',
    kind: 'change',
    target: 'fin',
    run: async (user, { door }) => mobileOutcome(await app.request('PATCH', `${DATA}${MODEL_PATHS[door.model]}/${door.pk}/`, { token: user.token, json: EVENT_CHANGE })),
  },
  {
    name: 'event change: web change form',
    kind: 'change',
    target: 'fin',
    run: (user, { door }) => inWebTurn(user, async () => webOutcome(user, await user.web.post(`/admin/${MODEL_PATHS[door.model]}/${door.pk}/change/`, { csrfmiddlewaretoken: user.csrf, ...EVENT_CHANGE }))),
  },
  {
    name: 'event change: MCP update_record',
    kind: 'change',
    target: 'fin',
    run: async (user, { door }) => mcpOutcome(await user.mcp.call('update_record', { model: door.model, pk: door.pk, changes: EVENT_CHANGE }, 10_000)),
  },
  {
    name: 'case change (flag): mobile PATCH',
    kind: 'change',
    target: 'case',
    run: async (user, { door }) => mobileOutcome(await app.request('PATCH', `${DATA}engine/watchlist/${door.pk}/`, { token: user.token, json: { flagged: true, rationale: 'matrix flag' } })),
  },
  {
    name: 'case change (flag): web change form',
    kind: 'change',
    target: 'case',
    run: (user, { door }) => inWebTurn(user, async () => webOutcome(user, await user.web.post(`/admin/engine/watchlist/${door.pk}/change/`, { csrfmiddlewaretoken: user.csrf, ...FLAG_FORM }))),
  },
  {
    name: 'case change (flag): MCP change_case',
    kind: 'change',
    target: 'case',
    run: async (user, { door }) => mcpOutcome(await user.mcp.call('change_case', { pk: door.pk, changes: { flagged: true }, rationale: 'matrix flag' }, 10_000)),
  },
  {
    name: 'case change (flag): MCP update_record',
    kind: 'change',
    target: 'case',
    run: async (user, { door }) => mcpOutcome(await user.mcp.call('update_record', { model: CASE, pk: door.pk, changes: { flagged: true, rationale: 'matrix flag' } }, 10_000)),
  },
];

// ---------------------------------------------------------------- policies

/** A policy situation: approval policies set for the whole group, or a pending request on one of the row's records. */
interface Situation {
  name: string;
  policies?: { model: string; operation: 'decision' | 'change' }[];
  /** The kinds of path the situation is tried on (all by default). */
  kinds?: Kind[];
  /** Where the pending request waits, from the row's records (null: the situation does not apply to this row). */
  pending?: (records: Records, kind: Kind) => { model: string; pk: string } | null;
}

const SITUATIONS: Situation[] = [
  { name: 'no policy' },
  { name: 'decision policy on financial events', policies: [{ model: FIN, operation: 'decision' }] },
  { name: 'decision policy on non-financial events', policies: [{ model: NONFIN, operation: 'decision' }] },
  { name: 'decision policy on execution logs', policies: [{ model: LOG, operation: 'decision' }] },
  { name: 'change policy on financial events', policies: [{ model: FIN, operation: 'change' }] },
  { name: 'change policy on non-financial events', policies: [{ model: NONFIN, operation: 'change' }] },
  { name: 'change policy on cases', policies: [{ model: CASE, operation: 'change' }] },
  { name: 'pending request on the record', pending: (records) => records.door },
  {
    name: 'pending request on the ruled record',
    pending: (records) => (records.ruled[0]!.model !== records.door.model || records.ruled[0]!.pk !== records.door.pk ? records.ruled.at(-1)! : null),
  },
  { name: 'pending request on an execution log of the record', pending: (records) => (records.door.model === LOG ? null : { model: LOG, pk: records.logs[0]! }) },
  // A closure is a case change too: a change policy on cases must not let it past the decision rules.
  {
    name: 'change policy on cases and decision policy on financial events',
    kinds: ['closure'],
    policies: [{ model: CASE, operation: 'change' }, { model: FIN, operation: 'decision' }],
  },
  {
    name: 'change policy on cases and a pending request on the ruled record',
    kinds: ['closure'],
    policies: [{ model: CASE, operation: 'change' }],
    pending: (records) => records.ruled.at(-1)!,
  },
];

interface Row {
  path: Path;
  situation: Situation;
  user: User;
  records?: Records;
}

// ---------------------------------------------------------------- the rules

interface Expectation {
  class: 'written' | 'pending' | 'refused';
  /** For a refusal: the answers the broken rules allow (403 permission, 409 lock, approval_required). */
  codes: Outcome[];
  why: string;
}

function mayDecide(user: User, model: string): boolean {
  const [appLabel, name] = model.split('.') as [string, string];
  return user.principal.has(`${appLabel}.change_${name}`) && user.principal.has(DECIDE);
}

function expected(row: Row, pending: { model: string; pk: string } | null): Expectation {
  const { door, ruled, logs } = row.records!;
  const kind = row.path.kind;
  const policies = row.situation.policies ?? [];
  const covers = (operation: 'decision' | 'change', model: string) => policies.some((policy) => policy.operation === operation && policy.model === model);
  const codes: Outcome[] = [];
  const reasons: string[] = [];
  const same = (a: { model: string; pk: string }, b: { model: string; pk: string }) => a.model === b.model && a.pk === b.pk;
  if (kind === 'change') {
    const [appLabel, name] = door.model.split('.') as [string, string];
    if (!row.user.principal.has(`${appLabel}.change_${name}`)) (codes.push(403), reasons.push(`no change permission on ${door.model}`));
    if (pending && same(pending, door)) (codes.push(409), reasons.push('a request is pending on the record'));
    if (codes.length) return { class: 'refused', codes, why: reasons.join('; ') };
    if (covers('change', door.model)) return { class: 'pending', codes: [], why: 'a change policy covers the record' };
    return { class: 'written', codes: [], why: 'nothing stops a change' };
  }
  // A decision (a closure's too) needs the decision permission on the door's model and on every record it rules on.
  const deciding = kind === 'closure' ? ruled.map((record) => record.model) : [door.model, ...ruled.map((record) => record.model)];
  for (const model of new Set(deciding)) if (!mayDecide(row.user, model)) (codes.push(403), reasons.push(`no decision permission on ${model}`));
  if (kind === 'closure' && !row.user.principal.has('engine.change_watchlist')) (codes.push(403), reasons.push('no change permission on cases'));
  if (pending && (same(pending, door) || ruled.some((record) => same(pending, record)) || (pending.model === LOG && logs.includes(pending.pk)))) {
    codes.push(409), reasons.push(`a request is pending on ${pending.model} ${pending.pk}`);
  }
  if (codes.length) return { class: 'refused', codes, why: reasons.join('; ') };
  const decisionPolicy = [door.model, ...ruled.map((record) => record.model)].find((model) => covers('decision', model));
  if (kind === 'closure') {
    if (decisionPolicy) return { class: 'refused', codes: ['approval_required'], why: `a decision policy covers ${decisionPolicy}: the closure is refused with approval_required` };
    if (covers('change', CASE)) return { class: 'pending', codes: [], why: 'a change policy covers cases' };
    return { class: 'written', codes: [], why: 'nothing stops the closure' };
  }
  if (decisionPolicy) return { class: 'pending', codes: [], why: `a decision policy covers ${decisionPolicy}` };
  return { class: 'written', codes: [], why: 'nothing stops the decision (change policies do not cover decisions)' };
}

// ---------------------------------------------------------------- the checks

/** What the row's write could have touched: decision rows, approval requests, the records' state. */
async function snapshot(records: Records) {
  const db = app.context.db;
  const uuids = [...new Set([records.door.pk, ...records.ruled.map((record) => record.pk), ...records.logs])];
  const [decisions, requests, state] = await Promise.all([
    db('compliance_decisions').where((clause) => {
      clause.whereIn('target_id', uuids);
      if (records.caseId) clause.orWhere('case_id', records.caseId);
    }).count('* as n').first(),
    db('approval_requests').whereIn('object_id', uuids).count('* as n').first(),
    Promise.all([
      ...records.ruled.map((record) => db(record.model === FIN ? 'financial_transactions' : 'non_financial_events').where({ id: record.pk }).first('decision', 'score', 'status', 'event_description', 'updated_at')),
      records.caseId ? db('cases').where({ id: records.caseId }).first('status', 'flagged', 'closed_at', 'updated_at') : null,
      records.caseId ? db('alerts').where({ case_id: records.caseId }).orderBy('id').pluck('status') : null,
    ]),
  ]);
  return { decisions: Number(decisions!.n), requests: Number(requests!.n), state: JSON.stringify(state) };
}

async function openPending(target: { model: string; pk: string }): Promise<void> {
  await app.context.db('approval_requests').insert({
    content_type: target.model,
    object_id: target.pk,
    object_repr: 'matrix lock',
    operation: 'change',
    diff: JSON.stringify({ fields: [], inline_blocks: [] }),
    payload: JSON.stringify({ input: {}, channel: 'web' }),
    maker_id: otherMaker,
    maker: 'wm-other-maker',
  });
}

const classOf = (outcome: Outcome): 'written' | 'pending' | 'refused' | 'other' =>
  outcome === 'written' ? 'written' : outcome === 'pending' ? 'pending' : typeof outcome === 'number' || outcome === 'approval_required' ? 'refused' : 'other';

async function runMatrix(t: ExecutionContext, paths: Path[], userNames: string[]): Promise<void> {
  const problems: string[] = [];
  const tally = new Map<string, number>();
  let rows = 0;
  const groups = SITUATIONS.map((situation) => ({
    situation,
    group: paths.filter((path) => !situation.kinds || situation.kinds.includes(path.kind)).flatMap((path) => userNames.map((name): Row => ({ path, situation, user: users.get(name)! }))),
  }));
  // Every row's records at once: a few integration requests for the whole table.
  await provision(groups.flatMap(({ group }) => group));
  for (const { situation, group } of groups) {
    const applicable = group.filter((row) => !situation.pending || situation.pending(row.records!, row.path.kind) !== null);
    for (const policy of situation.policies ?? []) await setApprovalPolicies(app.context.db, { model: policy.model, operations: [policy.operation] });
    try {
      for (let index = 0; index < applicable.length; index += 12) {
        await Promise.all(
          applicable.slice(index, index + 12).map(async (row) => {
            const records = row.records!;
            const pending = situation.pending?.(records, row.path.kind) ?? null;
            if (pending) await openPending(pending);
            const want = expected(row, pending);
            const before = await snapshot(records);
            const outcome = await row.path.run(row.user, records);
            const after = await snapshot(records);
            rows++;
            const label = `${row.path.name} | ${situation.name} | ${row.user.name}`;
            // What the database shows happened.
            const decided = after.decisions - before.decisions;
            const opened = after.requests - before.requests;
            const changed = after.state !== before.state;
            const stored = row.path.kind === 'change' ? changed && decided === 0 : decided > 0 && changed;
            const shown = stored && opened === 0 ? 'written' : !changed && decided === 0 && opened === 1 ? 'pending' : !changed && decided === 0 && opened === 0 ? 'refused' : `inconsistent (decisions +${decided}, requests +${opened}, record ${changed ? 'changed' : 'unchanged'})`;
            tally.set(`${row.path.kind}: ${shown}`, (tally.get(`${row.path.kind}: ${shown}`) ?? 0) + 1);
            if (shown !== want.class) problems.push(`${label}: expected ${want.class} (${want.why}), the database shows ${shown}; the answer was ${outcome}`);
            else if (classOf(outcome) !== shown) problems.push(`${label}: the database shows ${shown} but the answer was ${outcome}`);
            else if (want.class === 'refused' && !want.codes.includes(outcome)) problems.push(`${label}: refused with ${outcome}, expected ${want.codes.join(' or ')} (${want.why})`);
          }),
        );
      }
    } finally {
      await app.context.db('approval_policies').delete();
    }
  }
  t.log(`${rows} (path, policy, user) rows: ${[...tally].map(([outcome, count]) => `${outcome} ${count}`).join(', ')}`);
  t.deepEqual(problems, []);
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  for (const codename of app.context.backoffice.site.permissionCodenames()) operator.known.add(codename);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1], ['login-evt', 2]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  const plain = await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'wm-plain' }] });
  if (plain.status !== 200) throw new Error(plain.text);
  otherMaker = (await createUser(app.database.knex, { username: 'wm-other-maker', password: null }, operator)).id;
  for (const [name, permissions] of Object.entries(USERS)) users.set(name, await makeUser(name, permissions));
});

test.after.always(async () => {
  for (const user of users.values()) await user.mcp.close().catch(() => {});
  await app?.close();
});

test.serial('decisions on a financial event, a non-financial event and an execution log: mobile endpoint, web form, MCP add_decision', async (t) => {
  await runMatrix(t, decisionPaths, ['decider', 'no decision permission', 'no change on events']);
});

test.serial('a case closure with clear_decision: mobile PATCH, web change form, MCP change_case and update_record', async (t) => {
  await runMatrix(t, closurePaths, ['decider', 'no decision permission', 'no change on events']);
});

test.serial('record changes (an event, a case): mobile PATCH, web change form, MCP update_record and change_case', async (t) => {
  await runMatrix(t, changePaths, ['decider', 'no decision permission', 'no change on events', 'viewer']);
});

test.serial('a closure request opened under a change policy on cases never writes a decision its maker may not make, even once approved', async (t) => {
  const maker = users.get('no decision permission')!;
  const checker = await createUser(app.database.knex, { username: 'wm-checker', password: null, is_superuser: true }, operator);
  const checkerToken = (await pairDevice(app, clock, checker.id)).accessToken;
  const row: Row = { path: closurePaths[0]!, situation: SITUATIONS[0]!, user: maker };
  await provision([row]);
  const { caseId, ruled } = row.records!;
  await setApprovalPolicies(app.context.db, { model: CASE, operations: ['change'] });
  try {
    const closing = await app.request('PATCH', `${DATA}engine/watchlist/${caseId}/`, { token: maker.token, json: CLOSE });
    const requestId = closing.body?.data?.approval_request_id as string | undefined;
    if (closing.status === 202 && requestId) {
      const approved = await app.request('POST', `${DATA}approval/approvalrequest/${requestId}/process/`, { token: checkerToken, json: { action: 'approve', reason: 'ok' } });
      t.log(`the closure was opened as request ${requestId}; approving it answered ${approved.status}: ${approved.text.slice(0, 200)}; the request is now ${(await app.context.db('approval_requests').where({ id: requestId }).first('status')).status}`);
    }
    t.is(Number((await app.context.db('compliance_decisions').where({ case_id: caseId }).count('* as n').first())!.n), 0, 'no decision written');
    for (const record of ruled) t.is((await app.context.db('financial_transactions').where({ id: record.pk }).first('decision')).decision, 'REVIEW');
    t.not((await app.context.db('cases').where({ id: caseId }).first('status')).status, 'closed');
  } finally {
    await app.context.db('approval_policies').delete();
  }
});

test.serial('the matrix rows are not vacuous: a decider writes a decision and opens a request, and the record is locked after', async (t) => {
  // One row by hand, to see the table's machinery against plain expectations.
  const decider = users.get('decider')!;
  const [record] = await post('/api/transaction/financial/upsert/', [financial('wm-plain', 100)]);
  const written = await app.request('POST', `${DATA}transaction/financialevent/${record!.id}/decision/`, { token: decider.token, json: DECISION });
  t.is(written.status, 201, written.text);
  t.is((await app.context.db('financial_transactions').where({ id: record!.id }).first('decision')).decision, 'REJECT');
  await setApprovalPolicies(app.context.db, { model: FIN, operations: ['decision'] });
  try {
    const requested = await app.request('POST', `${DATA}transaction/financialevent/${record!.id}/decision/`, { token: decider.token, json: { decision: 'ACCEPT', description: 'x' } });
    t.is(requested.status, 202, requested.text);
    const locked = await app.request('PATCH', `${DATA}transaction/financialevent/${record!.id}/`, { token: decider.token, json: EVENT_CHANGE });
    t.is(locked.status, 409, 'the pending decision request locks the record against changes as well');
  } finally {
    await app.context.db('approval_policies').delete();
  }
});
