import type { Knex } from 'knex';

/**
 * Screening hits (issue 36): one record per customer and list entry that screening matched, which
 * an officer reviews (open, confirmed, false_positive). A false positive keeps the fingerprint of
 * what it was judged on (the entry's names, birth dates and nationalities and the customer's name,
 * birth date and nationality) so that the same entry stops counting on that customer until one of
 * them changes.
 *
 * The link to the entry (entry_id) is kept without a foreign key: an import replaces a source's
 * rows wholesale (delete, then insert under new ids), which a per-row ON DELETE SET NULL would
 * follow one lookup per deleted entry. Two statement-level triggers follow it with one join per
 * statement instead: a deleted entry unlinks its hits, an inserted one links the hits of its
 * (source, source_id), so a re-import that keeps an entry keeps its hits linked.
 *
 * Nor do customer_id and reviewed_by_id have one, for the cost of the write (like the cases'
 * customer, migration 0021): the customer batch writes its hits right after storing their
 * customers, hundreds at once where a batch is full of listed names (1500 hits of 450 customers,
 * scratch on a loaded machine: a median of 61 ms with both keys and an index on entry_id, 40
 * without), and no module deletes customers. The reviewer is the write chain's principal, and
 * stays named by reviewed_by (the username) should the account go.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('screening_hits', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.uuid('customer_id').notNullable();
    table.text('source').notNullable();
    table.text('source_id').notNullable();
    table.bigInteger('entry_id');
    table.text('entry_name').notNullable();
    table.text('matched_name').notNullable();
    table.decimal('similarity', 5, 2).notNullable();
    table.text('birth_date_agreement').notNullable().defaultTo('unknown');
    table.text('nationality_agreement').notNullable().defaultTo('unknown');
    table.jsonb('features').notNullable().defaultTo('{}');
    table.specificType('topics', 'text[]').notNullable().defaultTo('{}');
    table.text('status').notNullable().defaultTo('open');
    table.text('fingerprint');
    table.text('review_rationale');
    table.uuid('reviewed_by_id');
    table.text('reviewed_by');
    table.timestamp('reviewed_at', { useTz: true });
    table.timestamp('first_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('last_seen_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.unique(['customer_id', 'source', 'source_id']);
    table.index(['source', 'source_id']);
    table.index(['status', 'first_seen_at']);
  });
  await knex.raw(`alter table screening_hits add constraint screening_hits_status check (status in ('open', 'confirmed', 'false_positive'))`);

  // The matches of customers screened before hits existed, as open hits seen when they were last stored.
  await knex.raw(`
    insert into screening_hits
      (customer_id, source, source_id, entry_id, entry_name, matched_name, similarity, birth_date_agreement, nationality_agreement, features, topics, first_seen_at, last_seen_at)
    select distinct on (c.id, m.source, m.source_id)
      c.id, m.source, m.source_id, e.id, m.name, m.matched_name, m.score,
      coalesce(m.features->>'birth_date', 'unknown'), coalesce(m.features->>'nationality', 'unknown'), coalesce(m.features, '{}'), coalesce(m.topics, '{}'),
      c.updated_at, c.updated_at
    from customers c
    cross join lateral jsonb_to_recordset(c.sanction_matches) as m(source text, source_id text, name text, matched_name text, score numeric, topics text[], features jsonb)
    left join sanction_entries e on e.source = m.source and e.source_id = m.source_id
    where jsonb_typeof(c.sanction_matches) = 'array' and c.sanction_matches <> '[]'::jsonb
    order by c.id, m.source, m.source_id, m.score desc`);

  await knex.raw(`
    create function screening_hits_unlink_entries() returns trigger language plpgsql as $$
    begin
      update screening_hits h set entry_id = null from removed r where h.entry_id = r.id;
      return null;
    end $$`);
  await knex.raw(`
    create trigger sanction_entries_unlink_hits after delete on sanction_entries
    referencing old table as removed for each statement execute function screening_hits_unlink_entries()`);
  await knex.raw(`
    create function screening_hits_link_entries() returns trigger language plpgsql as $$
    begin
      update screening_hits h set entry_id = i.id from inserted i
      where h.source = i.source and h.source_id = i.source_id and h.entry_id is distinct from i.id;
      return null;
    end $$`);
  await knex.raw(`
    create trigger sanction_entries_link_hits after insert on sanction_entries
    referencing new table as inserted for each statement execute function screening_hits_link_entries()`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop trigger if exists sanction_entries_link_hits on sanction_entries');
  await knex.raw('drop trigger if exists sanction_entries_unlink_hits on sanction_entries');
  await knex.raw('drop function if exists screening_hits_link_entries()');
  await knex.raw('drop function if exists screening_hits_unlink_entries()');
  await knex.schema.dropTable('screening_hits');
}
