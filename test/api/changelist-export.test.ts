/**
 * CSV export of a changelist (GET /admin/<app>/<model>/export.csv): the list's filters, search and
 * ordering, the columns the viewer may see (no hidden fields, no joined column of a model they may
 * not view), formula cells quoted, 400 and 403 as the changelist, one audit row per export, and a
 * 20,000-row export streamed without the process holding it.
 */
import { randomUUID } from 'node:crypto';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import test from 'ava';
import { permissionCodenames } from '../../src/app/registrations.ts';
import { createUser } from '../../src/modules/staff/service.ts';
import { adminClient, CookieJar } from '../helpers/admin.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const PASSWORD = 'violet-harbour-lantern-42';
const BIG = 20_000;
let app: TestApp;
const operator = { actor: { type: 'operator' as const, id: 'test' }, known: new Set(permissionCodenames()) };

test.before(async () => {
  app = await startTestApp();
  const db = app.database.knex;
  await createUser(db, { username: 'root', password: PASSWORD, is_superuser: true }, operator);
  await createUser(db, { username: 'viewer', password: PASSWORD, permissions: ['customer.view_customer'] }, operator);
  await createUser(db, { username: 'alerts', password: PASSWORD, permissions: ['engine.view_alert'] }, operator);
  await createUser(db, { username: 'auditor', password: PASSWORD, permissions: ['customer.view_customer'] }, operator);
  await createUser(db, { username: 'nobody', password: PASSWORD, permissions: ['mobile.view_device'] }, operator);
  const customers = Array.from({ length: 30 }, (_, index) => ({
    id: randomUUID(),
    customer_ref: `cus-${String(index).padStart(3, '0')}`,
    first_name: index === 4 ? '=HYPERLINK("http://evil","x")' : index === 5 ? '@SUM(A1)' : `First${index}`,
    last_name: index === 6 ? 'O"Brien, Jr' : `Last${index}`,
    raw: '{}',
    score: index,
    decision: index % 3 === 0 ? 'REVIEW' : 'ACCEPT',
    created_by: 't',
    updated_by: 't',
    created_at: new Date(Date.UTC(2026, 0, 10, 23, 30, 15, 250) - index * 60_000),
  }));
  await db.batchInsert('customers', customers, 200);
  const customer = customers[1]!;
  await db('alerts').insert({ customer_id: customer.id, target: 'financial', record_id: randomUUID(), record_ref: 'tx-1', score: 80, decision: 'REVIEW' });
});
test.after.always(async () => {
  await app?.close();
});

async function as(username: string) {
  const client = adminClient(app.url);
  const login = await client.login(username, PASSWORD);
  if (login.status !== 302) throw new Error(`login failed: ${login.status}`);
  return client;
}

/** RFC 4180 lines (no quoted newlines in these fixtures) split into cells. */
function parse(text: string): string[][] {
  return text
    .split('\r\n')
    .filter(Boolean)
    .map((line) => {
      const cells: string[] = [];
      let cell = '';
      let quoted = false;
      for (let index = 0; index < line.length; index++) {
        const character = line[index]!;
        if (quoted) {
          if (character === '"' && line[index + 1] === '"') (cell += '"'), index++;
          else if (character === '"') quoted = false;
          else cell += character;
        } else if (character === '"') quoted = true;
        else if (character === ',') cells.push(cell), (cell = '');
        else cell += character;
      }
      cells.push(cell);
      return cells;
    });
}

test('the export holds the list as filtered, searched and sorted, with labelled columns and stored values', async (t) => {
  const viewer = await as('viewer');
  const response = await viewer.get('/admin/customer/customer/export.csv?decision__exact=REVIEW&o=6&score__range__gte=3');
  t.is(response.status, 200);
  t.regex(response.headers.get('content-type') ?? '', /^text\/csv/);
  t.regex(response.headers.get('content-disposition') ?? '', /attachment; filename="customer-customer-.*\.csv"/);
  const [header, ...rows] = parse(response.text);
  t.deepEqual(header, ['Reference', 'First name', 'Last name', 'Company', 'Nationality', 'Score', 'Decision', 'Sanction score', 'Created']);
  // REVIEW is every third; score >= 3; ordered by score ascending (column 6).
  t.deepEqual(rows.map((row) => row[0]), ['cus-003', 'cus-006', 'cus-009', 'cus-012', 'cus-015', 'cus-018', 'cus-021', 'cus-024', 'cus-027']);
  t.is(rows[0]![6], 'REVIEW', 'choices by stored value');
  t.is(rows[0]![8], '2026-01-10T23:27:15Z', 'times in UTC to the second');
  t.is(rows[1]![2], 'O"Brien, Jr');

  const descending = parse((await viewer.get('/admin/customer/customer/export.csv?decision__exact=REVIEW&o=-6')).text).slice(1);
  t.deepEqual(descending.map((row) => row[0]).slice(0, 2), ['cus-027', 'cus-024']);
  const searched = parse((await viewer.get('/admin/customer/customer/export.csv?q=cus-01')).text).slice(1);
  t.is(searched.length, 10);
  t.true(searched.every((row) => row[0]!.startsWith('cus-01')));
  // Default ordering (-created_at): the newest first, as the list.
  const all = parse((await viewer.get('/admin/customer/customer/export.csv?q=cus-')).text).slice(1);
  t.is(all.length, 30);
  t.is(all[0]![0], 'cus-000');
});

test('cells a spreadsheet would run as formulas are quoted; the raw CSV escapes quotes and commas', async (t) => {
  const root = await as('root');
  const response = await root.get('/admin/customer/customer/export.csv?q=cus-00');
  const rows = parse(response.text).slice(1);
  t.is(rows.find((row) => row[0] === 'cus-004')![1], `'=HYPERLINK("http://evil","x")`);
  t.is(rows.find((row) => row[0] === 'cus-005')![1], `'@SUM(A1)`);
  t.true(response.text.includes(`"'=HYPERLINK(""http://evil"",""x"")"`));
  t.true(response.text.includes('"O""Brien, Jr"'));
});

test('hidden fields never appear; a joined column of a model the viewer may not view is left out', async (t) => {
  const root = await as('root');
  const users = await root.get('/admin/auth/user/export.csv');
  t.is(users.status, 200);
  t.false(/password/i.test(users.text));
  t.false(users.text.includes('$argon2'));

  const withCustomer = parse((await root.get('/admin/engine/alert/export.csv')).text);
  t.true(withCustomer[0]!.includes('Customer'));
  t.true(withCustomer.flat().includes('cus-001'));
  const alertsOnly = await as('alerts');
  const without = await alertsOnly.get('/admin/engine/alert/export.csv');
  t.is(without.status, 200);
  const parsed = parse(without.text);
  t.false(parsed[0]!.includes('Customer'));
  t.false(without.text.includes('cus-001'));
  t.is(parsed.length, 2);
  t.is(parsed[0]!.length, parsed[1]!.length);
  // Nor may they sort by it (column 2 is the customer): the changelist's 400.
  t.is((await alertsOnly.get('/admin/engine/alert/export.csv?o=2')).status, 400);
});

test('no view permission is a 403; bad parameters are the changelist 400 page; unknown models 404', async (t) => {
  const nobody = await as('nobody');
  t.is((await nobody.get('/admin/customer/customer/export.csv')).status, 403);
  const viewer = await as('viewer');
  for (const query of ['o=99', 'o=abc', 'nope__exact=1', 'score__range__gte=abc', 'created_at__range__gte=yesterday', 'q=%00']) {
    const response = await viewer.get(`/admin/customer/customer/export.csv?${query}`);
    t.is(response.status, 400, query);
    t.regex(response.headers.get('content-type') ?? '', /text\/html/, query);
    t.true(response.text.includes('errornote'), query);
  }
  t.is((await viewer.get('/admin/nothing/here/export.csv')).status, 404);
  t.is((await adminClient(app.url).get('/admin/customer/customer/export.csv')).status, 302, 'anonymous: to the login page');
});

test('the changelist links to the export with its current filters, search and ordering', async (t) => {
  const viewer = await as('viewer');
  const page = await viewer.get('/admin/customer/customer/?decision__exact=REVIEW&q=cus&o=-6&p=1');
  const link = /href="([^"]*export\.csv[^"]*)"/.exec(page.text)?.[1]?.replace(/&amp;/g, '&');
  t.truthy(link);
  const url = new URL(link!, app.url);
  t.is(url.pathname, '/admin/customer/customer/export.csv');
  t.is(url.searchParams.get('decision__exact'), 'REVIEW');
  t.is(url.searchParams.get('q'), 'cus');
  t.is(url.searchParams.get('o'), '-6');
});

test('each export writes one audit row with its row count and query', async (t) => {
  const db = app.database.knex;
  const mine = { content_type: 'customer.customer', object_repr: 'CSV export', actor: 'auditor' };
  const before = Number((await db('admin_log_entries').where(mine).count('* as count'))[0]!.count);
  const auditor = await as('auditor');
  await auditor.get('/admin/customer/customer/export.csv?decision__exact=REVIEW');
  // The row is written as the stream ends: give the response's end a moment.
  let entries: { action_flag: number; object_id: string; actor: string; change: { export: { rows: number; query: string; complete: boolean } } }[] = [];
  for (let attempt = 0; attempt < 50; attempt++) {
    entries = await db('admin_log_entries').where(mine).orderBy('id');
    if (entries.length > before) break;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.is(entries.length, before + 1);
  const entry = entries.at(-1)!;
  t.is(entry.action_flag, 2);
  t.is(entry.object_id, '');
  t.is(entry.actor, 'auditor');
  t.deepEqual(entry.change.export, { rows: 10, query: 'decision__exact=REVIEW', complete: true });
});

test.serial('a 20,000-row export streams without the process holding it', async (t) => {
  const db = app.database.knex;
  await db.raw(
    `insert into customers (id, customer_ref, first_name, last_name, raw, score, decision, created_by, updated_by, created_at)
     select gen_random_uuid(), 'big-' || lpad(n::text, 6, '0'), 'First name of a rather long row ' || n, repeat('x', 1000), '{}', n % 100, 'ACCEPT', 't', 't', now() - n * interval '1 second'
     from generate_series(1, ${BIG}) as n`,
  );
  const jar = new CookieJar();
  const login = await adminClient(app.url, jar).login('viewer', PASSWORD);
  t.is(login.status, 302);
  // Read the body as it comes, keeping only a count: the test holds nothing either.
  // Live heap, not garbage waiting for a collection: a full collection before each sample.
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const baseline = process.memoryUsage().heapUsed;
  let sampled = 0;
  let peak = baseline;
  const response = await fetch(`${app.url}/admin/customer/customer/export.csv?q=big-`, { headers: { cookie: jar.header() } });
  t.is(response.status, 200);
  let bytes = 0;
  let lines = 0;
  const reader = response.body!.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.length;
    for (const byte of value) if (byte === 10) lines++;
    if (bytes - sampled > 500_000) {
      sampled = bytes;
      gc();
      peak = Math.max(peak, process.memoryUsage().heapUsed);
    }
  }
  t.is(lines, BIG + 1);
  t.true(bytes > 20_000_000, `${bytes} bytes`);
  const growth = peak - baseline;
  t.log(`${bytes} bytes, heap growth ${(growth / 1e6).toFixed(1)} MB`);
  // Held whole, the export's rows would be several times its bytes; streamed, the heap holds a batch or two.
  t.true(growth < bytes / 3, `heap grew ${growth} bytes for a ${bytes}-byte export`);
});

test.serial('a client that goes away mid-export frees the connection; the audit row says how far it got', async (t) => {
  const db = app.database.knex;
  const jar = new CookieJar();
  t.is((await adminClient(app.url, jar).login('auditor', PASSWORD)).status, 302);
  const controller = new AbortController();
  const response = await fetch(`${app.url}/admin/customer/customer/export.csv?q=big-`, { headers: { cookie: jar.header() }, signal: controller.signal });
  t.is(response.status, 200);
  const reader = response.body!.getReader();
  await reader.read();
  controller.abort();
  await reader.read().catch(() => undefined);
  let entry: { change: { export: { rows: number; complete: boolean } } } | undefined;
  for (let attempt = 0; attempt < 100 && !entry; attempt++) {
    entry = await db('admin_log_entries').where({ actor: 'auditor', object_repr: 'CSV export' }).whereRaw(`change->'export'->>'complete' = 'false'`).first();
    if (!entry) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.truthy(entry, 'the aborted export is audited');
  t.true(entry!.change.export.rows < BIG);
  // A HEAD request never reads the body: the export still ends and is audited.
  const head = await fetch(`${app.url}/admin/customer/customer/export.csv?q=big-0000`, { method: 'HEAD', headers: { cookie: jar.header() } });
  t.is(head.status, 200);
  let headEntry: unknown;
  for (let attempt = 0; attempt < 100 && !headEntry; attempt++) {
    headEntry = await db('admin_log_entries').where({ actor: 'auditor', object_repr: 'CSV export' }).whereRaw(`change->'export'->>'query' = 'q=big-0000'`).first();
    if (!headEntry) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  t.truthy(headEntry, 'the HEAD export is audited and its connection released');
  // The cursor's transaction was rolled back: no session is left holding it.
  const [{ count }] = (await db.raw(`select count(*)::int as count from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`)).rows;
  t.is(count, 0);
});

test('every registered model exports for a superuser: a header of its visible columns, one line per listed row', async (t) => {
  const root = await as('root');
  for (const model of app.context.backoffice.site.models.values()) {
    const response = await root.get(`/admin/${model.appLabel}/${model.model}/export.csv`);
    t.is(response.status, 200, model.key);
    const [header, ...rows] = parse(response.text);
    t.is(header!.length, model.columns.filter((column) => !model.fields?.[column.name]?.hidden).length, model.key);
    for (const row of rows) t.is(row.length, header!.length, model.key);
  }
});
