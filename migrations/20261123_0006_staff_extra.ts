import type { Knex } from 'knex';

/**
 * Failed staff logins counted per username and per IP (rate-limiter-flexible's RateLimiterPostgres
 * layout: key, points, expire in epoch milliseconds), created here so that no request creates
 * tables; and the web session's pending messages ("Saved.") shown by the next page it renders.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('staff_web_sessions', (table) => {
    table.jsonb('messages').notNullable().defaultTo('[]');
  });
  await knex.schema.createTable('staff_login_throttle', (table) => {
    table.string('key', 255).primary();
    table.integer('points').notNullable().defaultTo(0);
    table.bigInteger('expire');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('staff_login_throttle');
  await knex.schema.alterTable('staff_web_sessions', (table) => {
    table.dropColumn('messages');
  });
}
