import type { Knex } from 'knex';
import { mayName, visibleRow } from '../backoffice/access.ts';
import type { AdminSite } from '../backoffice/site.ts';
import type { BoundModel, Row } from '../backoffice/registry.ts';
import type { Principal } from '../staff/principal.ts';
import { formatTimestamp } from '../../timestamps.ts';
import { decisionContextOfLog, viewableDecisionContext } from '../rules/decision-context.ts';
import type { DecisionContext } from '../rules/evaluate.ts';
import { ruleContributions } from './rule-contributions.ts';

/**
 * The evidence an officer weighs beside a case's form: the customer with its risk scores and KYC
 * status, the alerted records (amount, currency, date, counterparty) with the rules they matched,
 * by name, with the score each contributed, and the decision context of the newest alert. The case page draws it; the mobile detail
 * carries it as its `evidence` block. Each part only for a viewer who may view its model; values
 * through the access core (visibleRow), so a hidden or redacted field stays so here.
 */

/** Alerts shown with their records: the newest 50 (a page of evidence to read, not a list to scroll); the alerts inline and the timeline have the rest. */
export const EVIDENCE_ALERTS = 50;

export interface LabelledValue {
  name: string;
  label: string;
  value: string;
}

export interface EvidenceRecord {
  alert: { pk: string; kind: string; decision: string; score: number; status: string; raised_at: string };
  record: { model: string; pk: string; ref: string | null; fields: LabelledValue[] } | null;
  rules: { code: string; name: string | null; score: number | null; decision: string | null }[];
}

export interface CaseEvidence {
  /** The decision context of the newest alert with an execution log: what the rules saw (null when none, or not the viewer's to see). */
  context: { alert: string; record_ref: string | null; data: DecisionContext } | null;
  customer: { pk: string; repr: string; fields: LabelledValue[] } | null;
  kyc: { pk: string; status: string; flow: string; created_at: string }[] | null;
  records: EvidenceRecord[] | null;
  alerts_total: number;
}

const CUSTOMER_FIELDS = ['customer_ref', 'customer_type', 'first_name', 'last_name', 'company_name', 'birth_date', 'nationality', 'country', 'status',
  'score', 'decision', 'sanction_score', 'sanction_topic', 'ip_address_score', 'email_risk_score'];
const FINANCIAL_FIELDS = ['transaction_ref', 'event_slug', 'amount', 'currency', 'io_type', 'event_date', 'payment_method', 'source_provider', 'source_ref',
  'source_address', 'destination_provider', 'destination_ref', 'destination_address', 'country', 'status', 'score', 'decision'];
const NON_FINANCIAL_FIELDS = ['transaction_ref', 'event_slug', 'event_date', 'payment_method', 'source_provider', 'source_ref', 'source_address', 'destination_provider',
  'destination_ref', 'destination_address', 'ip_address', 'country', 'score', 'decision'];
const RECORDS: Readonly<Record<string, { model: string; table: string; fields: string[] }>> = {
  financial: { model: 'transaction.financialevent', table: 'financial_transactions', fields: FINANCIAL_FIELDS },
  non_financial: { model: 'transaction.nonfinancialevent', table: 'non_financial_events', fields: NON_FINANCIAL_FIELDS },
  customer: { model: 'customer.customer', table: 'customers', fields: ['customer_ref', 'score', 'decision', 'sanction_score'] },
};

/** A stored value as text, with the field's choice label where it has one; empty values left out by the caller. */
function valueText(model: BoundModel, name: string, value: unknown): string {
  const field = model.formFields.find((candidate) => candidate.name === name);
  const choice = field?.choices?.find((candidate) => candidate.value === String(value));
  if (choice) return choice.label;
  if (Array.isArray(value)) return value.join(', ');
  if (value instanceof Date) return formatTimestamp(value);
  if (typeof value === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}/.test(value)) return formatTimestamp(new Date(value));
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  return String(value);
}

/** The named fields of a row the viewer may read, labelled, empty ones left out. */
function labelled(site: AdminSite, principal: Principal, model: BoundModel, row: Row, names: readonly string[]): LabelledValue[] {
  const visible = visibleRow(site, principal, model, row);
  const fields: LabelledValue[] = [];
  for (const name of names) {
    const value = visible[name];
    if (value === null || value === undefined || value === '' || (Array.isArray(value) && !value.length)) continue;
    const label = model.formFields.find((field) => field.name === name)?.label ?? name;
    fields.push({ name, label, value: valueText(model, name, value) });
  }
  return fields;
}

export async function caseEvidence(db: Knex, site: AdminSite, principal: Principal, caseRow: Row): Promise<CaseEvidence> {
  const customers = site.models.get('customer.customer')!;
  const sessions = site.models.get('document.documentverificationsession');
  const showCustomer = mayName(site, principal, customers.key);
  const showAlerts = mayName(site, principal, 'engine.alert');
  const [customer, alerts] = await Promise.all([
    showCustomer ? (db('customers').where('id', String(caseRow.customer_id)).first() as Promise<Row | undefined>) : Promise.resolve(undefined),
    showAlerts
      ? (db('alerts').where('case_id', String(caseRow.id)).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(EVIDENCE_ALERTS)
          .select('id', 'target', 'record_id', 'record_ref', 'log_id', 'kind', 'score', 'decision', 'rule_codes', 'status', 'created_at') as Promise<Row[]>)
      : Promise.resolve([] as Row[]),
  ]);
  // Everything else needs only the customer and the alerts: asked at once.
  const newest = alerts.find((alert) => typeof alert.log_id === 'string');
  const [kyc, records, context] = await Promise.all([
    customer && sessions && site.can(principal, sessions, 'view') ? kycSessions(db, sessions, String(customer.customer_ref)) : Promise.resolve(null),
    showAlerts ? alertedRecords(db, site, principal, alerts) : Promise.resolve(null),
    newest ? decisionContextOfLog(db, newest.log_id as string) : Promise.resolve(null),
  ]);
  return {
    context: context && newest ? { alert: String(newest.id), record_ref: (newest.record_ref as string | null) ?? null, data: caseContext(context, site, principal) } : null,
    customer: customer ? { pk: String(customer.id), repr: customers.repr(customer), fields: labelled(site, principal, customers, customer, CUSTOMER_FIELDS) } : null,
    kyc,
    records,
    // The count the alerts' writer keeps on the case.
    alerts_total: showAlerts ? Number(caseRow.alert_count ?? alerts.length) : 0,
  };
}

/**
 * The context as the case page may show it: the viewer's sections, and on a case, whose customer is
 * named only to viewers of customers, not the record's own reference to its customer either.
 */
function caseContext(context: DecisionContext, site: AdminSite, principal: Principal): DecisionContext {
  const viewable = viewableDecisionContext(context, (key) => mayName(site, principal, key));
  if (mayName(site, principal, 'customer.customer')) return viewable;
  const sections = Object.entries(viewable).map(([section, values]) => [
    section,
    Object.fromEntries(Object.entries(values as Record<string, unknown>).filter(([key]) => !key.startsWith('customer_'))),
  ]);
  return Object.fromEntries(sections) as DecisionContext;
}

async function kycSessions(db: Knex, sessions: BoundModel, customerRef: string): Promise<NonNullable<CaseEvidence['kyc']>> {
  const rows = (await db('verification_sessions').where('customer_ref', customerRef).orderBy('created_at', 'desc').limit(5).select('id', 'status', 'flow_code', 'created_at')) as Row[];
  return rows.map((session) => ({
    pk: String(session.id),
    status: valueText(sessions, 'status', session.status),
    flow: String(session.flow_code),
    created_at: formatTimestamp(session.created_at as Date),
  }));
}

/** The alerts' records and matched rules: one statement per record table, one for the logs and one for the rules, all sent at once. */
async function alertedRecords(db: Knex, site: AdminSite, principal: Principal, alerts: readonly Row[]): Promise<EvidenceRecord[]> {
  const byTarget = new Map<string, string[]>();
  for (const alert of alerts) byTarget.set(String(alert.target), [...(byTarget.get(String(alert.target)) ?? []), String(alert.record_id)]);
  const records = new Map<string, Row>();
  const logIds = alerts.map((alert) => alert.log_id).filter((id): id is string => typeof id === 'string');
  const [{ byLog: matched, names }] = await Promise.all([
    ruleContributions(db, logIds, alerts.flatMap((alert) => (alert.rule_codes as string[]) ?? [])),
    ...[...byTarget].map(async ([target, ids]) => {
      const spec = RECORDS[target];
      if (!spec || !mayName(site, principal, spec.model)) return;
      const rows = (await db(spec.table).whereIn('id', [...new Set(ids)]).select('id', ...spec.fields)) as Row[];
      for (const row of rows) records.set(`${target}:${String(row.id)}`, row);
    }),
  ]);
  return alerts.map((alert) => {
    const target = String(alert.target);
    const spec = RECORDS[target];
    const row = records.get(`${target}:${String(alert.record_id)}`);
    const model = spec ? site.models.get(spec.model) : undefined;
    const contributions = typeof alert.log_id === 'string' ? matched.get(alert.log_id) : undefined;
    return {
      alert: {
        pk: String(alert.id),
        kind: String(alert.kind),
        decision: String(alert.decision),
        score: Number(alert.score),
        status: String(alert.status),
        raised_at: formatTimestamp(alert.created_at as Date),
      },
      record: row && model ? { model: model.key, pk: String(row.id), ref: (alert.record_ref as string | null) ?? null, fields: labelled(site, principal, model, row, spec!.fields) } : null,
      rules: ((alert.rule_codes as string[]) ?? []).map((code) => {
        const contribution = contributions?.find((rule) => rule.code === code);
        return { code, name: names.get(code) ?? null, score: contribution?.score ?? null, decision: contribution?.decision ?? null };
      }),
    };
  });
}
