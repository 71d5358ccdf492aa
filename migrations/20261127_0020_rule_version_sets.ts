import type { Knex } from 'knex';

/**
 * Execution logs name the versions of the rules that ran by a content-addressed set instead of
 * carrying the map (src/modules/rules/version-sets.ts): a 30-rule map was about 590 of a log's
 * 2,600 bytes, the same in every log of a batch. The stored logs' maps move into the sets, keyed
 * by the MD5 of their JSON text as stored. For logs written since 20261123_0007 that is the text
 * the service wrote, so the id it computes for the same map; logs from before kept jsonb's own
 * text of the map (spaces, keys reordered), so the same map may sit under a second id: every log
 * still joins its set.
 *
 * This rewrites every stored log under one lock: on a large table, run it in a maintenance window
 * and VACUUM FULL (or pg_repack) execution_logs afterwards to give back the dropped column's space.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`create table rule_version_sets (
    id text primary key,
    versions json not null,
    created_at timestamptz not null default now())`);
  await knex.raw(`insert into rule_version_sets (id, versions)
    select distinct on (md5(rule_versions::text)) md5(rule_versions::text), rule_versions from execution_logs`);
  await knex.raw('alter table execution_logs add column rule_version_set text');
  await knex.raw('update execution_logs set rule_version_set = md5(rule_versions::text)');
  await knex.raw('alter table execution_logs drop column rule_versions');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`alter table execution_logs add column rule_versions json not null default '{}'`);
  await knex.raw('update execution_logs l set rule_versions = s.versions from rule_version_sets s where s.id = l.rule_version_set');
  await knex.raw('alter table execution_logs alter column rule_versions drop default, drop column rule_version_set');
  // As 20261123_0007 left the column.
  const { rows } = await knex.raw(`select 'lz4' = any(enumvals) as available from pg_settings where name = 'default_toast_compression'`);
  if (rows[0]?.available) await knex.raw('alter table execution_logs alter column rule_versions set compression lz4');
  await knex.raw('drop table rule_version_sets');
}
