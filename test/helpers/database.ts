import { randomBytes } from 'node:crypto';
import knexFactory, { type Knex } from 'knex';

export interface TestDatabase {
  url: string;
  knex: Knex;
  drop(): Promise<void>;
}

/** A fresh database for one test file, copied from the template that test/run.ts migrated. */
export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = process.env.WARDEN_TEST_ADMIN_URL;
  const template = process.env.WARDEN_TEST_TEMPLATE;
  if (!adminUrl || !template) {
    throw new Error('Database tests need the template that `npm test` prepares: run them with `npm test [-- files]`.');
  }
  const name = `${template.replace('tpl', 't')}_${randomBytes(4).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: adminUrl, pool: { min: 0, max: 1 } });
  await admin.raw(`create database ${name} template ${template}`);
  await admin.destroy();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const knex = knexFactory({ client: 'pg', connection: url.toString(), pool: { min: 0, max: 10 } });
  return {
    url: url.toString(),
    knex,
    async drop() {
      await knex.destroy();
      const again = knexFactory({ client: 'pg', connection: adminUrl, pool: { min: 0, max: 1 } });
      await again.raw(`drop database if exists ${name} with (force)`);
      await again.destroy();
    },
  };
}

/** Another connection pool on an existing test database; dropping it only closes the pool. */
export async function joinTestDatabase(url: string): Promise<TestDatabase> {
  const knex = knexFactory({ client: 'pg', connection: url, pool: { min: 0, max: 10 } });
  return { url, knex, drop: () => knex.destroy() };
}
