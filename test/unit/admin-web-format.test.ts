import test from 'ava';
import { dateInputValue, dateTimeInputValue, formatCalendarDate, formatDateTime, wallTime, wallTimeToIso } from '../../src/modules/backoffice/web/format.ts';

const tokyo = { timezone: 'Asia/Tokyo', date_format: 'DD.MM.YYYY', time_format: 'HH:mm', show_today: false };

test('instants read in the user zone and formats', (t) => {
  const instant = new Date('2026-01-10T23:30:00Z');
  t.is(formatDateTime(instant, tokyo), '11.01.2026 08:30');
  t.is(formatDateTime(instant, { ...tokyo, timezone: 'America/New_York', date_format: 'MM/DD/YYYY', time_format: 'h:mm a' }), '01/10/2026 6:30 pm');
  t.is(formatDateTime(instant, { ...tokyo, date_format: 'D MMM YYYY' }), '11 Jan 2026 08:30');
});

test('"Today" only when show_today is set and the day is today where the user is', (t) => {
  const now = new Date('2026-01-11T02:00:00Z');
  const instant = new Date('2026-01-10T23:30:00Z');
  t.is(formatDateTime(instant, { ...tokyo, show_today: true }, now), 'Today, 08:30');
  t.is(formatDateTime(instant, { ...tokyo, timezone: 'UTC', show_today: true }, now), '10.01.2026 23:30', 'still yesterday in UTC');
  t.is(formatCalendarDate('2026-01-11', { ...tokyo, show_today: true }, now), 'Today');
  t.is(formatCalendarDate('2026-01-11', tokyo, now), '11.01.2026');
});

test('form inputs: datetime-local is a wall time in the user zone, both ways, across DST', (t) => {
  t.is(dateTimeInputValue(new Date('2026-01-10T23:30:00Z'), 'Asia/Tokyo'), '2026-01-11T08:30:00');
  t.is(wallTimeToIso('2026-01-11T08:30', 'Asia/Tokyo'), '2026-01-10T23:30:00.000Z');
  t.is(wallTimeToIso('2026-07-01T12:00:00', 'Europe/Berlin'), '2026-07-01T10:00:00.000Z', 'summer time: UTC+2');
  t.is(wallTimeToIso('2026-01-01T12:00', 'Europe/Berlin'), '2026-01-01T11:00:00.000Z', 'winter time: UTC+1');
  t.is(wallTimeToIso('not a time', 'UTC'), 'not a time', 'left for the form cleaning to refuse');
  t.is(dateInputValue('2026-03-04'), '2026-03-04');
  t.is(dateInputValue(new Date(2026, 2, 4)), '2026-03-04');
});

test('wallTime agrees with Intl in every zone shape, across DST transitions and odd offsets', (t) => {
  const zones = ['UTC', 'Europe/Stockholm', 'America/New_York', 'Asia/Kolkata', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/St_Johns', 'Pacific/Chatham', 'Africa/Casablanca'];
  const start = Date.UTC(2025, 0, 1);
  let checked = 0;
  for (const timeZone of zones) {
    const reference = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' });
    // Every 7 hours 13 minutes 17 seconds for two years: every transition is crossed at many phases.
    for (let instant = start; instant < start + 2 * 365 * 86_400_000; instant += 26_000_000 + 797_000 + 17_000) {
      const parts = Object.fromEntries(reference.formatToParts(new Date(instant)).filter((part) => part.type !== 'literal').map((part) => [part.type, Number(part.value)]));
      const expected = { year: parts.year, month: parts.month, day: parts.day, hour: parts.hour! % 24, minute: parts.minute, second: parts.second };
      const actual = wallTime(new Date(instant), timeZone);
      if (JSON.stringify(actual) !== JSON.stringify(expected)) return t.fail(`${timeZone} ${new Date(instant).toISOString()}: ${JSON.stringify(actual)} != ${JSON.stringify(expected)}`);
      checked++;
    }
  }
  t.true(checked > 20_000);
});
