import type { Knex } from 'knex';

/**
 * What every alert costs to write (issue 17: a 1000-record batch raises up to 1000 alerts in its
 * transaction). Measured by COPY of 1000 alert rows into a table shaped like alerts: the foreign
 * key to cases cost about 4 ms per 1000 (a lookup per row), and each further index about 1 ms.
 *
 * - The case key: every alert is written with its case in one statement or transaction (the case
 *   upserted first, its id returned to the alerts), and cases are never deleted (neither the back
 *   office nor any module deletes one), so the key checked nothing the writer does not.
 * - The (target, record_id) index: nothing looks alerts up by their record (a record's page lists
 *   its execution logs; alerts are reached by case, customer, status or date).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('alter table alerts drop constraint alerts_case_id_foreign');
  await knex.raw('drop index alerts_target_record_id_index');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('create index alerts_target_record_id_index on alerts (target, record_id)');
  await knex.raw('alter table alerts add constraint alerts_case_id_foreign foreign key (case_id) references cases (id) on delete set null');
}
