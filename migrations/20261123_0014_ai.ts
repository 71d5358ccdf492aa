import type { Knex } from 'knex';

/**
 * AI case review and the staff assistant (issue 14): delegated tokens the gateway uses to call the
 * service's MCP server as a staff user, AI reviews of cases with their feedback (notes marked
 * to_knowledge are searched with PostgreSQL full-text search by later reviews), and assistant
 * conversations with their messages.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('ai_delegations', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    // Only the SHA-256 of the token is kept: a database read does not hand out working tokens.
    table.text('token_hash').notNullable().unique();
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.timestamp('expires_at', { useTz: true }).notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['user_id', 'expires_at']);
  });

  await knex.schema.createTable('ai_reviews', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.text('model_key').notNullable();
    table.text('object_pk').notNullable();
    // queued, running, done, failed
    table.text('status').notNullable().defaultTo('queued');
    table.text('error');
    table.jsonb('topic');
    table.jsonb('warnings').notNullable().defaultTo('[]');
    table.jsonb('result');
    table.jsonb('references').notNullable().defaultTo('[]');
    table.uuid('requested_by').references('staff_users.id').onDelete('SET NULL');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('completed_at', { useTz: true });
    table.index(['model_key', 'object_pk', 'created_at']);
  });
  // One review in flight per case, whichever process asks.
  await knex.raw(`create unique index ai_reviews_one_in_flight on ai_reviews (model_key, object_pk) where status in ('queued', 'running')`);

  await knex.schema.createTable('ai_feedback', (table) => {
    table.uuid('review_id').primary().references('ai_reviews.id').onDelete('CASCADE');
    table.text('verdict').notNullable();
    table.text('note').notNullable().defaultTo('');
    table.boolean('to_knowledge').notNullable().defaultTo(false);
    table.boolean('delivered').notNullable().defaultTo(false);
    table.text('error');
    table.uuid('author_id').references('staff_users.id').onDelete('SET NULL');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw(`alter table ai_feedback add column search tsvector generated always as (to_tsvector('english', note)) stored`);
  await knex.raw(`create index ai_feedback_knowledge on ai_feedback using gin (search) where to_knowledge`);

  await knex.schema.createTable('assistant_conversations', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.text('title').notNullable().defaultTo('');
    // idle, running, awaiting_approval, error
    table.text('status').notNullable().defaultTo('idle');
    table.integer('seq').notNullable().defaultTo(0);
    table.integer('tick').notNullable().defaultTo(0);
    table.text('error');
    table.jsonb('pending_call');
    table.jsonb('progress');
    table.jsonb('last_turn');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['user_id', 'updated_at']);
  });

  await knex.schema.createTable('assistant_messages', (table) => {
    table.uuid('conversation_id').notNullable().references('assistant_conversations.id').onDelete('CASCADE');
    table.integer('seq').notNullable();
    table.text('role').notNullable();
    table.text('content').notNullable().defaultTo('');
    table.jsonb('tool_calls');
    table.text('tool_call_id');
    table.text('name');
    table.jsonb('arguments');
    table.text('status');
    table.text('navigate');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.primary(['conversation_id', 'seq']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('assistant_messages');
  await knex.schema.dropTable('assistant_conversations');
  await knex.schema.dropTable('ai_feedback');
  await knex.schema.dropTable('ai_reviews');
  await knex.schema.dropTable('ai_delegations');
}
