import type { Knex } from 'knex';

/**
 * The back office's own models: the audit log of staff writes, alerts and the cases they open,
 * compliance decisions (append-only, enforced by the database), approval policies and requests,
 * reports and their results, and notifications. Later work adds behaviour; the shapes live here.
 */
export async function up(knex: Knex): Promise<void> {
  // admin.logentry: one row per write through the back office's write chain.
  await knex.schema.createTable('admin_log_entries', (table) => {
    table.bigIncrements('id');
    table.timestamp('action_time', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.uuid('user_id').references('staff_users.id').onDelete('SET NULL');
    // who, as recorded when the write happened (staff username, operator, system)
    table.text('actor').notNullable();
    // 1 add, 2 change, 3 delete (Django's action flags)
    table.smallint('action_flag').notNullable();
    // app_label.model of the changed record
    table.text('content_type').notNullable();
    table.text('object_id').notNullable();
    table.text('object_repr').notNullable();
    // {field: [old, new]} for a change, the stored values for an add or delete
    table.jsonb('change').notNullable().defaultTo('{}');
    table.text('approval_request_id');
    table.index(['content_type', 'object_id', 'action_time']);
    table.index(['action_time']);
  });

  // engine.watchlist: one case per customer at a time, opened or extended by alerts.
  await knex.schema.createTable('cases', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.uuid('customer_id').notNullable().references('customers.id');
    table.text('status').notNullable().defaultTo('open');
    table.boolean('flagged').notNullable().defaultTo(false);
    table.text('account_action').notNullable().defaultTo('none');
    table.date('postponed_until');
    table.uuid('assignee_id').references('staff_users.id').onDelete('SET NULL');
    table.decimal('priority', 5, 2).notNullable().defaultTo(0);
    table.integer('alert_count').notNullable().defaultTo(0);
    table.timestamp('opened_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('closed_at', { useTz: true });
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['status', 'priority']);
  });
  await knex.raw(`create unique index cases_one_open_per_customer on cases (customer_id) where status <> 'closed'`);

  await knex.schema.createTable('case_history', (table) => {
    table.bigIncrements('id');
    table.uuid('case_id').notNullable().references('cases.id').onDelete('CASCADE');
    table.uuid('user_id').references('staff_users.id').onDelete('SET NULL');
    table.text('actor').notNullable();
    table.jsonb('changes').notNullable();
    table.text('rationale').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['case_id', 'created_at']);
  });

  // engine.alert: a REVIEW or REJECT result (or a sanctions hit) worth a person's look.
  await knex.schema.createTable('alerts', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.uuid('case_id').references('cases.id').onDelete('SET NULL');
    table.uuid('customer_id').notNullable().references('customers.id');
    // customer, financial or non_financial: which table record_id points into
    table.text('target').notNullable();
    table.uuid('record_id').notNullable();
    table.text('record_ref');
    table.uuid('log_id');
    table.text('kind').notNullable().defaultTo('rules');
    table.decimal('score', 5, 2).notNullable();
    table.text('decision').notNullable();
    table.specificType('rule_codes', 'text[]').notNullable().defaultTo('{}');
    table.text('status').notNullable().defaultTo('open');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['case_id']);
    table.index(['status', 'created_at']);
    table.index(['target', 'record_id']);
  });

  // engine.compliancedecision: append-only; a wrong decision is corrected by a new one.
  await knex.schema.createTable('compliance_decisions', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    // executionlog, financialevent or nonfinancialevent
    table.text('target_model').notNullable();
    table.uuid('target_id').notNullable();
    table.text('decision').notNullable();
    table.decimal('score', 5, 2);
    table.decimal('original_score', 5, 2);
    table.text('original_decision');
    table.text('description').notNullable();
    table.text('document_description').notNullable().defaultTo('');
    table.jsonb('attachments').notNullable().defaultTo('[]');
    table.uuid('batch_id');
    table.uuid('case_id').references('cases.id');
    table.uuid('actor_id').references('staff_users.id');
    table.text('actor').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['target_model', 'target_id', 'created_at']);
  });
  await knex.raw(`
    create function compliance_decisions_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'compliance decisions are append-only: % refused', tg_op using errcode = 'P0001';
    end $$`);
  await knex.raw(`
    create trigger compliance_decisions_append_only before update or delete on compliance_decisions
    for each row execute function compliance_decisions_append_only()`);

  await knex.schema.createTable('approval_policies', (table) => {
    table.increments('id').primary();
    // app_label.model
    table.text('content_type').notNullable();
    // add, change, delete or decision
    table.text('operation').notNullable();
    table.integer('stages').notNullable().defaultTo(1);
    table.integer('signatures_per_stage').notNullable().defaultTo(1);
    table.integer('signer_group_id').references('staff_groups.id').onDelete('SET NULL');
    table.text('signer_permission');
    table.boolean('active').notNullable().defaultTo(true);
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.unique(['content_type', 'operation']);
  });

  await knex.schema.createTable('approval_requests', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.integer('policy_id').references('approval_policies.id').onDelete('SET NULL');
    table.text('content_type').notNullable();
    table.text('object_id');
    table.text('object_repr').notNullable().defaultTo('');
    table.text('operation').notNullable();
    // the typed diff and the payload to apply once approved
    table.jsonb('diff').notNullable();
    table.jsonb('payload').notNullable();
    // pending, approved, rejected, withdrawn
    table.text('status').notNullable().defaultTo('pending');
    table.integer('stage').notNullable().defaultTo(1);
    table.integer('stages').notNullable().defaultTo(1);
    table.integer('signatures_required').notNullable().defaultTo(1);
    table.uuid('maker_id').references('staff_users.id').onDelete('SET NULL');
    table.text('maker').notNullable();
    table.jsonb('attachments').notNullable().defaultTo('[]');
    table.jsonb('evidence');
    table.jsonb('mcp_origin');
    table.text('reason').notNullable().defaultTo('');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('processed_at', { useTz: true });
    table.index(['status', 'created_at']);
  });
  // A record has at most one pending request: a second change is refused while it waits.
  await knex.raw(`create unique index approval_requests_one_pending on approval_requests (content_type, object_id) where status = 'pending' and object_id is not null`);

  await knex.schema.createTable('approval_signatures', (table) => {
    table.bigIncrements('id');
    table.uuid('request_id').notNullable().references('approval_requests.id').onDelete('CASCADE');
    table.integer('stage').notNullable();
    table.uuid('user_id').notNullable().references('staff_users.id');
    table.text('action').notNullable();
    table.text('reason').notNullable().defaultTo('');
    table.jsonb('attachments').notNullable().defaultTo('[]');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.unique(['request_id', 'user_id']);
  });

  await knex.schema.createTable('reports', (table) => {
    table.increments('id').primary();
    table.text('name').notNullable();
    table.text('description').notNullable().defaultTo('');
    table.text('kind').notNullable();
    table.jsonb('parameters').notNullable().defaultTo('{}');
    table.uuid('created_by_id').references('staff_users.id').onDelete('SET NULL');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('report_results', (table) => {
    table.increments('id').primary();
    table.integer('report_id').notNullable().references('reports.id').onDelete('CASCADE');
    // queued, running, done, failed
    table.text('status').notNullable().defaultTo('queued');
    table.timestamp('started_at', { useTz: true });
    table.timestamp('completed_at', { useTz: true });
    table.integer('row_count');
    table.text('error_message');
    table.jsonb('columns');
    table.jsonb('rows');
    table.text('file_path');
    table.uuid('requested_by_id').references('staff_users.id').onDelete('SET NULL');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['report_id', 'created_at']);
  });

  await knex.schema.createTable('notifications', (table) => {
    table.bigIncrements('id');
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.text('kind').notNullable();
    table.text('title').notNullable();
    table.text('body').notNullable().defaultTo('');
    // app_label.model and pk of the record to open
    table.text('target_model');
    table.text('target_pk');
    table.boolean('read').notNullable().defaultTo(false);
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['user_id', 'read', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['notifications', 'report_results', 'reports', 'approval_signatures', 'approval_requests', 'approval_policies',
    'compliance_decisions', 'alerts', 'case_history', 'cases', 'admin_log_entries']) {
    await knex.schema.dropTableIfExists(table);
  }
  await knex.raw('drop function if exists compliance_decisions_append_only()');
}
