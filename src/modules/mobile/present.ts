import { HttpError } from '../../http/errors.ts';
import { columnKind } from '../backoffice/query.ts';
import type { AdminSite } from '../backoffice/site.ts';
import type { BoundModel, ColumnDeclaration, Row, Tone } from '../backoffice/registry.ts';
import { MOBILE_PREFIX } from './constants.ts';
import { formatTimestamp } from '../../timestamps.ts';

/**
 * How registry values read in the mobile schema and data API: model references, endpoints, raw
 * values made JSON-safe, display text and list cells. Everything here is derived from the
 * registration; nothing about a model is declared again.
 */

export interface ModelReference {
  app_label: string;
  model: string;
  object_name: string;
  verbose_name: string;
  verbose_name_plural: string;
}

export function modelReference(model: BoundModel): ModelReference {
  return {
    app_label: model.appLabel,
    model: model.model,
    object_name: model.objectName,
    verbose_name: model.verboseName,
    verbose_name_plural: model.verboseNamePlural,
  };
}

export function endpoints(model: BoundModel): { schema: string; data: string } {
  return { schema: `${MOBILE_PREFIX}schema/${model.appLabel}/${model.model}/`, data: dataEndpoint(model) };
}

export function dataEndpoint(model: BoundModel): string {
  return `${MOBILE_PREFIX}data/${model.appLabel}/${model.model}/`;
}

/** The model named by a path, or 404 (the spec's "model not registered"). */
export function registeredModel(site: AdminSite, appLabel: string, modelName: string): BoundModel {
  const model = site.get(appLabel, modelName);
  if (!model) throw modelNotFound(appLabel, modelName);
  return model;
}

export function modelNotFound(appLabel: string, modelName: string): HttpError {
  return new HttpError(404, `No model ${appLabel.slice(0, 100)}.${modelName.slice(0, 100)} is registered.`, 'model_not_found');
}

export function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/**
 * A stored value as JSON: timestamps as ISO 8601 UTC to the second, dates as YYYY-MM-DD, decimals
 * as the strings PostgreSQL gives (no float rounding), everything else as it is.
 */
export function rawValue(model: BoundModel, name: string, value: unknown): unknown {
  if (value instanceof Date) return formatDateValue(model, name, value);
  if (Buffer.isBuffer(value)) return null;
  return value ?? null;
}

/**
 * node-pg reads a `date` column as local midnight of that day, so its calendar day comes from the
 * local getters; timestamps are instants and read in UTC.
 */
function formatDateValue(model: BoundModel, name: string, value: Date): string {
  if (model.columnTypes.get(name)?.udtName === 'date') {
    const pad = (number: number) => String(number).padStart(2, '0');
    return `${String(value.getFullYear()).padStart(4, '0')}-${pad(value.getMonth() + 1)}-${pad(value.getDate())}`;
  }
  return formatTimestamp(value);
}

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' };

/**
 * Display functions of registrations may return markup (as Django's format_html does): the mobile
 * client gets its text. Stored values are never passed through here, so a name that contains
 * "<b>" is shown as written.
 */
export function stripHtml(html: string): string {
  return html
    .replace(/<[^>]*>/g, '')
    .replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (entity, body: string) => {
      if (body.startsWith('#x') || body.startsWith('#X')) return safeCodePoint(parseInt(body.slice(2), 16), entity);
      if (body.startsWith('#')) return safeCodePoint(parseInt(body.slice(1), 10), entity);
      return ENTITIES[body.toLowerCase()] ?? entity;
    });
}

function safeCodePoint(code: number, fallback: string): string {
  return code > 0 && code <= 0x10ffff && !(code >= 0xd800 && code <= 0xdfff) ? String.fromCodePoint(code) : fallback;
}

/** How a value reads: a declared display, a choice's label, Yes/No, dates in ISO form, lists joined. */
export function displayText(model: BoundModel, name: string, value: unknown, row: Row): string | null {
  const declaration = model.fields?.[name];
  if (declaration?.display) return stripHtml(declaration.display(row));
  if (value === null || value === undefined) return null;
  const choices = declaration?.choices;
  if (choices) {
    const label = (item: unknown) => choices.find((choice) => choice.value === String(item))?.label ?? String(item);
    return Array.isArray(value) ? value.map(label).join(', ') : label(value);
  }
  if (value instanceof Date) return formatDateValue(model, name, value);
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  if (Array.isArray(value)) return value.map((item) => (item !== null && typeof item === 'object' ? JSON.stringify(item) : String(item))).join(', ');
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** A list cell: a bool for bool columns, an ISO date for date columns, display text otherwise. */
export function cellValue(model: BoundModel, column: ColumnDeclaration, row: Row): string | boolean | null {
  return listCells(model).get(column.name)!.read(row);
}

export interface ListCell {
  name: string;
  read(row: Row): string | boolean | null;
  tone: ColumnDeclaration['tone'];
}

const listCellCache = new WeakMap<BoundModel, Map<string, ListCell>>();

/**
 * How each list column of a model reads, worked out once per model: a 200-row page then formats
 * its cells without looking up declarations, kinds or choices per cell.
 */
export function listCells(model: BoundModel): Map<string, ListCell> {
  let cells = listCellCache.get(model);
  if (cells) return cells;
  cells = new Map();
  for (const column of model.columns) {
    const name = column.name;
    const declaration = model.fields?.[name];
    let read: ListCell['read'];
    if (declaration?.display) {
      const display = declaration.display;
      read = (row) => stripHtml(display(row));
    } else if (columnKind(model, column) === 'bool') {
      read = (row) => (row[name] === null || row[name] === undefined ? null : Boolean(row[name]));
    } else if (declaration?.choices) {
      const labels = new Map(declaration.choices.map((choice) => [choice.value, choice.label]));
      read = (row) => {
        const value = row[name];
        if (value === null || value === undefined) return null;
        const label = (item: unknown) => labels.get(String(item)) ?? String(item);
        return Array.isArray(value) ? value.map(label).join(', ') : label(value);
      };
    } else {
      read = (row) => displayText(model, name, row[name], row);
    }
    cells.set(name, { name, read, tone: column.tone });
  }
  listCellCache.set(model, cells);
  return cells;
}

export function columnTone(column: ColumnDeclaration | undefined, row: Row): Tone | null {
  return column?.tone ? column.tone(row[column.name], row) : null;
}

/** The list column of a field, where its tone and kind are declared. */
export function columnOf(model: BoundModel, name: string): ColumnDeclaration | undefined {
  return model.columns.find((column) => column.name === name);
}
