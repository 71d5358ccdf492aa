import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('merchant_credentials', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.text('client').notNullable();
    table.text('api_key').notNullable().unique();
    table.text('secret_hash').notNullable();
    table.boolean('active').notNullable().defaultTo(true);
    table.specificType('allowed_ips', 'text[]').notNullable().defaultTo('{}');
    table.text('created_by').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  // Every write records who made it: a merchant credential, a staff user, the operator CLI or the system.
  await knex.schema.createTable('audit_log', (table) => {
    table.bigIncrements('id');
    table.timestamp('at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.text('actor_type').notNullable();
    table.text('actor_id').notNullable();
    table.text('action').notNullable();
    table.text('entity').notNullable();
    table.text('entity_id').notNullable();
    table.jsonb('details').notNullable().defaultTo('{}');
    table.index(['entity', 'entity_id']);
  });

  // Server-generated secrets (the token signing key when WARDEN_JWT_SECRET is not set), shared by every node.
  await knex.schema.createTable('server_secrets', (table) => {
    table.text('name').primary();
    table.text('value').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('server_secrets');
  await knex.schema.dropTable('audit_log');
  await knex.schema.dropTable('merchant_credentials');
}
