import type { Knex } from 'knex';

/**
 * ai_delegations.purpose and refused_at: the assistant status reports the delegation the user's
 * reviews and turns work with (purpose 'work'), not the short one it mints to probe the gateway
 * (purpose 'probe'); refused_at records that the MCP server turned a token away because it had
 * expired while the gateway still worked with it, which the status shows as needs_reauth.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('ai_delegations', (table) => {
    table.text('purpose').notNullable().defaultTo('work');
    table.timestamp('refused_at', { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('ai_delegations', (table) => {
    table.dropColumn('refused_at');
    table.dropColumn('purpose');
  });
}
