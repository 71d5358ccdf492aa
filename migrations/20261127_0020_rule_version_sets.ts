import type { Knex } from 'knex';

/**
 * Execution logs name the versions of the rules that ran by a content-addressed set instead of
 * carrying the map (src/modules/rules/version-sets.ts): a 30-rule map was about 590 of a log's
 * 2,600 bytes, the same in every log of a batch. The stored logs' maps move into the sets, keyed
 * by the MD5 of their JSON text as written, which is the id the service computes for a map.
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
  await knex.raw('drop table rule_version_sets');
}
