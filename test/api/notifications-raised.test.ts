/** Notifications raised by the system: alerts on cases, approval requests and their outcome, reports. */
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { defineEvents, hoursAgo, loadRuleSet } from '../helpers/fixtures.ts';
import { installClock, operator, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { connectLive } from '../helpers/live.ts';
import { loadPrincipal } from '../../src/modules/staff/principal.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { saveObject } from '../../src/modules/backoffice/write.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';
import { processRequest } from '../../src/modules/approvals/service.ts';

let app: TestApp;
let clock: TestClock;
let merchant: string;
const known = { actor: operator, known: new Set(permissionCodenames()) };

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  merchant = await app.merchantToken();
  await defineEvents(app.context, [['deposit', 1]]);
  await loadRuleSet(app.context, [{ code: 'LARGE', name: 'Large amount', target: 'financial', expression: { '>=': [{ var: 'record.amount' }, 5000] }, score: 60 }]);
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: ['nora', 'otto'].map((customer_ref) => ({ customer_ref })) });
});
test.after.always(async () => {
  await app?.close();
});

let sequence = 0;
async function largePayment(customer: string) {
  sequence += 1;
  const response = await app.request('POST', '/api/transaction/financial/upsert/', {
    token: merchant,
    json: [{ customer_ref: customer, event_slug: 'deposit', amount: '9000', currency: 'EUR', transaction_ref: `nr-${sequence}`, io_type: 0, event_date: hoursAgo(1) }],
  });
  if (response.status !== 200) throw new Error(response.text);
}

const alertsOf = (userId: string) => app.database.knex('notifications').where({ user_id: userId, kind: 'alert' }).orderBy('id');

test.serial('an alert on an unassigned case notifies everyone who may view cases, once while unread; an assigned case only its assignee', async (t) => {
  const viewer = await staffUser(app, { permissions: ['engine.view_watchlist'] });
  const changer = await staffUser(app, { permissions: ['engine.change_watchlist'] });
  const boss = await staffUser(app, { is_superuser: true });
  const outsider = await staffUser(app, { permissions: ['customer.view_customer'] });
  const live = await connectLive(app.url);
  await live.login((await pairDevice(app, clock, viewer.id)).accessToken);

  await largePayment('nora');
  const caseRow = await app.database.knex('cases').join('customers', 'customers.id', 'cases.customer_id').where('customers.customer_ref', 'nora').first('cases.id', 'cases.reference');
  t.regex(caseRow.reference, /^C-\d{6}$/);
  for (const user of [viewer, changer, boss]) {
    const rows = await alertsOf(user.id);
    t.is(rows.length, 1, user.username);
    // Named by its number: a viewer of cases may not be allowed to see customers.
    t.like(rows[0], { title: `New alert on ${caseRow.reference}`, target_model: 'engine.watchlist', target_pk: caseRow.id, read: false });
  }
  t.is((await alertsOf(outsider.id)).length, 0);
  const frame = await live.next((f) => f.data?.type === 'notification');
  t.like(frame.data.data, { kind: 'alert', title: `New alert on ${caseRow.reference}`, target: { model: 'engine.watchlist', pk: caseRow.id } });

  await largePayment('nora');
  t.is((await alertsOf(viewer.id)).length, 1, 'still unread: no second notification');
  await app.database.knex('notifications').where({ user_id: viewer.id }).update({ read: true });
  await largePayment('nora');
  t.is((await alertsOf(viewer.id)).length, 2, 'read: the next alert notifies again');

  await app.database.knex('cases').where({ id: caseRow.id }).update({ assignee_id: changer.id });
  await app.database.knex('notifications').update({ read: true });
  await largePayment('nora');
  t.is((await alertsOf(changer.id)).length, 2);
  t.is((await alertsOf(boss.id)).length, 1, 'an assigned case notifies only its assignee');
  live.close();
});

test.serial('approval requests notify their signers stage by stage; the maker hears forwarded, approved and rejected', async (t) => {
  await createGroup(app.context.db, { name: 'Signers', permissions: ['customer.view_customer', 'approval.view_approvalrequest'] }, known);
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], stages: 2, signatures: 1, signerGroup: 'Signers' });
  const maker = await staffUser(app, { permissions: ['customer.view_customer', 'customer.change_customer'] });
  const signerA = await staffUser(app, { groups: ['Signers'] });
  const signerB = await staffUser(app, { groups: ['Signers'] });
  const bystander = await staffUser(app, { permissions: ['customer.view_customer'] });
  const principal = async (id: string) => (await loadPrincipal(app.context.db, id))!;
  const model = app.context.backoffice.site.get('customer', 'customer')!;
  const customer = await app.context.db('customers').where({ customer_ref: 'otto' }).first();
  const of = (userId: string, kind: string) => app.database.knex('notifications').where({ user_id: userId, kind }).orderBy('id');

  const submitted = await saveObject(app.context.backoffice, model, await principal(maker.id), customer.id, { first_name: 'Otto' }, { partial: true });
  const requestId = submitted.approvalRequestId!;
  for (const signer of [signerA, signerB]) {
    const rows = await of(signer.id, 'approval_request');
    t.is(rows.length, 1);
    t.like(rows[0], { target_model: 'approval.approvalrequest', target_pk: requestId, body: 'change customer.customer: otto (stage 1)' });
  }
  t.is((await of(maker.id, 'approval_request')).length, 0, 'the maker never signs');
  t.is((await of(bystander.id, 'approval_request')).length, 0);

  await processRequest(app.context, await principal(signerA.id), requestId, { action: 'approve', reason: 'ok', attachments: [] });
  t.is((await of(maker.id, 'approval_forwarded')).length, 1);
  t.is((await of(signerB.id, 'approval_request')).length, 2, 'asked again for stage 2');
  await processRequest(app.context, await principal(signerB.id), requestId, { action: 'approve', reason: 'ok', attachments: [] });
  t.like((await of(maker.id, 'approval_approved'))[0], { title: 'Your request was approved', target_pk: requestId });

  const again = await saveObject(app.context.backoffice, model, await principal(maker.id), customer.id, { first_name: 'Otto II' }, { partial: true });
  await processRequest(app.context, await principal(signerA.id), again.approvalRequestId!, { action: 'reject', reason: 'wrong spelling', attachments: [] });
  const rejected = (await of(maker.id, 'approval_rejected'))[0];
  t.like(rejected, { title: 'Your request was rejected', target_pk: again.approvalRequestId });
  t.regex(rejected.body, /Reason: wrong spelling/);
});
