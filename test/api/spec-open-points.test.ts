/**
 * The spec points issue 37 left open (mobile-api.md): the case detail's own AI block, the
 * assistant's 503/502 on every endpoint but status, 403 for a schema the user may not view, dates
 * to the second in approval diffs, url items in the menu, and read-only review-ticket devices.
 */
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { issueReviewTicket } from '../../src/modules/mobile/tickets.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { startGateway, type RunningGateway } from '../../src/gateway/server.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo } from '../helpers/fixtures.ts';
import { installClock, LOGOUT, ME, operator, PAIR, pairDevice, PREFERENCES, staffUser, type TestClock } from '../helpers/mobile.ts';

const M = '/api/mobile/';
const A = `${M}assistant/`;
let app: TestApp;
let clock: TestClock;
let refusing: RunningGateway;

const OFFICER = ['engine.view_watchlist', 'engine.change_watchlist', 'customer.view_customer', 'customer.change_customer', 'customer.delete_customer'];

async function customer(name: string, birth = '1985-03-03'): Promise<string> {
  const id = randomUUID();
  await app.context.db('customers').insert({
    id, customer_ref: `ref-${id}`, first_name: name, last_name: 'Tester', birth_date: birth, raw: '{}', score: 10, decision: 'ACCEPT',
    created_by: 't', updated_by: 't', created_at: new Date('2026-01-02T03:04:05.678Z'),
  });
  return id;
}

async function caseOf(customerId: string): Promise<string> {
  const [row] = (await app.context.db('cases').insert({ customer_id: customerId }).returning('id')) as { id: string }[];
  return row!.id;
}

async function paired(permissions: string[], options: { superuser?: boolean } = {}): Promise<{ id: string; token: string }> {
  const user = await staffUser(app, { permissions, is_superuser: options.superuser ?? false });
  return { id: user.id, token: (await pairDevice(app, clock, user.id)).accessToken };
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Runs `body` with the app's AI settings changed, then restores them. */
async function withGateway(gatewayUrl: string | null, body: () => Promise<void>): Promise<void> {
  const original = app.context.config;
  app.context.config = { ...original, ai: { ...original.ai, gatewayUrl: gatewayUrl ?? '', gatewayToken: 'the-service-presents-this-token' } };
  try {
    await body();
  } finally {
    app.context.config = original;
  }
}

test.before(async () => {
  // A gateway expecting another token than the service presents: every call is its 401.
  refusing = await startGateway({ llmUrl: 'http://127.0.0.1:9/v1', llmModel: 'none', llmApiKey: '', token: 'the-gateway-expects-this-token', timeoutMs: 1000, mcpOrigin: 'http://127.0.0.1:1' }, 0);
  // No WARDEN_GATEWAY_URL: the AI review and the assistant are not installed.
  app = await startTestApp();
  clock = installClock(app);
});

test.after.always(async () => {
  await app?.close();
  await refusing?.close();
});

test.serial('1. the case detail carries the ai block, read from the stored reviews without a gateway; ai/ answers too (can_run false); run and feedback still need one', async (t) => {
  const officer = await paired(OFFICER);
  const pk = await caseOf(await customer('Ada'));
  const detail = await app.request('GET', `${M}data/engine/watchlist/${pk}/`, { token: officer.token });
  t.is(detail.status, 200);
  t.like(detail.body.data.ai, { status: 'empty', in_flight: false, can_run: false, can_feedback: false, result: null, feedback: null, legacy: null });

  // A stored, finished review shows in the detail as it is, no gateway involved.
  const [review] = (await app.context.db('ai_reviews')
    .insert({
      model_key: 'engine.watchlist', object_pk: pk, status: 'done', requested_by: officer.id,
      topic: JSON.stringify({ subject: 'Structuring', typologies: ['smurfing'] }), warnings: JSON.stringify([]), references: JSON.stringify([]),
      result: JSON.stringify({ decision: 'ESCALATE', confidence: 72, str_required: true, reasoning: 'Many small deposits.', recommended_actions: ['File an STR'], rule_proposal: null, knowledge_gaps: [] }),
    })
    .returning('id')) as { id: string }[];
  t.truthy(review);
  const reviewed = await app.request('GET', `${M}data/engine/watchlist/${pk}/`, { token: officer.token });
  t.like(reviewed.body.data.ai, {
    status: 'done', can_run: false, can_feedback: true, topic: { subject: 'Structuring' },
    result: { decision: 'ESCALATE', decision_label: 'Escalate', decision_tone: 'warning', confidence: 72, confidence_tone: 'warning', str_required: true },
  });
  const polled = await app.request('GET', `${M}data/engine/watchlist/${pk}/ai/`, { token: officer.token });
  t.is(polled.status, 200);
  t.deepEqual(polled.body.data, reviewed.body.data.ai);

  // The schema names the block; other models' details do not carry it.
  const schema = await app.request('GET', `${M}schema/engine/watchlist/`, { token: officer.token });
  t.true(schema.body.data.blocks.some((block: { name: string }) => block.name === 'ai'));
  const customerDetail = await app.request('GET', `${M}data/customer/customer/${(await app.context.db('cases').where({ id: pk }).first('customer_id')).customer_id}/`, { token: officer.token });
  t.is(customerDetail.status, 200);
  t.false('ai' in customerDetail.body.data);

  for (const tail of ['run/', 'feedback/']) {
    const response = await app.request('POST', `${M}data/engine/watchlist/${pk}/ai/${tail}`, { token: officer.token, json: { verdict: 'agree' } });
    t.is(response.status, 503, tail);
    t.regex(response.body.message, /not installed/);
  }
  // With a gateway configured can_run turns true (the block asks the app, not the request).
  await withGateway(refusing.url, async () => {
    await app.context.db('ai_reviews').where({ object_pk: pk }).delete();
    t.true((await app.request('GET', `${M}data/engine/watchlist/${pk}/`, { token: officer.token })).body.data.ai.can_run);
  });
});

test.serial('2. every assistant endpoint but status is 503 with the reason when unavailable, 502 when the gateway is unreachable or answers 401 (list, read, create and delete included)', async (t) => {
  const user = await paired(OFFICER);
  const id = randomUUID();
  await app.context.db('assistant_conversations').insert({ id, user_id: user.id });
  const calls: [string, string][] = [
    ['GET', `${A}conversations/`], ['POST', `${A}conversations/`], ['GET', `${A}conversations/${id}/`], ['DELETE', `${A}conversations/${id}/`],
    ['POST', `${A}conversations/${id}/messages/`], ['POST', `${A}conversations/${id}/approval/`],
  ];
  const json = (method: string) => (method === 'POST' ? { json: { text: 'hello', approve: true } } : {});
  for (const [method, path] of calls) {
    const response = await app.request(method, path, { token: user.token, ...json(method) });
    t.is(response.status, 503, `${method} ${path}`);
    t.false(response.body.status);
    t.regex(response.body.message, /not installed/);
  }
  await withGateway(refusing.url, async () => {
    t.is((await app.request('GET', `${A}status/`, { token: user.token })).status, 200);
    for (const [method, path] of calls) {
      const response = await app.request(method, path, { token: user.token, ...json(method) });
      t.is(response.status, 502, `401 gateway: ${method} ${path}`);
      t.regex(response.body.message, /401/);
    }
  });
  await withGateway(`http://127.0.0.1:${await closedPort()}`, async () => {
    for (const [method, path] of calls) {
      const response = await app.request(method, path, { token: user.token, ...json(method) });
      t.is(response.status, 502, `unreachable: ${method} ${path}`);
      t.regex(response.body.message, /cannot be reached/);
    }
  });
  // Nothing was created or deleted on the way.
  t.deepEqual((await app.context.db('assistant_conversations').where({ user_id: user.id }).select('id')).map((row) => row.id), [id]);
});

test.serial('3. schema/<app>/<model>/ of a registered model the user may not view is 403 permission_denied in the envelope; an unregistered one stays 404', async (t) => {
  const clerk = await paired(['customer.view_customer']);
  const denied = await app.request('GET', `${M}schema/engine/watchlist/`, { token: clerk.token });
  t.is(denied.status, 403);
  t.like(denied.body, { status: false, data: { reason: 'permission_denied' } });
  t.false(denied.text.includes('columns'));
  // As the data endpoint answers.
  t.is((await app.request('GET', `${M}data/engine/watchlist/`, { token: clerk.token })).status, 403);
  const unknown = await app.request('GET', `${M}schema/engine/nosuchmodel/`, { token: clerk.token });
  t.is(unknown.status, 404);
  t.is(unknown.body.data.reason, 'model_not_found');
  t.is((await app.request('GET', `${M}schema/customer/customer/`, { token: clerk.token })).status, 200);
});

test.serial('4. approval diffs show dates in the spec form: a date field as YYYY-MM-DD, a time to the second with no offset', async (t) => {
  await createGroup(app.context.db, { name: 'Diff signers', permissions: ['approval.view_approvalrequest', 'approval.view_pendingapprovalrequest'] }, { actor: operator, known: new Set(permissionCodenames()) });
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], signerGroup: 'Diff signers' });
  const maker = await paired([...OFFICER, 'approval.view_approvalrequest']);
  const changed = await customer('Grace', '1985-03-03');
  const patch = await app.request('PATCH', `${M}data/customer/customer/${changed}/`, { token: maker.token, json: { birth_date: '1990-01-02', first_name: 'Grace B.' } });
  t.is(patch.status, 202, patch.text);

  const request = await app.context.db('approval_requests').where({ object_id: changed }).first('id');
  const detail = await app.request('GET', `${M}data/approval/approvalrequest/${request.id}/`, { token: maker.token });
  t.is(detail.status, 200, detail.text);
  const fields = detail.body.data.approval.diff.fields as { name: string; old: unknown; new: unknown }[];
  t.like(fields.find((entry) => entry.name === 'birth_date'), { old: '1985-03-03', new: '1990-01-02' });
  t.like(fields.find((entry) => entry.name === 'first_name'), { old: 'Grace', new: 'Grace B.' });
  for (const entry of fields) {
    for (const value of [entry.old, entry.new]) {
      if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T/.test(value)) t.regex(value, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/, entry.name);
    }
  }
});

test.serial('5. the menu carries the site\'s url items for the users holding their permission, so the phone\'s menu matches the web\'s', async (t) => {
  type Item = { type: string; label: string; icon?: string | null; url?: string };
  const itemsOf = async (token: string) => ((await app.request('GET', `${M}schema/`, { token })).body.data.menu as { label: string; items: Item[] }[]).flatMap((group) => group.items);
  const admin = await paired([], { superuser: true });
  const links = (await itemsOf(admin.token)).filter((item) => item.type === 'url');
  // Each in its group: Reports joins the report models' group, the dashboard ones form their own.
  t.deepEqual(links.map((item) => [item.label, item.url]).sort(), [
    ['Dashboard', '/api/mobile/dashboard/widgets/'],
    ['Reports', '/api/mobile/data/report/report/'],
    ['Video-call console', '/api/mobile/dashboard/lobby/'],
  ]);
  t.true(links.every((item) => typeof item.icon === 'string'));
  const analyst = await paired(['transaction.view_financialevent']);
  t.deepEqual((await itemsOf(analyst.token)).filter((item) => item.type === 'url').map((item) => item.label), ['Dashboard']);
  const nobody = await paired([]);
  t.deepEqual(await itemsOf(nobody.token), []);
});

test.serial('6. a device paired with a review ticket is read-only: every write is 403 read_only_device, whatever the account may do; reads, logout and a replaced ticket\'s devices stay as they were', async (t) => {
  const reviewer = await staffUser(app, { permissions: OFFICER });
  const { code } = await issueReviewTicket(app.context.db, reviewer.id, { actor: operator }, clock.now);
  const pairing = await app.request('POST', PAIR, { json: { ticket: code, device_name: 'review phone', platform: 'other' } });
  t.is(pairing.status, 200);
  const token = pairing.body.data.access_token as string;
  const pk = await caseOf(await customer('Lin'));
  const customerId = await customer('Mae');

  t.is((await app.request('GET', ME, { token })).status, 200);
  t.is((await app.request('GET', `${M}data/engine/watchlist/${pk}/`, { token })).status, 200);
  const writes: [string, string, unknown][] = [
    ['PATCH', `${M}data/engine/watchlist/${pk}/`, { status: 'closed', rationale: 'done' }],
    ['PATCH', `${M}data/customer/customer/${customerId}/`, { first_name: 'Changed' }],
    ['DELETE', `${M}data/customer/customer/${customerId}/`, undefined],
    ['POST', `${M}data/customer/customer/`, { customer_ref: 'new' }],
    ['POST', `${M}data/engine/watchlist/${pk}/decision/`, { decision: 'ACCEPT', description: 'x' }],
    ['PATCH', PREFERENCES, { language: 'en' }],
    ['POST', `${A}conversations/`, undefined],
  ];
  for (const [method, path, json] of writes) {
    const response = await app.request(method, path, { token, ...(json === undefined ? {} : { json }) });
    t.is(response.status, 403, `${method} ${path}`);
    t.like(response.body, { status: false, data: { reason: 'read_only_device' } }, `${method} ${path}`);
    t.regex(response.body.message, /read-only/);
  }
  t.like(await app.context.db('customers').where({ id: customerId }).first('first_name'), { first_name: 'Mae' });
  t.like(await app.context.db('cases').where({ id: pk }).first('status'), { status: 'open' });

  // The same account paired by an ordinary QR ticket may write.
  const ordinary = (await pairDevice(app, clock, reviewer.id)).accessToken;
  // (200, or 202 where an approval policy on customers holds it for a checker)
  t.true([200, 202].includes((await app.request('PATCH', `${M}data/customer/customer/${customerId}/`, { token: ordinary, json: { first_name: 'Changed' } })).status));

  // A second ticket replaces the first: the devices the first opened stay read-only.
  await issueReviewTicket(app.context.db, reviewer.id, { actor: operator }, clock.now);
  const again = await app.request('PATCH', `${M}data/customer/customer/${customerId}/`, { token, json: { first_name: 'Again' } });
  t.is(again.status, 403);
  t.is(again.body.data.reason, 'read_only_device');
  // Logging out is housekeeping, not a write.
  t.is((await app.request('POST', LOGOUT, { token })).status, 200);
});

test.serial('7. non-financial records store and validate payment_method and the source_* / destination_* fields as the financial table does, and the registration shows them', async (t) => {
  const merchant = await app.merchantToken();
  await defineEvents(app.context, [['nf-login', 2], ['nf-deposit', 1]]);
  t.is((await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'nf-cust' }] })).status, 200);
  const counterparty = {
    payment_method: '  card  ', source_provider: 'Bank A', source_ref: 'SRC-1', source_address: 'DE89370400440532013000',
    destination_provider: 'Bank B', destination_ref: 'DST-1', destination_address: 'GB29NWBK60161331926819',
  };
  const response = await app.request('POST', '/api/transaction/non-financial/upsert/', {
    token: merchant,
    json: [
      { customer_ref: 'nf-cust', event_slug: 'nf-login', event_date: hoursAgo(0.1), transaction_ref: 'nf-cp-1', ...counterparty },
      { customer_ref: 'nf-cust', event_slug: 'nf-login', event_date: hoursAgo(0.1), transaction_ref: 'nf-cp-2', payment_method: 'x'.repeat(17) },
    ],
  });
  t.is(response.status, 200, response.text);
  const [stored, tooLong] = response.body.data.results;
  t.is(stored.action, 'created');
  t.true(stored.warnings.some((warning: string) => warning.startsWith('payment_method: surrounding whitespace')));
  const row = await app.context.db('non_financial_events').where({ transaction_ref: 'nf-cp-1' }).first();
  t.like(row, { ...counterparty, payment_method: 'card' });

  // The same value on the financial endpoint is refused alike.
  const financial = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'nf-cust', event_slug: 'nf-deposit', amount: '10', currency: 'EUR', io_type: 0, event_date: hoursAgo(0.1), transaction_ref: 'nf-cp-f', payment_method: 'x'.repeat(17) }],
  });
  const refused = financial.body.data.results[0];
  t.is(tooLong.action, refused.action);
  t.is(tooLong.error, refused.error);
  t.deepEqual(tooLong.warnings, refused.warnings);
  t.regex(JSON.stringify(tooLong), /payment_method: longer than 16 characters/);

  // The registration shows them (read-only, as reported).
  const admin = await paired([], { superuser: true });
  const detail = await app.request('GET', `${M}data/transaction/nonfinancialevent/${row.id}/`, { token: admin.token });
  t.is(detail.status, 200);
  for (const [name, value] of Object.entries({ ...counterparty, payment_method: 'card' })) t.like(detail.body.data.fields[name], { value, editable: false }, name);
  const schema = await app.request('GET', `${M}schema/transaction/nonfinancialevent/`, { token: admin.token });
  t.true(schema.body.data.form.fieldsets.some((fieldset: { title: string; fields: string[] }) => fieldset.title === 'Counterparty' && fieldset.fields.includes('destination_ref')));
});
