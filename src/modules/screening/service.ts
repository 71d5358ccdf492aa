import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
import { CHANNELS, type NotificationHub } from '../../db/notifications.ts';
import type { Pools } from '../../pools.ts';
import { loadEmailLists, scoreEmail, type EmailLists, type EmailRiskResult } from './email-risk.ts';
import { createIpRiskContext, scoreIp, type IpRiskContext, type IpRiskResult } from './ip-risk.ts';
import type { ScreenedSlice, ScreenedText, ScreenTask } from '../../../workers/light.ts';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { JsonText } from '../../db/copy.ts';
import { SanctionsIndex, type ScreeningQuery } from './sanctions/matcher.ts';
import { shareIndex, type SharedSanctionsIndex } from './sanctions/shared-index.ts';
import { loadAllEntries } from './sanctions/store.ts';

/** Queries a worker takes at a time: small enough that the workers finish together, large enough that the shared counter is rarely touched. */
const SCREEN_SLICE = 16;

/** The customer fields screening reads. */
export interface ScreeningSubject {
  customer_type: number;
  first_name: string | null;
  last_name: string | null;
  company_name: string | null;
  birth_date: string | null;
  nationality: string | null;
  country: string | null;
  email: string | null;
  ip_address: string | null;
}

export interface CustomerScreening {
  sanction_score: number;
  sanction_topic: string[];
  /** The ScreeningMatch[] as JSON text (see ScreenedText). */
  sanction_matches: JsonText;
  ip_address_score: number;
  ip_reasons: string[];
  ip_country: string | null;
  email_risk_score: number;
  email_reasons: string[];
}

/**
 * Sanctions, IP and email risk for customers. Email and IP scoring are microseconds and run
 * inline; sanctions matching runs in the light pool over an index built once per list version
 * and shared with the workers (see shared-index.ts). An import announced on the sanctions
 * channel makes the next screening reload the list.
 */
export class ScreeningService {
  private sanctions: Promise<SharedSanctionsIndex | null> | undefined;

  private constructor(
    private readonly db: Knex,
    private readonly pools: Pools,
    private readonly workers: number,
    private readonly emailLists: EmailLists,
    private readonly ipContext: IpRiskContext,
  ) {}

  static async create(config: Config, db: Knex, pools: Pools, hub: NotificationHub): Promise<ScreeningService> {
    const ipContext = await createIpRiskContext({
      geoipDbPath: config.geoipDb,
      datacenterListPath: config.ipDatacenterList,
      torListPath: config.ipTorList,
    });
    const service = new ScreeningService(db, pools, config.lightWorkers, loadEmailLists(), ipContext);
    hub.subscribe(CHANNELS.sanctions, () => (service.sanctions = undefined));
    hub.onReset(() => (service.sanctions = undefined));
    return service;
  }

  private sanctionsIndex(): Promise<SharedSanctionsIndex | null> {
    if (this.sanctions) return this.sanctions;
    const loading = loadAllEntries(this.db).then((entries) =>
      entries.length ? shareIndex(SanctionsIndex.build(entries), randomUUID()) : null,
    );
    this.sanctions = loading;
    // A failed load is not kept: the next batch tries again.
    loading.catch(() => {
      if (this.sanctions === loading) this.sanctions = undefined;
    });
    return loading;
  }

  /**
   * Screens `subjects`. With `ready`, reports progress as the workers go: `ready(count, screenings)`
   * each time the first `count` subjects are screened (screenings holds them by position), so the
   * caller can go on with them before the rest is done.
   */
  async screen(subjects: ScreeningSubject[], ready?: (count: number, screenings: readonly CustomerScreening[]) => void): Promise<CustomerScreening[]> {
    const sanctions = new Array<ScreenedText | undefined>(subjects.length);
    const screenings = new Array<CustomerScreening>(subjects.length);
    let ips: IpRiskResult[] | undefined;
    let emails: EmailRiskResult[] | undefined;
    let count = 0;
    // Combines what is known in subject order; called once the IPs and emails are scored, then as the names are.
    const advance = () => {
      if (!ips || !emails) return;
      const before = count;
      for (; count < subjects.length && sanctions[count] !== undefined; count++) {
        const sanction = sanctions[count]!;
        const ip = ips[count]!;
        const email = emails[count]!;
        screenings[count] = {
          sanction_score: sanction.score,
          sanction_topic: sanction.topics,
          sanction_matches: new JsonText(sanction.matches),
          ip_address_score: ip.score,
          ip_reasons: ip.reasons,
          ip_country: ip.country,
          email_risk_score: email.score,
          email_reasons: email.reasons,
        };
      }
      if (ready && count > before) ready(count, screenings);
    };
    // The workers match names while this thread scores the IP addresses and emails: the tasks are
    // handed to them (synchronously, once the index is known) before the scoring below starts.
    const sanctioning = this.screenSanctions(await this.sanctionsIndex(), subjects, (position, result) => {
      sanctions[position] = result;
      if (position === count) advance();
    });
    sanctioning.catch(() => {});
    ips = subjects.map((subject) => scoreIp({ ip: subject.ip_address, customerCountry: subject.country ?? subject.nationality }, this.ipContext));
    emails = subjects.map((subject) =>
      scoreEmail({ email: subject.email, firstName: subject.first_name, lastName: subject.last_name, birthDate: subject.birth_date }, this.emailLists),
    );
    advance();
    await sanctioning;
    return screenings;
  }

  /** Matches each subject's name, calling `screened(position, result)` for each as it comes; resolves once every subject has its result. */
  private screenSanctions(index: SharedSanctionsIndex | null, subjects: ScreeningSubject[], screened: (position: number, result: ScreenedText) => void): Promise<void> {
    const named: Array<{ query: ScreeningQuery; position: number }> = [];
    subjects.forEach((subject, position) => {
      const query = index ? sanctionsQuery(subject) : null;
      if (query) named.push({ query, position });
      else screened(position, NOT_SCREENED);
    });
    if (named.length === 0) return Promise.resolve();
    // One task per worker over all the queries, which the workers take in slices from a shared
    // counter, posting each slice's results as it is done. Handing out eight tasks instead, four
    // per worker, left workers idle: the request thread, scoring IP addresses and emails meanwhile
    // (or collecting garbage), handed a worker its next task 10-15 ms after it asked (scratch:
    // tasks started 25-30 ms into a 70 ms phase whose first two took 13-15 ms).
    const queries = named.map((item) => item.query);
    const next = new Int32Array(new SharedArrayBuffer(4));
    return new Promise<void>((resolve, reject) => {
      let received = 0;
      const ports: MessagePort[] = [];
      const finish = (error?: unknown) => {
        for (const port of ports) port.close();
        if (error) reject(error);
        else resolve();
      };
      const tasks = Array.from({ length: this.workers }, () => {
        const { port1, port2 } = new MessageChannel();
        ports.push(port1);
        port1.on('message', ({ start, results }: ScreenedSlice) => {
          results.forEach((result, offset) => screened(named[start + offset]!.position, result));
          received += results.length;
          if (received === named.length) finish();
        });
        const task: ScreenTask = { type: 'screen', index: index!, queries, next, slice: SCREEN_SLICE, port: port2 };
        return this.pools.light.run(task, { transferList: [port2] }) as Promise<number>;
      });
      // The results come by the ports; a task only says how many it screened, or why it failed.
      Promise.all(tasks).then((counts) => {
        if (counts.reduce((sum, screenedHere) => sum + screenedHere, 0) !== named.length) finish(new Error('sanctions screening: the workers screened a different number of names than asked'));
      }, finish);
    });
  }
}

/** The result of a subject without a name to screen, or screened while no list is loaded. */
const NOT_SCREENED: ScreenedText = { score: 0, topics: [], matches: '[]' };

function sanctionsQuery(subject: ScreeningSubject): ScreeningQuery | null {
  const corporate = subject.customer_type === 2;
  const name = corporate && subject.company_name ? subject.company_name : [subject.first_name, subject.last_name].filter(Boolean).join(' ');
  if (!name.trim()) return null;
  return {
    name,
    birthDate: corporate ? null : subject.birth_date,
    nationality: subject.nationality,
    schema: corporate ? 'organization' : 'person',
  };
}
