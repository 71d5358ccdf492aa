import test from 'ava';
import { NotificationHub } from '../../src/db/notifications.ts';
import { JobQueue, QUEUES } from '../../src/jobs/queue.ts';
import { createLogger } from '../../src/logger.ts';
import { createTestDatabase, joinTestDatabase } from '../helpers/database.ts';

// Workers poll only every `pollingSeconds` (here a minute): a job sent in another process's
// transaction must still be taken at once, announced on the jobs channel at commit, and a burst
// must drain without one polling interval per job.
test('a job sent from another process is taken at once, and a burst drains, long before the polling interval', async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const logger = createLogger('silent');
  const settings = { jobTimeoutSeconds: 60, maintenanceSeconds: 60, pollingSeconds: 60 };
  const sender = await joinTestDatabase(database.url);
  const worker = await joinTestDatabase(database.url);
  const sending = await JobQueue.start(sender.knex, settings, logger);
  const hub = new NotificationHub(worker.knex, logger);
  const working = await JobQueue.start(worker.knex, settings, logger, hub);
  await hub.start();
  t.teardown(async () => {
    await working.stop();
    await sending.stop();
    await hub.stop();
    await worker.drop();
    await sender.drop();
  });
  const taken: number[] = [];
  let resolveAll!: () => void;
  const allTaken = new Promise<void>((resolve) => (resolveAll = resolve));
  await working.work<{ resultId: number }>(QUEUES.runReport, async (job) => {
    taken.push(job.data.resultId);
    if (taken.length === 6) resolveAll();
  });
  // The worker's first fetch found nothing; from now on it would wait a minute.
  await new Promise((resolve) => setTimeout(resolve, 500));
  const started = Date.now();
  await sender.knex.transaction((trx) => sending.runReport(trx, 1));
  while (taken.length < 1 && Date.now() - started < 10_000) await new Promise((resolve) => setTimeout(resolve, 20));
  t.deepEqual(taken, [1]);
  t.true(Date.now() - started < 5_000, `first job taken after ${Date.now() - started} ms`);

  const burst = Date.now();
  await sender.knex.transaction(async (trx) => {
    for (const id of [2, 3, 4, 5, 6]) await sending.runReport(trx, id);
  });
  await Promise.race([allTaken, new Promise((resolve) => setTimeout(resolve, 15_000))]);
  t.deepEqual([...taken].sort((a, b) => a - b), [1, 2, 3, 4, 5, 6]);
  t.true(Date.now() - burst < 10_000, `burst of five drained after ${Date.now() - burst} ms`);
});

// A retry is announced by no one: the process's one poll (every `pollingSeconds`, here one) finds
// it once its delay has passed and wakes its queue's workers, whose own polling is a minute apart.
test('a retry that no NOTIFY announces is taken soon after its delay, by the process\'s one poll', async (t) => {
  const database = await createTestDatabase();
  t.teardown(() => database.drop());
  const logger = createLogger('silent');
  const node = await joinTestDatabase(database.url);
  const hub = new NotificationHub(node.knex, logger);
  const queue = await JobQueue.start(node.knex, { jobTimeoutSeconds: 60, maintenanceSeconds: 60, pollingSeconds: 1 }, logger, hub);
  await hub.start();
  t.teardown(async () => {
    await queue.stop();
    await hub.stop();
    await node.drop();
  });
  const attempts: number[] = [];
  await queue.work<{ resultId: number }>(QUEUES.runReport, async (job) => {
    attempts.push(Date.now());
    if (job.attempt === 1) throw new Error('the first attempt fails');
  });
  await node.knex.transaction((trx) => queue.runReport(trx, 1));
  const started = Date.now();
  while (attempts.length < 2 && Date.now() - started < 30_000) await new Promise((resolve) => setTimeout(resolve, 50));
  t.is(attempts.length, 2);
  // The retry waits its delay (2 s, doubled at most once by pg-boss's backoff and jitter), then at most one poll.
  t.true(attempts[1]! - attempts[0]! < 10_000, `retried after ${attempts[1]! - attempts[0]!} ms`);
});
