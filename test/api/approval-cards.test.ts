import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient } from '../helpers/admin.ts';
import { installClock, pairDevice, staffUser, type TestClock } from '../helpers/mobile.ts';
import { createGroup } from '../../src/modules/staff/service.ts';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { setApprovalPolicies } from '../../src/app/policies.ts';

/**
 * The list card of an approval request (mobile-api.md, Approval request): the target's name as the
 * title, the action badge as this viewer sees it, the target model's name, related_model and
 * related_pk; the pending list holds exactly the requests its viewer may sign.
 */

const DATA = '/api/mobile/data/';
const PENDING = `${DATA}approval/pendingapprovalrequest/`;
const ALL = `${DATA}approval/approvalrequest/`;
const PASSWORD = 'amber-quarry-window-58';

let app: TestApp;
let clock: TestClock;
const ids: Record<string, string> = {};
const users: Record<string, { id: string; username: string; token: string }> = {};

async function member(name: string, permissions: string[], groups: string[] = []) {
  const user = await staffUser(app, { permissions, groups, password: PASSWORD });
  users[name] = { id: user.id, username: user.username, token: (await pairDevice(app, clock, user.id)).accessToken };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Card = any;

async function cards(path: string, who: string): Promise<Card[]> {
  const response = await app.request('GET', path, { token: users[who]!.token });
  if (response.status !== 200) throw new Error(`${path}: ${response.status} ${response.text}`);
  return response.body.data.results;
}

function cardOf(list: Card[], requestId: string): Card {
  const card = list.find((candidate) => candidate.pk === requestId);
  if (!card) throw new Error(`no card for ${requestId}`);
  return card;
}

test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
  const merchant = await app.merchantToken();
  await app.request('POST', '/api/customer/upsert/', { token: merchant, json: [{ customer_ref: 'ann', first_name: 'Ann' }] });
  ids.ann = (await app.context.db('customers').where({ customer_ref: 'ann' }).first('id')).id;
  await app.context.db('events').insert({ slug: 'refund', name: 'Refund', type: 1 });
  const lists = ['approval.view_pendingapprovalrequest', 'approval.view_approvalrequest'];
  await createGroup(app.context.db, { name: 'Signers', permissions: ['customer.view_customer', ...lists] }, { actor: { type: 'operator', id: 'test' }, known: new Set(permissionCodenames()) });
  // A change of a customer needs two signatures from the group; a change of an event names no
  // signer, so whoever may change events signs it.
  await setApprovalPolicies(app.context.db, { model: 'customer.customer', operations: ['change'], signatures: 2, signerGroup: 'Signers' });
  await setApprovalPolicies(app.context.db, { model: 'engine.event', operations: ['change'] });
  await member('maker', ['customer.view_customer', 'customer.change_customer', 'engine.change_event', ...lists]);
  await member('first', [], ['Signers']);
  await member('second', [], ['Signers']);
  await member('editor', ['engine.change_event', ...lists]);
  await member('outsider', lists);
  await app.context.db('staff_users').where({ id: users.first!.id }).update({ is_staff: true });

  const change = await app.request('PATCH', `${DATA}customer/customer/${ids.ann}/`, { token: users.maker!.token, json: { first_name: 'Annette' } });
  const rename = await app.request('PATCH', `${DATA}engine/event/refund/`, { token: users.maker!.token, json: { name: 'Refunds' } });
  if (change.status !== 202 || rename.status !== 202) throw new Error(`not submitted: ${change.text} ${rename.text}`);
  ids.change = change.body.data.approval_request_id;
  ids.rename = rename.body.data.approval_request_id;
});

test.after.always(async () => {
  await app?.close();
});

test.serial('a pending card: the target as title, the viewer\'s action badge, the target model\'s name, related_model and related_pk', async (t) => {
  const [card, ...others] = await cards(PENDING, 'first');
  t.is(others.length, 0, 'the event\'s change is not theirs to sign');
  t.is(card.pk, ids.change);
  t.like(card.cells, { target_model: 'customer', action: 'Review', status: 'Pending' });
  t.regex(card.cells.object_repr, /ann/i);
  t.like(card.tones, { action: 'warning' });
  t.is(card.related_model, 'customer.customer');
  t.is(card.related_pk, ids.ann);

  const schema = (await app.request('GET', '/api/mobile/schema/approval/pendingapprovalrequest/', { token: users.first!.token })).body.data.list;
  t.like(schema, { title_column: 'object_repr', status_column: 'action' });
  const columns = Object.fromEntries(schema.columns.map((column: Card) => [column.name, column]));
  t.like(columns.action, { label: 'Action', kind: 'badge', sortable: false });
  t.like(columns.target_model, { label: 'Model', kind: 'text', sortable: false });
  const sortByAction = await app.request('GET', `${PENDING}?o=${columns.action.index}`, { token: users.first!.token });
  t.is(sortByAction.status, 400, 'a computed column cannot be sorted on');
  t.is(sortByAction.body.data.parameter, 'o');
});

test.serial('the badge follows the viewer: signed after their signature, review for the next signer, withdraw for the maker, not authorized without a say', async (t) => {
  const signed = await app.request('POST', `${PENDING}${ids.change}/process/`, { token: users.first!.token, json: { action: 'approve', reason: 'seen' } });
  t.is(signed.status, 200);
  const mine = cardOf(await cards(PENDING, 'first'), ids.change!);
  t.like(mine, { cells: { action: 'Signed' }, tones: { action: 'success' } });
  t.is(cardOf(await cards(PENDING, 'second'), ids.change!).cells.action, 'Review');

  const made = await cards(ALL, 'maker');
  t.like(cardOf(made, ids.change!), { cells: { action: 'Withdraw' }, tones: { action: 'info' }, related_model: 'customer.customer', related_pk: ids.ann });
  t.like(cardOf(made, ids.rename!), { cells: { action: 'Withdraw', target_model: 'event' }, related_model: 'engine.event', related_pk: 'refund' });
  t.deepEqual(await cards(PENDING, 'maker'), [], 'a maker never signs their own request');

  // The outsider may list requests but neither sign them nor open customers: no link to follow.
  const seen = cardOf(await cards(ALL, 'outsider'), ids.change!);
  t.like(seen, { cells: { action: 'Not authorized', target_model: 'customer' }, tones: { action: 'neutral' }, related_model: null, related_pk: null });
  t.deepEqual(await cards(PENDING, 'outsider'), []);
});

test.serial('a policy naming no signer: the pending list shows its requests to whoever may make the change, and they can sign them', async (t) => {
  const [card, ...others] = await cards(PENDING, 'editor');
  t.is(others.length, 0, 'the customer\'s change is the group\'s to sign');
  t.like(card, { pk: ids.rename, cells: { action: 'Review', target_model: 'event' }, related_model: 'engine.event', related_pk: 'refund' });
  const approved = await app.request('POST', `${PENDING}${ids.rename}/process/`, { token: users.editor!.token, json: { action: 'approve', reason: 'typo' } });
  t.is(approved.status, 200, approved.text);
  t.true(approved.body.data.applied);
  t.is((await app.context.db('events').where({ slug: 'refund' }).first()).name, 'Refunds');
  t.like(cardOf(await cards(ALL, 'editor'), ids.rename!), { cells: { action: 'Processed', status: 'Approved' } });
  t.deepEqual(await cards(PENDING, 'editor'), []);
});

test.serial('the web changelist of pending requests shows the same badge and model name', async (t) => {
  const client = adminClient(app.url);
  t.is((await client.login(users.first!.username, PASSWORD)).status, 302);
  const page = await client.get('/admin/approval/pendingapprovalrequest/');
  t.is(page.status, 200);
  t.regex(page.text, /<span class="badge tone-success">Signed<\/span>/);
  t.regex(page.text, /<td class="column-text" data-label="Model">customer<\/td>/);
});
