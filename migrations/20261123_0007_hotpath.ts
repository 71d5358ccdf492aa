import type { Knex } from 'knex';

/**
 * The scoring hot path (issue 17, measured in bench/RESULTS.md):
 * - the velocity window reads a customer's transactions in one index range scan; the index now
 *   carries every column the aggregates read (and the ref that excludes re-sent records), so the
 *   scan never visits the table and its cost follows the window, not the stored history;
 * - the execution log's documents are `json`, not `jsonb`: they are written once per scored
 *   record and read whole, never queried inside, and parsing them into jsonb was the largest
 *   single cost of a batch's write (about 90 ms per 1000 records with 30 rules);
 * - a log row with 30 rules is about 2.7 KB, over the 2 KB from which PostgreSQL compresses a
 *   row's largest values: lz4 (where the server has it) compresses them faster than pglz (COPY
 *   of 1000 logs 20-30 % faster, measured side by side).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`create index financial_transactions_customer_window on financial_transactions (customer_id, event_date)
    include (amount, io_type, device_id, ip_address, country, transaction_ref)`);
  await knex.raw('drop index financial_transactions_customer_date');
  await knex.raw(`alter table execution_logs
    alter column matched_rules type json using matched_rules::json,
    alter column rule_versions type json using rule_versions::json,
    alter column rule_errors drop default,
    alter column rule_errors type json using rule_errors::json,
    alter column rule_errors set default '[]'::json,
    alter column data_context type json using data_context::json`);
  const { rows } = await knex.raw(`select 'lz4' = any(enumvals) as available from pg_settings where name = 'default_toast_compression'`);
  if (rows[0]?.available) {
    await knex.raw(`alter table execution_logs alter column data_context set compression lz4,
      alter column rule_versions set compression lz4, alter column matched_rules set compression lz4`);
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`alter table execution_logs alter column data_context set compression default,
    alter column rule_versions set compression default, alter column matched_rules set compression default`);
  await knex.raw(`alter table execution_logs
    alter column matched_rules type jsonb using matched_rules::jsonb,
    alter column rule_versions type jsonb using rule_versions::jsonb,
    alter column rule_errors drop default,
    alter column rule_errors type jsonb using rule_errors::jsonb,
    alter column rule_errors set default '[]'::jsonb,
    alter column data_context type jsonb using data_context::jsonb`);
  await knex.raw('create index financial_transactions_customer_date on financial_transactions (customer_id, event_date) include (amount, io_type)');
  await knex.raw('drop index financial_transactions_customer_window');
}
