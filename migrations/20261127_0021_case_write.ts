import type { Knex } from 'knex';

/**
 * What opening a case costs (issue 17: a customer batch of 1000 opens up to 1000 cases in its
 * transaction, 740 in the benchmark). The foreign key from cases to customers cost a lookup per
 * case: COPY of 740 new cases took 9.2 ms with it and 4.9 ms without (scratch, embedded PostgreSQL).
 *
 * It checked nothing the writer does not: the alerts writer (src/modules/cases/alerts.ts) is the
 * only one that opens cases, each for a customer stored in the same transaction (the back office
 * neither adds cases nor changes their customer), and no module deletes customers. Like the
 * alerts' key to cases (migration 0019), it is dropped; the unique index of open cases per customer stays.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table cases drop constraint cases_customer_id_foreign');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('alter table cases add constraint cases_customer_id_foreign foreign key (customer_id) references customers (id)');
}
