import type { StaffUser } from '../../staff/principal.ts';

/**
 * Dates as the signed-in user reads them: in their time zone, with their date and time formats
 * (staff_users.date_format, time_format: YYYY-MM-DD, DD.MM.YYYY, HH:mm, h:mm a ...), and "Today"
 * in place of today's date when show_today is set. Form inputs go the other way: a
 * datetime-local value is a wall time in the user's zone.
 */

export type DatePreferences = Pick<StaffUser, 'timezone' | 'date_format' | 'time_format' | 'show_today'>;

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const TOKENS = /YYYY|YY|MMMM|MMM|MM|M|DD|D|HH|H|hh|h|mm|ss|A|a/g;

interface WallTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function zoneFormatter(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    try {
      formatter = new Intl.DateTimeFormat('en-US', {
        timeZone,
        hourCycle: 'h23',
        year: 'numeric',
        month: 'numeric',
        day: 'numeric',
        hour: 'numeric',
        minute: 'numeric',
        second: 'numeric',
      });
    } catch {
      // A zone the runtime does not know (stored before validation existed) reads as UTC.
      formatter = zoneFormatter('UTC');
    }
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

const QUARTER_HOUR_MS = 15 * 60 * 1000;
/** zone -> quarter hour -> the zone's offset from UTC then (ms); bounded, cleared when full. */
const offsets = new Map<string, Map<number, number>>();
const MAX_CACHED_OFFSETS = 100_000;

/** A zone's offset from UTC at an instant, by Intl (formatToParts: about 10 µs a call, a page of dates paid it hundreds of times). */
function zoneOffset(instant: number, timeZone: string): number {
  const quarter = Math.floor(instant / QUARTER_HOUR_MS);
  let zone = offsets.get(timeZone);
  if (!zone) offsets.set(timeZone, (zone = new Map()));
  let offset = zone.get(quarter);
  if (offset === undefined) {
    // Offsets change only at the transitions of a zone, which fall on quarter hours: one offset serves the whole quarter.
    const start = quarter * QUARTER_HOUR_MS;
    const parts: Record<string, number> = {};
    for (const part of zoneFormatter(timeZone).formatToParts(new Date(start))) if (part.type !== 'literal') parts[part.type] = Number(part.value);
    offset = Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour! % 24, parts.minute!, parts.second!) - start;
    if (zone.size >= MAX_CACHED_OFFSETS) zone.clear();
    zone.set(quarter, offset);
  }
  return offset;
}

/** The wall-clock time of an instant in a zone. */
export function wallTime(instant: Date, timeZone: string): WallTime {
  const local = new Date(instant.getTime() + (timeZone === 'UTC' ? 0 : zoneOffset(instant.getTime(), timeZone)));
  return { year: local.getUTCFullYear(), month: local.getUTCMonth() + 1, day: local.getUTCDate(), hour: local.getUTCHours(), minute: local.getUTCMinutes(), second: local.getUTCSeconds() };
}

const pad = (value: number, width = 2) => String(value).padStart(width, '0');

function applyFormat(format: string, time: WallTime): string {
  return format.replace(TOKENS, (token) => {
    switch (token) {
      case 'YYYY': return pad(time.year, 4);
      case 'YY': return pad(time.year % 100);
      case 'MMMM': return MONTHS[time.month - 1]!;
      case 'MMM': return MONTHS[time.month - 1]!.slice(0, 3);
      case 'MM': return pad(time.month);
      case 'M': return String(time.month);
      case 'DD': return pad(time.day);
      case 'D': return String(time.day);
      case 'HH': return pad(time.hour);
      case 'H': return String(time.hour);
      case 'hh': return pad(time.hour % 12 || 12);
      case 'h': return String(time.hour % 12 || 12);
      case 'mm': return pad(time.minute);
      case 'ss': return pad(time.second);
      case 'A': return time.hour < 12 ? 'AM' : 'PM';
      default: return time.hour < 12 ? 'am' : 'pm';
    }
  });
}

const sameDay = (a: WallTime, b: WallTime) => a.year === b.year && a.month === b.month && a.day === b.day;

/** An instant (timestamptz) as the user reads it: "Today, 14:05" or "2026-11-23 14:05". */
export function formatDateTime(instant: Date, preferences: DatePreferences, now = new Date()): string {
  const time = wallTime(instant, preferences.timezone);
  const clock = applyFormat(preferences.time_format, time);
  if (preferences.show_today && sameDay(time, wallTime(now, preferences.timezone))) return `Today, ${clock}`;
  return `${applyFormat(preferences.date_format, time)} ${clock}`;
}

/** A calendar date (a `date` column: no zone) as the user reads it; "Today" when it is today where they are. */
export function formatCalendarDate(date: Date | string, preferences: DatePreferences, now = new Date()): string {
  const day = calendarParts(date);
  if (!day) return String(date);
  if (preferences.show_today && sameDay(day, wallTime(now, preferences.timezone))) return 'Today';
  return applyFormat(preferences.date_format, day);
}

/**
 * node-pg reads a `date` as local midnight of the server process; its local parts are the
 * stored date, whatever the process zone is.
 */
function calendarParts(date: Date | string): WallTime | null {
  if (date instanceof Date) return { year: date.getFullYear(), month: date.getMonth() + 1, day: date.getDate(), hour: 0, minute: 0, second: 0 };
  const match = /^(\d{4})-(\d{2})-(\d{2})/.exec(date);
  return match ? { year: Number(match[1]), month: Number(match[2]), day: Number(match[3]), hour: 0, minute: 0, second: 0 } : null;
}

/** The value of an <input type="date"> for a stored date. */
export function dateInputValue(date: Date | string): string {
  const day = calendarParts(date);
  return day ? `${pad(day.year, 4)}-${pad(day.month)}-${pad(day.day)}` : '';
}

/** The value of an <input type="datetime-local"> for an instant: its wall time in the user's zone. */
export function dateTimeInputValue(instant: Date, timeZone: string): string {
  const time = wallTime(instant, timeZone);
  return `${pad(time.year, 4)}-${pad(time.month)}-${pad(time.day)}T${pad(time.hour)}:${pad(time.minute)}:${pad(time.second)}`;
}

/**
 * A datetime-local value (a wall time in `timeZone`, no offset) as an ISO 8601 instant with Z, or
 * the input unchanged when it is not such a value (the form cleaning then says what is wrong).
 * Around a DST change the offset is taken at the resulting instant, as most calendar apps do.
 */
export function wallTimeToIso(value: string, timeZone: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2}))?$/.exec(value);
  if (!match) return value;
  const [year, month, day, hour, minute, second] = match.slice(1).map((part) => Number(part ?? 0)) as [number, number, number, number, number, number];
  const asUtc = Date.UTC(year, month - 1, day, hour, minute, second);
  if (Number.isNaN(asUtc)) return value;
  const offsetAt = (instant: number) => {
    const wall = wallTime(new Date(instant), timeZone);
    return Date.UTC(wall.year, wall.month - 1, wall.day, wall.hour, wall.minute, wall.second) - Math.floor(instant / 1000) * 1000;
  };
  let instant = asUtc - offsetAt(asUtc);
  instant = asUtc - offsetAt(instant);
  const date = new Date(instant);
  return Number.isNaN(date.getTime()) ? value : date.toISOString();
}
