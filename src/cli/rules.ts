import fs from 'node:fs/promises';
import type { Database } from '../db/database.ts';
import { parseRuleFile, RuleFileError } from '../modules/rules/definitions.ts';
import { listRules, loadRules } from '../modules/rules/store.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

export async function rulesCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  switch (action) {
    case 'load': {
      const { values, positionals } = parseOptions(rest, { replace: { type: 'boolean' } }, true);
      const file = positionals[0];
      if (!file) throw new CliError('rules load needs a FILE.json', 2);
      const text = await fs.readFile(file, 'utf8').catch((error: Error) => {
        throw new CliError(`Cannot read ${file}: ${error.message}`);
      });
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch (error) {
        throw new CliError(`${file} is not valid JSON: ${(error as Error).message}`);
      }
      try {
        return await loadRules(knex, parseRuleFile(json), OPERATOR, { deactivateMissing: values.replace ?? false });
      } catch (error) {
        if (error instanceof RuleFileError) throw new CliError(error.message);
        throw error;
      }
    }
    case 'list':
      return listRules(knex);
    default:
      throw new CliError(`Unknown rules command: ${action ?? '(none)'} (load, list)`, 2);
  }
}
