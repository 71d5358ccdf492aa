// For the knex command line (npx knex --knexfile knexfile.ts ...). The service itself migrates at start-up.
import { migrationSource } from './migrations/index.ts';

export default {
  client: 'pg',
  connection: process.env.DATABASE_URL,
  migrations: { migrationSource },
};
