import type { Knex } from 'knex';
import { alertAdmin, complianceDecisionAdmin } from '../cases/admin.ts';
import { customerAdmin } from '../customer/admin.ts';
import { verificationSessionAdmin } from '../kyc/admin.ts';
import { financialEventAdmin } from '../transaction/admin.ts';
import { mayOperate, modelKey } from '../backoffice/declare.ts';
import type { ModelRegistration } from '../backoffice/registry.ts';
import type { Principal } from '../staff/principal.ts';
import { HttpError } from '../../http/errors.ts';
import { REPORT_KINDS, reportKind, type ModelSource, type ReportKind } from './kinds.ts';

/**
 * Who may run a report kind and read what it produced. A kind declares the back-office models
 * it reads (ReportKind.models); running it needs view on each of them, as the mobile data API
 * would need to list those models' records. The checks here serve the mobile endpoints, the
 * run job, and the registrations' scope and save hooks, which are given a principal but no bound
 * site: so they apply the access core's rule (mayOperate) to the registrations themselves.
 */

/** The registrations report kinds may read, by key (app_label.model). */
const READABLE: ReadonlyMap<string, ModelRegistration> = new Map(
  [customerAdmin, financialEventAdmin, complianceDecisionAdmin, alertAdmin, verificationSessionAdmin].map((registration) => [modelKey(registration.appLabel, registration.model), registration]),
);

for (const [name, kind] of REPORT_KINDS) {
  for (const key of kind.models) if (!READABLE.has(key)) throw new Error(`report kind ${name} reads ${key}, which reports/access.ts does not know`);
}

/** Whether the principal may view the model's records: the access core's rule (declare.ts mayOperate, which AdminSite.can applies). */
export function mayViewModel(principal: Principal, key: string): boolean {
  const model = READABLE.get(key);
  if (!model) return false;
  return mayOperate(principal, model, 'view');
}

/** An active superuser: reads every result, whoever requested it. */
export function isSuperuser(principal: Principal): boolean {
  return principal.user.is_active && principal.user.is_superuser;
}

/** The models of a kind the principal may not view, in the kind's order (empty: they may run it). */
export function modelsDenied(principal: Principal, kind: ReportKind): string[] {
  return kind.models.filter((key) => !mayViewModel(principal, key));
}

/** The names of the kinds the principal may run. */
export function runnableKinds(principal: Principal): string[] {
  return [...REPORT_KINDS].filter(([, kind]) => modelsDenied(principal, kind).length === 0).map(([name]) => name);
}

/** The plural name of a model a kind reads, for messages: `customers (customer.customer)`. */
export function describeModel(key: string): string {
  const model = READABLE.get(key);
  return model ? `${model.verboseNamePlural ?? `${model.verboseName}s`} (${key})` : key;
}

/** Running the kind reads a model the user may not view: 403, naming the model in the message and in data.model. */
export class ReportKindForbidden extends HttpError {
  constructor(readonly model: string) {
    super(403, `You may not run this report: it reads ${describeModel(model)}, which you do not have permission to view.`, 'permission_denied', { model });
  }
}

/** Throws ReportKindForbidden when the principal may not run the named kind (an unknown kind is no one's to run). */
export function assertMayRun(principal: Principal, kindName: string): ReportKind {
  const kind = reportKind(kindName);
  if (!kind) throw new HttpError(404, 'Report not found.', 'not_found');
  const [denied] = modelsDenied(principal, kind);
  if (denied) throw new ReportKindForbidden(denied);
  return kind;
}

/**
 * What a kind's query reads its models through: the model's table under `alias`, narrowed by the
 * model's scope for the requester, as every other read of it is. A kind may read only the
 * models it declares.
 */
export function modelSource(db: Knex | Knex.Transaction, kind: ReportKind, principal: Principal): ModelSource {
  return (key, alias) => {
    const model = READABLE.get(key);
    if (!model || !kind.models.includes(key)) throw new Error(`This report kind does not declare that it reads ${key}.`);
    const query = db({ [alias]: model.table });
    model.scope?.(query, principal, alias);
    return query;
  };
}
