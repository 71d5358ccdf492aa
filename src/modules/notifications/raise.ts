import type { Knex } from 'knex';
import { usersWhoMaySql } from '../backoffice/access.ts';
import { viewCodenames } from '../backoffice/declare.ts';
import { announceNotifications, notify, type RaisedNotification } from './service.ts';

const CASE_MODEL = 'engine.watchlist';
const REQUEST_MODEL = 'approval.approvalrequest';
/** Who may view cases (the access core's rule; cases may be changed, so change implies view). */
const CASE_VIEWERS = viewCodenames({ appLabel: 'engine', model: 'watchlist' });

/**
 * The notification of alerts on cases, as CTEs to append to a statement's `with`: `touched` is a
 * CTE of the cases the alerts went to (id, assignee_id, alert_count, reference, as they are after
 * the alerts); `codenames` and `model` the placeholders of CASE_VIEWERS and CASE_MODEL. The last
 * CTE, `notified`, inserts the notifications and returns them. For each case (named by its number,
 * C-000123, never by the customer, whom the recipient may not be allowed to see) its assignee, or,
 * unassigned, everyone who may view cases, is notified once, unless they still have an unread
 * alert notification for that case: a busy case does not flood anyone.
 */
export function caseAlertNotificationsSql(touched: string, codenames: string, model: string): string {
  return `viewers as (${usersWhoMaySql(codenames)}), recipients as (
       select t.id as case_id, t.reference, t.alert_count, v.id as user_id from ${touched} t cross join viewers v where t.assignee_id is null
       union all
       select t.id, t.reference, t.alert_count, t.assignee_id from ${touched} t join staff_users s on s.id = t.assignee_id and s.is_active
     ), notified as (
       insert into notifications (user_id, kind, title, body, target_model, target_pk)
       select r.user_id, 'alert', 'New alert on ' || r.reference, r.alert_count || ' alert(s) on this case', ${model}, r.case_id::text
       from recipients r
       where not exists (select 1 from notifications n where n.user_id = r.user_id and not n.read and n.kind = 'alert' and n.target_model = ${model} and n.target_pk = r.case_id::text)
       returning id, user_id, kind, title, body, target_model, target_pk, created_at
     )`;
}

/** The values of caseAlertNotificationsSql's two placeholders, in order. */
export const CASE_ALERT_NOTIFICATION_VALUES: readonly [string[], string] = [CASE_VIEWERS, CASE_MODEL];

export interface InsertedNotification {
  id: string;
  user_id: string;
  kind: string;
  title: string;
  body: string;
  target_model: string;
  target_pk: string;
  created_at: Date;
}

/** Sends the notifications a statement of caseAlertNotificationsSql inserted: one live message and push per user. */
export function announceCaseAlerts(trx: Knex.Transaction, inserted: readonly InsertedNotification[]): Promise<void> {
  return announceNotifications(
    trx,
    inserted.map((row): RaisedNotification => ({ ...row, id: String(row.id), target: { model: row.target_model, pk: row.target_pk } })),
  );
}

/**
 * Alerts just raised in a batch's transaction (a large batch's, by COPY): their open cases'
 * people are notified (caseAlertNotificationsSql), in one statement whatever the batch size, then
 * one live message and push per user.
 */
export async function notifyCaseAlerts(trx: Knex.Transaction, customerIds: readonly string[]): Promise<void> {
  if (!customerIds.length) return;
  const inserted = (await trx.raw(
    `with touched as (
       select c.id, c.assignee_id, c.alert_count, c.reference from cases c where c.customer_id = any(?::uuid[]) and c.status <> 'closed'
     ), ${caseAlertNotificationsSql('touched', '?::text[]', '?')}
     select * from notified`,
    [[...customerIds], CASE_VIEWERS, CASE_VIEWERS, CASE_MODEL, CASE_MODEL],
  )) as { rows: InsertedNotification[] };
  await announceCaseAlerts(trx, inserted.rows);
}

interface RequestFacts {
  id: string;
  content_type: string;
  object_repr: string;
  operation: string;
  stage: number;
  maker_id: string | null;
}

/**
 * The users who may sign a request now (maySign of the approvals service decides for each active
 * staff user but its maker). Passed in rather than imported, so the approvals module keeps the rule.
 */
export type SignerCheck = (trx: Knex.Transaction, userId: string) => Promise<boolean>;

async function signers(trx: Knex.Transaction, request: RequestFacts, maySign: SignerCheck): Promise<string[]> {
  const users = (await trx('staff_users').where({ is_active: true, is_staff: true }).select('id')) as { id: string }[];
  const allowed: string[] = [];
  for (const user of users) if (user.id !== request.maker_id && (await maySign(trx, user.id))) allowed.push(user.id);
  return allowed;
}

function describe(request: RequestFacts): string {
  return `${request.operation} ${request.content_type}${request.object_repr ? `: ${request.object_repr}` : ''}`;
}

/** A request opened or forwarded to its next stage: whoever may sign it now is asked for a signature. */
export async function notifySigners(trx: Knex.Transaction, requestId: string, maySign: SignerCheck): Promise<void> {
  const request = (await trx('approval_requests').where({ id: requestId }).first('id', 'content_type', 'object_repr', 'operation', 'stage', 'maker_id')) as RequestFacts | undefined;
  if (!request) return;
  await notify(trx, {
    userIds: await signers(trx, request, maySign),
    kind: 'approval_request',
    title: 'Approval request waiting for your signature',
    body: `${describe(request)} (stage ${request.stage})`,
    target: { model: REQUEST_MODEL, pk: request.id },
  });
}

/** The maker hears how their request went: approved, rejected or forwarded to the next stage. */
export async function notifyMaker(trx: Knex.Transaction, requestId: string, outcome: 'approved' | 'rejected' | 'forwarded'): Promise<void> {
  const request = (await trx('approval_requests').where({ id: requestId }).first('id', 'content_type', 'object_repr', 'operation', 'stage', 'maker_id', 'reason')) as
    | (RequestFacts & { reason: string })
    | undefined;
  if (!request?.maker_id) return;
  const titles = { approved: 'Your request was approved', rejected: 'Your request was rejected', forwarded: 'Your request moved to its next stage' };
  await notify(trx, {
    userIds: [request.maker_id],
    kind: `approval_${outcome}` as const,
    title: titles[outcome],
    body: outcome === 'rejected' && request.reason ? `${describe(request)}. Reason: ${request.reason}` : describe(request),
    target: { model: REQUEST_MODEL, pk: request.id },
  });
}
