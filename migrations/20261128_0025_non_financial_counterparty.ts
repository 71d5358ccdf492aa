import type { Knex } from 'knex';

/** The counterparty fields the financial table has, on non-financial records too (stored and validated, no longer in raw only). */
const COLUMNS = ['payment_method', 'source_provider', 'source_ref', 'source_address', 'destination_provider', 'destination_ref', 'destination_address'] as const;

/**
 * Nullable text columns without a default: adding them rewrites nothing (a catalogue change only),
 * however many records the table holds. Records stored before keep these values in raw only.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`alter table non_financial_events ${COLUMNS.map((name) => `add column ${name} text`).join(', ')}`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`alter table non_financial_events ${COLUMNS.map((name) => `drop column ${name}`).join(', ')}`);
}
