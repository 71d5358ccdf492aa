import QRCode from 'qrcode';
import type { Knex } from 'knex';
import { loadConfig } from '../config.ts';
import type { Database } from '../db/database.ts';
import { PAIRING_PATH, QR_TYPE, QR_VERSION } from '../modules/mobile/constants.ts';
import {
  issueLoginTicket,
  issueReviewTicket,
  listReviewTickets,
  revokeReviewTickets,
  TicketRefusedError,
  type QrPayload,
} from '../modules/mobile/tickets.ts';
import { CliError, OPERATOR, parseOptions } from './options.ts';

async function userIdByName(knex: Knex, username: string): Promise<string> {
  const user = (await knex('staff_users').whereRaw('lower(username) = lower(?)', [username.trim()]).first('id')) as { id: string } | undefined;
  if (!user) throw new CliError(`No staff user named ${username}.`);
  return user.id;
}

async function writeQr(file: string, payload: QrPayload): Promise<void> {
  try {
    await QRCode.toFile(file, JSON.stringify(payload), { type: 'png', errorCorrectionLevel: 'M', margin: 2, scale: 8 });
  } catch (error) {
    throw new CliError(`Cannot write the QR image to ${file}: ${(error as Error).message}`);
  }
}

function refused<T>(work: Promise<T>): Promise<T> {
  return work.catch((error: unknown) => {
    throw error instanceof TicketRefusedError ? new CliError(error.message) : error;
  });
}

/** warden login-ticket --username U [--qr FILE.png]: the QR a user's web page would show, for pairing from a terminal. */
export async function loginTicketCommand(args: string[], { knex }: Database): Promise<unknown> {
  const { values } = parseOptions(args, { username: { type: 'string' }, qr: { type: 'string' } });
  if (!values.username) throw new CliError('login-ticket needs --username U', 2);
  const ticket = await refused(issueLoginTicket(knex, await userIdByName(knex, values.username)));
  if (values.qr) await writeQr(values.qr, ticket.qr);
  return ticket;
}

/**
 * warden issue_review_ticket: a multi-use ticket for a reviewer account (the app's manual entry
 * screen), shown once; --list shows every ticket without codes; --revoke ends one and its devices.
 */
export async function reviewTicketCommand(args: string[], { knex }: Database): Promise<unknown> {
  const { values } = parseOptions(args, {
    user: { type: 'string' },
    days: { type: 'string' },
    note: { type: 'string' },
    qr: { type: 'string' },
    force: { type: 'boolean' },
    list: { type: 'boolean' },
    revoke: { type: 'boolean' },
  });
  if (values.list) return listReviewTickets(knex);
  if (!values.user) throw new CliError('issue_review_ticket needs --user U (or --list)', 2);
  const userId = await userIdByName(knex, values.user);
  if (values.revoke) return { user: values.user, revoked: await revokeReviewTickets(knex, userId, OPERATOR) };
  if (values.days !== undefined && !/^\d+$/.test(values.days)) throw new CliError(`--days must be a whole number of days, got ${values.days}`, 2);
  const days = values.days === undefined ? undefined : Number(values.days);
  const { code, expires_at } = await refused(
    issueReviewTicket(knex, userId, { days, note: values.note, force: values.force ?? false, actor: OPERATOR }),
  );
  if (values.qr) await writeQr(values.qr, { v: QR_VERSION, typ: QR_TYPE, ticket: code, endpoint: PAIRING_PATH });
  return { workspace: loadConfig().publicUrl ?? null, code, expires_at };
}
