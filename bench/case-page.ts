/**
 * The case page as a workbench (issue 36): the web change page of a case and its mobile detail,
 * for a case with 200 alerts and a 1,000-entry timeline (200 alerts, 500 changes with rationale,
 * 249 notes, 50 decisions with attachments, its opening), in a store of 400,000 financial events,
 * 20,000 alerts and 2,000 cases, read by a superuser (every part of the page shown). Budget: the
 * list's, p95 30 ms (bench/backoffice.ts). Server time from the Server-Timing header, client p95
 * beside it.
 */
import http from 'node:http';
import os from 'node:os';
import { createKnex } from '../src/db/knex.ts';
import { permissionCodenames } from '../src/app/registrations.ts';
import { startSession, SESSION_COOKIE } from '../src/modules/backoffice/web/session.ts';
import { issueLoginTicket } from '../src/modules/mobile/tickets.ts';
import { createUser } from '../src/modules/staff/service.ts';
import { serveBench, withOwnDatabase } from './bench-database.ts';
import { machineLine, writeSection } from './results.ts';

const EVENTS = 400_000;
const CUSTOMERS = 2000;
const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const WARMUP = 20;
const BUDGET_MS = 30;

function percentile(samples: number[], fraction: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))]!;
}
const ms = (value: number) => value.toFixed(2);

/** The store, every case with ten alerts, and the busy case (customer c-0) with its 1,000-entry timeline. */
export async function seedCasePage(db: ReturnType<typeof createKnex>, officerId: string): Promise<string> {
  await db('events').insert({ slug: 'payment', name: 'Payment', type: 1 });
  await db('rules').insert(
    Array.from({ length: 30 }, (_, index) => ({ code: `R${index}`, name: `Rule number ${index}`, target: 'financial', expression: '{"==":[1,1]}', score: 10, updated_by: 'bench' })),
  );
  await db.raw(`
    insert into customers (id, customer_ref, first_name, last_name, birth_date, nationality, raw, score, decision, sanction_score, created_by, updated_by)
    select gen_random_uuid(), 'c-' || i, 'First' || i, 'Last' || i, date '1980-01-01' + i, 'DE', '{}', i % 100, 'REVIEW', 0, 'bench', 'bench'
    from generate_series(0, ${CUSTOMERS - 1}) as i`);
  await db.raw(`
    insert into financial_transactions (id, transaction_ref, customer_id, customer_ref, event_slug, amount, currency, io_type, event_date,
      destination_ref, payment_method, raw, score, decision, rule_check, log_id, created_by, updated_by)
    select gen_random_uuid(), 'tx-' || i, c.id, c.customer_ref, 'payment', (i % 100000) / 10.0 + 1, 'EUR', i % 2, now() - (i || ' minutes')::interval,
      'IBAN-' || i, 'card', '{}', 60, 'REVIEW', true, gen_random_uuid(), 'bench', 'bench'
    from generate_series(0, ${EVENTS - 1}) as i
    join (select id, customer_ref, row_number() over (order by customer_ref) - 1 as n from customers) c on c.n = i % ${CUSTOMERS}`);
  // Ten alerts per customer (the busy customer's 200), each with its execution log of three rules.
  await db.raw(`
    insert into execution_logs (id, target, record_id, record_ref, score, decision, matched_rules, rule_version_set, data_context, duration_us, actor)
    select t.log_id, 'financial', t.id, t.transaction_ref, 60, 'REVIEW',
      jsonb_build_array(jsonb_build_object('code', 'R1', 'version', 1, 'score', 30, 'decision', null), jsonb_build_object('code', 'R2', 'version', 1, 'score', 20, 'decision', null),
        jsonb_build_object('code', 'R3', 'version', 1, 'score', 10, 'decision', null)),
      null, '{"transaction": {"amount": 100}, "customer": {}, "aggregates": {}, "event": {}}', 10, 'bench'
    from (select f.*, row_number() over (partition by f.customer_id order by f.event_date desc) as n from financial_transactions f) t
    where t.n <= case when t.customer_ref = 'c-0' then 200 else 10 end`);
  await db.raw(`insert into cases (customer_id, priority, alert_count, opened_at) select id, 60, 0, now() - interval '30 days' from customers order by customer_ref`);
  await db.raw(`
    insert into alerts (case_id, customer_id, target, record_id, record_ref, log_id, kind, score, decision, rule_codes, created_at)
    select c.id, l_cust.customer_id, 'financial', l.record_id, l.record_ref, l.id, 'rules', 60, 'REVIEW', '{R1,R2,R3}', now() - interval '20 days' + (random() * interval '19 days')
    from execution_logs l join financial_transactions l_cust on l_cust.id = l.record_id join cases c on c.customer_id = l_cust.customer_id`);
  await db.raw(`update cases set alert_count = (select count(*) from alerts where alerts.case_id = cases.id)`);
  const busy = (await db('cases as c').join('customers as cu', 'cu.id', 'c.customer_id').where('cu.customer_ref', 'c-0').first('c.id')) as { id: string };
  await db.raw(
    `insert into case_history (case_id, user_id, actor, changes, rationale, created_at)
     select ?, ?, 'officer', jsonb_build_object('status', jsonb_build_array('open', 'in_review'), 'flagged', jsonb_build_array(false, true)),
       'Rationale number ' || i, now() - interval '19 days' + i * interval '30 minutes'
     from generate_series(1, 500) as i`,
    [busy.id, officerId],
  );
  await db.raw(
    `insert into case_notes (case_id, author_id, author, body, created_at)
     select ?, ?, 'officer', 'A note of some length about what the officer found, number ' || i, now() - interval '18 days' + i * interval '40 minutes'
     from generate_series(1, 249) as i`,
    [busy.id, officerId],
  );
  await db.raw(
    `insert into compliance_decisions (target_model, target_id, decision, score, original_score, original_decision, description, attachments, case_id, actor_id, actor, created_at)
     select 'financialevent', a.record_id, 'ACCEPT', 10, 60, 'REVIEW', 'Documented income', '[{"name": "payslip.pdf", "content_type": "application/pdf", "size": 20480, "sha256": "x", "path": "x"}]',
       ?, ?, 'officer', a.created_at + interval '1 hour'
     from (select * from alerts where case_id = ? order by created_at limit 50) a`,
    [busy.id, officerId, busy.id],
  );
  await db.raw('vacuum analyze');
  return busy.id;
}

export async function benchCasePage(): Promise<void> {
  await withOwnDatabase('case', async (db, url) => {
    const operator = { actor: { type: 'operator' as const, id: 'bench' }, known: new Set(permissionCodenames()) };
    const user = await createUser(db, { username: 'officer', full_name: 'Olga Officer', password: 'a sturdy bench passphrase', is_superuser: true }, operator);
    const seeding = performance.now();
    const caseId = await seedCasePage(db, user.id);
    const entries = Number(
      ((await db.raw(
        `select (select count(*) from alerts where case_id = $1) + (select count(*) from case_history where case_id = $1) + (select count(*) from case_notes where case_id = $1)
           + (select count(*) from compliance_decisions where case_id = $1) + 1 as n`.replace(/\$1/g, '?'),
        [caseId, caseId, caseId, caseId],
      )) as { rows: { n: string }[] }).rows[0]!.n,
    );
    console.log(`seeded in ${((performance.now() - seeding) / 1000).toFixed(1)} s; the busy case has ${entries} timeline entries`);
    const service = await serveBench(db, url);
    const base = service.base;
    const lines: string[] = [];
    try {
      const ticket = (await issueLoginTicket(db, user.id)).qr.ticket;
      const paired = (await (await fetch(`${base}/api/mobile/auth/qr/`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ ticket, device_name: 'bench', platform: 'other', app_version: '1' }),
      })).json()) as { data: { access_token: string } };
      const bearer = { authorization: `Bearer ${paired.data.access_token}` };
      const { cookieValue } = await startSession(db, user.id);
      const cookie = { cookie: `${SESSION_COOKIE}=${cookieValue}` };
      const web = await timeHttp(`${base}/admin/engine/watchlist/${caseId}/change/`, cookie);
      const mobile = await timeHttp(`${base}/api/mobile/data/engine/watchlist/${caseId}/?include_inlines=1`, bearer);
      const older = await timeHttp(`${base}/api/mobile/data/engine/watchlist/${caseId}/timeline/?page=10`, bearer);
      lines.push(
        `Machine: ${machineLine()}. ${EVENTS.toLocaleString('en')} financial events over ${CUSTOMERS.toLocaleString('en')} customers, one case each with 10 alerts; the measured case has 200 alerts and a ${entries.toLocaleString('en')}-entry timeline (200 alerts, 500 changes with rationale, 249 notes, 50 decisions with an attachment, its opening). Read by a superuser, so every part is drawn. ${RUNS} runs after ${WARMUP} warm-up, one client at a time; load average ${os.loadavg()[0]!.toFixed(1)} at the end.`,
        '',
        '| page | server p50 / p95 | client p95 | budget p95 |',
        '|---|---|---|---|',
        `| web case page (evidence: the newest 50 of its 200 alerted records; the newest 100 timeline entries; form, inlines) | ${web.server} | ${web.client} | ${BUDGET_MS} ms |`,
        `| mobile case detail with inlines (timeline and evidence blocks) | ${mobile.server} | ${mobile.client} | ${BUDGET_MS} ms |`,
        `| mobile timeline, page 10 (the oldest entries) | ${older.server} | ${older.client} | ${BUDGET_MS} ms |`,
        '',
        'Server time from the Server-Timing header (the handler, the page rendered, body serialisation excluded). Command: `npm run bench case-page`.',
      );
    } finally {
      await service.close();
    }
    const report = lines.join('\n');
    console.log(report);
    await writeSection('case-page', `## Case page with 200 alerts and a 1,000-entry timeline (\`npm run bench case-page\`)\n\n${report}`);
  });

  async function timeHttp(address: string, headers: Record<string, string>): Promise<{ server: string; client: string }> {
    const probe = await fetch(address, { headers });
    if (probe.status !== 200) throw new Error(`${address} answered ${probe.status}: ${(await probe.text()).slice(0, 300)}`);
    await probe.arrayBuffer();
    const server: number[] = [];
    const client: number[] = [];
    for (let index = 0; index < WARMUP + RUNS; index++) {
      const started = performance.now();
      const response = await fetch(address, { headers });
      await response.arrayBuffer();
      if (index < WARMUP) continue;
      client.push(performance.now() - started);
      server.push(Number(/dur=([\d.]+)/.exec(response.headers.get('server-timing') ?? '')?.[1]));
    }
    return { server: `${ms(percentile(server, 0.5))} / ${ms(percentile(server, 0.95))} ms`, client: `${ms(percentile(client, 0.95))} ms` };
  }
}
