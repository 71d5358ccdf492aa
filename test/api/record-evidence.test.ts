/**
 * The evidence of a scored record, as the mobile detail and the web decision form carry it (issue
 * 36): the matched_rules block (each rule by code and name, its score contribution and forced
 * decision, from the record's execution log) on alerts, execution logs and both event models; an
 * alert's record_mark (its record's decision form) and the earlier decisions with their
 * attachments; and the web decision form's multipart post, with the mobile endpoint's allowlist
 * and limits, its CSRF token checked before any file is stored.
 */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

const DATA = '/api/mobile/data/';
const PASSWORD = 'amber-quarry-signal-77';
const OFFICER = [
  'transaction.view_financialevent', 'transaction.change_financialevent', 'transaction.view_nonfinancialevent', 'engine.view_executionlog',
  'engine.add_compliancedecision', 'engine.view_compliancedecision', 'engine.view_alert', 'engine.view_watchlist', 'customer.view_customer',
];
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
  'base64',
);
const EXECUTABLE = Buffer.concat([Buffer.from('MZ'), Buffer.alloc(58), Buffer.from([0x80, 0, 0, 0]), Buffer.alloc(64), Buffer.from('PE\0\0'), Buffer.alloc(200)]);

let app: TestApp;
let clock: TestClock;
let merchant: string;
let officer: { id: string; username: string; token: string };
let financial: { id: string; log_id: string; decision: string };
let nonFinancial: { id: string; log_id: string; decision: string };

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1], ['login', 2]]);
  await loadRuleSet(app.context, [
    { code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 },
    { code: 'ROUND', name: 'Round amount', target: 'financial', expression: { '==': [{ '%': [{ var: 'record.amount' }, 1000] }, 0] }, score: 12.5 },
    { code: 'STOLEN', name: 'Login from a stolen device', target: 'non_financial', expression: { '==': [{ var: 'record.device_id' }, 'stolen'] }, score: 90, decision: 'REJECT' },
  ]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'cus-re', first_name: 'Rhea' }] });
  const ingested = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'cus-re', event_slug: 'deposit', amount: '6000', currency: 'EUR', transaction_ref: 're-1', io_type: 0, event_date: hoursAgo(1) }],
  });
  financial = ingested.body.data.results[0];
  const logins = await app.request('POST', '/api/transaction/non-financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: 'cus-re', event_slug: 'login', transaction_ref: 're-login-1', device_id: 'stolen', event_date: hoursAgo(1) }],
  });
  nonFinancial = logins.body.data.results[0];
  const user = await staffUser(app, { password: PASSWORD, permissions: OFFICER });
  await app.database.knex('staff_users').where({ id: user.id }).update({ is_staff: true });
  officer = { id: user.id, username: user.username, token: (await pairDevice(app, clock, user.id)).accessToken };
});

test.after.always(async () => {
  await app?.close();
});

async function detail(modelPath: string, pk: string) {
  const response = await app.request('GET', `${DATA}${modelPath}/${pk}/`, { token: officer.token });
  if (response.status !== 200) throw new Error(`detail ${modelPath} ${pk}: ${response.status} ${response.text}`);
  return response.body.data;
}

/** Every file under the app's data folder: stored evidence and temporary uploads alike. */
async function storedFiles(): Promise<string[]> {
  const root = app.context.config.dataDir;
  const entries = await fs.readdir(root, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((entry) => entry.isFile()).map((entry) => path.relative(root, path.join(entry.parentPath, entry.name))).sort();
}

const decisionCount = async () => Number((await app.database.knex('compliance_decisions').count('* as n').first())!.n);

test.serial('matched_rules in the mobile detail of a financial event, its alert and its execution log: rules by code and name, with their contributions', async (t) => {
  t.is(financial.decision, 'REVIEW');
  const expected = {
    log_id: financial.log_id,
    score: 72.5,
    decision: 'REVIEW',
    by_decision: false,
    rules: [
      { code: 'LARGE', name: 'Large amount', version: 1, score: 60, decision: null },
      { code: 'ROUND', name: 'Round amount', version: 1, score: 12.5, decision: null },
    ],
  };
  const event = await detail('transaction/financialevent', financial.id);
  t.like(event.matched_rules, expected);
  t.regex(event.matched_rules.scored_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/);
  const alert = await app.database.knex('alerts').where({ record_id: financial.id }).first();
  const alertDetail = await detail('engine/alert', alert.id);
  t.deepEqual(alertDetail.matched_rules, event.matched_rules);
  const log = await detail('engine/executionlog', financial.log_id);
  t.deepEqual(log.matched_rules, event.matched_rules);

  // One click from the alert to its record, its case and its log: relations in the detail.
  t.like(alertDetail.fields.record_id, { kind: 'relation', related_model: 'transaction.financialevent', related_pk: financial.id, display: 're-1' });
  t.like(alertDetail.fields.case_id, { kind: 'relation', related_model: 'engine.watchlist', related_pk: alert.case_id });
  t.like(alertDetail.fields.log_id, { kind: 'relation', related_model: 'engine.executionlog', related_pk: financial.log_id });
  // The alert carries its record's decision form.
  t.like(alertDetail.record_mark, { model: 'transaction.financialevent', pk: financial.id, repr: 're-1', allowed: true, current: 'REVIEW', score: 72.5, max_attachments: 10 });
  t.is(alertDetail.mark, undefined, 'no decision is made on the alert itself');

  // The mobile schema names the blocks each detail carries.
  const blocksOf = async (model: string) => ((await app.request('GET', `/api/mobile/schema/${model}/`, { token: officer.token })).body.data.blocks as { name: string }[]).map((block) => block.name);
  t.deepEqual((await blocksOf('engine/alert')).filter((name) => ['data_context', 'matched_rules', 'mark', 'record_mark', 'decisions'].includes(name)), ['data_context', 'matched_rules', 'record_mark', 'decisions']);
  t.deepEqual((await blocksOf('transaction/financialevent')).filter((name) => ['data_context', 'matched_rules', 'mark', 'record_mark', 'decisions'].includes(name)), ['matched_rules', 'mark', 'decisions']);
});

test.serial('matched_rules of a non-financial event names its forcing rule; a record no rule scored has null', async (t) => {
  t.is(nonFinancial.decision, 'REJECT');
  const event = await detail('transaction/nonfinancialevent', nonFinancial.id);
  t.like(event.matched_rules, { log_id: nonFinancial.log_id, score: 90, decision: 'REJECT', rules: [{ code: 'STOLEN', name: 'Login from a stolen device', score: 90, decision: 'REJECT' }] });
  // A record whose logs are gone has no scoring to show.
  const [orphan] = await app.database.knex('non_financial_events').insert({
    id: randomUUID(),
    customer_id: (await app.database.knex('customers').where({ customer_ref: 'cus-re' }).first('id')).id, transaction_ref: 're-orphan', customer_ref: 'cus-re',
    event_slug: 'login', event_date: new Date(), raw: '{}', rule_check: false, created_by: 'test', updated_by: 'test',
  }).returning('id');
  t.is((await detail('transaction/nonfinancialevent', orphan.id)).matched_rules, null);
});

test.serial('after a decision with an attachment, the rules stay in view, and the decisions block lists it with its attachment (mobile)', async (t) => {
  const form = new FormData();
  form.append('decision', 'REJECT');
  form.append('description', 'Funds from a sanctioned exchange.');
  form.append('attachments[]', new Blob([new Uint8Array(PNG)]), 'statement.png');
  const response = await fetch(`${app.url}${DATA}transaction/financialevent/${financial.id}/decision/`, { method: 'POST', headers: { authorization: `Bearer ${officer.token}` }, body: form });
  t.is(response.status, 201, await response.clone().text());
  const event = await detail('transaction/financialevent', financial.id);
  t.is(event.matched_rules.log_id, financial.log_id, "the ruling's own log matched nothing: the rules' log stays the one shown");
  t.is(event.matched_rules.rules.length, 2);
  t.like(event.decisions, { total: 1, rows: [{ decision: 'REJECT', actor: officer.username, description: 'Funds from a sanctioned exchange.', attachments: [{ name: 'statement.png', content_type: 'image/png', size: PNG.length }] }] });
  const record = await app.database.knex('financial_transactions').where({ id: financial.id }).first('log_id');
  const rulingLog = await detail('engine/executionlog', record.log_id);
  t.like(rulingLog.matched_rules, { log_id: record.log_id, by_decision: true, rules: [] });
  const alert = await app.database.knex('alerts').where({ record_id: financial.id }).first();
  t.like((await detail('engine/alert', alert.id)).decisions, { total: 1 });
  t.like((await detail('engine/alert', alert.id)).record_mark, { current: 'REJECT' });
});

test.serial('a viewer without the compliance decision permission gets no decisions block; one who may not view the record gets no record_mark', async (t) => {
  const user = await staffUser(app, { permissions: ['engine.view_alert'] });
  const { accessToken } = await pairDevice(app, clock, user.id);
  const alert = await app.database.knex('alerts').where({ record_id: financial.id }).first();
  const response = await app.request('GET', `${DATA}engine/alert/${alert.id}/`, { token: accessToken });
  t.is(response.status, 200);
  t.is(response.body.data.record_mark, undefined);
  t.is(response.body.data.decisions, undefined);
  t.is(response.body.data.matched_rules.rules.length, 2);
});

async function webOfficer() {
  const client = adminClient(app.url);
  const login = await client.login(officer.username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  const page = await client.get(`/admin/transaction/financialevent/${financial.id}/change/`);
  return { client, csrf: csrfTokenIn(page.text), page };
}

function decisionForm(fields: Record<string, string>, files: Array<{ name: string; bytes: Buffer }>): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, value);
  for (const file of files) form.append('attachments[]', new Blob([new Uint8Array(file.bytes)]), file.name);
  return form;
}

async function postMultipart(client: ReturnType<typeof adminClient>, pagePath: string, form: FormData, headers: Record<string, string> = {}) {
  const response = await fetch(`${app.url}${pagePath}`, { method: 'POST', redirect: 'manual', headers: { cookie: client.jar.header(), ...headers }, body: form });
  client.jar.store(response.headers);
  return { status: response.status, location: response.headers.get('location'), text: await response.text() };
}

test.serial('web: the decision form is multipart with attachments[], above the change form', async (t) => {
  const { page } = await webOfficer();
  t.is(page.status, 200);
  t.regex(page.text, /<form method="post" action="\/admin\/transaction\/financialevent\/[^"]+\/decision\/" enctype="multipart\/form-data"/);
  t.regex(page.text, /<input id="casework-attachments" name="attachments\[\]" type="file" multiple/);
  t.true(page.text.indexOf('casework-decision') < page.text.indexOf('class="change-form'), 'the decision form comes before the change form');
  t.true(page.text.indexOf('casework-rules') < page.text.indexOf('class="change-form'), 'the matched rules come before the change form');
  t.true(page.text.includes(`statement.png <span class="help">(image/png, ${PNG.length} B)</span>`), "the earlier decision's attachment, named with its size");
});

test.serial('web: a multipart decision without or with a wrong CSRF token is refused (403) and stores nothing', async (t) => {
  const { client, csrf } = await webOfficer();
  const before = await storedFiles();
  const decisions = await decisionCount();
  const fields = { decision: 'ACCEPT', description: 'Forged' };
  const missing = await postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, decisionForm(fields, [{ name: 'forged.png', bytes: PNG }]));
  t.is(missing.status, 403);
  t.regex(missing.text, /CSRF verification failed\. Request aborted\. CSRF token missing\./);
  const wrong = await postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, decisionForm({ csrfmiddlewaretoken: `${csrf.slice(0, -2)}xx`, ...fields }, [{ name: 'forged.png', bytes: PNG }]));
  t.is(wrong.status, 403);
  t.regex(wrong.text, /CSRF token incorrect/);
  const foreign = await postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, decisionForm({ csrfmiddlewaretoken: csrf, ...fields }, [{ name: 'forged.png', bytes: PNG }]), { origin: 'https://evil.example' });
  t.is(foreign.status, 403);
  t.regex(foreign.text, /Origin checking failed/);
  const anonymous = await fetch(`${app.url}/admin/transaction/financialevent/${financial.id}/decision/`, { method: 'POST', redirect: 'manual', body: decisionForm({ csrfmiddlewaretoken: csrf, ...fields }, [{ name: 'forged.png', bytes: PNG }]) });
  t.is(anonymous.status, 302);
  t.regex(anonymous.headers.get('location') ?? '', /^\/admin\/login\//);
  t.deepEqual(await storedFiles(), before, 'no file stored, no temporary file left');
  t.is(await decisionCount(), decisions);
  t.is((await app.database.knex('financial_transactions').where({ id: financial.id }).first()).decision, 'REJECT');
});

test.serial('web: a refused file type, too many files or a bad score come back as an error message on the page; nothing is stored', async (t) => {
  const { client, csrf } = await webOfficer();
  const before = await storedFiles();
  const decisions = await decisionCount();
  const post = (fields: Record<string, string>, files: Array<{ name: string; bytes: Buffer }>) =>
    postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, decisionForm({ csrfmiddlewaretoken: csrf, decision: 'ACCEPT', description: 'Cleared', ...fields }, files));
  const messages = async () => (await client.get(`/admin/transaction/financialevent/${financial.id}/change/`)).text;

  const executable = await post({}, [{ name: 'statement.pdf', bytes: EXECUTABLE }]);
  t.is(executable.status, 302);
  t.is(executable.location, `/admin/transaction/financialevent/${financial.id}/change/`);
  t.regex(await messages(), /message-error[^>]*>statement\.pdf is not an accepted file: only images, videos and PDF documents are/);

  const many = await post({}, Array.from({ length: 11 }, (_, index) => ({ name: `page-${index}.png`, bytes: PNG })));
  t.is(many.status, 302);
  t.regex(await messages(), /message-error[^>]*>At most 10 attachments may be sent\./);

  const badScore = await post({ score: '101' }, [{ name: 'ok.png', bytes: PNG }]);
  t.is(badScore.status, 302);
  t.regex(await messages(), /message-error[^>]*>score: /);

  t.deepEqual(await storedFiles(), before);
  t.is(await decisionCount(), decisions);
});

test.serial('web: a user without the decision permission is refused (403) before the body is read', async (t) => {
  const viewer = await staffUser(app, { password: PASSWORD, permissions: ['transaction.view_financialevent'] });
  await app.database.knex('staff_users').where({ id: viewer.id }).update({ is_staff: true });
  const client = adminClient(app.url);
  await client.login(viewer.username, PASSWORD);
  const page = await client.get(`/admin/transaction/financialevent/${financial.id}/change/`);
  t.false(page.text.includes('name="attachments[]"'), 'no form for one who may not decide');
  const before = await storedFiles();
  const refused = await postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, decisionForm({ csrfmiddlewaretoken: csrfTokenIn(page.text), decision: 'ACCEPT', description: 'x' }, [{ name: 'a.png', bytes: PNG }]));
  t.is(refused.status, 403);
  t.regex(refused.text, /Permission denied/);
  const missing = await postMultipart(client, '/admin/transaction/financialevent/00000000-0000-4000-8000-000000000000/decision/', decisionForm({ csrfmiddlewaretoken: csrfTokenIn(page.text), decision: 'ACCEPT', description: 'x' }, []));
  t.is(missing.status, 404);
  const notDecided = await postMultipart(client, `/admin/customer/customer/${financial.id}/decision/`, decisionForm({ csrfmiddlewaretoken: csrfTokenIn(page.text), decision: 'ACCEPT', description: 'x' }, []));
  t.is(notDecided.status, 404);
  t.deepEqual(await storedFiles(), before);
});

test.serial('web: a multipart decision with attachments from the alert page is recorded, and the page it came from is where it goes back to', async (t) => {
  const { client } = await webOfficer();
  const alert = await app.database.knex('alerts').where({ record_id: financial.id }).first();
  const alertPage = await client.get(`/admin/engine/alert/${alert.id}/change/`);
  t.is(alertPage.status, 200);
  t.true(alertPage.text.includes(`href="/admin/transaction/financialevent/${financial.id}/change/">re-1</a>`), 'the alert links to its record');
  t.true(alertPage.text.includes(`href="/admin/engine/watchlist/${alert.case_id}/change/"`), 'and to its case');
  t.true(alertPage.text.includes(`action="/admin/transaction/financialevent/${financial.id}/decision/"`), "the alert's page holds its record's decision form");
  const before = (await storedFiles()).length;
  const posted = await postMultipart(
    client,
    `/admin/transaction/financialevent/${financial.id}/decision/`,
    decisionForm({ csrfmiddlewaretoken: csrfTokenIn(alertPage.text), next: `/admin/engine/alert/${alert.id}/change/`, decision: 'ACCEPT', score: '10', description: 'Explained by the sale of a flat.' }, [
      { name: 'contract.png', bytes: Buffer.concat([PNG, Buffer.from('contract')]) },
      { name: 'deed.pdf', bytes: Buffer.from('%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n') },
    ]),
  );
  t.is(posted.status, 302);
  t.is(posted.location, `/admin/engine/alert/${alert.id}/change/`);
  t.like(await app.database.knex('financial_transactions').where({ id: financial.id }).first(), { decision: 'ACCEPT', score: '10.00' });
  const decision = await app.database.knex('compliance_decisions').where({ target_id: financial.id }).orderBy('created_at', 'desc').first();
  t.deepEqual(decision.attachments.map((file: { name: string; content_type: string }) => [file.name, file.content_type]), [['contract.png', 'image/png'], ['deed.pdf', 'application/pdf']]);
  t.is((await storedFiles()).length, before + 2, 'both files stored, no temporary file left');
  const shown = await client.get(`/admin/engine/alert/${alert.id}/change/`);
  t.regex(shown.text, /Decision ACCEPT recorded\./);
  t.regex(shown.text, /deed\.pdf <span class="help">\(application\/pdf, \d+ B\)/);
  // The file input left empty, as a browser sends it (a part with no file name and no bytes): a decision without attachments.
  const empty = decisionForm({ csrfmiddlewaretoken: csrfTokenIn(alertPage.text), decision: 'REVIEW', description: 'No file this time' }, []);
  empty.append('attachments[]', new File([], ''));
  const withoutFiles = await postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, empty);
  t.is(withoutFiles.status, 302);
  t.regex((await client.get(`/admin/transaction/financialevent/${financial.id}/change/`)).text, /Decision REVIEW recorded\./);
  t.deepEqual((await app.database.knex('compliance_decisions').where({ target_id: financial.id }).orderBy('created_at', 'desc').first()).attachments, []);
  // A page outside the admin is never where it goes back to.
  const elsewhere = await postMultipart(client, `/admin/transaction/financialevent/${financial.id}/decision/`, decisionForm({ csrfmiddlewaretoken: csrfTokenIn(alertPage.text), next: '//evil.example/', decision: 'ACCEPT', description: 'Again' }, []));
  t.is(elsewhere.location, '/admin/');
});
