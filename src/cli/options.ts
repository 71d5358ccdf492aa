import { parseArgs, type ParseArgsConfig } from 'node:util';
import type { Actor } from '../actor.ts';
import type { Database } from '../db/database.ts';

type ParseArgsOptionsConfig = NonNullable<ParseArgsConfig['options']>;

/** A command's failure that the operator can fix: printed as JSON on stderr, exit code 1 (usage: 2). */
export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

/** Writes from the command line are recorded as the operator's, named by the shell user. */
export const OPERATOR: Actor = { type: 'operator', id: process.env.USER || 'cli' };

export type CommandHandler = (args: string[], database: Database) => Promise<unknown>;

export function parseOptions<const T extends ParseArgsOptionsConfig>(args: string[], options: T, allowPositionals = false) {
  try {
    return parseArgs({ args, options, allowPositionals, strict: true });
  } catch (error) {
    throw new CliError((error as Error).message, 2);
  }
}
