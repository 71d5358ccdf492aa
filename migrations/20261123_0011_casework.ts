import type { Knex } from 'knex';

/**
 * Case work on the back-office tables: where a merchant hears about compliance decisions that
 * change a record's outcome (one webhook per merchant credential, signed like the KYC flow
 * notifications, every attempt logged), the execution-log rows such a decision writes into the
 * record's history, and the state of a rule-change request's replay evidence.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('merchant_decision_webhooks', (table) => {
    table.uuid('credential_id').primary().references('merchant_credentials.id').onDelete('CASCADE');
    table.text('url').notNullable();
    table.text('secret').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  await knex.schema.createTable('decision_deliveries', (table) => {
    table.bigIncrements('id');
    table.uuid('decision_id').notNullable().references('compliance_decisions.id');
    table.text('url').notNullable();
    table.integer('attempt').notNullable();
    table.integer('status_code');
    table.text('error');
    table.integer('duration_ms').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['decision_id']);
  });
  // The execution-log row a compliance decision wrote (null for the rule engine's own rows).
  await knex.schema.alterTable('execution_logs', (table) => {
    table.uuid('compliance_decision_id');
  });
  // queued, running, done or failed while a rule change's replay is computed; null for other requests.
  await knex.schema.alterTable('approval_requests', (table) => {
    table.text('evidence_status');
  });
  // A compliance decision opened for approval keeps its files with the request until it is applied.
  await knex.schema.alterTable('compliance_decisions', (table) => {
    table.uuid('approval_request_id');
  });
  await knex.raw('create index alerts_customer_open on alerts (customer_id) where status = \'open\'');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index if exists alerts_customer_open');
  // compliance_decisions refuses ALTER through no trigger (only UPDATE/DELETE rows), so the column can go.
  await knex.schema.alterTable('compliance_decisions', (table) => table.dropColumn('approval_request_id'));
  await knex.schema.alterTable('approval_requests', (table) => table.dropColumn('evidence_status'));
  await knex.schema.alterTable('execution_logs', (table) => table.dropColumn('compliance_decision_id'));
  await knex.schema.dropTableIfExists('decision_deliveries');
  await knex.schema.dropTableIfExists('merchant_decision_webhooks');
}
