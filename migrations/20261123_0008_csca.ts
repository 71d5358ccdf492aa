import type { Knex } from 'knex';

/**
 * Country signing CA certificates imported by the operator (`warden csca import`), the trust
 * anchors of chip passive authentication (ICAO 9303-11). One row per certificate (by the SHA-256 of
 * its DER): a master list imported again, or one that repeats another's certificates, adds nothing
 * twice. Subject and key identifier are kept to find a document signer's issuer without parsing
 * every certificate.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('csca_certificates', (table) => {
    table.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    table.string('sha256', 64).notNullable().unique();
    table.binary('der').notNullable();
    table.text('subject').notNullable();
    /** The subject's DER, hex: compared byte for byte with a document signer's issuer. */
    table.text('subject_der').notNullable().index();
    table.string('key_id', 128).nullable().index();
    table.timestamp('not_before', { useTz: true }).notNullable();
    table.timestamp('not_after', { useTz: true }).notNullable();
    table.text('source').notNullable();
    table.timestamp('imported_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('csca_certificates');
}
