import type { Knex } from 'knex';

/**
 * The documents the service stores but never queries inside: a record's `raw` (the record as
 * sent) and a customer's screening details (sanction_matches, ip_reasons, email_reasons) become
 * json, kept as written, instead of jsonb, parsed into PostgreSQL's binary form on every write
 * (issue 17). A customer batch of 1000 copied its rows in 26 ms with these columns jsonb and in
 * 18.5 ms as json (scratch, embedded PostgreSQL); nothing reads them with a jsonb-only operator
 * (the report's count of matches uses json_array_length), and `raw` now keeps the record exactly
 * as the service serialised it. The fields a record carries as objects (geo, metadata, founders)
 * stay jsonb. On a large existing table the change rewrites it once.
 */
const COLUMNS: Array<[string, string[]]> = [
  ['customers', ['raw', 'sanction_matches', 'ip_reasons', 'email_reasons']],
  ['financial_transactions', ['raw']],
  ['non_financial_events', ['raw']],
];

async function retype(knex: Knex, type: 'json' | 'jsonb'): Promise<void> {
  for (const [table, columns] of COLUMNS) {
    const changes = columns.flatMap((column) => {
      const defaulted = column !== 'raw';
      return [
        ...(defaulted ? [`alter column "${column}" drop default`] : []),
        `alter column "${column}" type ${type} using "${column}"::${type}`,
        ...(defaulted ? [`alter column "${column}" set default '[]'::${type}`] : []),
      ];
    });
    await knex.raw(`alter table "${table}" ${changes.join(', ')}`);
  }
}

export async function up(knex: Knex): Promise<void> {
  await retype(knex, 'json');
}

export async function down(knex: Knex): Promise<void> {
  await retype(knex, 'jsonb');
}
