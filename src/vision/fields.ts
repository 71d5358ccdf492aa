/**
 * Fields of a document front from its OCR lines. Identity documents print a small label above (or
 * before) each value, often in two languages ("Surname / Nom"); a field is the text nearest below
 * or after its label. Labels are matched on a compact form of the text (accents, case, spaces and
 * punctuation removed), so "Date of birth", "Dateofbirth" and "DATE DE NAISSANCE" all match.
 */
import anyAscii from 'any-ascii';
import { distance } from 'fastest-levenshtein';
import countries from 'i18n-iso-countries';
import type { TextLine } from './ocr.ts';

export const DOCUMENT_FIELDS = ['last_name', 'first_name', 'document_number', 'birth_date', 'expiry_date', 'nationality', 'sex'] as const;
export type DocumentField = (typeof DOCUMENT_FIELDS)[number];
/**
 * `full_name` is set only when the document prints surname and given names as one value that cannot
 * be split (no comma; OCR often drops the spaces): it is then compared with the whole known name.
 */
export type DocumentFields = Partial<Record<DocumentField | 'full_name', string>>;

/** Compact label spellings by field, in the languages most often printed on ICAO documents. */
const LABELS: Record<DocumentField, string[]> = {
  last_name: ['primaryidentifier', 'identifiantprimaire', 'nomdefamille', 'surname', 'familyname', 'lastname', 'nom', 'apellidos', 'apellido', 'nachname', 'familienname', 'cognome', 'achternaam', 'nazwisko'],
  first_name: ['secondaryidentifier', 'identifiantsecondaire', 'givennames', 'givenname', 'forenames', 'firstname', 'prenoms', 'prenom', 'vornamen', 'vorname', 'nombres', 'nombre', 'nomi', 'voornamen', 'imiona'],
  document_number: ['passportno', 'passportnumber', 'nodupasseport', 'documentno', 'documentnumber', 'docno', 'cardno', 'cardnumber', 'idno', 'reisepassnr', 'ausweisnr', 'pasaporten', 'numero', 'nummer'],
  birth_date: ['dateofbirth', 'datedenaissance', 'birthdate', 'geburtsdatum', 'fechadenacimiento', 'datadinascita', 'geboortedatum', 'dob'],
  expiry_date: ['dateofexpiry', 'datedexpiration', 'expirydate', 'dateofexpiration', 'expires', 'validuntil', 'gultigbis', 'fechadecaducidad', 'scadenza', 'vervaldatum', 'validejusquau', 'expiry'],
  nationality: ['nationality', 'nationalite', 'staatsangehorigkeit', 'nacionalidad', 'nazionalita', 'nationaliteit', 'obywatelstwo'],
  sex: ['sex', 'sexe', 'geschlecht', 'sexo', 'sesso', 'geslacht', 'plec'],
};

/** Labels of the whole name; "Name/Nom" is one label, so the "nom" after it is absorbed. */
const FULL_NAME_LABELS = ['surnamegivennames', 'surnameandgivennames', 'nomprenoms', 'namenom', 'name', 'nameandsurname'];

/**
 * Labels of the dates a validity starts with (issue, a visa's "Valid from / Valide a partir du"):
 * not extracted, but each takes the date under it, which is then known to be no expiry.
 */
const ISSUE_LABELS = ['dateofissue', 'datededelivrance', 'issuedate', 'validfrom', 'valideapartirdu'];

/** Labels of fields not extracted: recognising them keeps them from being read as a value. */
const OTHER_LABELS = ['noofentries', 'nombredentrees', 'numberofentries', 'placeofbirth', 'lieudenaissance', 'authority', 'autorite', 'type', 'countrycode', 'codedupays', 'personalno', 'signature', 'height', 'taille', 'address', 'domicile', 'issuingstate'];

const MONTHS: Record<string, number> = {
  JAN: 1, JANUARY: 1, JANV: 1, JANVIER: 1, ENE: 1, JANUAR: 1,
  FEB: 2, FEBRUARY: 2, FEV: 2, FEVRIER: 2, FEBRUAR: 2,
  MAR: 3, MARCH: 3, MARS: 3, MARZ: 3, MARZO: 3,
  APR: 4, APRIL: 4, AVR: 4, AVRIL: 4, ABR: 4,
  MAY: 5, MAI: 5, MAYO: 5,
  JUN: 6, JUNE: 6, JUIN: 6, JUNI: 6, JUNIO: 6,
  JUL: 7, JULY: 7, JUIL: 7, JUILLET: 7, JULI: 7, JULIO: 7,
  AUG: 8, AUGUST: 8, AOUT: 8, AGO: 8, AGOSTO: 8,
  SEP: 9, SEPT: 9, SEPTEMBER: 9, SEPTEMBRE: 9, SEPTIEMBRE: 9,
  OCT: 10, OCTOBER: 10, OCTOBRE: 10, OKT: 10, OKTOBER: 10, OCTUBRE: 10,
  NOV: 11, NOVEMBER: 11, NOVEMBRE: 11, NOVIEMBRE: 11,
  DEC: 12, DECEMBER: 12, DECEMBRE: 12, DEZ: 12, DEZEMBER: 12, DIC: 12, DICIEMBRE: 12,
};

function compact(text: string): string {
  return anyAscii(text).toLowerCase().replace(/[^a-z0-9]+/g, '');
}

/** A field, the whole name ("Name": SURNAME, GIVEN NAMES), or null for labels of fields not extracted. */
type LabelKind = DocumentField | 'full_name' | 'issue_date' | null;

interface Label {
  field: LabelKind;
  line: TextLine;
  /** Left edge of the label within its line, in pixels (a line may hold several labels). */
  x: number;
  /** Characters of the line after the label, when the value is printed on the same line. */
  rest: string;
}

/** Every spelling with what it labels, longest first, so "dateofbirth" wins over "dob" and "givennames" over "nom". */
const SPELLINGS: readonly [LabelKind, string][] = [
  ...DOCUMENT_FIELDS.flatMap((field) => LABELS[field].map((label): [LabelKind, string] => [field, label])),
  ...FULL_NAME_LABELS.map((label): [LabelKind, string] => ['full_name', label]),
  ...ISSUE_LABELS.map((label): [LabelKind, string] => ['issue_date', label]),
  ...OTHER_LABELS.map((label): [null, string] => [null, label]),
].sort((a, b) => b[1].length - a[1].length);

/** Every label found in a line, with its estimated position. */
function labelsOf(line: TextLine): Label[] {
  const text = compact(line.text);
  const found: { field: LabelKind; start: number; end: number }[] = [];
  for (const [field, label] of SPELLINGS) {
    for (const [start, end] of occurrences(text, label)) {
      if (!found.some((f) => start < f.end && end > f.start)) found.push({ field, start, end });
    }
  }
  // A spelling followed, after a space, by lower-case words that are no label is the first word of
  // a longer label phrase, not a label of its own: the "Nombre" (Spanish: given name) of the French
  // "Nombre d'entrées" (number of entries), the "Nom" of "Nom d'usage", the "Numero" of "Numero de
  // entradas", even when OCR damage keeps the whole phrase from matching. It still marks the line as
  // label text.
  for (const f of found) {
    if (f.field && /^\s+\p{Ll}/u.test(line.text.slice(originalEnd(line.text, f.end))) && !found.some((other) => other !== f && other.start >= f.end && other.start - f.end <= 1)) f.field = null;
  }
  // Short spellings ("nom", "sex", "type") also occur inside values and words: only take them
  // when they begin the line or follow another label (the bilingual "Surname/Nom").
  const kept = found.filter((f) => f.end - f.start > 4 || f.start === 0 || found.some((other) => other !== f && Math.abs(other.end - f.start) <= 1));
  return kept.map((f) => ({
    field: f.field,
    line,
    x: line.box.x + (line.box.width * f.start) / Math.max(1, text.length),
    rest: restAfter(line.text, f.end),
  }));
}

/**
 * Where a label occurs in compact text: exactly, or for long labels with one or two letters misread
 * ("Nationaity", "DaleofBith"), as OCR of small print often has.
 */
function occurrences(text: string, label: string): [number, number][] {
  const hits: [number, number][] = [];
  for (let from = 0; ; ) {
    const start = text.indexOf(label, from);
    if (start < 0) break;
    hits.push([start, start + label.length]);
    from = start + label.length;
  }
  if (hits.length || label.length < 8) return hits;
  const allowed = label.length >= 11 ? 2 : 1;
  for (let start = 0; start + label.length - 1 <= text.length; start++) {
    for (const length of [label.length - 1, label.length, label.length + 1]) {
      if (start + length > text.length) continue;
      if (distance(text.slice(start, start + length), label) <= allowed) {
        hits.push([start, start + length]);
        start += length - 1;
        break;
      }
    }
  }
  return hits;
}

/** The index in the original text just after its `end`-th compact character. */
function originalEnd(text: string, end: number): number {
  let seen = 0;
  for (let i = 0; i < text.length; i++) {
    if (seen >= end) return i;
    if (/[a-z0-9]/.test(compact(text[i]!))) seen += compact(text[i]!).length;
  }
  return text.length;
}

/** The original text after the `end`-th compact character (labels printed as "Surname: DOE"). */
function restAfter(text: string, end: number): string {
  return text.slice(originalEnd(text, end)).replace(/^[\s:/.-]+/, '');
}

function isMrzLine(line: TextLine): boolean {
  return /<</.test(line.text) || (line.text.replace(/\s/g, '').length >= 28 && /^[A-Z0-9<]+$/.test(line.text.replace(/\s/g, '')));
}

/** A date found in text: its reading, and where it lies in the text as normalised (ASCII, capitals). */
interface FoundDate {
  date: string;
  start: number;
  end: number;
}

const ISO_DATE = /\b(\d{4})[-./ ](\d{1,2})[-./ ](\d{1,2})\b/g;
const NUMERIC_DATE = /\b(\d{1,2})\s*[-./ ]\s*(\d{1,2})\s*[-./ ]\s*(\d{4}|\d{2})\b/g;
/** Day, month (with its translation after a slash: "12 AUG/AOUT"), and the digits after it. */
const NAMED_DATE = /(\d{1,2})\s*([A-Z]{3,9})(?:\s*\/\s*[A-Z]{3,9})?\s*(\d+)/g;

function isoDate(day: number, month: number, year: number, kind: 'past' | 'future', today: Date): string | null {
  if (year < 100) {
    // Birth dates lie in the past, expiry dates at most a few decades ahead.
    const century = Math.floor(today.getUTCFullYear() / 100) * 100;
    year += century;
    if (kind === 'past' && year > today.getUTCFullYear()) year -= 100;
    if (kind === 'future' && year < today.getUTCFullYear() - 50) year += 100;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31) return null;
  // A day the month does not have (31 FEB) is a misread.
  if (new Date(Date.UTC(year, month - 1, day)).getUTCDate() !== day) return null;
  return `${year}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

/**
 * Dates with a month name. OCR often joins two dates printed side by side ("10DEC/DEC1110DEC/DEC16",
 * a visa's "valid from" and "valid until"): when the digits after a month run straight into another
 * month name, their last one or two digits are the next date's day, and only what is left before
 * them (two or four digits) is the year, so "1110" there is the year 11 and the day 10, not a year
 * 1110. The next date may then begin right after a digit.
 */
function namedDates(upper: string): { day: number; month: number; year: number; start: number; end: number }[] {
  const found: { day: number; month: number; year: number; start: number; end: number }[] = [];
  const pattern = new RegExp(NAMED_DATE.source, 'g');
  let joined = -1;
  for (let match = pattern.exec(upper); match; match = pattern.exec(upper)) {
    const start = match.index;
    const month = MONTHS[match[2]!];
    // The day begins a word (as \b would require), unless it was split off the previous date's year.
    if (!month || (start > 0 && /[A-Z0-9]/.test(upper[start - 1]!) && start !== joined)) {
      pattern.lastIndex = start + 1;
      continue;
    }
    const digits = match[3]!;
    const digitsEnd = start + match[0].length;
    // Joined dates have nothing between them; after a space, a word is no day of a next date.
    const next = upper.slice(digitsEnd).match(/^([A-Z]{3,9})/);
    let yearDigits: string | null = null;
    let end = digitsEnd;
    if (next && MONTHS[next[1]!]) {
      for (const dayLength of [2, 1]) {
        const head = digits.slice(0, -dayLength);
        if ((head.length === 2 || head.length === 4) && Number(digits.slice(-dayLength)) >= 1) {
          yearDigits = head;
          end = digitsEnd - dayLength;
          break;
        }
      }
    }
    // Otherwise the year is the whole run of digits, two or four of them, ending the word.
    if (yearDigits === null && (digits.length === 2 || digits.length === 4) && !/^[A-Z]/.test(upper.slice(digitsEnd))) yearDigits = digits;
    if (yearDigits === null) {
      pattern.lastIndex = start + 1;
      continue;
    }
    found.push({ day: Number(match[1]), month, year: Number(yearDigits), start, end });
    joined = end;
    pattern.lastIndex = end;
  }
  return found;
}

/** Every date in a text, in reading order, in the formats of parseDocumentDate; indices into `anyAscii(text).toUpperCase()`. */
function findDates(text: string, kind: 'past' | 'future', today: Date): FoundDate[] {
  const upper = anyAscii(text).toUpperCase();
  const raw: { day: number; month: number; year: number; start: number; end: number }[] = [];
  // ISO first, then month names, then day.month.year, as before: a later kind never overlaps an earlier.
  const add = (date: { day: number; month: number; year: number; start: number; end: number }) => {
    if (!raw.some((other) => date.start < other.end && date.end > other.start)) raw.push(date);
  };
  for (const m of upper.matchAll(ISO_DATE)) add({ year: Number(m[1]), month: Number(m[2]), day: Number(m[3]), start: m.index, end: m.index + m[0].length });
  namedDates(upper).forEach(add);
  for (const m of upper.matchAll(NUMERIC_DATE)) add({ day: Number(m[1]), month: Number(m[2]), year: Number(m[3]), start: m.index, end: m.index + m[0].length });
  return raw
    .sort((a, b) => a.start - b.start)
    .flatMap(({ day, month, year, start, end }) => {
      const date = isoDate(day, month, year, kind, today);
      return date ? [{ date, start, end }] : [];
    });
}

/** Every date printed in a text, in reading order ("10DEC/DEC1110DEC/DEC16" holds two). */
export function findDocumentDates(text: string, kind: 'past' | 'future', today = new Date()): string[] {
  return findDates(text, kind, today).map((found) => found.date);
}

/** A date in the formats documents print: 12 AUG 74, 12 AUG/AOUT 1974, 12.08.1974, 1974-08-12, 12/08/74 (the first, if several). */
export function parseDocumentDate(text: string, kind: 'past' | 'future', today = new Date()): string | null {
  return findDates(text, kind, today)[0]?.date ?? null;
}

function parseValue(field: DocumentField, text: string, today: Date): string | null {
  const clean = anyAscii(text).toUpperCase().trim();
  switch (field) {
    case 'last_name':
    case 'first_name': {
      const name = clean.replace(/[^A-Z' -]+/g, ' ').replace(/\s+/g, ' ').trim();
      return name.length >= 2 ? name : null;
    }
    case 'birth_date':
      return parseDocumentDate(text, 'past', today);
    case 'expiry_date': {
      // A validity printed as two dates ("from" and "until") ends with the later one.
      const dates = findDocumentDates(text, 'future', today).filter((date) => date <= validityLimit(today));
      return dates.length ? dates.reduce((a, b) => (b > a ? b : a)) : null;
    }
    case 'sex': {
      const match = clean.match(/^(M|F|X)\b|\b(M|F|X)\b/);
      return match ? (match[1] ?? match[2])! : null;
    }
    case 'nationality': {
      const name = clean.replace(/[^A-Z ]+/g, ' ').replace(/\s+/g, ' ').trim();
      return name.length >= 3 ? name : null;
    }
    case 'document_number': {
      const tokens = clean.replace(/[^A-Z0-9 ]+/g, ' ').split(' ').filter((token) => token.length >= 5 && /\d/.test(token));
      return tokens.sort((a, b) => b.length - a.length)[0] ?? null;
    }
  }
}

/**
 * A value line holding several dates (OCR joins the "valid from" and "valid until" dates printed side
 * by side) split into one line per date, each with its share of the line's box (by characters), so
 * each label above finds the date printed under it. Other lines are kept as they are.
 */
function splitDates(line: TextLine, today: Date): TextLine[] {
  const dates = findDates(line.text, 'future', today);
  if (dates.length < 2) return [line];
  const text = anyAscii(line.text).toUpperCase();
  const { x, y, width, height } = line.box;
  return dates.map((date, i) => {
    const from = i === 0 ? 0 : date.start;
    const to = i + 1 < dates.length ? dates[i + 1]!.start : text.length;
    return { ...line, text: text.slice(from, to).trim(), box: { x: x + (width * from) / text.length, y, width: (width * (to - from)) / text.length, height } };
  });
}

/** Rows of a box overlap vertically by at least half the smaller height. */
const sameRow = (a: TextLine, b: TextLine) => Math.min(a.box.y + a.box.height, b.box.y + b.box.height) - Math.max(a.box.y, b.box.y) >= 0.5 * Math.min(a.box.height, b.box.height);

/**
 * Label fragments: a label line that begins with a separator ("/Nom,Prenoms") is the end of a longer
 * bilingual label that OCR broke into pieces ("Suma", "ne,Give" of "Surname, Given names"). The
 * unrecognised pieces of mixed-case text just before it on its row (each within three line heights
 * of the next) belong to it: the label begins where the first of them does, and they are no values.
 */
function labelFragments(label: TextLine, lines: readonly TextLine[], labelLines: ReadonlySet<TextLine>): TextLine[] {
  if (!/^\s*[/,]/.test(label.text)) return [];
  const pieces: TextLine[] = [];
  for (let left = label.box.x; ; ) {
    const piece = lines
      .filter((line) => !labelLines.has(line) && !pieces.includes(line) && /[a-z]/.test(line.text) && sameRow(line, label))
      .filter((line) => line.box.x < left && line.box.x + line.box.width <= left + label.box.height && left - (line.box.x + line.box.width) <= 3 * label.box.height)
      .sort((a, b) => b.box.x + b.box.width - (a.box.x + a.box.width))[0];
    if (!piece) return pieces;
    pieces.push(piece);
    left = piece.box.x;
  }
}

/** Expiry dates lie at most this many years ahead (passports run ten years, some cards fifteen). */
const MAX_VALIDITY_YEARS = 20;

/** The last day an expiry date can be, read on `today` (a later reading is a misread or a past year such as 86 read as 2086). */
function validityLimit(today: Date): string {
  return `${today.getUTCFullYear() + MAX_VALIDITY_YEARS}-12-31`;
}

/**
 * The field values of a document's OCR lines. Each label takes the nearest unused line below it
 * (within a few line heights, starting near the label's left edge) or the text after it on its
 * own line.
 */
export function extractFields(lines: readonly TextLine[], today = new Date()): DocumentFields {
  const candidates = lines.filter((line) => line.text.trim() && !isMrzLine(line));
  const labels = candidates.flatMap(labelsOf);
  const labelLines = new Set(labels.map((label) => label.line));
  // Where each label line really begins, with the pieces OCR broke off its start.
  const leftEdge = new Map<TextLine, number>();
  const fragments = new Set<TextLine>();
  for (const line of labelLines) {
    const pieces = labelFragments(line, candidates, labelLines);
    pieces.forEach((piece) => fragments.add(piece));
    leftEdge.set(line, Math.min(line.box.x, ...pieces.map((piece) => piece.box.x)));
  }
  const values = candidates.filter((line) => !labelLines.has(line) && !fragments.has(line)).flatMap((line) => splitDates(line, today));
  const used = new Set<TextLine>();
  /** Dates taken by issue and "valid from" labels: known not to be the expiry. */
  const issued = new Set<string>();
  const fields: DocumentFields = {};
  const store = (kind: Exclude<LabelKind, null>, text: string): boolean => {
    if (kind === 'issue_date') {
      const date = parseDocumentDate(text, 'future', today);
      if (date) issued.add(date);
      return date !== null;
    }
    if (kind === 'full_name') {
      // "SURNAME, GIVEN NAMES", as TD1 cards print under "Name"; without a comma it stays whole.
      const [last, first] = text.split(/\s*,\s*/);
      const lastName = last ? parseValue('last_name', last, today) : null;
      if (!lastName) return false;
      const firstName = first ? parseValue('first_name', first, today) : null;
      if (!firstName) {
        fields.full_name ??= lastName;
        return true;
      }
      fields.last_name ??= lastName;
      fields.first_name ??= firstName;
      return true;
    }
    const value = parseValue(kind, text, today);
    if (value) fields[kind] = value;
    return value !== null;
  };
  for (const label of labels) {
    if (!label.field || (label.field !== 'full_name' && label.field !== 'issue_date' && fields[label.field])) continue;
    // A value on the label's own line ("Sex: M") is printed in capitals; mixed case is more label.
    const inline = label.rest && !/[a-z]/.test(label.rest) && !labelsOf({ ...label.line, text: label.rest }).length;
    if (inline && store(label.field, label.rest)) continue;
    const height = label.line.box.height;
    const nearby: { line: TextLine; cost: number }[] = [];
    for (const line of values) {
      if (used.has(line)) continue;
      const dy = line.box.y - label.line.box.y;
      // The label's position inside its line is an estimate: its line's left edge counts too.
      const lineLeft = leftEdge.get(label.line) ?? label.line.box.x;
      const dx = Math.abs(line.box.x - label.x) < Math.abs(line.box.x - lineLeft) ? line.box.x - label.x : line.box.x - lineLeft;
      if (dy <= height * 0.3 || dy > height * 3 || dx < -height * 1.5 || dx > height * 4) continue;
      // A value belongs to the nearest label above it: another label in between owns it.
      const between = [...labelLines].some((other) => other !== label.line && other.box.y > label.line.box.y && other.box.y < line.box.y && other.box.x < line.box.x + line.box.width && line.box.x < other.box.x + other.box.width);
      if (!between) nearby.push({ line, cost: dy + Math.abs(dx) * 0.5 });
    }
    // The nearest line that reads as this field's value (a date under "Date of birth", ...).
    for (const { line } of nearby.sort((a, b) => a.cost - b.cost)) {
      if (store(label.field, line.text)) {
        used.add(line);
        break;
      }
    }
  }
  // No expiry label gave a value (its label too damaged to read, "Valliduni/V"): the dates of a
  // document come in order, birth, then issue or "valid from", then expiry. Once the birth date is
  // known, and at least two later dates are printed that no other field took (those under an issue
  // or "valid from" label included), the latest is the expiry, unless an issue or "valid from"
  // label took it. A single date is not taken: it may be the issue date under a label not read.
  // Two-digit years are read as expiry years, and a reading past validityLimit is no expiry.
  if (!fields.expiry_date && fields.birth_date) {
    const birth = fields.birth_date;
    const free = values.filter((line) => !used.has(line)).flatMap((line) => findDocumentDates(line.text, 'future', today));
    const later = new Set([...free, ...issued].filter((date) => date > birth && date <= validityLimit(today)));
    const latest = [...later].reduce<string | null>((a, b) => (a === null || b > a ? b : a), null);
    if (later.size >= 2 && latest && !issued.has(latest)) fields.expiry_date = latest;
  }
  return fields;
}

/** Nationality words printed on documents instead of a code (the common ones). */
const DEMONYMS: Record<string, string> = {
  BRITISH: 'GBR', IRISH: 'IRL', AMERICAN: 'USA', CANADIAN: 'CAN', AUSTRALIAN: 'AUS', GERMAN: 'DEU', DEUTSCH: 'DEU', FRENCH: 'FRA', FRANCAISE: 'FRA',
  SPANISH: 'ESP', ESPANOLA: 'ESP', ITALIAN: 'ITA', ITALIANA: 'ITA', DUTCH: 'NLD', NEDERLANDSE: 'NLD', BELGIAN: 'BEL', SWISS: 'CHE', AUSTRIAN: 'AUT',
  POLISH: 'POL', POLSKIE: 'POL', SWEDISH: 'SWE', NORWEGIAN: 'NOR', DANISH: 'DNK', FINNISH: 'FIN', PORTUGUESE: 'PRT', PORTUGUESA: 'PRT', GREEK: 'GRC',
  INDIAN: 'IND', CHINESE: 'CHN', JAPANESE: 'JPN', MEXICAN: 'MEX', MEXICANA: 'MEX', BRAZILIAN: 'BRA', BRASILEIRA: 'BRA', NIGERIAN: 'NGA',
};

/** ISO 3166 alpha-3 code of a nationality as printed (a code, a country name or a demonym), when it can be told. */
export function nationalityCode(printed: string | undefined): string | null {
  if (!printed) return null;
  const text = printed.trim().toUpperCase();
  if (/^[A-Z]{3}$/.test(text) && countries.isValid(text)) return text;
  const byName = countries.getAlpha3Code(text.toLowerCase().replace(/\b\w/g, (c) => c.toUpperCase()), 'en');
  if (byName) return byName;
  const demonym = Object.entries(DEMONYMS).find(([word]) => text.split(/\s+/).includes(word));
  return demonym?.[1] ?? null;
}
