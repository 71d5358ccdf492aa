import type { Knex } from 'knex';

/**
 * What keeps staff informed (issue 13): the video-call queue (one row per KYC session whose flow
 * asks for a call, from waiting to offered, in call and ended: the agent lobby and the agent
 * summary read it), push delivery bookkeeping on notifications, and indexes for the notification
 * list and the dashboard.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('video_call_queue', (table) => {
    table.bigIncrements('id');
    table.text('session_id').notNullable().unique().references('verification_sessions.id').onDelete('CASCADE');
    table.text('customer_ref').notNullable();
    // waiting, offered, in_call, ended
    table.text('status').notNullable().defaultTo('waiting');
    table.uuid('offered_to').references('staff_users.id').onDelete('SET NULL');
    table.timestamp('offered_at', { useTz: true });
    table.uuid('agent_id').references('staff_users.id').onDelete('SET NULL');
    table.timestamp('taken_at', { useTz: true });
    table.timestamp('ended_at', { useTz: true });
    table.timestamp('enqueued_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['status', 'enqueued_at']);
    table.index(['agent_id', 'taken_at']);
  });

  // A session whose flow asks for a video call enters the queue as it is created, and leaves it
  // when it closes before a call; every change is announced on warden_video_queue (the staff socket's
  // videoCallQueue broadcast and the offer round listen there), whichever code path wrote it.
  await knex.raw(`
    create function video_call_queue_enqueue() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' and new.requires_video_call and new.status = 'open' then
        insert into video_call_queue (session_id, customer_ref) values (new.id, new.customer_ref) on conflict (session_id) do nothing;
      elsif tg_op = 'UPDATE' and new.status <> 'open' and old.status = 'open' then
        update video_call_queue set status = 'ended', ended_at = now() where session_id = new.id and status in ('waiting', 'offered');
      end if;
      return null;
    end $$`);
  await knex.raw(`
    create trigger verification_sessions_video_queue after insert or update of status on verification_sessions
    for each row execute function video_call_queue_enqueue()`);
  await knex.raw(`
    create function video_call_queue_announce() returns trigger language plpgsql as $$
    begin
      perform pg_notify('warden_video_queue', json_build_object('session_id', new.session_id, 'status', new.status)::text);
      return null;
    end $$`);
  await knex.raw(`
    create trigger video_call_queue_announce after insert or update on video_call_queue
    for each row execute function video_call_queue_announce()`);

  await knex.schema.alterTable('notifications', (table) => {
    // set once the push job has handed the notification to the providers (or found no device)
    table.timestamp('pushed_at', { useTz: true });
  });
  await knex.raw('create index notifications_user_id_desc on notifications (user_id, id desc)');
  // The dashboard cards' 7-day trends read their tables by creation time.
  await knex.raw('create index verification_sessions_status on verification_sessions (status, created_at)');
  await knex.raw('create index alerts_created_at on alerts (created_at)');
  await knex.raw('create index compliance_decisions_created_at on compliance_decisions (created_at)');
  // Decisions by day and 30-day volumes per customer read a month of events from the event_date
  // index alone: the list's index (0012) is widened to carry what they read instead of adding
  // another index to the ingest hot path.
  await knex.raw('create index financial_transactions_event_date_cover on financial_transactions (event_date) include (decision, customer_id, amount)');
  await knex.raw('drop index financial_transactions_event_date');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('create index financial_transactions_event_date on financial_transactions (event_date)');
  await knex.raw('drop index if exists financial_transactions_event_date_cover');
  await knex.raw('drop trigger if exists video_call_queue_announce on video_call_queue');
  await knex.raw('drop trigger if exists verification_sessions_video_queue on verification_sessions');
  await knex.raw('drop function if exists video_call_queue_announce()');
  await knex.raw('drop function if exists video_call_queue_enqueue()');
  await knex.raw('drop index if exists verification_sessions_status');
  await knex.raw('drop index if exists alerts_created_at');
  await knex.raw('drop index if exists compliance_decisions_created_at');
  await knex.raw('drop index if exists notifications_user_id_desc');
  await knex.schema.alterTable('notifications', (table) => {
    table.dropColumn('pushed_at');
  });
  await knex.schema.dropTableIfExists('video_call_queue');
}
