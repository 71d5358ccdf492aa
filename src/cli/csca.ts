import fs from 'node:fs/promises';
import path from 'node:path';
import type { Database } from '../db/database.ts';
import { recordAudit } from '../audit.ts';
import { CscaFormatError, readCscaFile, storeCscas } from '../modules/kyc/verifiers/passive-auth.ts';
import { CliError, OPERATOR } from './options.ts';

/**
 * `warden csca import FILE...`: country signing CA certificates, the trust anchors of chip passive
 * authentication, from an ICAO or national master list (CMS), an LDIF export, PEM or DER. Adds
 * certificates not stored yet (nothing is replaced: lists of several countries add up).
 * `warden csca list`: what is stored.
 */
export async function cscaCommand(args: string[], { knex }: Database): Promise<unknown> {
  const [action, ...files] = args;
  switch (action) {
    case 'import': {
      if (files.length === 0) throw new CliError('csca import needs at least one FILE', 2);
      const report = [];
      for (const file of files) {
        const bytes = await fs.readFile(file).catch((error: Error) => {
          throw new CliError(`Cannot read ${file}: ${error.message}`);
        });
        let read;
        try {
          read = await readCscaFile(bytes);
        } catch (error) {
          if (error instanceof CscaFormatError) throw new CliError(`${file}: ${error.message}`);
          throw error;
        }
        const added = await knex.transaction(async (trx) => {
          const count = await storeCscas(trx, read.certificates, path.basename(file));
          await recordAudit(trx, OPERATOR, 'csca.import', 'csca_certificates', path.basename(file), { certificates: read.certificates.length, added: count });
          return count;
        });
        report.push({ file, certificates: read.certificates.length, added, already_stored: read.certificates.length - added, master_lists: read.master_lists });
      }
      return { imported: report };
    }
    case 'list':
      return knex('csca_certificates').select('subject', 'not_before', 'not_after', 'source', 'sha256', 'imported_at').orderBy('subject');
    default:
      throw new CliError(`Unknown csca command: ${action ?? '(none)'} (import, list)`, 2);
  }
}
