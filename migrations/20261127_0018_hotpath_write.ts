import type { Knex } from 'knex';

/**
 * Two costs of the scored batch's write (issue 17), and the index a customer's alerts need.
 *
 * Execution logs are written once per scored record and read whole: a 1000-record batch writes
 * 1000 rows of about 2.7 KB (the decision context, the matched rules, the rule versions). Above
 * about 2 KB PostgreSQL's toaster compresses the widest columns of every row before it is stored;
 * with the row kept whole up to a page (toast_tuple_target 8160) a batch's COPY of the logs took
 * 26 ms instead of 37 (bench/RESULTS.md). The price is disk: rows are stored uncompressed (about
 * half again as much as lz4 made of them); larger rows are still compressed as before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table execution_logs set (toast_tuple_target = 8160)');
  // Every alert is written with its case in one statement or transaction, and the case holds the
  // customer by its own foreign key (neither cases nor customers can be deleted): this key checked
  // nothing the case's does not, at 3.4 ms per 1000 alerts.
  await knex.raw('alter table alerts drop constraint alerts_customer_id_foreign');
  // A customer's page lists its alerts newest first, of every status: the partial index on open
  // alerts could not serve that (a scan of every alert), this one can, at the same cost per alert.
  await knex.raw('drop index alerts_customer_open');
  await knex.raw('create index alerts_customer_created_at on alerts (customer_id, created_at)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('drop index alerts_customer_created_at');
  await knex.raw(`create index alerts_customer_open on alerts (customer_id) where status = 'open'`);
  await knex.raw('alter table alerts add constraint alerts_customer_id_foreign foreign key (customer_id) references customers (id)');
  await knex.raw('alter table execution_logs reset (toast_tuple_target)');
}
