import fs from 'node:fs/promises';
import path from 'node:path';
import readline from 'node:readline';
import { createReadStream } from 'node:fs';
import type { Database } from '../db/database.ts';
import { announce, CHANNELS } from '../db/notifications.ts';
import { recordAudit } from '../audit.ts';
import { parseOfac, parseOpenSanctions, parseUnConsolidated, type ImportResult, type SanctionSource } from '../modules/screening/sanctions/importers.ts';
import { replaceSource } from '../modules/screening/sanctions/store.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

const FORMATS: SanctionSource[] = ['ofac', 'un', 'opensanctions'];

async function readFile(file: string): Promise<string> {
  return fs.readFile(file, 'utf8').catch((error: Error) => {
    throw new CliError(`Cannot read ${file}: ${error.message}`);
  });
}

async function parse(format: SanctionSource, files: string[]): Promise<ImportResult> {
  switch (format) {
    case 'ofac': {
      const byName = (name: string) => files.find((file) => path.basename(file).toLowerCase().startsWith(name));
      const sdn = byName('sdn') ?? files[0]!;
      const alt = byName('alt');
      const add = byName('add');
      return parseOfac({ sdn: await readFile(sdn), alt: alt && (await readFile(alt)), add: add && (await readFile(add)) });
    }
    case 'un':
      return parseUnConsolidated(await readFile(files[0]!));
    case 'opensanctions': {
      await fs.access(files[0]!).catch((error: Error) => {
        throw new CliError(`Cannot read ${files[0]}: ${error.message}`);
      });
      return parseOpenSanctions(readline.createInterface({ input: createReadStream(files[0]!), crlfDelay: Infinity }));
    }
  }
}

/**
 * `sanctions import` replaces one source's entries in one transaction and announces it, so that
 * running servers rebuild their screening index before their next customer batch.
 */
export async function sanctionsCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...rest] = args;
  switch (action) {
    case 'import': {
      const { values, positionals } = parseOptions(rest, { format: { type: 'string' } }, true);
      const format = values.format as SanctionSource | undefined;
      if (!format || !FORMATS.includes(format)) throw new CliError(`sanctions import needs --format ${FORMATS.join('|')}`, 2);
      if (positionals.length === 0) throw new CliError('sanctions import needs at least one FILE', 2);
      const started = Date.now();
      const parsed = await parse(format, positionals);
      if (parsed.entries.length === 0) throw new CliError(`No entries found in ${positionals.join(', ')} as ${format}; nothing was replaced.`);
      await knex.transaction(async (trx) => {
        await replaceSource(trx, format, parsed.entries);
        await recordAudit(trx, OPERATOR, 'sanctions.import', 'sanction_source', format, { entries: parsed.entries.length, files: positionals });
        await announce(trx, CHANNELS.sanctions, format);
      });
      return { source: format, imported: parsed.entries.length, skipped: parsed.skipped, ignored: parsed.ignored, ms: Date.now() - started };
    }
    case 'status':
      return knex('sanction_entries').select('source').count({ entries: '*' }).max({ imported_at: 'imported_at' }).groupBy('source').orderBy('source');
    default:
      throw new CliError(`Unknown sanctions command: ${action ?? '(none)'} (import, status)`, 2);
  }
}
