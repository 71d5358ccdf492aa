/**
 * Every door to writing a case note (the case page's form, the generic web add page, the mobile
 * data API; the MCP tools have no create): each refuses a writer who may not view the case, each
 * lets an officer write one, and each sets the author from the session, never from the form.
 */
import test from 'ava';
import { randomUUID } from 'node:crypto';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { adminClient, csrfTokenIn } from '../helpers/admin.ts';
import { installClock, pairDevice, staffUser } from '../helpers/mobile.ts';

const PASSWORD = 'correct horse battery staple 42';
let app: TestApp;
let caseId: string;

test.before(async () => {
  app = await startTestApp();
  const db = app.database.knex;
  const customerId = randomUUID();
  await db('customers').insert({ id: customerId, customer_ref: 'door-1', raw: '{}', score: 0, decision: 'ACCEPT', created_by: 't', updated_by: 't' });
  [{ id: caseId }] = await db('cases').insert({ customer_id: customerId, priority: 10 }).returning('id');
});
test.after.always(async () => {
  await app?.close();
});

async function doors(permissions: string[]) {
  const user = await staffUser(app, { permissions, password: PASSWORD });
  await app.database.knex('staff_users').where({ id: user.id }).update({ is_staff: true });
  const web = adminClient(app.url);
  await web.login(user.username, PASSWORD);
  const token = (await pairDevice(app, installClock(app), user.id)).accessToken;
  // The session's form token (the same on every page); the officer's writes below show it is accepted.
  const csrf = async () => csrfTokenIn((await web.get('/admin/')).text);
  return {
    user,
    casePage: async (body: string) => web.post(`/admin/engine/watchlist/${caseId}/note/`, { csrfmiddlewaretoken: await csrf(), body }),
    addPage: async (body: string) => web.post('/admin/engine/casenote/add/', { csrfmiddlewaretoken: await csrf(), case_id: caseId, body, author: 'someone-else' }),
    mobile: (body: string) => app.request('POST', '/api/mobile/data/engine/casenote/', { token, json: { case_id: caseId, body, author: 'someone-else' } }),
  };
}

test.serial('a writer who may not view the case is refused at every door, and nothing is written', async (t) => {
  const writer = await doors(['engine.add_casenote']);
  t.is((await writer.casePage('through the case page')).status, 403);
  t.is((await writer.addPage('through the add page')).status, 403);
  t.is((await writer.mobile('through the mobile API')).status, 403);
  t.is(Number((await app.database.knex('case_notes').count('* as n').first())!.n), 0);
});

test.serial('an officer writes through every door; the author is whoever wrote, whatever the form says', async (t) => {
  const officer = await doors(['engine.view_watchlist', 'engine.add_casenote', 'engine.view_casenote']);
  t.is((await officer.casePage('through the case page')).status, 302);
  t.true([200, 302].includes((await officer.addPage('through the add page')).status));
  t.is((await officer.mobile('through the mobile API')).status, 201);
  const notes = await app.database.knex('case_notes').orderBy('created_at');
  t.deepEqual(notes.map((note) => note.body), ['through the case page', 'through the add page', 'through the mobile API']);
  t.true(notes.every((note) => note.author === officer.user.username && note.author_id === officer.user.id));
});
