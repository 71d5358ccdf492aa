/**
 * The staff live socket across two service processes on one database: a socket logged in on
 * process B hears record changes and notifications caused through process A, and closes when its
 * device is revoked through A. Once through PostgreSQL LISTEN/NOTIFY, once through Redis (when
 * REDIS_URL is set).
 */
import type { ChildProcess } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { issueLoginTicket } from '../../src/modules/mobile/tickets.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { CLOSE_DEVICE_REVOKED } from '../../src/realtime/staff.ts';
import { createTestDatabase } from '../helpers/database.ts';
import { connectLive } from '../helpers/live.ts';
import { startService } from '../helpers/service.ts';

const redisUrl = process.env.REDIS_URL;
if (!redisUrl) console.log('live-two-processes: REDIS_URL is not set; only the PostgreSQL fan-out is tested.');

async function twoProcesses(t: import('ava').ExecutionContext, extra: Record<string, string>) {
  const database = await createTestDatabase();
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'warden-live-e2e-'));
  const children: ChildProcess[] = [];
  t.teardown(async () => {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((child) => new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)))));
    await database.drop();
    await fs.rm(dataDir, { recursive: true, force: true });
  });
  const env = { ...process.env, DATABASE_URL: database.url, PORT: '0', HOST: '127.0.0.1', WARDEN_DATA_DIR: dataDir, LOG_LEVEL: 'warn', ...extra };
  const [a, b] = await Promise.all([startService(env), startService(env)]);
  children.push(a.child, b.child);

  const user = await createUser(database.knex, { username: `live-${process.pid}`, password: null, permissions: ['report.view_report', 'report.add_report', 'report.view_reportresult', 'document.view_documentverificationsession'] }, {
    actor: { type: 'operator', id: 'test' },
    known: new Set(permissionCodenames()),
  });
  const { qr } = await issueLoginTicket(database.knex, user.id, new Date());
  const paired = (await (await fetch(`${a.url}/api/mobile/auth/qr/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ticket: qr.ticket, device_name: 'e2e', platform: 'ios' }),
  })).json()) as { data: { access_token: string } };
  const token = paired.data.access_token;

  const live = await connectLive(b.url);
  t.is((await live.login(token)).type, 'login');

  const created = await fetch(`${a.url}/api/mobile/data/report/report/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ name: 'Across', kind: 'verification_outcomes', parameters: {} }),
  });
  t.is(created.status, 201);
  const pk = String(((await created.json()) as { data: { object: { pk: unknown } } }).data.object.pk);
  const change = await live.next((frame) => frame.data?.type === 'recordChange', 30_000);
  t.deepEqual(change.data.data, { model: 'report.report', pk, operation: 'add' });

  const run = await fetch(`${a.url}/api/mobile/reports/${pk}/run/`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  t.is(run.status, 202);
  const notification = await live.next((frame) => frame.data?.type === 'notification', 60_000);
  t.like(notification.data.data, { kind: 'report_done', title: 'Report ready: Across' });

  await fetch(`${a.url}/api/mobile/auth/logout/`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
  t.is((await live.closed).code, CLOSE_DEVICE_REVOKED);
}

test.serial('PostgreSQL LISTEN/NOTIFY: record changes, notifications and revocations reach a socket on the other process', async (t) => {
  await twoProcesses(t, {});
});

(redisUrl ? test.serial : test.serial.skip)('Redis: the same across two processes with REDIS_URL set', async (t) => {
  await twoProcesses(t, { REDIS_URL: redisUrl! });
});
