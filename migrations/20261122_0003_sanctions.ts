import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  // One row per list entry as the importers produce it; the servers read the whole table into
  // the in-memory screening index, so nothing here is queried by name.
  await knex.schema.createTable('sanction_entries', (table) => {
    table.bigIncrements('id');
    table.text('source').notNullable();
    table.text('source_id').notNullable();
    table.text('schema').notNullable();
    table.text('name').notNullable();
    table.specificType('aliases', 'text[]').notNullable().defaultTo('{}');
    table.specificType('birth_dates', 'text[]').notNullable().defaultTo('{}');
    table.specificType('nationalities', 'text[]').notNullable().defaultTo('{}');
    table.specificType('topics', 'text[]').notNullable().defaultTo('{}');
    table.specificType('programs', 'text[]').notNullable().defaultTo('{}');
    table.text('remarks');
    table.timestamp('imported_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    table.unique(['source', 'source_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('sanction_entries');
}
