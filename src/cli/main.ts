import { parseArgs, type ParseArgsConfig } from 'node:util';

type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig['options']>;
import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase, type Database } from '../db/database.ts';
import { credentialCommand } from './credential.ts';

/** A command's failure that the operator can fix: printed as JSON on stderr, exit code 1 (usage: 2). */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

export type CommandHandler = (args: string[], database: Database) => Promise<unknown>;

const USAGE = `Usage: warden <command> [options]   (every command prints JSON)

  credential create --name NAME [--allow-ip IP|CIDR|*]...
  credential list
  credential deactivate --api-key KEY
  credential activate --api-key KEY
  credential allow-ip --api-key KEY [--ip IP|CIDR|*]... [--remove IP]... [--replace]
  db migrate

Environment: DATABASE_URL (external PostgreSQL) or WARDEN_DATA_DIR (embedded, default ./data).`;

const COMMANDS: Record<string, CommandHandler> = {
  credential: credentialCommand,
  db: async (args) => {
    if (args[0] !== 'migrate') throw new CliError(`Unknown db command: ${args[0] ?? '(none)'}\n${USAGE}`, 2);
    return { migrated: true };
  },
};

export function parseOptions<const T extends ParseArgsOptionsConfig>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, allowPositionals: false, strict: true });
  } catch (error) {
    throw new CliError((error as Error).message, 2);
  }
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (!command || command === 'help' || command === '--help') {
    console.log(USAGE);
    return command ? 0 : 2;
  }
  const handler = COMMANDS[command];
  if (!handler) {
    console.error(JSON.stringify({ error: `Unknown command: ${command}` }));
    console.error(USAGE);
    return 2;
  }
  let database: Database | undefined;
  try {
    const config = loadConfig();
    database = await openDatabase(config, () => {});
    const result = await handler(rest, database);
    console.log(JSON.stringify(result, null, 2));
    return 0;
  } catch (error) {
    const known = error instanceof CliError || error instanceof ConfigError;
    console.error(JSON.stringify({ error: (error as Error).message }));
    return known ? (error as CliError).exitCode ?? 1 : 1;
  } finally {
    await database?.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
