import type { Knex } from 'knex';

/**
 * The case as a workbench (issue 36): a readable, sequential number (C-000123) for every case,
 * existing ones numbered in the order they were opened; and free-text notes on a case, kept like
 * the history (append-only: a wrong note is corrected by a new one).
 *
 * The number comes from a sequence as the row is inserted (by the alerts writer's upsert or COPY,
 * which name no number); `reference` is its text form, stored so that every face searches and
 * shows the same string. Beyond C-999999 the number simply grows a digit.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('create sequence cases_number_seq');
  await knex.raw('alter table cases add column number bigint');
  await knex.raw(`
    update cases set number = numbered.n
    from (select id, row_number() over (order by opened_at, id) as n from cases) numbered
    where cases.id = numbered.id`);
  await knex.raw(`select setval('cases_number_seq', coalesce((select max(number) from cases), 0) + 1, false)`);
  await knex.raw(`alter table cases alter column number set default nextval('cases_number_seq'), alter column number set not null`);
  await knex.raw('alter sequence cases_number_seq owned by cases.number');
  await knex.raw('create unique index cases_number on cases (number)');
  await knex.raw(`alter table cases add column reference text generated always as ('C-' || lpad(number::text, greatest(6, length(number::text)), '0')) stored`);
  await knex.raw('create index cases_reference on cases (reference)');

  // The timeline reads a case's closing decisions and the approval requests on it by these.
  await knex.raw('create index compliance_decisions_case on compliance_decisions (case_id) where case_id is not null');
  await knex.raw('create index approval_requests_object on approval_requests (content_type, object_id)');

  await knex.schema.createTable('case_notes', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.uuid('case_id').notNullable().references('cases.id').onDelete('CASCADE');
    table.uuid('author_id').references('staff_users.id').onDelete('SET NULL');
    table.text('author').notNullable();
    table.text('body').notNullable();
    table.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.index(['case_id', 'created_at']);
  });
  await knex.raw(`
    create function case_notes_append_only() returns trigger language plpgsql as $$
    begin
      raise exception 'case notes are append-only: % refused', tg_op using errcode = 'P0001';
    end $$`);
  await knex.raw('create trigger case_notes_append_only before update or delete on case_notes for each row execute function case_notes_append_only()');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('case_notes');
  await knex.raw('drop function case_notes_append_only()');
  await knex.raw('drop index approval_requests_object');
  await knex.raw('drop index compliance_decisions_case');
  await knex.raw('alter table cases drop column reference, drop column number');
}
