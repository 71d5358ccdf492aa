/**
 * `warden demo`: fills an empty installation with a seeded, realistic data set, so that a first
 * run shows the product: a merchant credential, events, the example rules, a small invented
 * sanctions and PEP list (demo/), customers and a history of transactions ingested through the
 * service's own batch functions (so scores, alerts, cases and screening hits are real), cases in
 * every status worked through the back-office write chain, KYC sessions, two staff users in groups
 * and an approval policy on transaction decisions.
 *
 * The data (names, amounts, dates relative to now, patterns) follows --seed; the secrets (API
 * secret, passwords) are random every time and printed once.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Actor } from '../actor.ts';
import { loadConfig } from '../config.ts';
import type { AppContext } from '../context.ts';
import type { Database } from '../db/database.ts';
import { createLogger } from '../logger.ts';
import { permissionCodenames } from '../app/registrations.ts';
import { setApprovalPolicies } from '../app/policies.ts';
import { ValidationFailed } from '../modules/backoffice/errors.ts';
import { saveObject } from '../modules/backoffice/write.ts';
import { upsertCustomers } from '../modules/customer/service.ts';
import { defineEvent } from '../modules/events/service.ts';
import { defineFlow } from '../modules/kyc/flows.ts';
import { closeSession, createSession, markArtifactSucceeded } from '../modules/kyc/sessions.ts';
import { createCredential } from '../modules/merchant/service.ts';
import { loadPrincipal } from '../modules/staff/principal.ts';
import { createGroup, createUser } from '../modules/staff/service.ts';
import { FINANCIAL, NON_FINANCIAL, upsertTransactions } from '../modules/transaction/service.ts';
import { buildContext } from '../server.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';
import { rulesCommand } from './rules.ts';
import { sanctionsCommand } from './sanctions.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const DEMO_FILES = {
  rules: path.join(ROOT, 'rules/examples/aml-fraud.json'),
  sanctions: path.join(ROOT, 'demo/sdn.csv'),
  peps: path.join(ROOT, 'demo/pep.jsonl'),
};

const DAY = 86_400_000;
const HOUR = 3_600_000;
const MINUTE = 60_000;
/** Records per call of the batch functions: what one HTTP request may carry. */
const BATCH = 500;

const EVENTS = [
  { slug: 'registration', name: 'Registration', type: 0 },
  { slug: 'deposit', name: 'Deposit', type: 1 },
  { slug: 'withdrawal', name: 'Withdrawal', type: 1 },
  { slug: 'transfer', name: 'Transfer', type: 1 },
  { slug: 'card_payment', name: 'Card payment', type: 1 },
  { slug: 'login', name: 'Login', type: 2 },
  { slug: 'password_change', name: 'Password change', type: 2 },
  { slug: 'email_change', name: 'E-mail change', type: 2 },
] as const;

const ANALYST_PERMISSIONS = [
  'customer.view_customer', 'customer.change_customer',
  'transaction.view_financialevent', 'transaction.change_financialevent',
  'transaction.view_nonfinancialevent', 'transaction.change_nonfinancialevent',
  'engine.view_alert', 'engine.change_alert', 'engine.view_watchlist', 'engine.change_watchlist',
  'engine.view_casenote', 'engine.add_casenote', 'engine.view_compliancedecision', 'engine.add_compliancedecision',
  'engine.view_executionlog', 'engine.change_executionlog', 'engine.view_rule', 'engine.view_event',
  'screening.view_sanctionentry', 'screening.view_screeninghit', 'screening.change_screeninghit',
  'document.view_flow', 'document.view_documentverificationsession', 'document.view_artifact',
  'approval.view_approvalrequest', 'approval.view_pendingapprovalrequest',
  'report.view_report', 'report.view_reportresult', 'notification.view_notification',
];
const CHECKER_PERMISSIONS = [
  'customer.view_customer', 'transaction.view_financialevent', 'transaction.view_nonfinancialevent',
  'engine.view_alert', 'engine.view_watchlist', 'engine.view_casenote', 'engine.view_compliancedecision', 'engine.view_executionlog',
  'screening.view_screeninghit', 'approval.view_approvalpolicy', 'approval.view_approvalrequest', 'approval.view_pendingapprovalrequest',
  'notification.view_notification',
];

const FIRST_NAMES = [
  'Anna', 'Lukas', 'Sofia', 'Jonas', 'Elena', 'Mateo', 'Clara', 'Noah', 'Lea', 'Tomas', 'Ines', 'Felix', 'Marta', 'Oskar', 'Nora',
  'Pablo', 'Ida', 'Emil', 'Greta', 'Hugo', 'Lina', 'Milan', 'Alba', 'Jakub', 'Zoe', 'Rafael', 'Mila', 'Anton', 'Elif', 'Kerem',
  'Sara', 'David', 'Julia', 'Marek', 'Chiara', 'Luca', 'Freya', 'Nils', 'Amelie', 'Victor',
];
const LAST_NAMES = [
  'Brenner', 'Castell', 'Dunmore', 'Ekholm', 'Fairbank', 'Gravina', 'Hollis', 'Ivarsen', 'Jansky', 'Kellerman', 'Lindqvist', 'Marchetti',
  'Norwood', 'Ostrander', 'Pellegrin', 'Quarles', 'Rosendahl', 'Sabatier', 'Tennant', 'Ulvaeus', 'Vasquez-Roe', 'Whitcombe', 'Yilmazer',
  'Zorrilla', 'Abernethy', 'Bergmark', 'Calloway', 'Delmonte', 'Eastwick', 'Falkner', 'Gostisha', 'Harrow', 'Iglesias-Mar', 'Jorunn',
  'Kastrati', 'Lowell', 'Merriweather', 'Nakashian', 'Oberlin', 'Pridmore',
];
const COUNTRIES = ['DEU', 'FRA', 'NLD', 'ESP', 'ITA', 'POL', 'AUT', 'BEL', 'SWE', 'PRT', 'GBR', 'IRL', 'TUR', 'CZE', 'DNK'];
const HIGH_RISK = ['IRN', 'SYR', 'MMR', 'YEM'];
const OCCUPATIONS = ['engineer', 'teacher', 'nurse', 'sales manager', 'student', 'accountant', 'designer', 'shop owner', 'driver', 'consultant', 'retired', 'developer'];
const DOMAINS = ['example.com', 'example.org', 'example.net'];
const DISPOSABLE = ['mailinator.com', 'guerrillamail.com', 'yopmail.com'];
const AGENTS = ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)', 'Mozilla/5.0 (Linux; Android 14; Pixel 8)', 'Mozilla/5.0 (Windows NT 10.0; Win64; x64)', 'Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4)'];

/** Sanctions entries (demo/sdn.csv) and PEPs (demo/pep.jsonl) that demo customers carry the names of. */
const SANCTIONED = [
  { first: 'Arkady Semyonovich', last: 'Varnokov', nationality: 'RUS', birth: '1968-02-03' },
  { first: 'Farid Nouri', last: 'Qassemi', nationality: 'IRN', birth: '1974-05-19' },
  { first: 'Yevgenia Pavlovna', last: 'Korolenko', nationality: 'BLR', birth: '1985-08-22' },
  { first: 'Benedikt', last: 'Osterwald', nationality: 'AUT', birth: '1957-11-11' },
  { first: 'Irina Olegovna', last: 'Nakhimova', nationality: 'RUS', birth: '1982-06-30' },
  { first: 'Hennig', last: 'Grauwacke', nationality: 'DEU', birth: '1990-05-05' },
];
const PEPS = [
  { first: 'Valentina', last: 'Ostrowska', nationality: 'POL', birth: '1966-04-12' },
  { first: 'Marisol', last: 'Quintanilla', nationality: 'ESP', birth: '1971-09-03' },
  { first: 'Gregor', last: 'Vantongeren', nationality: 'NLD', birth: '1955-01-28' },
  { first: 'Henrik', last: 'Aalberg', nationality: 'NOR', birth: '1959-03-14' },
  { first: 'Ayla', last: 'Demirkaya', nationality: 'TUR', birth: '1978-10-02' },
  { first: 'Katarzyna', last: 'Wielgosz', nationality: 'POL', birth: '1980-07-21' },
];

/** mulberry32: small, fast and the same on every platform. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Profile = 'normal' | 'sanctioned' | 'pep' | 'high_risk' | 'structuring' | 'big' | 'velocity' | 'hopper' | 'pass_through' | 'takeover' | 'risky_email';

interface DemoCustomer {
  ref: string;
  profile: Profile;
  country: string;
  devices: string[];
  ips: string[];
  /** Transactions a day, and the typical amount. */
  rate: number;
  amount: number;
  record: Record<string, unknown>;
}

interface DemoEvent {
  at: number;
  financial: boolean;
  record: Record<string, unknown>;
}

interface Options {
  customers: number;
  days: number;
  seed: number;
}

function wholeNumber(value: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < min || number > max) throw new CliError(`--${name} must be a whole number from ${min} to ${max}.`, 2);
  return number;
}

/** Generated once, printed once: long enough and random enough for the password validators. */
function password(): string {
  return `demo-${randomBytes(15).toString('base64url')}`;
}

export async function demoCommand(args: string[], database: Database): Promise<unknown> {
  const { values } = parseOptions(args, {
    customers: { type: 'string' },
    days: { type: 'string' },
    seed: { type: 'string' },
    force: { type: 'boolean' },
  });
  const options: Options = {
    customers: wholeNumber(values.customers, 'customers', 200, 1, 100_000),
    days: wholeNumber(values.days, 'days', 30, 1, 365),
    seed: wholeNumber(values.seed, 'seed', 1, 0, 2 ** 31 - 1),
  };
  const { knex } = database;
  const stored = Number((await knex('customers').count({ n: '*' }).first())!.n);
  if (stored > 0 && !values.force) {
    throw new CliError(
      `This database already holds ${stored} customer(s): warden demo fills an empty installation only. ` +
        'Use an empty database, or add --force to add the demo data set beside what is there.',
    );
  }
  const started = Date.now();
  const config = loadConfig();
  const known = new Set(permissionCodenames());
  const staffOptions = { actor: OPERATOR, known };

  // 1. Set-up through the operator's own paths: credential, events, rules, lists, flow, staff.
  const { credential, apiSecret } = await createCredential(knex, { client: `Demo Merchant (seed ${options.seed})`, allowedIps: ['127.0.0.1', '::1'] }, OPERATOR);
  for (const event of EVENTS) await defineEvent(knex, { ...event, active: true }, OPERATOR);
  const rules = (await rulesCommand(['load', DEMO_FILES.rules], database)) as { created: string[]; updated: string[]; unchanged: string[] };
  const lists: Record<string, unknown> = {};
  for (const [source, file] of [['ofac', DEMO_FILES.sanctions], ['opensanctions', DEMO_FILES.peps]] as const) {
    // A list already imported (a real one) is never replaced by the demo's invented entries.
    const present = Number((await knex('sanction_entries').where({ source }).count({ n: '*' }).first())!.n);
    if (present > 0) lists[source] = { kept: present, note: 'a list of this source was already imported; the demo list was not loaded' };
    else lists[source] = { imported: ((await sanctionsCommand(['import', '--format', source, file], database)) as { imported: number }).imported, file: path.relative(ROOT, file) };
  }
  await defineFlow(knex, { code: 'demo', name: 'Demo: passport MRZ and selfie', artifacts: ['doc_mrz', 'selfie'], videoCall: false, isDefault: false, active: true, notifyUrl: null }, OPERATOR);
  const groups: string[] = [];
  for (const [name, permissions] of [['Analysts', ANALYST_PERMISSIONS], ['Checkers', CHECKER_PERMISSIONS]] as const) {
    if (await knex('staff_groups').where({ name }).first()) continue;
    await createGroup(knex, { name, permissions: [...permissions] }, staffOptions);
    groups.push(name);
  }
  const users: Record<string, { password: string | null; groups: string[]; note?: string }> = {};
  for (const [username, group, fullName] of [['analyst', 'Analysts', 'Demo Analyst'], ['checker', 'Checkers', 'Demo Checker']] as const) {
    if (await knex('staff_users').whereRaw('lower(username) = ?', [username]).first()) {
      users[username] = { password: null, groups: [group], note: 'already existed: password and groups left unchanged' };
      continue;
    }
    const secret = password();
    await createUser(knex, { username, password: secret, full_name: fullName, email: `${username}@example.com`, groups: [group] }, staffOptions);
    users[username] = { password: secret, groups: [group] };
  }
  const analyst = (await knex('staff_users').whereRaw('lower(username) = ?', ['analyst']).first('id', 'username')) as { id: string; username: string };

  // 2. The running service's context, built after the set-up so its caches start with it.
  const app = await buildContext(config, knex, createLogger('silent'));
  try {
    const merchant: Actor = { type: 'merchant', id: credential.id };
    const now = Date.now();
    const customers = generateCustomers(options, now);
    const customerResults = [];
    for (let start = 0; start < customers.length; start += BATCH) {
      customerResults.push(...(await upsertCustomers(app, customers.slice(start, start + BATCH).map((customer) => customer.record), merchant)));
    }
    const events = generateEvents(options, customers, now);
    const transactionCounts = await ingest(app, events, merchant, now, options.days);

    const principal = await loadPrincipal(knex, analyst.id);
    if (!principal) throw new Error('the analyst user could not be loaded');
    const caseWork = await workCases(app, principal, analyst.id, options.seed);
    const sessions = await kycSessions(app, customers, merchant, analyst.username);
    // Set after the case work: closures with a clear decision are refused where a decision policy applies.
    await setApprovalPolicies(knex, { model: 'transaction.financialevent', operations: ['decision'], stages: 1, signatures: 1, signerGroup: 'Checkers' });

    const prefix = `demo-${options.seed}-%`;
    const count = async (query: Promise<{ n: string | number }[]>) => Number((await query)[0]!.n);
    const customerIds = knex('customers').where('customer_ref', 'like', prefix).select('id');
    const caseRows = (await knex('cases').whereIn('customer_id', customerIds).select('status').count({ n: '*' }).groupBy('status')) as { status: string; n: string }[];
    const byStatus: Record<string, number> = { open: 0, in_review: 0, escalated: 0, closed: 0 };
    for (const row of caseRows) byStatus[row.status] = Number(row.n);
    const sessionRows = (await knex('verification_sessions').where('customer_ref', 'like', prefix).select('status').count({ n: '*' }).groupBy('status')) as { status: string; n: string }[];
    const host = config.publicUrl ?? `http://localhost:${config.port}`;
    return {
      seed: options.seed,
      days: options.days,
      seconds: Math.round((Date.now() - started) / 100) / 10,
      credential: {
        client: credential.client,
        api_key: credential.api_key,
        api_secret: apiSecret,
        allowed_ips: credential.allowed_ips,
        note: 'The api_secret is shown only now. Token: POST /api/merchant/auth/token/ {"api_key", "api_secret"} from 127.0.0.1 (warden credential allow-ip to widen).',
      },
      users: Object.fromEntries(Object.entries(users).map(([username, user]) => [username, { ...user }])),
      users_note: 'Passwords are shown only now. Sign in at the admin URL.',
      admin_url: `${host.replace(/\/$/, '')}/admin/`,
      groups_created: groups,
      events: EVENTS.map((event) => event.slug),
      rules: { created: rules.created.length, updated: rules.updated.length, unchanged: rules.unchanged.length },
      sanctions: lists,
      approval_policy: 'transaction.financialevent decision: 1 stage, 1 signature, signer group Checkers',
      counts: {
        customers: customerResults.filter((result) => result.id !== null).length,
        customers_refused_at_onboarding: customerResults.filter((result) => result.decision === 'REJECT').length,
        financial_transactions: transactionCounts.financial,
        non_financial_events: transactionCounts.nonFinancial,
        unscored_records: transactionCounts.unscored,
        alerts: await count(knex('alerts').whereIn('customer_id', customerIds).count({ n: '*' })),
        screening_hits: await count(knex('screening_hits').whereIn('customer_id', customerIds).count({ n: '*' })),
        cases: byStatus,
        cases_assigned: await count(knex('cases').whereIn('customer_id', customerIds).whereNotNull('assignee_id').count({ n: '*' })),
        case_changes: caseWork,
        kyc_sessions: Object.fromEntries(sessionRows.map((row) => [row.status, Number(row.n)])),
      },
      kyc_note: sessions,
    };
  } finally {
    await app.close();
  }
}

function generateCustomers({ customers: total, days, seed }: Options, now: number): DemoCustomer[] {
  const random = prng(seed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const between = (lo: number, hi: number) => lo + random() * (hi - lo);
  // Special profiles at fixed shares (at least a few of each, for small runs), spread over the list.
  const share = (fraction: number, min: number) => Math.max(min, Math.round(total * fraction));
  const profiles: Profile[] = [];
  const plan: [Profile, number][] = [
    ['sanctioned', Math.min(SANCTIONED.length, share(0.015, 2))],
    ['pep', Math.min(PEPS.length, share(0.025, 2))],
    ['structuring', share(0.03, 2)],
    ['big', share(0.02, 1)],
    ['velocity', share(0.01, 1)],
    ['hopper', share(0.015, 1)],
    ['pass_through', share(0.015, 1)],
    ['takeover', share(0.01, 1)],
    ['high_risk', share(0.015, 1)],
    ['risky_email', share(0.015, 1)],
  ];
  for (const [profile, count] of plan) for (let i = 0; i < count; i++) profiles.push(profile);
  while (profiles.length < total) profiles.push('normal');
  profiles.length = total;
  // Fisher-Yates with the seeded generator: the specials land anywhere in the list.
  for (let i = profiles.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [profiles[i], profiles[j]] = [profiles[j]!, profiles[i]!];
  }
  let sanctioned = 0;
  let peps = 0;
  return profiles.map((profile, index): DemoCustomer => {
    const ref = `demo-${seed}-c${String(index + 1).padStart(5, '0')}`;
    let first = pick(FIRST_NAMES);
    let last = pick(LAST_NAMES);
    let nationality = pick(COUNTRIES);
    let birth = new Date(Date.UTC(1950 + Math.floor(random() * 54), Math.floor(random() * 12), 1 + Math.floor(random() * 28))).toISOString().slice(0, 10);
    if (profile === 'sanctioned') ({ first, last, nationality, birth } = SANCTIONED[sanctioned++]!);
    if (profile === 'pep') ({ first, last, nationality, birth } = PEPS[peps++]!);
    if (profile === 'high_risk') nationality = pick(HIGH_RISK);
    const country = profile === 'high_risk' ? pick(COUNTRIES) : nationality;
    const local = `${first.split(' ')[0]}.${last}`.toLowerCase().replace(/[^a-z.]/g, '');
    const domain = profile === 'risky_email' ? pick(DISPOSABLE) : pick(DOMAINS);
    // Most customers were there before the history starts; some joined during it (new-customer rules).
    const registered = now - (random() < 0.15 ? between(1, days) : between(days + 1, days + 400)) * DAY;
    const deviceCount = 1 + Math.floor(random() * 2);
    const devices = Array.from({ length: deviceCount }, () => `dev-${randomHex(random, 12)}`);
    const ips = Array.from({ length: 1 + Math.floor(random() * 2) }, () => `${pick([31, 46, 62, 77, 84, 91, 93, 109, 145, 176, 188, 212])}.${1 + Math.floor(random() * 254)}.${Math.floor(random() * 256)}.${1 + Math.floor(random() * 254)}`);
    return {
      ref,
      profile,
      country,
      devices,
      ips,
      rate: profile === 'velocity' ? 1.2 : between(0.15, 1.3),
      amount: Math.round(between(15, 450)),
      record: {
        customer_ref: ref,
        customer_type: 1,
        first_name: first,
        last_name: last,
        gender: pick(['male', 'female', 'unknown']),
        birth_date: birth,
        nationality,
        country,
        email: `${local}${index + 1}@${domain}`,
        phone: `+${30 + Math.floor(random() * 60)}${String(Math.floor(random() * 1e9)).padStart(9, '0')}`,
        occupation: profile === 'pep' ? 'public official' : pick(OCCUPATIONS),
        ip_address: ips[0],
        status: 'active',
        registration_date: new Date(registered).toISOString(),
        email_verified_at: new Date(registered + HOUR).toISOString(),
      },
    };
  });
}

function randomHex(random: () => number, length: number): string {
  let text = '';
  for (let i = 0; i < length; i++) text += Math.floor(random() * 16).toString(16);
  return text;
}

/** The customers' history over the last `days` days, normal activity plus each profile's pattern. */
function generateEvents({ days, seed }: Options, customers: DemoCustomer[], now: number): DemoEvent[] {
  const random = prng(seed ^ 0x5eed);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const between = (lo: number, hi: number) => lo + random() * (hi - lo);
  const start = now - days * DAY;
  const end = now - 5 * MINUTE;
  const events: DemoEvent[] = [];
  let financialSequence = 0;
  let otherSequence = 0;
  const money = (value: number) => (Math.round(value * 100) / 100).toFixed(2);

  for (const customer of customers) {
    const registered = Date.parse(customer.record.registration_date as string);
    const from = Math.max(start, registered + HOUR);
    const at = (time: number) => Math.min(end, Math.max(from, time));
    const financial = (time: number, slug: string, amount: number, io: 0 | 1, extra: { device?: string; ip?: string; country?: string } = {}) => {
      events.push({
        at: at(time),
        financial: true,
        record: {
          customer_ref: customer.ref,
          event_slug: slug,
          amount: money(amount),
          currency: 'EUR',
          transaction_ref: `demo-${seed}-t${String(++financialSequence).padStart(7, '0')}`,
          io_type: io,
          event_date: new Date(at(time)).toISOString(),
          status: 'completed',
          payment_method: slug === 'card_payment' ? 'card' : slug === 'transfer' ? 'sepa' : 'bank_transfer',
          channel: 1,
          device_id: extra.device ?? pick(customer.devices),
          ip_address: extra.ip ?? pick(customer.ips),
          geo: { country_code: extra.country ?? customer.country },
          ...(slug === 'card_payment' ? { destination_provider: pick(['Grocer & Co', 'City Transit', 'Stream+', 'Bookhaus', 'Fuel Stop', 'Cafe Nordlicht']) } : {}),
        },
      });
    };
    const other = (time: number, slug: string, extra: { device?: string; ip?: string; country?: string } = {}) => {
      events.push({
        at: at(time),
        financial: false,
        record: {
          customer_ref: customer.ref,
          event_slug: slug,
          transaction_ref: `demo-${seed}-n${String(++otherSequence).padStart(7, '0')}`,
          event_date: new Date(at(time)).toISOString(),
          status: 'completed',
          channel: 1,
          device_id: extra.device ?? pick(customer.devices),
          ip_address: extra.ip ?? pick(customer.ips),
          user_agent: pick(AGENTS),
          geo: { country_code: extra.country ?? customer.country },
        },
      });
    };
    if (from >= end) continue;

    // Everyday activity: a salary-like deposit now and then, card payments, the odd withdrawal or transfer, logins.
    for (let day = from; day < end; day += DAY) {
      const count = Math.floor(customer.rate + random());
      for (let i = 0; i < count; i++) {
        const time = day + between(0, DAY);
        const roll = random();
        const amount = customer.amount * between(0.3, 1.8);
        if (roll < 0.55) financial(time, 'card_payment', Math.min(amount, 900), 1);
        else if (roll < 0.75) financial(time, 'deposit', amount * 2.5, 0);
        else if (roll < 0.88) financial(time, 'withdrawal', amount, 1);
        else financial(time, 'transfer', amount * 1.5, random() < 0.5 ? 1 : 0);
      }
      if (random() < 0.6) other(day + between(0, DAY), 'login');
    }

    // The patterns the example rules look for, on a day within the history.
    const when = between(Math.max(from, end - Math.min(days, 20) * DAY), end - 2 * HOUR);
    switch (customer.profile) {
      case 'sanctioned':
      case 'high_risk':
        financial(when, 'transfer', between(1500, 6000), 1);
        break;
      case 'pep':
        financial(when, 'deposit', Math.round(between(15, 40)) * 1000 + 250, 0);
        break;
      case 'structuring':
        for (let i = 0; i < 3; i++) financial(when + i * 90 * MINUTE, 'deposit', between(3200, 3950), 0);
        financial(when + 5 * HOUR, 'deposit', between(9100, 9950), 0);
        break;
      case 'big':
        financial(when, 'deposit', Math.round(between(55, 120)) * 1000, 0);
        break;
      case 'velocity':
        // A burst from several devices at once: velocity and device count together reach review.
        for (let i = 0; i < 12; i++) financial(when + i * 4 * MINUTE, 'card_payment', between(20, 180), 1, { device: `dev-vel-${customer.ref}-${i % 4}` });
        break;
      case 'hopper': {
        const countries = ['ROU', 'NGA', 'BRA', 'VNM'];
        for (let i = 0; i < 5; i++) {
          const ip = `${100 + i * 17}.${20 + i}.${i * 11}.${7 + i}`;
          financial(when + i * 50 * MINUTE, 'card_payment', between(150, 700), 1, { device: `dev-hop-${customer.ref}-${i}`, ip, country: countries[i % countries.length] });
        }
        break;
      }
      case 'pass_through': {
        const credit = Math.round(between(6000, 15000));
        financial(when, 'deposit', credit, 0);
        financial(when + 2 * HOUR, 'withdrawal', credit * between(0.92, 0.99), 1);
        break;
      }
      case 'takeover':
        // Devices count from financial activity: small payments from three new devices, then the password change.
        for (let i = 0; i < 3; i++) {
          const device = { device: `dev-ato-${customer.ref}-${i}`, ip: `185.${40 + i}.${i * 7}.${9 + i}` };
          other(when + i * 20 * MINUTE, 'login', device);
          financial(when + i * 20 * MINUTE + 5 * MINUTE, 'card_payment', between(5, 40), 1, device);
        }
        other(when + 70 * MINUTE, 'password_change', { device: `dev-ato-${customer.ref}-2`, ip: '185.42.14.11' });
        break;
      case 'risky_email':
        financial(when, 'withdrawal', between(1200, 4000), 1);
        break;
      case 'normal':
        break;
    }
  }
  return events.sort((a, b) => a.at - b.at);
}

/**
 * Sends the history day by day, oldest first, each day's records as the service would have
 * received them that day: `now` is the end of that day (the batch functions' clock), so every
 * record is within the scoring window and each is scored against the history stored before it.
 */
async function ingest(app: AppContext, events: DemoEvent[], actor: Actor, now: number, days: number) {
  const counts = { financial: 0, nonFinancial: 0, unscored: 0 };
  const start = now - days * DAY;
  let index = 0;
  for (let dayEnd = start + DAY; index < events.length; dayEnd += DAY) {
    const clock = Math.min(dayEnd, now);
    const day: DemoEvent[] = [];
    while (index < events.length && (events[index]!.at < dayEnd || dayEnd >= now)) day.push(events[index++]!);
    for (const financial of [true, false]) {
      const records = day.filter((event) => event.financial === financial).map((event) => event.record);
      for (let from = 0; from < records.length; from += BATCH) {
        const results = await upsertTransactions(app, financial ? FINANCIAL : NON_FINANCIAL, records.slice(from, from + BATCH), actor, clock);
        for (const result of results) {
          if (result.id === null) throw new Error(`demo record ${result.transaction_ref} was refused: ${result.error ?? result.warnings.join('; ')}`);
          if (!result.rule_check) counts.unscored += 1;
        }
        if (financial) counts.financial += results.length;
        else counts.nonFinancial += results.length;
      }
    }
  }
  return counts;
}

const RATIONALES = {
  in_review: 'Taken for review: checking the customer profile against the alerted activity.',
  escalated: 'Escalated to the MLRO: pattern consistent with structuring or a list match; needs a second look.',
  accept: 'Reviewed: activity consistent with the customer profile and source of funds; false positive.',
  reject: 'Confirmed suspicious: funds moved straight through; transactions rejected and a report prepared.',
};

/**
 * Works the demo cases through the back office's write chain as the analyst would: some taken and
 * in review, some escalated, some closed with a clear decision (ACCEPT or REJECT), some left open,
 * some of those assigned.
 */
async function workCases(app: AppContext, principal: NonNullable<Awaited<ReturnType<typeof loadPrincipal>>>, analystId: string, seed: number) {
  const model = app.backoffice.site.get('engine', 'watchlist');
  if (!model) throw new Error('the case model is not registered');
  const open = (await app.db('cases as c')
    .join('customers as cu', 'cu.id', 'c.customer_id')
    .where('cu.customer_ref', 'like', `demo-${seed}-%`)
    .where('c.status', 'open')
    .orderBy('cu.customer_ref')
    .select('c.id')) as { id: string }[];
  // The first four of the cycle cover every status, so a small run has each.
  const cycle = ['accept', 'in_review', 'escalated', 'assigned', 'reject', 'in_review', 'open', 'open'] as const;
  const done: Record<string, number> = {};
  // A decision policy already in force (a --force run) refuses closures with a clear decision: those cases close without one.
  const policy = await app.db('approval_policies')
    .whereIn('content_type', ['transaction.financialevent', 'transaction.nonfinancialevent'])
    .where({ operation: 'decision', active: true })
    .first('id');
  const save = async (id: string, input: Record<string, unknown>) => {
    try {
      return await saveObject(app.backoffice, model, principal, id, input, { partial: true });
    } catch (error) {
      if (error instanceof ValidationFailed) throw new Error(`case ${id}: ${error.message} ${JSON.stringify(error.errors)}`);
      throw error;
    }
  };
  for (const [index, { id }] of open.entries()) {
    const step = cycle[index % cycle.length]!;
    switch (step) {
      case 'open':
        break;
      case 'assigned':
        await save(id, { assignee_id: analystId });
        break;
      case 'in_review':
        await save(id, { status: 'in_review', assignee_id: analystId, rationale: RATIONALES.in_review });
        break;
      case 'escalated':
        await save(id, { status: 'in_review', assignee_id: analystId, rationale: RATIONALES.in_review });
        await save(id, { status: 'escalated', flagged: true, rationale: RATIONALES.escalated });
        break;
      case 'accept':
      case 'reject':
        await save(id, { status: 'in_review', assignee_id: analystId, rationale: RATIONALES.in_review });
        await save(id, policy
          ? { status: 'closed', rationale: RATIONALES[step] }
          : { status: 'closed', rationale: RATIONALES[step], clear_decision: step === 'accept' ? 'ACCEPT' : 'REJECT', clear_score: step === 'accept' ? '5' : '95' });
        break;
    }
    done[step] = (done[step] ?? 0) + 1;
  }
  return { ...done, closed_with_clear_decision: !policy };
}

/**
 * KYC sessions opened through the service for some customers, in every state: completed,
 * reported, failed (ended), and open ones part-way. The vision pipeline is not run: no images are
 * uploaded; progress is marked as a verified upload marks it, and sessions are closed as an agent's
 * end-kyc-session closes them.
 */
async function kycSessions(app: AppContext, customers: DemoCustomer[], actor: Actor, agent: string) {
  // One customer in twelve, at least one session of each kind (six) on a small run.
  const count = Math.min(customers.length, Math.max(6, Math.ceil(customers.length / 12)));
  const chosen = Array.from({ length: count }, (_, index) => customers[Math.floor((index * customers.length) / count)]!);
  const cycle = ['completed', 'completed', 'reported', 'ended', 'in_progress', 'open'] as const;
  for (const [index, customer] of chosen.entries()) {
    const step = cycle[index % cycle.length]!;
    const session = await createSession(app, { customer_ref: customer.ref, flow: 'demo', device_id: customer.devices[0], ip_address: customer.ips[0], user_agent: AGENTS[0] }, actor);
    if (step === 'open') continue;
    await markArtifactSucceeded(app.db, session.session_id, 'doc_mrz');
    if (step === 'in_progress') continue;
    if (step !== 'ended') await markArtifactSucceeded(app.db, session.session_id, 'selfie');
    const checklist =
      step === 'completed' ? { document_valid: true, face_matches: true, liveness_confirmed: true }
      : step === 'reported' ? { document_valid: false, face_matches: true, liveness_confirmed: true }
      : { document_valid: true, face_matches: false, liveness_confirmed: false };
    await closeSession(app, session.session_id, step, checklist, agent);
  }
  return 'Sessions are opened and closed through the KYC service; no images are uploaded, so the vision pipeline has no results to show for them.';
}
