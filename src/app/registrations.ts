import type { Knex } from 'knex';
import { aiReviewBlocks } from '../modules/ai/blocks.ts';
import { approvalPolicyAdmin, approvalRequestAdmin, pendingApprovalRequestAdmin } from '../modules/approvals/admin.ts';
import { approvalBlocks } from '../modules/approvals/service.ts';
import { codenamesOf } from '../modules/backoffice/declare.ts';
import { logEntryAdmin } from '../modules/backoffice/admin.ts';
import type { ModelRegistration } from '../modules/backoffice/registry.ts';
import { AdminSite } from '../modules/backoffice/site.ts';
import { alertAdmin, caseAdmin, caseNoteAdmin, complianceDecisionAdmin } from '../modules/cases/admin.ts';
import { caseWorkBlocks } from '../modules/cases/blocks.ts';
import { caseWorkbenchBlocks } from '../modules/cases/workbench.ts';
import { caseQueueBlocks, caseQueueSection } from '../modules/cases/queue.ts';
import { CaseEvidenceSection, CaseTimelineSection } from '../modules/cases/workbench-web.tsx';
import { CaseWorkSections, CaseWorkTopSections } from '../modules/cases/web.tsx';
import { customerAdmin } from '../modules/customer/admin.ts';
import { eventAdmin } from '../modules/events/admin.ts';
import { artifactAdmin, flowAdmin, verificationSessionAdmin } from '../modules/kyc/admin.ts';
import { credentialAdmin } from '../modules/merchant/admin.ts';
import { deviceAdmin } from '../modules/mobile/admin.ts';
import { notificationAdmin } from '../modules/notifications/admin.ts';
import { reportAdmin, reportResultAdmin } from '../modules/reports/admin.ts';
import { ReportRowsSection, reportResultBlocks } from '../modules/reports/web.tsx';
import { dashboardPanel } from '../modules/dashboard/web.tsx';
import { executionLogAdmin, ruleAdmin } from '../modules/rules/admin.ts';
import { sanctionEntryAdmin, screeningHitAdmin } from '../modules/screening/admin.ts';
import { screeningHitBlocks } from '../modules/screening/blocks.ts';
import { ScreeningHitSection } from '../modules/screening/web.tsx';
import { groupAdmin, userAdmin } from '../modules/staff/admin.ts';
import { financialEventAdmin, nonFinancialEventAdmin } from '../modules/transaction/admin.ts';

/**
 * Django's INSTALLED_APPS for the back office: every model registration, each declared next to its
 * module, in the order the index lists them, and what the modules add to the generic pages (detail
 * blocks, web sections). The generic back office imports none of them; it is handed this list.
 */
export const REGISTRATIONS: readonly ModelRegistration[] = [
  customerAdmin,
  financialEventAdmin,
  nonFinancialEventAdmin,
  alertAdmin,
  caseAdmin,
  caseNoteAdmin,
  complianceDecisionAdmin,
  executionLogAdmin,
  ruleAdmin,
  eventAdmin,
  sanctionEntryAdmin,
  screeningHitAdmin,
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
  return AdminSite.bind(db, REGISTRATIONS, {
    detailBlocks: [caseWorkBlocks, caseWorkbenchBlocks, caseQueueBlocks, approvalBlocks, screeningHitBlocks, aiReviewBlocks, reportResultBlocks],
    // The dashboard at the top of the web admin's index.
    indexPanels: [dashboardPanel],
    // The menu's link entries (the spec's url items), each for the users holding its permission.
    menuLinks: [
      { group: 'Dashboard', label: 'Dashboard', icon: 'dashboard', url: '/api/mobile/dashboard/widgets/', permission: 'transaction.view_financialevent' },
      { group: 'Dashboard', label: 'Video-call console', icon: 'videocam', url: '/api/mobile/dashboard/lobby/', permission: 'document.view_documentverificationsession' },
      { group: 'Reports', label: 'Reports', icon: 'assessment', url: '/api/mobile/data/report/report/', permission: 'report.view_report' },
    ],
    // Above a record's form the work done on it (take, matched rules, the decision form, the context,
    // a case's evidence and screening hits); below it the approval request and a case's timeline.
    detailSections: [
      caseQueueSection,
      { position: 'top', component: CaseWorkTopSections },
      { position: 'top', component: CaseEvidenceSection },
      { position: 'top', component: ScreeningHitSection },
      { position: 'bottom', component: CaseWorkSections },
      { position: 'bottom', component: CaseTimelineSection },
      { position: 'bottom', component: ReportRowsSection },
    ],
  });
}
