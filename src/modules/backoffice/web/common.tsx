import type { Context } from 'koa';
import type { ComponentChildren } from 'preact';
import type { AppContext } from '../../../context.ts';
import { ForbiddenError, HttpError } from '../../../http/errors.ts';
import { columnKind } from '../query.ts';
import type { BoundModel, ColumnDeclaration, Row, Tone } from '../registry.ts';
import { formatCalendarDate, formatDateTime, type DatePreferences } from './format.ts';
import { Layout, type Crumb } from './layout.tsx';
import { layoutProps, sendPage, type AdminState } from './shell.tsx';

/** What every generated admin page shares: the model from the URL, its URLs, cells and values as text. */

export const ADMIN_ROOT = '/admin/';

export function modelUrl(model: Pick<BoundModel, 'appLabel' | 'model'>, suffix = ''): string {
  return `${ADMIN_ROOT}${model.appLabel}/${model.model}/${suffix}`;
}

export function objectUrl(model: Pick<BoundModel, 'appLabel' | 'model'>, pk: unknown, action: 'change' | 'delete' | 'history' = 'change'): string {
  return modelUrl(model, `${encodeURIComponent(String(pk))}/${action}/`);
}

/** The registered model named by the URL, or a 404 page. */
export function modelFromParams(app: AppContext, params: Record<string, string | undefined>): BoundModel {
  const model = app.backoffice.site.get(params.app ?? '', params.model ?? '');
  if (!model) throw new HttpError(404, `No model ${String(params.app)}.${String(params.model)} is registered.`);
  return model;
}

export function forbidden(what = 'You do not have permission to view or change this.'): never {
  throw new ForbiddenError(what);
}

export function notFound(model: BoundModel, pk: string): never {
  throw new HttpError(404, `${capitalize(model.verboseName)} with ID “${pk.slice(0, 100)}” doesn’t exist. Perhaps it was deleted?`);
}

export function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function homeCrumbs(model?: BoundModel, ...rest: Crumb[]): Crumb[] {
  const crumbs: Crumb[] = [{ label: 'Home', href: ADMIN_ROOT }];
  if (model) crumbs.push({ label: capitalize(model.verboseNamePlural), href: modelUrl(model) });
  return [...crumbs, ...rest];
}

/** Renders a page in the admin frame, with the session's pending messages. */
export async function renderPage(ctx: Context, app: AppContext, status: number, title: string, breadcrumbs: Crumb[], children: ComponentChildren): Promise<void> {
  await sendPage(
    ctx,
    status,
    <Layout title={title} breadcrumbs={breadcrumbs} {...await layoutProps(ctx, app)}>
      {children}
    </Layout>,
  );
}

export function adminState(ctx: Context): AdminState {
  return ctx.state as AdminState;
}

/** The label of a stored value of a field with declared choices, or the value itself. */
function choiceLabel(model: BoundModel, field: string, value: unknown): string | null {
  const choices = model.fields?.[field]?.choices;
  const found = choices?.find((choice) => choice.value === String(value));
  return found ? found.label : null;
}

/** Any stored value as text for a person: dates in their zone and format, choices by label, lists joined. */
export function valueText(model: BoundModel, field: string, value: unknown, preferences: DatePreferences): string {
  if (value === null || value === undefined || value === '') return '—';
  const chosen = choiceLabel(model, field, value);
  if (chosen !== null) return chosen;
  if (value instanceof Date) {
    return model.columnTypes.get(field)?.udtName === 'date' ? formatCalendarDate(value, preferences) : formatDateTime(value, preferences);
  }
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  if (Array.isArray(value) && value.every((item) => typeof item !== 'object' || item === null)) return value.length ? value.join(', ') : '—';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** A field's value as the detail shows it: the declaration's display function first. */
export function fieldText(model: BoundModel, field: string, row: Row, preferences: DatePreferences): string {
  const display = model.fields?.[field]?.display;
  return display ? display(row) : valueText(model, field, row[field], preferences);
}

export function Badge({ tone, children }: { tone: Tone | null; children: ComponentChildren }) {
  return <span class={`badge tone-${tone ?? 'neutral'}`}>{children}</span>;
}

export function BoolIcon({ value }: { value: unknown }) {
  if (value === null || value === undefined) return <span class="bool bool-unknown">—</span>;
  return value ? <span class="bool bool-yes">✔ Yes</span> : <span class="bool bool-no">✘ No</span>;
}

/** One changelist cell: formatted by the column's kind. */
export function Cell({ model, column, row, preferences }: { model: BoundModel; column: ColumnDeclaration; row: Row; preferences: DatePreferences }) {
  const kind = columnKind(model, column);
  const value = row[column.name];
  const text = model.fields?.[column.name]?.display ? fieldText(model, column.name, row, preferences) : valueText(model, column.name, value, preferences);
  if (kind === 'bool') return <BoolIcon value={value} />;
  if (kind === 'badge') return value === null || value === undefined ? <>—</> : <Badge tone={column.tone?.(value, row) ?? null}>{text}</Badge>;
  return <>{text}</>;
}

/** A non-negative whole number with thousands separators, as counts read. */
export function count(value: number): string {
  return value.toLocaleString('en-US');
}
