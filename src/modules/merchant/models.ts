import { Model } from 'objection';

export class MerchantCredential extends Model {
  static override tableName = 'merchant_credentials';

  id!: string;
  client!: string;
  api_key!: string;
  secret_hash!: string;
  active!: boolean;
  allowed_ips!: string[];
  /** Merchant tokens carry the epoch they were issued in; deactivation and rotation move it on. */
  token_epoch!: number;
  created_by!: string;
  created_at!: Date;
  updated_at!: Date;

  /** What the operator sees: never the secret hash. */
  toPublic() {
    return {
      id: this.id,
      client: this.client,
      api_key: this.api_key,
      active: this.active,
      allowed_ips: this.allowed_ips,
      created_by: this.created_by,
      created_at: this.created_at.toISOString(),
      updated_at: this.updated_at.toISOString(),
    };
  }
}
