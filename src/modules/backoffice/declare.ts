import type { ModelRegistration, Operation } from './registry.ts';
import type { Principal } from '../staff/principal.ts';

/** Small helpers that registrations and the generic code share; nothing here imports a registration. */

export class RegistryError extends Error {}

export function modelKey(appLabel: string, model: string): string {
  return `${appLabel}.${model}`;
}

export function label(name: string): string {
  const words = name.replace(/__/g, ' ').replace(/_/g, ' ').trim();
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** The permission codename of an operation on a model: `transaction.view_financialevent`. */
export function permissionFor(model: { appLabel: string; model: string }, operation: Operation): string {
  return `${model.appLabel}.${operation}_${model.model}`;
}

const OPERATIONS: readonly Operation[] = ['view', 'add', 'change', 'delete'];

/**
 * The model permission rule, the one every face applies (AdminSite.can is this over a bound model):
 * an operation a registration disables is refused to everyone; change implies view (Django), except
 * where change is disabled for everyone.
 */
export function mayOperate(principal: Principal, model: Pick<ModelRegistration, 'appLabel' | 'model' | 'disabled'>, operation: Operation): boolean {
  if (operation !== 'view' && model.disabled?.[operation]) return false;
  if (operation === 'view') return viewCodenames(model).some((codename) => principal.has(codename));
  return principal.has(permissionFor(model, operation));
}

/** The codenames any one of which lets a user view a model (mayOperate's view rule, for SQL that picks viewers). */
export function viewCodenames(model: Pick<ModelRegistration, 'appLabel' | 'model' | 'disabled'>): string[] {
  return model.disabled?.change ? [permissionFor(model, 'view')] : [permissionFor(model, 'view'), permissionFor(model, 'change')];
}

/**
 * Every permission codename of some registrations: view/add/change/delete of each model plus the
 * custom ones they declare. From the registrations alone (no database), so the command line can
 * check a grant without a running service.
 */
export function codenamesOf(registrations: readonly ModelRegistration[]): string[] {
  const codenames: string[] = [];
  for (const registration of registrations) {
    for (const operation of OPERATIONS) codenames.push(permissionFor(registration, operation));
    for (const custom of registration.customPermissions ?? []) codenames.push(`${registration.appLabel}.${custom.codename}`);
  }
  return codenames;
}

/** Choices from values, labelled by a map or by the value itself. */
export function choices(values: readonly string[], labels: Record<string, string> = {}): { value: string; label: string }[] {
  return values.map((value) => ({ value, label: labels[value] ?? label(value.toLowerCase()) }));
}

export const DECISION_CHOICES = choices(['ACCEPT', 'REVIEW', 'REJECT'], { ACCEPT: 'Accept', REVIEW: 'Review', REJECT: 'Reject' });

/** The colour of a rule-engine decision wherever it shows. */
export function decisionTone(value: unknown): 'success' | 'warning' | 'danger' | null {
  return value === 'ACCEPT' ? 'success' : value === 'REVIEW' ? 'warning' : value === 'REJECT' ? 'danger' : null;
}

export function activeTone(value: unknown): 'success' | 'neutral' {
  return value ? 'success' : 'neutral';
}
