import type { Knex } from 'knex';

/**
 * merchant_credentials.token_epoch: merchant tokens carry the epoch they were issued in, and
 * deactivating a credential or rotating its secret moves the epoch on, so that a reactivated
 * credential does not bring back the tokens issued before (tokens without the claim count as 0).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('merchant_credentials', (table) => {
    table.integer('token_epoch').notNullable().defaultTo(0);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('merchant_credentials', (table) => {
    table.dropColumn('token_epoch');
  });
}
