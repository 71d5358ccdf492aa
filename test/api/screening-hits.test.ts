/**
 * Screening hits (issue 36): each sanctions or PEP match of a customer is a record an officer
 * reviews, shown on the customer, its case and its alert (mobile detail and web change page). A
 * false positive, marked with a rationale through the write chain (approvals included), stops the
 * entry from counting on that customer until the entry or the customer's name, birth date or
 * nationality change. The example rules send a PEP to review and keep refusing sanctions.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import test from 'ava';
import { HITS_WRITTEN_INLINE } from '../../src/modules/customer/service.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { processRequest } from '../../src/modules/approvals/service.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { adminClient } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { countRows, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';

const CUSTOMERS = '/api/customer/upsert/';
const DATA = '/api/mobile/data/';
const HITS = `${DATA}screening/screeninghit/`;
const root = path.resolve(import.meta.dirname, '../..');
const fixtures = path.join(root, 'test/fixtures/sanctions');
const PASSWORD = 'amber-quarry-lattice-58';

// test/fixtures/sanctions/sdn.csv lists "KARAVELLO, Dmitri Anatolyevich" (OFAC 90001), DOB 14 Mar 1971, nationality Russia,
// and "AL-QUMRANI, Yusuf Hamid" (OFAC 90002), DOB 1965, Yemen; opensanctions.jsonl the PEP "Lorenzo Vittadini" (NK-fix-001).
const KARAVELLO = { first_name: 'Dmitri', last_name: 'Karavello', birth_date: '1971-03-14', nationality: 'RUS' };
const QUMRANI = { first_name: 'Yusuf', last_name: 'Al-Qumrani', birth_date: '1965-01-01', nationality: 'YEM' };
const VITTADINI = { first_name: 'Lorenzo', last_name: 'Vittadini', birth_date: '1962-07-30', nationality: 'ITA' };

const REVIEWER = [
  'screening.view_screeninghit', 'screening.change_screeninghit', 'screening.view_sanctionentry', 'customer.view_customer', 'engine.view_watchlist', 'engine.view_alert',
];
const READER = ['screening.view_screeninghit', 'customer.view_customer', 'engine.view_watchlist', 'engine.view_alert'];

let app: TestApp;
let clock: TestClock;
let merchant: string;
type Member = { id: string; username: string; token: string };
let reviewer: Member;
let checker: Member;
let reader: Member;
let outsider: Member;

async function member(permissions: string[]): Promise<Member> {
  const user = await staffUser(app, { permissions, password: PASSWORD });
  const { accessToken } = await pairDevice(app, clock, user.id);
  return { id: user.id, username: user.username, token: accessToken };
}

async function warden(...args: string[]) {
  await promisify(execFile)(process.execPath, ['bin/warden.js', ...args], { cwd: root, env: { ...process.env, DATABASE_URL: app.database.url } });
}

type CustomerResult = { id: string; customer_ref: string; decision: string; sanction_score: number | null; sanction_topic: string[] };

async function upsert(ref: string, body: Record<string, unknown>): Promise<CustomerResult> {
  const response = await app.request('POST', CUSTOMERS, { token: merchant, json: { customer_ref: ref, ...body } });
  if (response.status !== 200) throw new Error(`upsert failed: ${response.text}`);
  return response.body.data.results[0];
}

async function hitsOf(customerId: string) {
  return app.context.db('screening_hits').where({ customer_id: customerId }).orderBy(['source', 'source_id']);
}

async function alertsOf(customerId: string): Promise<number> {
  return countRows(app.context.db, 'alerts', { customer_id: customerId });
}

async function review(who: Member, hitId: string, body: Record<string, unknown>) {
  return app.request('PATCH', `${HITS}${hitId}/`, { token: who.token, json: body });
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await warden('sanctions', 'import', '--format', 'ofac', path.join(fixtures, 'sdn.csv'), path.join(fixtures, 'alt.csv'));
  await warden('sanctions', 'import', '--format', 'opensanctions', path.join(fixtures, 'opensanctions.jsonl'));
  reviewer = await member(REVIEWER);
  checker = await member(REVIEWER);
  reader = await member(READER);
  outsider = await member(['customer.view_customer', 'engine.view_watchlist', 'engine.view_alert']);
});
test.after.always(async () => {
  await app?.close();
});

test.serial('a listed customer gets one hit per entry with what matched; a clean one none; upserting again refreshes it', async (t) => {
  const listed = await upsert('sh-listed', KARAVELLO);
  const clean = await upsert('sh-clean', { first_name: 'Maria', last_name: 'Lindqvist', birth_date: '1988-04-02', nationality: 'SWE' });
  const [hit, ...others] = await hitsOf(listed.id);
  t.is(others.length, 0);
  const entry = await app.context.db('sanction_entries').where({ source: 'ofac', source_id: '90001' }).first();
  t.like(hit, {
    source: 'ofac',
    source_id: '90001',
    entry_id: entry.id,
    entry_name: 'KARAVELLO, Dmitri Anatolyevich',
    birth_date_agreement: 'match',
    nationality_agreement: 'match',
    status: 'open',
    fingerprint: null,
    reviewed_at: null,
  });
  t.deepEqual(hit.topics, ['sanction']);
  t.regex(hit.matched_name, /KARAVEL/i);
  t.true(Math.abs(Number(hit.similarity) - listed.sanction_score!) < 0.01, 'the similarity is the match score');
  t.true(hit.features.name_similarity > 0.9);
  t.is(await countRows(app.context.db, 'screening_hits', { customer_id: clean.id }), 0);

  const again = await upsert('sh-listed', KARAVELLO);
  t.is(again.id, listed.id);
  const [refreshed, ...more] = await hitsOf(listed.id);
  t.is(more.length, 0, 'one hit per customer and entry, whatever the number of screenings');
  t.is(refreshed.id, hit.id);
  t.true(refreshed.last_seen_at >= hit.last_seen_at);
});

test.serial('a batch writes the hits of every matched customer in it, new and stored alike', async (t) => {
  const response = await app.request('POST', CUSTOMERS, {
    token: merchant,
    json: Array.from({ length: 40 }, (_, index) => ({ customer_ref: `sh-batch-${index}`, ...(index % 4 === 0 ? KARAVELLO : { first_name: `Person${index}`, last_name: 'Ordinary' }) })),
  });
  t.is(response.status, 200);
  const results = response.body.data.results as CustomerResult[];
  const listed = results.filter((_, index) => index % 4 === 0).map((result) => result.id);
  const hits = await app.context.db('screening_hits').whereIn('customer_id', results.map((result) => result.id));
  t.deepEqual(hits.map((hit) => hit.customer_id).sort(), [...listed].sort());
  t.true(hits.every((hit) => hit.source_id === '90001' && hit.status === 'open'));
});

test.serial('a batch with more matched customers than are written inline queues their hits; the job writes every one from the stored matches', async (t) => {
  const matched = HITS_WRITTEN_INLINE + 8;
  const response = await app.request('POST', CUSTOMERS, {
    token: merchant,
    json: Array.from({ length: matched }, (_, index) => ({ customer_ref: `sh-queued-${index}`, ...KARAVELLO })),
  });
  t.is(response.status, 200);
  const ids = (response.body.data.results as CustomerResult[]).map((result) => result.id);
  const deadline = Date.now() + 20_000;
  let written = 0;
  while (Date.now() < deadline && (written = await app.context.db('screening_hits').whereIn('customer_id', ids).count('* as n').first().then((row) => Number(row!.n))) < matched) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  t.is(written, matched, 'one hit per matched customer, written by the job');
  t.true((await app.context.db('screening_hits').whereIn('customer_id', ids)).every((hit) => hit.source_id === '90001' && hit.status === 'open'));
});

test.serial('hits show on the customer, its case and its alert: mobile detail and web change page, for those who may view hits', async (t) => {
  const listed = await upsert('sh-shown', KARAVELLO);
  const [hit] = await hitsOf(listed.id);
  const alert = await app.context.db('alerts').where({ customer_id: listed.id, kind: 'sanctions' }).first();
  t.truthy(alert, 'the match raised a sanctions alert');
  const details = {
    customer: `${DATA}customer/customer/${listed.id}/`,
    case: `${DATA}engine/watchlist/${alert.case_id}/`,
    alert: `${DATA}engine/alert/${alert.id}/`,
  };
  for (const [name, url] of Object.entries(details)) {
    const detail = await app.request('GET', url, { token: reviewer.token });
    t.is(detail.status, 200, `${name}: ${detail.text}`);
    const hits = detail.body.data.screening_hits as Array<Record<string, unknown>>;
    t.is(hits.length, 1, name);
    t.like(hits[0], { id: hit.id, source: 'ofac', source_id: '90001', entry_id: hit.entry_id, entry_name: 'KARAVELLO, Dmitri Anatolyevich', birth_date: 'match', nationality: 'match', status: 'open', can_change: true }, name);
    t.deepEqual(hits[0]!.topics, ['sanction']);

    const read = await app.request('GET', url, { token: reader.token });
    t.like(read.body.data.screening_hits[0], { id: hit.id, entry_id: null, can_change: false }, `${name}: no entry named to a reader who may not view entries, no review offered`);
    const hidden = await app.request('GET', url, { token: outsider.token });
    t.is(hidden.status, 200);
    t.false('screening_hits' in hidden.body.data, `${name}: no hits for a viewer who may not view them`);
  }
  const detail = await app.request('GET', `${HITS}${hit.id}/`, { token: reviewer.token });
  t.is(detail.status, 200);
  t.like(detail.body.data.fields.entry_id, { kind: 'relation', related_model: 'screening.sanctionentry', related_pk: String(hit.entry_id) });
  t.like(detail.body.data.fields.status, { editable: true, value: 'open' });
  t.like(detail.body.data.fields.similarity, { editable: false });
  t.false('fingerprint' in detail.body.data.fields);

  const web = adminClient(app.url);
  t.is((await web.login(reviewer.username, PASSWORD)).status, 302);
  for (const url of [`/admin/customer/customer/${listed.id}/change/`, `/admin/engine/watchlist/${alert.case_id}/change/`, `/admin/engine/alert/${alert.id}/change/`]) {
    const page = await web.get(url);
    t.is(page.status, 200, url);
    t.regex(page.text, /<section class="module screening-hits"/, url);
    t.true(page.text.includes(`href="/admin/screening/screeninghit/${hit.id}/change/"`), url);
    t.true(page.text.includes(`href="/admin/screening/sanctionentry/${hit.entry_id}/change/"`), url);
  }
  const outsiderWeb = adminClient(app.url);
  t.is((await outsiderWeb.login(outsider.username, PASSWORD)).status, 302);
  const unseen = await outsiderWeb.get(`/admin/customer/customer/${listed.id}/change/`);
  t.is(unseen.status, 200);
  t.false(unseen.text.includes('screening-hits'));
});

test.serial('a false positive needs a rationale and change permission; it stops the entry counting until the birth date changes', async (t) => {
  const listed = await upsert('sh-fp', KARAVELLO);
  t.true(listed.sanction_score! >= app.context.config.thresholds.review);
  const [hit] = await hitsOf(listed.id);
  const alertsBefore = await alertsOf(listed.id);

  const missing = await review(reviewer, hit.id, { status: 'false_positive' });
  t.is(missing.status, 400);
  t.is(missing.body.data.errors.rationale[0].code, 'required');
  t.is((await review(reader, hit.id, { status: 'false_positive', rationale: 'Different person.' })).status, 403);
  t.is((await review(outsider, hit.id, { status: 'false_positive', rationale: 'Different person.' })).status, 403);
  t.is((await review(reviewer, hit.id, { similarity: 1 })).status, 200, 'a read-only field is not written');
  t.is(Number((await app.context.db('screening_hits').where({ id: hit.id }).first()).similarity), Number(hit.similarity));

  const marked = await review(reviewer, hit.id, { status: 'false_positive', rationale: 'Passport shows another patronymic and place of birth.' });
  t.is(marked.status, 200, marked.text);
  const stored = await app.context.db('screening_hits').where({ id: hit.id }).first();
  t.like(stored, { status: 'false_positive', reviewed_by_id: reviewer.id, reviewed_by: reviewer.username, review_rationale: 'Passport shows another patronymic and place of birth.' });
  t.truthy(stored.reviewed_at);
  t.regex(stored.fingerprint, /^[0-9a-f]{64}$/);
  const customer = await app.context.db('customers').where({ id: listed.id }).first();
  t.is(Number(customer.sanction_score), 0, 'the customer is rescored at once');
  t.deepEqual(customer.sanction_topic, []);
  t.deepEqual(customer.sanction_matches, []);
  const audit = await app.context.db('admin_log_entries').where({ content_type: 'screening.screeninghit', object_id: hit.id }).pluck('change');
  t.true(audit.some((change: { status?: unknown[] }) => change.status?.[1] === 'false_positive'), 'the review is in the audit log');

  const again = await upsert('sh-fp', KARAVELLO);
  t.is(again.sanction_score, 0);
  t.deepEqual(again.sanction_topic, []);
  t.is(await alertsOf(listed.id), alertsBefore, 'no new alert');
  t.like(await app.context.db('screening_hits').where({ id: hit.id }).first(), { status: 'false_positive' });
  t.is((await hitsOf(listed.id)).length, 1);

  // A batch large enough to be written while it is screened (records/batch.ts): the dismissed match is still dropped there.
  const batch = Array.from({ length: 260 }, (_, index) =>
    index === 130 ? { customer_ref: 'sh-fp', ...KARAVELLO } : { customer_ref: `sh-fp-batch-${index}`, ...(index % 50 === 0 ? KARAVELLO : { first_name: `Person${index}`, last_name: 'Ordinary' }) },
  );
  const large = await app.request('POST', CUSTOMERS, { token: merchant, json: batch });
  t.is(large.status, 200);
  const results = large.body.data.results as CustomerResult[];
  t.is(results[130]!.sanction_score, 0);
  t.true(results.filter((_, index) => index % 50 === 0).every((result) => result.sanction_score! >= app.context.config.thresholds.review));
  t.is(await alertsOf(listed.id), alertsBefore, 'no new alert from the large batch either');
  t.is(await countRows(app.context.db, 'screening_hits', { source_id: '90001', status: 'open' }), await app.context.db('customers').where('customer_ref', 'like', 'sh-%').andWhere('sanction_score', '>=', 50).count('* as n').first().then((row) => Number(row!.n)));

  const moved = await upsert('sh-fp', { ...KARAVELLO, birth_date: '1971-03-15' });
  t.true(moved.sanction_score! >= app.context.config.thresholds.review, JSON.stringify(moved));
  t.is(await alertsOf(listed.id), alertsBefore + 1, 'the match counts again');
  t.like(await app.context.db('screening_hits').where({ id: hit.id }).first(), { status: 'open', fingerprint: null, review_rationale: 'Passport shows another patronymic and place of birth.' });
});

test.serial('a change of the list entry brings a dismissed match back; the name as sent, not its case, is what was judged', async (t) => {
  const listed = await upsert('sh-entry', KARAVELLO);
  const [hit] = await hitsOf(listed.id);
  t.is((await review(reviewer, hit.id, { status: 'false_positive', rationale: 'Known customer, different person.' })).status, 200);
  t.is((await upsert('sh-entry', { ...KARAVELLO, first_name: 'DMITRI' })).sanction_score, 0, 'upper case names the same person');

  await app.context.db('sanction_entries').where({ source: 'ofac', source_id: '90001' }).update({ aliases: app.context.db.raw("array_append(aliases, 'KARAVELLO, Dima')") });
  const back = await upsert('sh-entry', KARAVELLO);
  t.true(back.sanction_score! >= app.context.config.thresholds.review, JSON.stringify(back));
  t.like(await app.context.db('screening_hits').where({ id: hit.id }).first(), { status: 'open' });
});

test.serial('a confirmed match keeps counting; reopening a false positive counts it again at once', async (t) => {
  const listed = await upsert('sh-confirmed', QUMRANI);
  const [hit] = await hitsOf(listed.id);
  t.truthy(hit, JSON.stringify(listed));
  t.is((await review(reviewer, hit.id, { status: 'confirmed' })).status, 400, 'every status change needs a rationale');
  t.is((await review(reviewer, hit.id, { status: 'confirmed', rationale: 'Same person: passport copy on file.' })).status, 200);
  const alerts = await alertsOf(listed.id);
  const again = await upsert('sh-confirmed', QUMRANI);
  t.is(again.sanction_score, listed.sanction_score);
  t.is(await alertsOf(listed.id), alerts + 1);
  t.like(await app.context.db('screening_hits').where({ id: hit.id }).first(), { status: 'confirmed', reviewed_by_id: reviewer.id });

  t.is((await review(reviewer, hit.id, { status: 'false_positive', rationale: 'Wrong file attached earlier.' })).status, 200);
  t.is(Number((await app.context.db('customers').where({ id: listed.id }).first()).sanction_score), 0);
  t.is((await review(reviewer, hit.id, { status: 'open', rationale: 'Reopened for a second look.' })).status, 200);
  const reopened = await app.context.db('customers').where({ id: listed.id }).first();
  t.is(Number(reopened.sanction_score), Number(hit.similarity));
  t.deepEqual(reopened.sanction_topic, ['sanction']);
  t.is(reopened.sanction_matches.length, 1);
  t.like(await app.context.db('screening_hits').where({ id: hit.id }).first(), { status: 'open', fingerprint: null });
});

test.serial('with a maker-checker policy on hits, a false positive is a request, applied on approval', async (t) => {
  const listed = await upsert('sh-approval', KARAVELLO);
  const [hit] = await hitsOf(listed.id);
  await setApprovalPolicies(app.context.db, { model: 'screening.screeninghit', operations: ['change'] });
  try {
    const pending = await review(reviewer, hit.id, { status: 'false_positive', rationale: 'Different person per ID check.' });
    t.is(pending.status, 202, pending.text);
    t.is(pending.body.data.pending_approval, true);
    t.like(await app.context.db('screening_hits').where({ id: hit.id }).first(), { status: 'open', fingerprint: null });
    t.true(Number((await app.context.db('customers').where({ id: listed.id }).first()).sanction_score) > 0);
    const request = await app.context.db('approval_requests').where({ content_type: 'screening.screeninghit', object_id: hit.id, status: 'pending' }).first();
    t.truthy(request);
    t.is((await review(reviewer, hit.id, { status: 'confirmed', rationale: 'x' })).status, 409, 'a pending request blocks other changes');

    await processRequest(app.context, (await loadPrincipal(app.context.db, checker.id))!, request.id, { action: 'approve', reason: 'Agreed.', attachments: [] });
    const applied = await app.context.db('screening_hits').where({ id: hit.id }).first();
    t.like(applied, { status: 'false_positive', reviewed_by_id: reviewer.id, review_rationale: 'Different person per ID check.' });
    t.regex(applied.fingerprint, /^[0-9a-f]{64}$/);
    t.is(Number((await app.context.db('customers').where({ id: listed.id }).first()).sanction_score), 0);
    t.is((await upsert('sh-approval', KARAVELLO)).sanction_score, 0);
  } finally {
    await setApprovalPolicies(app.context.db, { model: 'screening.screeninghit', operations: ['change'], active: false });
  }
});

test.serial('example rules: a PEP goes to review, a sanctions match is refused; both get hits', async (t) => {
  await loadRuleSet(app.context, JSON.parse(await readFile(path.join(root, 'rules/examples/aml-fraud.json'), 'utf8')).rules);
  const pep = await upsert('sh-pep', VITTADINI);
  t.true(pep.sanction_score! >= 85, JSON.stringify(pep));
  t.deepEqual(pep.sanction_topic, ['pep']);
  t.is(pep.decision, 'REVIEW');
  const [pepHit] = await hitsOf(pep.id);
  t.like(pepHit, { source: 'opensanctions', source_id: 'NK-fix-001', status: 'open' });
  t.deepEqual(pepHit.topics, ['pep']);
  const sanctioned = await upsert('sh-sanctioned', KARAVELLO);
  t.is(sanctioned.decision, 'REJECT');
});

test.serial('a re-import keeps hits linked to their entry under its new id; an entry gone from the list unlinks them', async (t) => {
  const listed = await upsert('sh-linked', KARAVELLO);
  const [before] = await hitsOf(listed.id);
  await warden('sanctions', 'import', '--format', 'ofac', path.join(fixtures, 'sdn.csv'), path.join(fixtures, 'alt.csv'));
  const entry = await app.context.db('sanction_entries').where({ source: 'ofac', source_id: '90001' }).first();
  t.not(entry.id, before.entry_id, 'an import stores the list anew');
  const linked = await app.context.db('screening_hits').where({ source: 'ofac', source_id: '90001' }).pluck('entry_id');
  t.true(linked.length > 1);
  t.true(linked.every((id) => id === entry.id));

  await app.context.db('sanction_entries').where({ source: 'ofac', source_id: '90001' }).delete();
  t.deepEqual([...new Set(await app.context.db('screening_hits').where({ source: 'ofac', source_id: '90001' }).pluck('entry_id'))], [null]);
  const detail = await app.request('GET', `${DATA}customer/customer/${listed.id}/`, { token: reviewer.token });
  t.like(detail.body.data.screening_hits[0], { source_id: '90001', entry_id: null, entry_name: 'KARAVELLO, Dmitri Anatolyevich' });
});
