import type { Knex } from 'knex';
import { CHANNELS, type NotificationHub } from '../../db/notifications.ts';
import { IpRangeList } from '../../net/ip-ranges.ts';
import { MerchantCredential } from './models.ts';

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
  /** Counts invalidations: a row read while one arrived may be the old row and is not kept. */
  private invalidations = 0;

  constructor(
    private readonly db: Knex,
    private readonly hub: NotificationHub,
  ) {
    hub.subscribe(CHANNELS.credentials, (id) => {
      this.invalidations++;
      this.entries.delete(id);
    });
    hub.onReset(() => {
      this.invalidations++;
      this.entries.clear();
    });
  }

  async get(id: string): Promise<CachedCredential | undefined> {
    const hit = this.entries.get(id);
    if (hit) return hit;
    const invalidationsBefore = this.invalidations;
    const credential = await MerchantCredential.query(this.db).findById(id);
    if (!credential) return undefined;
    const entry = { credential, allowList: new IpRangeList(credential.allowed_ips) };
    if (this.hub.healthy && this.invalidations === invalidationsBefore) this.entries.set(id, entry);
    return entry;
  }
}
