import test from 'ava';
import knexFactory from 'knex';
import { createKnex } from '../../src/db/knex.ts';
import { createTestDatabase } from '../helpers/database.ts';

// The API shows every time in UTC without an offset, and clients send such times back in filters
// and forms: the service's sessions must read them as UTC even where the server's (or the
// database's) own time zone is another one.
test("the service's sessions run in UTC whatever the database's default time zone", async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const name = new URL(database.url).pathname.slice(1);
  await database.knex.raw(`alter database "${name}" set timezone to 'America/New_York'`);
  const plain = knexFactory({ client: 'pg', connection: database.url, pool: { min: 0, max: 1 } });
  const service = createKnex(database.url, 1);
  t.teardown(async () => {
    await plain.destroy();
    await service.destroy();
  });
  // The database's setting takes for a plain session; the service's sessions stay in UTC.
  t.is((await plain.raw('show timezone')).rows[0].TimeZone, 'America/New_York');
  t.is((await service.raw('show timezone')).rows[0].TimeZone, 'UTC');
  const { rows } = await service.raw('select ?::timestamptz as at', ['2026-11-23T13:00:00']);
  t.is((rows[0].at as Date).toISOString(), '2026-11-23T13:00:00.000Z');
});
