/** Multi-use review tickets: issued by the command line's service, redeemed at auth/qr/. */
import test from 'ava';
import {
  issueReviewTicket,
  listReviewTickets,
  revokeReviewTickets,
} from '../../src/modules/mobile/tickets.ts';
import { canonicalReviewCode, hashSecret } from '../../src/modules/mobile/secrets.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, ME, operator, PAIR, staffUser, type TestClock } from '../helpers/mobile.ts';

let app: TestApp;
let clock: TestClock;
test.before(async () => {
  app = await startTestApp();
  clock = installClock(app);
});
test.after.always(async () => {
  await app?.close();
});

const redeem = (ticket: string, name = 'review phone') => app.request('POST', PAIR, { json: { ticket, device_name: name, platform: 'other' } });

test.serial('a review ticket opens a device per redemption, leaves used_by_device empty and stays valid until it expires', async (t) => {
  const knex = app.database.knex;
  const reviewer = await staffUser(app);
  const { code, expires_at } = await issueReviewTicket(knex, reviewer.id, { days: 2, note: 'store review', actor: operator }, clock.now);
  t.regex(code, /^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){5}$/);
  t.is(expires_at, new Date(clock.now.getTime() + 2 * 86400_000).toISOString().slice(0, 19));
  const stored = await knex('mobile_login_tickets').where({ user_id: reviewer.id }).first();
  t.is(stored.ticket_hash, hashSecret(canonicalReviewCode(code)!));
  t.is(stored.note, 'store review');

  const first = await redeem(code, 'first');
  t.is(first.status, 200);
  // Typed by hand: lower case, spaces instead of dashes, O for 0 and I or L for 1 all still match.
  const typed = code.toLowerCase().replace(/-/g, ' ').replace(/0/g, 'o').replace(/1/g, 'l');
  const second = await redeem(typed, 'second');
  t.is(second.status, 200);
  t.not(first.body.data.device_id, second.body.data.device_id);
  const ticket = await knex('mobile_login_tickets').where({ user_id: reviewer.id }).first();
  t.is(ticket.used_by_device, null);
  t.is(ticket.used_at, null);
  const devices = await knex('mobile_devices').where({ ticket_id: ticket.id });
  t.is(devices.length, 2);

  clock.advance(2 * 86400 - 1);
  t.is((await redeem(code, 'third')).status, 200);
  clock.advance(1);
  const expired = await redeem(code, 'fourth');
  t.is(expired.status, 401);
  t.is(expired.body.message, 'QR ticket is invalid, expired or already used.');
});

test.serial('a second ticket replaces the first; revoking ends the ticket and the devices it opened', async (t) => {
  const knex = app.database.knex;
  const reviewer = await staffUser(app);
  const old = await issueReviewTicket(knex, reviewer.id, { actor: operator }, clock.now);
  const current = await issueReviewTicket(knex, reviewer.id, { actor: operator }, clock.now);
  t.is((await redeem(old.code)).status, 401);
  const paired = await redeem(current.code);
  t.is(paired.status, 200);
  t.is((await knex('mobile_login_tickets').where({ user_id: reviewer.id, kind: 'review' })).length, 1);

  const listed = (await listReviewTickets(knex, clock.now)).find((row) => row.username === reviewer.username)!;
  t.like(listed, { state: 'valid', devices: 1, revoked_at: null });
  t.false(JSON.stringify(listed).includes(current.code));

  t.deepEqual(await revokeReviewTickets(knex, reviewer.id, operator, clock.now), { tickets: 1, devices: 1 });
  t.is((await redeem(current.code)).status, 401);
  const me = await app.request('GET', ME, { token: paired.body.data.access_token });
  t.is(me.status, 401);
  t.is(me.body.data.reason, 'device_revoked');
  t.like((await listReviewTickets(knex, clock.now)).find((row) => row.username === reviewer.username), { state: 'revoked' });
  t.deepEqual(await revokeReviewTickets(knex, reviewer.id, operator, clock.now), { tickets: 0, devices: 0 });
});

test.serial('review tickets: a superuser needs force; inactive and non-staff users get none; days are bounded', async (t) => {
  const knex = app.database.knex;
  const admin = await staffUser(app, { is_superuser: true });
  await t.throwsAsync(issueReviewTicket(knex, admin.id, { actor: operator }, clock.now), { message: /superuser.*--force/ });
  const forced = await issueReviewTicket(knex, admin.id, { force: true, actor: operator }, clock.now);
  t.is((await redeem(forced.code)).status, 200);

  for (const change of [{ is_active: false }, { is_staff: false }]) {
    const user = await staffUser(app);
    await knex('staff_users').where({ id: user.id }).update(change);
    await t.throwsAsync(issueReviewTicket(knex, user.id, { actor: operator }, clock.now), { message: /not eligible/ });
    t.is((await knex('mobile_login_tickets').where({ user_id: user.id })).length, 0);
  }
  const user = await staffUser(app);
  for (const days of [0, 366, 1.5]) {
    await t.throwsAsync(issueReviewTicket(knex, user.id, { days, actor: operator }, clock.now), { message: /--days/ });
  }
});

test.serial('a review ticket of a user deactivated later is refused at redemption with 403', async (t) => {
  const knex = app.database.knex;
  const user = await staffUser(app);
  const { code } = await issueReviewTicket(knex, user.id, { actor: operator }, clock.now);
  await knex('staff_users').where({ id: user.id }).update({ is_active: false });
  const response = await redeem(code);
  t.is(response.status, 403);
  t.is(response.body.message, 'User account is not eligible for mobile access');
});
