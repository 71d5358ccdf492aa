import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { Config } from '../../config.ts';
import { CHANNELS, type NotificationHub } from '../../db/notifications.ts';
import type { Pools } from '../../pools.ts';
import { loadEmailLists, scoreEmail, type EmailLists } from './email-risk.ts';
import { createIpRiskContext, scoreIp, type IpRiskContext } from './ip-risk.ts';
import type { ScreenedSlices, ScreenedText, ScreenTask } from '../../../workers/light.ts';
import { JsonText } from '../records/sql.ts';
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

  async screen(subjects: ScreeningSubject[]): Promise<CustomerScreening[]> {
    // The workers match names while this thread scores the IP addresses and emails: the tasks are
    // handed to them (synchronously, once the index is known) before the scoring below starts.
    const sanctioning = this.screenSanctions(await this.sanctionsIndex(), subjects);
    sanctioning.catch(() => {});
    const ips = subjects.map((subject) => scoreIp({ ip: subject.ip_address, customerCountry: subject.country ?? subject.nationality }, this.ipContext));
    const emails = subjects.map((subject) =>
      scoreEmail({ email: subject.email, firstName: subject.first_name, lastName: subject.last_name, birthDate: subject.birth_date }, this.emailLists),
    );
    const sanctionResults = await sanctioning;
    return subjects.map((_, position) => {
      const sanctions = sanctionResults[position]!;
      const ip = ips[position]!;
      const email = emails[position]!;
      return {
        sanction_score: sanctions.score,
        sanction_topic: sanctions.topics,
        sanction_matches: new JsonText(sanctions.matches),
        ip_address_score: ip.score,
        ip_reasons: ip.reasons,
        ip_country: ip.country,
        email_risk_score: email.score,
        email_reasons: email.reasons,
      };
    });
  }

  private async screenSanctions(index: SharedSanctionsIndex | null, subjects: ScreeningSubject[]): Promise<ScreenedText[]> {
    const empty: ScreenedText = { score: 0, topics: [], matches: '[]' };
    const named = subjects.map(sanctionsQuery).flatMap((query, position) => (query ? [{ query, position }] : []));
    const results: ScreenedText[] = subjects.map(() => empty);
    if (!index || named.length === 0) return results;
    // One task per worker over all the queries, which the workers take in slices from a shared
    // counter. Handing out eight tasks instead, four per worker, left workers idle: the request
    // thread, scoring IP addresses and emails meanwhile (or collecting garbage), handed a worker
    // its next task 10-15 ms after it asked (scratch: tasks started 25-30 ms into a 70 ms phase
    // whose first two took 13-15 ms).
    const queries = named.map((item) => item.query);
    const next = new Int32Array(new SharedArrayBuffer(4));
    const task: ScreenTask = { type: 'screen', index, queries, next, slice: SCREEN_SLICE };
    const outputs = (await Promise.all(Array.from({ length: this.workers }, () => this.pools.light.run(task)))) as ScreenedSlices[];
    for (const output of outputs) output.positions.forEach((position, at) => (results[named[position]!.position] = output.results[at]!));
    return results;
  }
}

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
