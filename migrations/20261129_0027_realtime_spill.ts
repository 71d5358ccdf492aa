import type { Knex } from 'knex';

/**
 * realtime_spill: fan-out messages too big for a NOTIFY payload (PostgreSQL refuses 8000 bytes or
 * more). The writer stores the payload here in its own transaction and notifies the row's id;
 * every process reads the row when notified, and rows are deleted a minute after they were written
 * (src/realtime/fanout.ts). Unlogged: the rows live a minute and a crash only loses messages in
 * flight, so they are not worth writing to the WAL. created_at is the clock time of the insert,
 * not the start of the writer's transaction, which may have begun long before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    create unlogged table realtime_spill (
      id bigint generated always as identity primary key,
      payload text not null,
      created_at timestamptz not null default clock_timestamp()
    )`);
  await knex.raw('create index realtime_spill_created_at on realtime_spill (created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop table realtime_spill');
}
