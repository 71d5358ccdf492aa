import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('events', (table) => {
    table.text('slug').primary();
    table.text('name').notNullable();
    // 0 Onboarding, 1 Financial, 2 Non-financial (the spec's event_type constant)
    table.smallint('type').notNullable();
    table.boolean('active').notNullable().defaultTo(true);
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('rules', (table) => {
    table.text('code').primary();
    table.text('name').notNullable();
    table.text('description');
    table.text('target').notNullable();
    table.specificType('event_slugs', 'text[]').notNullable().defaultTo('{}');
    table.jsonb('expression').notNullable();
    table.decimal('score', 6, 2).notNullable();
    table.text('decision');
    table.boolean('active').notNullable().defaultTo(true);
    table.integer('version').notNullable().defaultTo(1);
    table.text('updated_by').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('customers', (table) => {
    table.uuid('id').primary();
    table.text('customer_ref').notNullable().unique();
    table.smallint('customer_type').notNullable().defaultTo(1);
    for (const name of ['first_name', 'last_name', 'gender', 'identity_number', 'passport_number', 'passport_issuing_country',
      'nationality', 'email', 'phone', 'country', 'occupation', 'ip_address', 'status', 'company_name', 'legal_form',
      'tax_number', 'tax_office', 'sector', 'country_of_origin', 'registry_number', 'lei_code', 'stock_ticker_symbol', 'website']) {
      table.text(name);
    }
    table.date('birth_date');
    table.date('incorporation_date');
    table.timestamp('registration_date', { useTz: true });
    table.timestamp('email_verified_at', { useTz: true });
    table.timestamp('phone_verified_at', { useTz: true });
    table.jsonb('founders');
    table.boolean('migration').notNullable().defaultTo(false);
    table.jsonb('raw').notNullable();
    table.decimal('score', 5, 2).notNullable();
    table.text('decision').notNullable();
    table.decimal('sanction_score', 5, 2);
    table.specificType('sanction_topic', 'text[]').notNullable().defaultTo('{}');
    table.jsonb('sanction_matches').notNullable().defaultTo('[]');
    table.decimal('ip_address_score', 5, 2);
    table.jsonb('ip_reasons').notNullable().defaultTo('[]');
    table.decimal('email_risk_score', 5, 2);
    table.jsonb('email_reasons').notNullable().defaultTo('[]');
    table.uuid('log_id');
    table.text('created_by').notNullable();
    table.text('updated_by').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('financial_transactions', (table) => {
    table.uuid('id').primary();
    table.text('transaction_ref').notNullable().unique();
    table.uuid('customer_id').notNullable().references('customers.id');
    table.text('customer_ref').notNullable();
    table.text('event_slug').notNullable().references('events.slug');
    table.decimal('amount', 12, 2).notNullable();
    table.text('currency').notNullable();
    table.smallint('io_type').notNullable();
    table.timestamp('event_date', { useTz: true }).notNullable();
    table.decimal('fee_amount', 14, 2);
    for (const name of ['payment_method', 'fee_currency', 'source_provider', 'source_ref', 'source_address',
      'destination_provider', 'destination_ref', 'destination_address', 'status', 'event_description', 'session_id',
      'device_id', 'ip_address', 'user_agent', 'country']) {
      table.text(name);
    }
    table.smallint('channel').notNullable().defaultTo(0);
    table.jsonb('geo');
    table.jsonb('metadata');
    table.jsonb('raw').notNullable();
    table.decimal('score', 5, 2);
    table.text('decision');
    table.boolean('rule_check').notNullable();
    table.uuid('log_id');
    table.text('created_by').notNullable();
    table.text('updated_by').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
  // Velocity aggregates read a customer's transactions over a time window.
  await knex.raw('create index financial_transactions_customer_date on financial_transactions (customer_id, event_date) include (amount, io_type)');

  await knex.schema.createTable('non_financial_events', (table) => {
    table.uuid('id').primary();
    // Nullable: without a ref the record cannot be deduplicated and is always a new row.
    table.text('transaction_ref').unique();
    table.uuid('customer_id').notNullable().references('customers.id');
    table.text('customer_ref').notNullable();
    table.text('event_slug').notNullable().references('events.slug');
    table.timestamp('event_date', { useTz: true }).notNullable();
    for (const name of ['status', 'event_description', 'session_id', 'device_id', 'ip_address', 'user_agent', 'country']) {
      table.text(name);
    }
    table.smallint('channel').notNullable().defaultTo(0);
    table.jsonb('geo');
    table.jsonb('metadata');
    table.jsonb('raw').notNullable();
    table.decimal('score', 5, 2);
    table.text('decision');
    table.boolean('rule_check').notNullable();
    table.uuid('log_id');
    table.text('created_by').notNullable();
    table.text('updated_by').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['customer_id', 'event_date']);
  });

  await knex.schema.createTable('execution_logs', (table) => {
    table.uuid('id').primary();
    table.text('target').notNullable();
    table.uuid('record_id').notNullable();
    table.text('record_ref');
    table.decimal('score', 5, 2).notNullable();
    table.text('decision').notNullable();
    table.jsonb('matched_rules').notNullable();
    table.jsonb('rule_versions').notNullable();
    table.jsonb('rule_errors').notNullable().defaultTo('[]');
    table.jsonb('data_context').notNullable();
    table.integer('duration_us').notNullable();
    table.text('actor').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['target', 'record_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['execution_logs', 'non_financial_events', 'financial_transactions', 'customers', 'rules', 'events']) {
    await knex.schema.dropTable(table);
  }
}
