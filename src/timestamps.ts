/** The spec's timestamp form: ISO 8601 in UTC, to the second, without an offset (YYYY-MM-DDTHH:MM:SS). */
export function formatTimestamp(date: Date): string;
export function formatTimestamp(date: Date | null): string | null;
export function formatTimestamp(date: Date | null): string | null {
  return date === null ? null : date.toISOString().slice(0, 19);
}

export function addSeconds(date: Date, seconds: number): Date {
  return new Date(date.getTime() + seconds * 1000);
}
