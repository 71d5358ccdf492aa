/**
 * The case as a workbench (issue 36): readable case numbers everywhere a case is named; one
 * timeline (alerts with rule names and scores, changes with rationale and names, decisions with
 * attachments, approval requests and signatures, notes), newest first, in the mobile detail and on
 * the web page, paginated; the evidence block; notes from the case page and the mobile API; each
 * part only for those who may view its model.
 */
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { processRequest } from '../../src/modules/approvals/service.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { TIMELINE_PAGE } from '../../src/modules/cases/timeline.ts';

const DATA = '/api/mobile/data/';
const PASSWORD = 'correct horse battery staple 42';
const OFFICER = [
  'transaction.view_financialevent', 'transaction.change_financialevent', 'engine.add_compliancedecision', 'engine.view_compliancedecision',
  'engine.view_watchlist', 'engine.change_watchlist', 'engine.view_alert', 'engine.view_casenote', 'engine.add_casenote', 'customer.view_customer',
  'approval.view_approvalrequest', 'document.view_documentverificationsession',
];

let app: TestApp;
let clock: TestClock;
let merchant: string;
let sequence = 0;

async function member(permissions: string[], fullName = '') {
  const user = await staffUser(app, { permissions, full_name: fullName });
  const { accessToken } = await pairDevice(app, clock, user.id);
  return { id: user.id, username: user.username, token: accessToken };
}

async function ingest(customer: string, amounts: number[]) {
  const response = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: amounts.map((amount) => {
      sequence += 1;
      return { customer_ref: customer, event_slug: 'deposit', amount: String(amount), currency: 'EUR', transaction_ref: `wb-${sequence}`, io_type: 0, event_date: hoursAgo(1), destination_ref: `IBAN-${sequence}` };
    }),
  });
  if (response.status !== 200) throw new Error(response.text);
  return response.body.data.results as Array<{ id: string; decision: string }>;
}

async function caseOf(customer: string) {
  return app.context.db('cases as c').join('customers as cu', 'cu.id', 'c.customer_id').where('cu.customer_ref', customer).first('c.*');
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [
    { code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 },
    { code: 'ROUND', name: 'Round thousands', target: 'financial', expression: { '==': [{ '%': [{ var: 'record.amount' }, 1000] }, 0] }, score: 15 },
  ]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: ['wb-a', 'wb-b', 'wb-c', 'wb-d'].map((customer_ref) => ({ customer_ref, first_name: 'Wanda', last_name: customer_ref })) });
});

test.after.always(async () => {
  await app?.close();
});

test.serial('cases are numbered C-000001 on, in the order they open, and named by the number in lists, details and titles', async (t) => {
  await ingest('wb-a', [6000]);
  await ingest('wb-b', [7000]);
  const [a, b] = [await caseOf('wb-a'), await caseOf('wb-b')];
  t.regex(a.reference, /^C-\d{6}$/);
  t.is(Number(b.number), Number(a.number) + 1);
  t.is(b.reference, `C-${String(b.number).padStart(6, '0')}`);

  const officer = await member(OFFICER);
  const list = await app.request('GET', `${DATA}engine/watchlist/?q=${a.reference}`, { token: officer.token });
  t.is(list.status, 200);
  t.deepEqual(list.body.data.results.map((row: { repr: string }) => row.repr), [a.reference]);
  const detail = await app.request('GET', `${DATA}engine/watchlist/${a.id}/`, { token: officer.token });
  t.is(detail.body.data.repr, a.reference);
  const alerts = await app.request('GET', `${DATA}engine/alert/${(await app.context.db('alerts').where({ case_id: a.id }).first()).id}/`, { token: officer.token });
  t.is(alerts.status, 200);
  t.true(JSON.stringify(alerts.body.data).includes(a.reference), 'the alert names its case by number');
});

test.serial('the timeline: alerts with rule names and scores, changes with rationale and names, notes, decisions with attachments; newest first', async (t) => {
  const officer = await member(OFFICER, 'Olga Officer');
  const results = await ingest('wb-c', [6000, 9000]);
  const caseRow = await caseOf('wb-c');
  const change = await app.request('PATCH', `${DATA}engine/watchlist/${caseRow.id}/`, { token: officer.token, json: { status: 'in_review', assignee_id: officer.id, rationale: 'Looking at the deposits.' } });
  t.is(change.status, 200, change.text);
  const note = await app.request('POST', `${DATA}engine/casenote/`, { token: officer.token, json: { case_id: caseRow.id, body: 'Called the customer; waiting for payslips.' } });
  t.is(note.status, 201, note.text);
  const form = new FormData();
  form.append('decision', 'ACCEPT');
  form.append('description', 'Salary, documented.');
  form.append('attachments[]', new Blob([new Uint8Array(Buffer.from('%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n'))]), 'payslip.pdf');
  const decided = await fetch(`${app.url}${DATA}transaction/financialevent/${results[0]!.id}/decision/`, { method: 'POST', headers: { authorization: `Bearer ${officer.token}` }, body: form });
  t.is(decided.status, 201, await decided.clone().text());

  const detail = await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/`, { token: officer.token });
  t.is(detail.status, 200);
  const timeline = detail.body.data.timeline as { entries: Array<{ kind: string; title: string; actor: string | null; text: string | null; details: { label: string; value: string }[]; attachments: { name: string }[]; at: string }>; total: number; can_note: boolean };
  t.true(timeline.can_note);
  const kinds = timeline.entries.map((entry) => entry.kind);
  t.deepEqual(kinds.slice().sort(), ['alert', 'alert', 'change', 'decision', 'note', 'opened'].sort());
  const times = timeline.entries.map((entry) => entry.at);
  t.deepEqual(times, times.slice().sort().reverse(), 'newest first');
  t.regex(times[0]!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/, 'to the second, no offset');

  const alert = timeline.entries.find((entry) => entry.kind === 'alert' && entry.title.includes('score 75'))!;
  t.truthy(alert, JSON.stringify(timeline.entries));
  t.is(alert.details[0]!.label, 'Rules');
  t.regex(alert.details[0]!.value, /LARGE Large amount \(\+60\); ROUND Round thousands \(\+15\)/);

  const changed = timeline.entries.find((entry) => entry.kind === 'change')!;
  t.is(changed.actor, `Olga Officer (${officer.username})`);
  t.is(changed.text, 'Looking at the deposits.');
  t.deepEqual(changed.details, [
    { label: 'Status', value: 'Open → In review' },
    { label: 'Assignee', value: `— → Olga Officer (${officer.username})` },
  ]);
  const written = timeline.entries.find((entry) => entry.kind === 'note')!;
  t.is(written.text, 'Called the customer; waiting for payslips.');
  t.is(written.actor, `Olga Officer (${officer.username})`);
  const decision = timeline.entries.find((entry) => entry.kind === 'decision')!;
  t.regex(decision.title, /^Decision ACCEPT on financial event/);
  t.is(decision.text, 'Salary, documented.');
  t.deepEqual(decision.attachments.map((file) => file.name), ['payslip.pdf']);

  const evidence = detail.body.data.evidence;
  // Both alerts came in one batch (one moment): the context is either's, as the rules saw it.
  t.true([6000, 9000].includes(evidence.context.data.transaction.amount), JSON.stringify(evidence.context));
  t.is(evidence.context.alert, evidence.records[0].alert.pk, 'the newest alert listed is the one whose context is shown');
  t.is(evidence.records.length, 2);
  t.deepEqual(evidence.records[0].rules.map((rule: { code: string; name: string; score: number }) => [rule.code, rule.name, rule.score]), [['LARGE', 'Large amount', 60], ['ROUND', 'Round thousands', 15]]);
  t.true(evidence.records[0].record.fields.some((field: { label: string; value: string }) => /IBAN-/.test(field.value)), 'counterparty fields');

  const schema = await app.request('GET', '/api/mobile/schema/engine/watchlist/', { token: officer.token });
  t.deepEqual(schema.body.data.blocks.map((block: { name: string }) => block.name).filter((name: string) => ['timeline', 'evidence'].includes(name)), ['timeline', 'evidence']);
});

test.serial('approval requests on the case and their signatures are in its timeline', async (t) => {
  const maker = await member(OFFICER, 'Mia Maker');
  const checker = await member([...OFFICER, 'approval.change_approvalrequest']);
  await setApprovalPolicies(app.context.db, { model: 'engine.watchlist', operations: ['change'], signerPermission: 'engine.change_watchlist' });
  try {
    await ingest('wb-d', [6000]);
    const caseRow = await caseOf('wb-d');
    const pending = await app.request('PATCH', `${DATA}engine/watchlist/${caseRow.id}/`, { token: maker.token, json: { flagged: true, rationale: 'Unusual pattern.' } });
    t.is(pending.status, 202, pending.text);
    const requestId = pending.body.data.approval_request_id as string;
    await processRequest(app.context, (await loadPrincipal(app.context.db, checker.id))!, requestId, { action: 'approve', reason: 'Agreed.', attachments: [] });
    const detail = await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/`, { token: maker.token });
    const entries = detail.body.data.timeline.entries as Array<{ kind: string; title: string; actor: string; text: string; details: { label: string; value: string }[] }>;
    const request = entries.find((entry) => entry.kind === 'approval_request')!;
    t.truthy(request, JSON.stringify(entries));
    t.is(request.actor, `Mia Maker (${maker.username})`);
    t.true(request.details.some((detail) => detail.label === 'Flag'), JSON.stringify(request.details));
    const signature = entries.find((entry) => entry.kind === 'signature')!;
    t.regex(signature.title, /^Approved: /);
    t.is(signature.text, 'Agreed.');
    t.true(entries.some((entry) => entry.kind === 'change' && entry.text === 'Unusual pattern.'), 'the applied change keeps its rationale');
  } finally {
    await app.context.db('approval_policies').delete();
  }
});

test.serial('each part of the timeline and the evidence only for those who may view its model', async (t) => {
  const caseRow = await caseOf('wb-c');
  const casesOnly = await member(['engine.view_watchlist']);
  const detail = await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/`, { token: casesOnly.token });
  t.is(detail.status, 200);
  const kinds = new Set((detail.body.data.timeline.entries as { kind: string }[]).map((entry) => entry.kind));
  t.false(kinds.has('alert'));
  t.false(kinds.has('note'));
  t.false(kinds.has('decision'));
  t.true(kinds.has('change'));
  t.false(detail.body.data.timeline.can_note);
  t.is(detail.body.data.evidence.customer, null);
  t.is(detail.body.data.evidence.records, null);
  t.is(detail.body.data.evidence.context, null);
  t.false(JSON.stringify(detail.body.data).includes('wb-c'), 'no customer reference leaks to a viewer of cases only');

  const noteWithoutCase = await member(['engine.add_casenote']);
  const refused = await app.request('POST', `${DATA}engine/casenote/`, { token: noteWithoutCase.token, json: { case_id: caseRow.id, body: 'Sneaky.' } });
  t.is(refused.status, 403, refused.text);
  const noAdd = await app.request('POST', `${DATA}engine/casenote/`, { token: casesOnly.token, json: { case_id: caseRow.id, body: 'Sneaky.' } });
  t.is(noAdd.status, 403);
  const empty = await app.request('POST', `${DATA}engine/casenote/`, { token: (await member(OFFICER)).token, json: { case_id: caseRow.id, body: '   ' } });
  t.is(empty.status, 400);
  t.truthy(empty.body.data.errors.body);

  const outsider = await member(['customer.view_customer']);
  t.is((await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/timeline/`, { token: outsider.token })).status, 403);
  t.is((await app.request('GET', `${DATA}engine/watchlist/00000000-0000-0000-0000-000000000000/timeline/`, { token: casesOnly.token })).status, 404);
  t.is((await app.request('GET', `${DATA}engine/watchlist/not-a-uuid/timeline/`, { token: casesOnly.token })).status, 404);
  t.is((await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/timeline/?page=0`, { token: casesOnly.token })).status, 400);
  t.is((await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/timeline/?other=1`, { token: casesOnly.token })).status, 400);
  const notes = await app.context.db('case_notes').count('* as n').first();
  const update = await app.context.db.raw('update case_notes set body = ?', ['rewritten']).then(() => 'updated', (error: Error) => error.message);
  t.regex(update, /append-only/);
  t.deepEqual(await app.context.db('case_notes').count('* as n').first(), notes);
});

test.serial('the timeline pages by 100: the detail carries the newest page, the timeline endpoint the rest', async (t) => {
  const officer = await member(OFFICER);
  const caseRow = await caseOf('wb-a');
  const rows = Array.from({ length: 150 }, (_, index) => ({ case_id: caseRow.id, author_id: officer.id, author: officer.username, body: `note ${index}`, created_at: new Date(new Date(caseRow.opened_at).getTime() + (index + 1) * 1000) }));
  await app.context.db('case_notes').insert(rows);
  const detail = await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/`, { token: officer.token });
  const first = detail.body.data.timeline;
  t.is(first.entries.length, TIMELINE_PAGE, JSON.stringify(first.entries.slice(0, 3)));
  t.is(first.pages, 2);
  t.is(first.entries.find((entry: { kind: string }) => entry.kind === 'note').text, 'note 149', JSON.stringify(first.entries.slice(0, 3)));
  const second = await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/timeline/?page=2`, { token: officer.token });
  t.is(second.status, 200);
  t.is(second.body.data.page, 2);
  t.is(first.total, TIMELINE_PAGE + second.body.data.entries.length);
  t.is(second.body.data.entries.at(-1).kind, 'opened');
  const beyond = await app.request('GET', `${DATA}engine/watchlist/${caseRow.id}/timeline/?page=9`, { token: officer.token });
  t.deepEqual(beyond.body.data.entries, []);
  t.is(beyond.body.data.total, first.total);
});

test.serial('the web case page: evidence, timeline with rationale, a note added from the page, older entries on their own page', async (t) => {
  const user = await staffUser(app, { permissions: OFFICER, password: PASSWORD, full_name: 'Webb Officer' });
  await app.context.db('staff_users').where({ id: user.id }).update({ is_staff: true });
  const browser = adminClient(app.url);
  t.is((await browser.login(user.username, PASSWORD)).status, 302);
  const caseRow = await caseOf('wb-c');
  const page = await browser.get(`/admin/engine/watchlist/${caseRow.id}/change/`);
  t.is(page.status, 200);
  t.true(page.text.includes(`<title>${caseRow.reference}`) || page.text.includes(`${caseRow.reference}</h1>`), 'the page is titled by the case number');
  t.true(page.text.includes('Looking at the deposits.'), 'the rationale is shown');
  t.true(page.text.includes('Open → In review'));
  t.true(page.text.includes('Large amount'));
  t.true(page.text.includes('IBAN-'), 'the alerted records show their counterparty');
  t.true(page.text.includes('Decision context of the newest alert'), 'the newest alert\'s context as labelled rows');
  const posted = await browser.post(`/admin/engine/watchlist/${caseRow.id}/note/`, { csrfmiddlewaretoken: csrfTokenIn(page.text), body: 'Escalating <b>tomorrow</b>.' });
  t.is(posted.status, 302, posted.text);
  const after = await browser.get(`/admin/engine/watchlist/${caseRow.id}/change/`);
  t.true(after.text.includes('Note added.'), after.text.slice(after.text.indexOf('messagelist'), after.text.indexOf('messagelist') + 400));
  t.true(after.text.includes('Escalating &lt;b>tomorrow&lt;/b>.'), after.text.slice(after.text.indexOf('Escalating') - 50, after.text.indexOf('Escalating') + 80));
  t.false(after.text.includes('<b>tomorrow'), 'the note is escaped');
  t.true(after.text.includes('Webb Officer'));
  const forged = await browser.post(`/admin/engine/watchlist/${caseRow.id}/note/`, { csrfmiddlewaretoken: 'forged', body: 'x' });
  t.is(forged.status, 403);

  const long = await caseOf('wb-a');
  const older = await browser.get(`/admin/engine/watchlist/${long.id}/timeline/?page=2`);
  t.is(older.status, 200);
  t.true(older.text.includes('Case opened'));
  t.is((await browser.get(`/admin/engine/watchlist/${long.id}/timeline/?page=x`)).status, 400);
});
