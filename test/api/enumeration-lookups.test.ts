/**
 * Enumerations are looked up among their own members, never with `in` or `[]` on an object that
 * inherits Object.prototype: a report parameter or kind named __proto__, constructor or toString,
 * and an event type of that name, are refused like any other unknown name (the notification kind
 * is covered in notifications.test.ts).
 */
import test from 'ava';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { installClock, operator, pairDevice, staffUser } from '../helpers/mobile.ts';
import { defineEvent, EventInputError, type EventType } from '../../src/modules/events/service.ts';
import { resolveParameters } from '../../src/modules/reports/kinds.ts';

let app: TestApp;
let token: string;
const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf'];

test.before(async () => {
  app = await startTestApp();
  const clock = installClock(app);
  const user = await staffUser(app, { permissions: ['report.view_report', 'report.add_report', 'report.view_reportresult', 'transaction.view_financialevent'] });
  token = (await pairDevice(app, clock, user.id)).accessToken;
});
test.after.always(async () => {
  await app?.close();
});

test('report parameters named like Object.prototype members are 400 naming the parameter', async (t) => {
  for (const name of PROTOTYPE_NAMES) {
    // Written by hand: a JavaScript object literal would set the prototype instead of a "__proto__" key.
    const body = `{"name": "Proto", "kind": "transactions_above", "parameters": {${JSON.stringify(name)}: 5}}`;
    const response = await app.request('POST', '/api/mobile/data/report/report/', { token, body, headers: { 'content-type': 'application/json' } });
    t.is(response.status, 400, `${name}: ${response.text}`);
    t.false(response.body.status);
    const errors: { message: string }[] = response.body.data.errors?.parameters ?? [];
    t.true(errors.some((error) => error.message.startsWith(`${name} is not a parameter`)), `${name}: ${response.text}`);
  }
  t.is(await app.database.knex('reports').where({ name: 'Proto' }).first(), undefined);
  const fine = await app.request('POST', '/api/mobile/data/report/report/', { token, json: { name: 'Fine', kind: 'transactions_above', parameters: { threshold: 5 } } });
  t.is(fine.status, 201, fine.text);
});

test('resolveParameters refuses prototype names and unknown kinds, whatever the kind', (t) => {
  for (const name of PROTOTYPE_NAMES) {
    const { errors } = resolveParameters('transactions_above', JSON.parse(`{${JSON.stringify(name)}: 1}`));
    t.deepEqual(errors.length, 1, name);
    t.true(errors[0]!.startsWith(`${name} is not a parameter`), errors[0]);
    t.deepEqual(resolveParameters(name, {}).errors, [`Unknown report kind ${name}.`]);
  }
});

test('a report kind named like an Object.prototype member is a field error, not a 500', async (t) => {
  for (const kind of PROTOTYPE_NAMES) {
    const response = await app.request('POST', '/api/mobile/data/report/report/', { token, json: { name: 'Kind', kind, parameters: {} } });
    t.is(response.status, 400, `${kind}: ${response.text}`);
    t.truthy(response.body.data.errors.kind, response.text);
  }
});

test('an event type named like an Object.prototype member is refused', async (t) => {
  for (const type of [...PROTOTYPE_NAMES, '1', 1.5, 3]) {
    await t.throwsAsync(defineEvent(app.database.knex, { slug: 'proto-event', name: 'x', type: type as unknown as EventType, active: true }, operator), { instanceOf: EventInputError }, String(type));
  }
  t.is(await app.database.knex('events').where({ slug: 'proto-event' }).first(), undefined);
  t.like(await defineEvent(app.database.knex, { slug: 'proto-event', name: 'x', type: 1, active: true }, operator), { slug: 'proto-event', type: 1 });
});
