import { parseArgs, type ParseArgsConfig } from 'node:util';

type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig['options']>;
import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase, type Database } from '../db/database.ts';
import type { Actor } from '../context.ts';
import { credentialCommand } from './credential.ts';
import { eventCommand } from './events.ts';
import { agentTokenCommand, flowCommand } from './kyc.ts';
import { rulesCommand } from './rules.ts';
import { sanctionsCommand } from './sanctions.ts';
import { verifyCommand } from './verify.ts';

/** A command's failure that the operator can fix: printed as JSON on stderr, exit code 1 (usage: 2). */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

/** Writes from the command line are recorded as the operator's, named by the shell user. */
export const OPERATOR: Actor = { type: 'operator', id: process.env.USER || 'cli' };

export type CommandHandler = (args: string[], database: Database) => Promise<unknown>;

/** Commands that work on files alone and never open the database. */
const OFFLINE_COMMANDS: Record<string, (args: string[]) => Promise<unknown>> = { verify: verifyCommand };

const USAGE = `Usage: warden <command> [options]   (every command prints JSON)

  credential create --name NAME [--allow-ip IP|CIDR|*]...
  credential list
  credential deactivate --api-key KEY
  credential activate --api-key KEY
  credential allow-ip --api-key KEY [--ip IP|CIDR|*]... [--remove IP]... [--replace]
  event define --slug SLUG --type 0|1|2 [--name NAME] [--inactive]   (0 Onboarding, 1 Financial, 2 Non-financial)
  event list
  rules load FILE.json [--replace]      (--replace deactivates active rules missing from the file)
  rules list
  sanctions import --format ofac|un|opensanctions FILE...
                                        (ofac: sdn.csv [alt.csv] [add.csv], recognised by name)
  sanctions status
  flow define --code C --artifacts doc_mrz,selfie [--name N] [--video-call] [--default] [--inactive] [--notify URL]
  flow list
  agent-token --session ID [--agent NAME]
  verify mrz IMAGE                      (reads the MRZ of a photograph; no database needed)
  verify doc-front IMAGE                (OCR fields, document outline, portrait; no database needed)
  verify face IMAGE_A IMAGE_B           (faces, similarity, threshold, match; no database needed)
  db migrate

Environment: DATABASE_URL (external PostgreSQL) or WARDEN_DATA_DIR (embedded, default ./data).`;

const COMMANDS: Record<string, CommandHandler> = {
  credential: credentialCommand,
  event: eventCommand,
  flow: flowCommand,
  'agent-token': agentTokenCommand,
  rules: rulesCommand,
  sanctions: sanctionsCommand,
  db: async (args) => {
    if (args[0] !== 'migrate') throw new CliError(`Unknown db command: ${args[0] ?? '(none)'}\n${USAGE}`, 2);
    return { migrated: true };
  },
};

export function parseOptions<const T extends ParseArgsOptionsConfig>(args: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({ args, options, allowPositionals, strict: true });
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
  const offline = OFFLINE_COMMANDS[command];
  if (offline) {
    try {
      console.log(JSON.stringify(await offline(rest), null, 2));
      return 0;
    } catch (error) {
      console.error(JSON.stringify({ error: (error as Error).message }));
      return error instanceof CliError ? error.exitCode : 1;
    }
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
