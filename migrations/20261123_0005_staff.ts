import type { Knex } from 'knex';

/**
 * The staff side's accounts: users, groups and their permissions (`app_label.codename` text,
 * checked against the back-office registry when granted), web sessions, paired mobile devices
 * with their rotating refresh tokens, and login tickets. Every secret is stored as a hash.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('staff_users', (table) => {
    table.uuid('id').primary();
    table.text('username').notNullable();
    table.text('full_name').notNullable().defaultTo('');
    table.text('email').notNullable().defaultTo('');
    // null: no usable password (the account can pair by ticket only)
    table.text('password_hash');
    table.boolean('is_active').notNullable().defaultTo(true);
    table.boolean('is_staff').notNullable().defaultTo(true);
    table.boolean('is_superuser').notNullable().defaultTo(false);
    table.text('timezone').notNullable().defaultTo('UTC');
    table.text('language').notNullable().defaultTo('en');
    table.text('mobile').notNullable().defaultTo('');
    table.text('date_format').notNullable().defaultTo('YYYY-MM-DD');
    table.text('time_format').notNullable().defaultTo('HH:mm');
    table.boolean('show_today').notNullable().defaultTo(true);
    table.timestamp('last_login', { useTz: true });
    table.timestamp('date_joined', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // Bumped when the password changes: web sessions issued before it are dropped.
    table.timestamp('password_changed_at', { useTz: true });
  });
  await knex.raw('create unique index staff_users_username_ci on staff_users (lower(username))');

  // The optional video-call agent profile: a row makes the user an agent.
  await knex.schema.createTable('staff_video_agents', (table) => {
    table.uuid('user_id').primary().references('staff_users.id').onDelete('CASCADE');
    table.text('status').notNullable().defaultTo('AWAY');
    table.boolean('in_call').notNullable().defaultTo(false);
    table.timestamp('status_changed_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('staff_groups', (table) => {
    table.increments('id').primary();
    table.text('name').notNullable().unique();
  });
  await knex.schema.createTable('staff_group_permissions', (table) => {
    table.integer('group_id').notNullable().references('staff_groups.id').onDelete('CASCADE');
    table.text('codename').notNullable();
    table.primary(['group_id', 'codename']);
  });
  await knex.schema.createTable('staff_user_groups', (table) => {
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.integer('group_id').notNullable().references('staff_groups.id').onDelete('CASCADE');
    table.primary(['user_id', 'group_id']);
    table.index(['group_id']);
  });
  await knex.schema.createTable('staff_user_permissions', (table) => {
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.text('codename').notNullable();
    table.primary(['user_id', 'codename']);
  });

  await knex.schema.createTable('staff_web_sessions', (table) => {
    // sha256 of the cookie value; the value itself is never stored
    table.text('id_hash').primary();
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.text('csrf_token').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['user_id']);
  });

  await knex.schema.createTable('staff_saved_filters', (table) => {
    table.increments('id').primary();
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.text('app_label').notNullable();
    table.text('model').notNullable();
    table.text('name').notNullable();
    // the changelist query string (filters and search) as the web page had it
    table.text('query').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.unique(['user_id', 'app_label', 'model', 'name']);
  });

  await knex.schema.createTable('mobile_login_tickets', (table) => {
    table.uuid('id').primary();
    table.text('ticket_hash').notNullable().unique();
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    // 'login' (single use, minutes) or 'review' (multi-use, days, command line only)
    table.text('kind').notNullable();
    table.text('note').notNullable().defaultTo('');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('expires_at', { useTz: true }).notNullable();
    table.timestamp('used_at', { useTz: true });
    table.uuid('used_by_device');
    table.timestamp('revoked_at', { useTz: true });
    table.index(['user_id']);
  });

  await knex.schema.createTable('mobile_devices', (table) => {
    table.uuid('id').primary();
    table.uuid('user_id').notNullable().references('staff_users.id').onDelete('CASCADE');
    table.text('name').notNullable();
    table.text('platform').notNullable();
    table.text('app_version').notNullable().defaultTo('');
    table.uuid('ticket_id');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('last_seen_at', { useTz: true });
    table.timestamp('revoked_at', { useTz: true });
    table.text('revoked_reason');
    table.text('push_provider');
    table.text('push_token');
    table.boolean('push_enabled').notNullable().defaultTo(false);
    table.index(['user_id']);
  });

  // Every refresh token a device was given; only the newest unrotated one works. Presenting a
  // rotated one is token reuse and revokes the device.
  await knex.schema.createTable('mobile_refresh_tokens', (table) => {
    table.text('token_hash').primary();
    table.uuid('device_id').notNullable().references('mobile_devices.id').onDelete('CASCADE');
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('expires_at', { useTz: true }).notNullable();
    table.timestamp('rotated_at', { useTz: true });
    table.index(['device_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['mobile_refresh_tokens', 'mobile_devices', 'mobile_login_tickets', 'staff_saved_filters', 'staff_web_sessions',
    'staff_user_permissions', 'staff_user_groups', 'staff_group_permissions', 'staff_groups', 'staff_video_agents', 'staff_users']) {
    await knex.schema.dropTableIfExists(table);
  }
}
