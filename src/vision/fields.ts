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
  last_name: ['primaryidentifier', 'identifiantprimaire', 'surname', 'familyname', 'lastname', 'nom', 'apellidos', 'apellido', 'nachname', 'familienname', 'cognome', 'achternaam', 'nazwisko'],
  first_name: ['secondaryidentifier', 'identifiantsecondaire', 'givennames', 'givenname', 'forenames', 'firstname', 'prenoms', 'prenom', 'vornamen', 'vorname', 'nombres', 'nombre', 'nomi', 'voornamen', 'imiona'],
  document_number: ['passportno', 'passportnumber', 'nodupasseport', 'documentno', 'documentnumber', 'docno', 'cardno', 'cardnumber', 'idno', 'reisepassnr', 'ausweisnr', 'pasaporten', 'numero', 'nummer'],
  birth_date: ['dateofbirth', 'datedenaissance', 'birthdate', 'geburtsdatum', 'fechadenacimiento', 'datadinascita', 'geboortedatum', 'dob'],
  expiry_date: ['dateofexpiry', 'datedexpiration', 'expirydate', 'dateofexpiration', 'expires', 'validuntil', 'gultigbis', 'fechadecaducidad', 'scadenza', 'vervaldatum', 'validejusquau', 'expiry'],
  nationality: ['nationality', 'nationalite', 'staatsangehorigkeit', 'nacionalidad', 'nazionalita', 'nationaliteit', 'obywatelstwo'],
  sex: ['sex', 'sexe', 'geschlecht', 'sexo', 'sesso', 'geslacht', 'plec'],
};

/** Labels of the whole name; "Name/Nom" is one label, so the "nom" after it is absorbed. */
const FULL_NAME_LABELS = ['surnamegivennames', 'surnameandgivennames', 'nomprenoms', 'namenom', 'name', 'nameandsurname'];

/** Labels of fields not extracted: recognising them keeps them from being read as a value. */
const OTHER_LABELS = ['noofentries', 'nombredentrees', 'numberofentries', 'placeofbirth', 'lieudenaissance', 'dateofissue', 'datededelivrance', 'authority', 'autorite', 'type', 'countrycode', 'codedupays', 'personalno', 'signature', 'height', 'taille', 'address', 'domicile', 'issuingstate'];

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
type LabelKind = DocumentField | 'full_name' | null;

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

/** The original text after the `end`-th compact character (labels printed as "Surname: DOE"). */
function restAfter(text: string, end: number): string {
  let seen = 0;
  for (let i = 0; i < text.length; i++) {
    if (seen >= end) return text.slice(i).replace(/^[\s:/.-]+/, '');
    if (/[a-z0-9]/.test(compact(text[i]!))) seen += compact(text[i]!).length;
  }
  return '';
}

function isMrzLine(line: TextLine): boolean {
  return /<</.test(line.text) || (line.text.replace(/\s/g, '').length >= 28 && /^[A-Z0-9<]+$/.test(line.text.replace(/\s/g, '')));
}

/** A date in the formats documents print: 12 AUG 74, 12 AUG/AOUT 1974, 12.08.1974, 1974-08-12, 12/08/74. */
export function parseDocumentDate(text: string, kind: 'past' | 'future', today = new Date()): string | null {
  const upper = anyAscii(text).toUpperCase();
  let day: number | undefined, month: number | undefined, year: number | undefined;
  const iso = upper.match(/\b(\d{4})[-./ ](\d{1,2})[-./ ](\d{1,2})\b/);
  const numeric = upper.match(/\b(\d{1,2})\s*[-./ ]\s*(\d{1,2})\s*[-./ ]\s*(\d{4}|\d{2})\b/);
  const named = upper.match(/\b(\d{1,2})\s*([A-Z]{3,9})(?:\s*\/\s*[A-Z]{3,9})?\s*(\d{4}|\d{2})\b/);
  if (iso) [year, month, day] = [Number(iso[1]), Number(iso[2]), Number(iso[3])];
  else if (named && MONTHS[named[2]!]) [day, month, year] = [Number(named[1]), MONTHS[named[2]!], Number(named[3])];
  else if (numeric) [day, month, year] = [Number(numeric[1]), Number(numeric[2]), Number(numeric[3])];
  if (day === undefined || month === undefined || year === undefined) return null;
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

function parseValue(field: DocumentField, text: string): string | null {
  const clean = anyAscii(text).toUpperCase().trim();
  switch (field) {
    case 'last_name':
    case 'first_name': {
      const name = clean.replace(/[^A-Z' -]+/g, ' ').replace(/\s+/g, ' ').trim();
      return name.length >= 2 ? name : null;
    }
    case 'birth_date':
      return parseDocumentDate(text, 'past');
    case 'expiry_date':
      return parseDocumentDate(text, 'future');
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
 * The field values of a document's OCR lines. Each label takes the nearest unused line below it
 * (within a few line heights, starting near the label's left edge) or the text after it on its
 * own line.
 */
export function extractFields(lines: readonly TextLine[]): DocumentFields {
  const candidates = lines.filter((line) => line.text.trim() && !isMrzLine(line));
  const labels = candidates.flatMap(labelsOf);
  const labelLines = new Set(labels.map((label) => label.line));
  const values = candidates.filter((line) => !labelLines.has(line));
  const used = new Set<TextLine>();
  const fields: DocumentFields = {};
  const store = (kind: Exclude<LabelKind, null>, text: string): boolean => {
    if (kind === 'full_name') {
      // "SURNAME, GIVEN NAMES", as TD1 cards print under "Name"; without a comma it stays whole.
      const [last, first] = text.split(/\s*,\s*/);
      const lastName = last ? parseValue('last_name', last) : null;
      if (!lastName) return false;
      const firstName = first ? parseValue('first_name', first) : null;
      if (!firstName) {
        fields.full_name ??= lastName;
        return true;
      }
      fields.last_name ??= lastName;
      fields.first_name ??= firstName;
      return true;
    }
    const value = parseValue(kind, text);
    if (value) fields[kind] = value;
    return value !== null;
  };
  for (const label of labels) {
    if (!label.field || (label.field !== 'full_name' && fields[label.field])) continue;
    // A value on the label's own line ("Sex: M") is printed in capitals; mixed case is more label.
    const inline = label.rest && !/[a-z]/.test(label.rest) && !labelsOf({ ...label.line, text: label.rest }).length;
    if (inline && store(label.field, label.rest)) continue;
    const height = label.line.box.height;
    const nearby: { line: TextLine; cost: number }[] = [];
    for (const line of values) {
      if (used.has(line)) continue;
      const dy = line.box.y - label.line.box.y;
      // The label's position inside its line is an estimate: its line's left edge counts too.
      const dx = Math.abs(line.box.x - label.x) < Math.abs(line.box.x - label.line.box.x) ? line.box.x - label.x : line.box.x - label.line.box.x;
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
