import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('verification_flows', (table) => {
    table.text('code').primary();
    table.text('name').notNullable();
    table.boolean('active').notNullable().defaultTo(true);
    table.specificType('required_artifact_types', 'text[]').notNullable();
    table.boolean('requires_video_call').notNullable().defaultTo(false);
    table.text('notify_url');
    // The HMAC key for result notifications; shown to the operator once, like an api secret.
    table.text('notify_secret');
    table.boolean('is_default').notNullable().defaultTo(false);
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.raw('create unique index verification_flows_one_default on verification_flows (is_default) where is_default');

  await knex.schema.createTable('verification_sessions', (table) => {
    table.text('id').primary();
    table.text('customer_ref').notNullable();
    table.text('flow_code').notNullable().references('verification_flows.code');
    table.text('status').notNullable().defaultTo('open');
    table.integer('attempt_no').notNullable().defaultTo(1);
    table.specificType('required_artifact_types', 'text[]').notNullable();
    table.specificType('pending_artifact_types', 'text[]').notNullable();
    table.specificType('succeeded_artifact_types', 'text[]').notNullable().defaultTo('{}');
    table.boolean('requires_video_call').notNullable();
    table.text('videocall_token').notNullable();
    table.jsonb('mrz_data');
    // The end user's device, as the merchant's server reports it.
    table.text('device_id');
    table.text('ip_address');
    table.text('user_agent');
    table.jsonb('geo');
    table.jsonb('checklist');
    table.text('closed_by');
    table.timestamp('closed_at', { useTz: true });
    table.text('created_by').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  // At most one open session per customer and flow, even under concurrent create-session calls.
  await knex.raw(`create unique index verification_sessions_one_open on verification_sessions (customer_ref, flow_code) where status = 'open'`);

  await knex.schema.createTable('verification_artifacts', (table) => {
    table.uuid('id').primary();
    table.text('session_id').notNullable().references('verification_sessions.id');
    table.text('artifact_type').notNullable();
    table.text('content_type').notNullable();
    table.bigInteger('size').notNullable();
    table.text('sha256').notNullable();
    table.text('path').notNullable();
    table.jsonb('extra_data');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['session_id']);
  });

  await knex.schema.createTable('verification_results', (table) => {
    table.uuid('id').primary();
    table.text('session_id').notNullable().references('verification_sessions.id');
    table.uuid('artifact_id').notNullable().unique().references('verification_artifacts.id');
    table.text('type').notNullable();
    table.text('code').notNullable();
    table.text('message').notNullable();
    table.jsonb('data');
    // What the verifier saw beyond the message's data (timings, mismatches, similarity), for review.
    table.jsonb('details').notNullable().defaultTo('{}');
    table.text('correlation_id').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('webhook_deliveries', (table) => {
    table.bigIncrements('id');
    table.text('session_id').notNullable();
    table.text('url').notNullable();
    table.integer('attempt').notNullable();
    table.integer('status_code');
    table.text('error');
    table.integer('duration_ms').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['webhook_deliveries', 'verification_results', 'verification_artifacts', 'verification_sessions', 'verification_flows']) {
    await knex.schema.dropTable(table);
  }
}
