import type { Knex } from 'knex';
import type pg from 'pg';
import type { Logger } from '../../logger.ts';
import { IpRangeList } from '../../net/ip-ranges.ts';
import { MerchantCredential } from './models.ts';

/** Channel on which every credential write announces the id it changed (see service.ts). */
export const CREDENTIAL_CHANNEL = 'warden_credentials';

export interface CachedCredential {
  credential: MerchantCredential;
  allowList: IpRangeList;
}

/**
 * Credentials read by the Bearer middleware, kept in memory and dropped the moment PostgreSQL
 * delivers a NOTIFY for them, from this process, another node or the CLI. While the LISTEN
 * connection is down nothing is cached, so a deactivation can never be missed.
 */
export class CredentialCache {
  private readonly entries = new Map<string, CachedCredential>();
  private listener: pg.Client | undefined;
  private listening = false;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly db: Knex,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    const client = (await this.db.client.acquireRawConnection()) as pg.Client;
    client.on('notification', (message) => {
      if (message.payload) this.entries.delete(message.payload);
    });
    const lost = (error?: Error) => {
      if (!this.listening) return;
      this.listening = false;
      this.entries.clear();
      if (this.stopped) return;
      this.logger.warn({ err: error }, 'credential cache listener lost; reconnecting');
      this.retryTimer = setTimeout(() => this.start().catch((retryError) => lost(retryError)), 1000);
    };
    client.on('error', lost);
    client.on('end', () => lost());
    await client.query(`LISTEN ${CREDENTIAL_CHANNEL}`);
    this.listener = client;
    this.listening = true;
  }

  async get(id: string): Promise<CachedCredential | undefined> {
    const hit = this.entries.get(id);
    if (hit) return hit;
    const credential = await MerchantCredential.query(this.db).findById(id);
    if (!credential) return undefined;
    const entry = { credential, allowList: new IpRangeList(credential.allowed_ips) };
    if (this.listening) this.entries.set(id, entry);
    return entry;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.listening = false;
    this.entries.clear();
    await this.listener?.end().catch(() => {});
  }
}
