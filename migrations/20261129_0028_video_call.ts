import type { Knex } from 'knex';

/**
 * The call itself (issue 38). A session whose flow asks for a call no longer waits in the lobby
 * from its creation: its queue row is `pending` until the end user's page joins (with consent),
 * then `waiting` (enqueued_at is the join), `offered`, `in_call`, `ended`; an end user who leaves
 * before an agent takes the call goes back to `pending`. The queue row names the one connection
 * of the end user that joined (signals go to it only), the last agent whose offer lapsed (the
 * next round offers the call to someone else) and why the call ended. The consent the end user
 * gave is kept with the session.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('verification_sessions', (table) => {
    // {call, recording, text, at} as the end user's page sent it, plus received_at
    table.jsonb('call_consent');
  });
  await knex.schema.alterTable('video_call_queue', (table) => {
    table.text('end_user_client');
    table.uuid('passed_over').references('staff_users.id').onDelete('SET NULL');
    table.text('end_reason');
  });
  await knex.raw(`
    create or replace function video_call_queue_enqueue() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' and new.requires_video_call and new.status = 'open' then
        insert into video_call_queue (session_id, customer_ref, status) values (new.id, new.customer_ref, 'pending') on conflict (session_id) do nothing;
      elsif tg_op = 'UPDATE' and new.status <> 'open' and old.status = 'open' then
        update video_call_queue set status = 'ended', ended_at = now(), end_reason = coalesce(end_reason, 'session_closed')
        where session_id = new.id and status in ('pending', 'waiting', 'offered');
      end if;
      return null;
    end $$`);
  // Sessions created before this migration that nobody has joined yet: pending like new ones.
  await knex('video_call_queue').where({ status: 'waiting' }).update({ status: 'pending' });
  await knex('video_call_queue').where({ status: 'offered' }).update({ status: 'pending', offered_to: null, offered_at: null });
  await knex.schema.alterTable('video_call_queue', (table) => {
    table.index(['status', 'offered_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('video_call_queue', (table) => {
    table.dropIndex(['status', 'offered_at']);
  });
  await knex('video_call_queue').where({ status: 'pending' }).update({ status: 'waiting' });
  await knex.raw(`
    create or replace function video_call_queue_enqueue() returns trigger language plpgsql as $$
    begin
      if tg_op = 'INSERT' and new.requires_video_call and new.status = 'open' then
        insert into video_call_queue (session_id, customer_ref) values (new.id, new.customer_ref) on conflict (session_id) do nothing;
      elsif tg_op = 'UPDATE' and new.status <> 'open' and old.status = 'open' then
        update video_call_queue set status = 'ended', ended_at = now() where session_id = new.id and status in ('waiting', 'offered');
      end if;
      return null;
    end $$`);
  await knex.schema.alterTable('video_call_queue', (table) => {
    table.dropColumn('end_user_client');
    table.dropColumn('passed_over');
    table.dropColumn('end_reason');
  });
  await knex.schema.alterTable('verification_sessions', (table) => {
    table.dropColumn('call_consent');
  });
}
