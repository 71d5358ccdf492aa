import { approvalPolicyAdmin, approvalRequestAdmin, pendingApprovalRequestAdmin } from '../approvals/admin.ts';
import { alertAdmin, caseAdmin, complianceDecisionAdmin } from '../cases/admin.ts';
import { customerAdmin } from '../customer/admin.ts';
import { eventAdmin } from '../events/admin.ts';
import { artifactAdmin, flowAdmin, verificationSessionAdmin } from '../kyc/admin.ts';
import { credentialAdmin } from '../merchant/admin.ts';
import { deviceAdmin } from '../mobile/admin.ts';
import { notificationAdmin } from '../notifications/admin.ts';
import { reportAdmin, reportResultAdmin } from '../reports/admin.ts';
import { executionLogAdmin, ruleAdmin } from '../rules/admin.ts';
import { sanctionEntryAdmin } from '../screening/admin.ts';
import { groupAdmin, userAdmin } from '../staff/admin.ts';
import { financialEventAdmin, nonFinancialEventAdmin } from '../transaction/admin.ts';
import { logEntryAdmin } from './admin.ts';
import { approvalBlocks } from '../approvals/service.ts';
import { caseWorkBlocks } from '../cases/blocks.ts';
import type { Knex } from 'knex';
import type { Principal } from '../staff/principal.ts';
import { codenamesOf } from './declare.ts';
import { AdminSite, type DetailBlockProvider } from './site.ts';
import type { BoundModel, ModelRegistration, Row } from './registry.ts';

/** Every back-office model, each registered next to its module, in the order the index lists them. */
export const REGISTRATIONS: readonly ModelRegistration[] = [
  customerAdmin,
  financialEventAdmin,
  nonFinancialEventAdmin,
  alertAdmin,
  caseAdmin,
  complianceDecisionAdmin,
  executionLogAdmin,
  ruleAdmin,
  eventAdmin,
  sanctionEntryAdmin,
  flowAdmin,
  verificationSessionAdmin,
  artifactAdmin,
  credentialAdmin,
  approvalPolicyAdmin,
  approvalRequestAdmin,
  pendingApprovalRequestAdmin,
  reportAdmin,
  reportResultAdmin,
  notificationAdmin,
  userAdmin,
  groupAdmin,
  deviceAdmin,
  logEntryAdmin,
];

/** Every permission codename the back office knows; the command line checks grants against it. */
export function permissionCodenames(): string[] {
  return codenamesOf(REGISTRATIONS);
}

/** The site of every registration, bound to a database (the service binds it once at start-up). */
export function bindAdminSite(db: Knex): Promise<AdminSite> {
  return AdminSite.bind(db, REGISTRATIONS);
}

/** Every module's detail blocks (see DetailBlockProvider). */
export const DETAIL_BLOCKS: readonly DetailBlockProvider[] = [caseWorkBlocks, approvalBlocks];

/** The extra blocks of one record's detail, merged, for the mobile detail and the web change page alike. */
export async function detailBlocks(db: Knex, site: AdminSite, model: BoundModel, row: Row, principal: Principal): Promise<Record<string, unknown>> {
  const blocks: Record<string, unknown> = {};
  for (const provider of DETAIL_BLOCKS) {
    if (provider.models && !provider.models.includes(model.key)) continue;
    Object.assign(blocks, await provider.blocks({ db, site, model, row, principal }));
  }
  return blocks;
}
