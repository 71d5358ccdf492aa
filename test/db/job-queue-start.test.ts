import test from 'ava';
import { JobQueue, QUEUES } from '../../src/jobs/queue.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestDatabase, joinTestDatabase } from '../helpers/database.ts';

// Two Warden nodes starting against a database that has no job queues yet once failed with a
// PostgreSQL deadlock while both created the queues' partition tables.
test('several processes starting together all get their job queues', async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  await database.knex.raw('drop schema if exists pgboss cascade');
  const pools = await Promise.all([1, 2, 3, 4].map(() => joinTestDatabase(database.url)));
  const settings = { jobTimeoutSeconds: 60, maintenanceSeconds: 60, pollingSeconds: 2 };
  const logger = createLogger('silent');
  const queues = await Promise.all(pools.map((pool) => JobQueue.start(pool.knex, settings, logger)));
  const { rows } = await database.knex.raw<{ rows: { count: number }[] }>('select count(*)::int as count from pgboss.queue');
  t.is(rows[0]?.count, Object.keys(QUEUES).length);
  for (const queue of queues) await queue.stop();
  for (const pool of pools) await pool.drop();
});
