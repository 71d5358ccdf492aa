/**
 * From per-character class probabilities to MRZ text and fields. Each position is read within the
 * characters ICAO 9303 allows there (a date holds digits, a name letters), and a check digit that
 * fails may be repaired only with characters the model itself ranked as plausible at those
 * positions; nothing is invented. Parsing and the final check-digit verdict are the `mrz` library's.
 */
import { parse, type Details, type FieldName } from 'mrz';
import { ALPHABET } from './glyphs.ts';

export type MrzFormat = 'TD1' | 'TD2' | 'TD3' | 'MRVA' | 'MRVB';

export interface MrzFields {
  document_type: string | null;
  issuing_country: string | null;
  last_name: string | null;
  first_name: string | null;
  document_number: string | null;
  nationality: string | null;
  /** YYYY-MM-DD; the century is inferred (a birth date is never in the future). */
  birth_date: string | null;
  sex: 'M' | 'F' | 'X' | null;
  /** YYYY-MM-DD, 20YY unless that is more than 50 years ahead (old visas). */
  expiry_date: string | null;
  personal_number: string | null;
  optional_data: string | null;
  optional_data_2: string | null;
}

export interface Correction {
  line: number;
  column: number;
  read: string;
  corrected: string;
  /** The model's probability for the character put in. */
  probability: number;
}

export interface Decoded {
  format: MrzFormat;
  lines: string[];
  valid: boolean;
  fields: MrzFields;
  invalid_fields: string[];
  corrections: Correction[];
  /** Mean probability of the characters kept. */
  confidence: number;
  /** Share of positions whose unconstrained best class already fits the layout: low for text that is not an MRZ. */
  conformity: number;
}

/**
 * Layout codes: T document code letter, A letter or filler, N digit or filler, D digit, S sex,
 * X letter, digit or filler.
 */
const LAYOUTS: Record<MrzFormat, string[]> = {
  TD3: ['TA' + 'A'.repeat(42), 'X'.repeat(9) + 'D' + 'AAA' + 'NNNNNN' + 'D' + 'S' + 'NNNNNN' + 'D' + 'X'.repeat(14) + 'N' + 'D'],
  MRVA: ['TA' + 'A'.repeat(42), 'X'.repeat(9) + 'D' + 'AAA' + 'NNNNNN' + 'D' + 'S' + 'NNNNNN' + 'D' + 'X'.repeat(16)],
  TD2: ['TA' + 'A'.repeat(34), 'X'.repeat(9) + 'N' + 'AAA' + 'NNNNNN' + 'D' + 'S' + 'NNNNNN' + 'D' + 'X'.repeat(7) + 'D'],
  MRVB: ['TA' + 'A'.repeat(34), 'X'.repeat(9) + 'D' + 'AAA' + 'NNNNNN' + 'D' + 'S' + 'NNNNNN' + 'D' + 'X'.repeat(8)],
  TD1: ['TAAAA' + 'X'.repeat(9) + 'N' + 'X'.repeat(15), 'NNNNNN' + 'D' + 'S' + 'NNNNNN' + 'D' + 'AAA' + 'X'.repeat(11) + 'D', 'A'.repeat(30)],
};

const ALLOWED: Record<string, string> = {
  T: 'ACIPV',
  A: '<ABCDEFGHIJKLMNOPQRSTUVWXYZ',
  N: '<0123456789',
  D: '0123456789',
  S: '<FMX',
  X: ALPHABET,
};

type Span = readonly [line: number, start: number, end: number];
interface CheckGroup {
  spans: Span[];
  digit: readonly [line: number, column: number];
}

/** Document number, birth date and expiry date: the same places on the second line of TD2, TD3 and visas. */
const LINE_2_CHECKS: CheckGroup[] = [
  { spans: [[1, 0, 9]], digit: [1, 9] },
  { spans: [[1, 13, 19]], digit: [1, 19] },
  { spans: [[1, 21, 27]], digit: [1, 27] },
];

/** Check digits per format, composite last (it covers the others). */
const CHECKS: Record<MrzFormat, CheckGroup[]> = {
  TD3: [...LINE_2_CHECKS, { spans: [[1, 28, 42]], digit: [1, 42] }, { spans: [[1, 0, 10], [1, 13, 20], [1, 21, 43]], digit: [1, 43] }],
  MRVA: LINE_2_CHECKS,
  TD2: [...LINE_2_CHECKS, { spans: [[1, 0, 10], [1, 13, 20], [1, 21, 35]], digit: [1, 35] }],
  MRVB: LINE_2_CHECKS,
  TD1: [
    { spans: [[0, 5, 14]], digit: [0, 14] },
    { spans: [[1, 0, 6]], digit: [1, 6] },
    { spans: [[1, 8, 14]], digit: [1, 14] },
    { spans: [[0, 5, 30], [1, 0, 7], [1, 8, 15], [1, 18, 29]], digit: [1, 29] },
  ],
};

/** A probability at or above this makes a character a candidate for check-digit repair. */
const REPAIR_FLOOR = 0.05;

/** The formats a band of `lines` lines of `length` characters can be, given its first character. */
export function formatFor(lineCount: number, length: number, documentCode: string): MrzFormat | null {
  if (lineCount === 3 && length === 30) return 'TD1';
  if (lineCount !== 2) return null;
  const visa = documentCode === 'V';
  if (length === 44) return visa ? 'MRVA' : 'TD3';
  if (length === 36) return visa ? 'MRVB' : 'TD2';
  return null;
}

/**
 * `probabilities` holds lineCount x length rows of ALPHABET.length class probabilities, lines in
 * reading order.
 */
export function decode(probabilities: Float32Array, lineCount: number, length: number): Decoded | null {
  const classes = ALPHABET.length;
  const rowOf = (line: number, column: number) => (line * length + column) * classes;
  const documentCode = bestOf(probabilities, rowOf(0, 0), ALLOWED.T!);
  const format = formatFor(lineCount, length, documentCode.char);
  if (!format) return null;
  const layout = LAYOUTS[format];
  const chars: string[][] = [];
  const kept: number[][] = [];
  let conforming = 0;
  let confidence = 0;
  const [numberLine, numberStart, numberEnd] = DOCUMENT_NUMBER[format];
  for (let line = 0; line < lineCount; line++) {
    chars.push([]);
    kept.push([]);
    for (let column = 0; column < length; column++) {
      const allowed = ALLOWED[layout[line]![column]!]!;
      const inNumber = line === numberLine && column >= numberStart && column < numberEnd;
      const best = inNumber ? preferZero(probabilities, rowOf(line, column), allowed) : bestOf(probabilities, rowOf(line, column), allowed);
      chars[line]!.push(best.char);
      kept[line]!.push(best.probability);
      confidence += best.probability;
      if (allowed.includes(bestOf(probabilities, rowOf(line, column), ALPHABET).char)) conforming++;
    }
  }
  clearNameTail(format, chars, kept, probabilities, rowOf);
  const corrections = repair(format, chars, kept, (line, column) => {
    const allowed = ALLOWED[layout[line]![column]!]!;
    const row = rowOf(line, column);
    return [...allowed]
      .map((char) => ({ char, probability: probabilities[row + ALPHABET.indexOf(char)]! }))
      .filter((option) => option.probability >= REPAIR_FLOOR && option.char !== chars[line]![column])
      .sort((a, b) => b.probability - a.probability)
      .slice(0, 3);
  });
  const lines = chars.map((line) => line.join(''));
  const parsed = parseLines(format, lines);
  return {
    format,
    lines,
    ...parsed,
    corrections,
    confidence: confidence / (lineCount * length),
    conformity: conforming / (lineCount * length),
  };
}

/** Where the document number is (its first nine characters). */
const DOCUMENT_NUMBER: Record<MrzFormat, Span> = {
  TD3: [1, 0, 9],
  MRVA: [1, 0, 9],
  TD2: [1, 0, 9],
  MRVB: [1, 0, 9],
  TD1: [0, 5, 14],
};

/** Where the holder's name is. */
const NAME: Record<MrzFormat, Span> = {
  TD3: [0, 5, 44],
  MRVA: [0, 5, 44],
  TD2: [0, 5, 36],
  MRVB: [0, 5, 36],
  TD1: [2, 0, 30],
};

/**
 * Name components are separated by one filler, surname from given names by two, so three fillers in
 * a row end the name and only fillers may follow. A letter read out there (a speck, a guilloche line)
 * becomes the filler when the model gives the filler a fair chance.
 */
function clearNameTail(
  format: MrzFormat,
  chars: string[][],
  kept: number[][],
  probabilities: Float32Array,
  rowOf: (line: number, column: number) => number,
): void {
  const [line, start, end] = NAME[format];
  const text = chars[line]!.slice(start, end).join('');
  const tail = text.indexOf('<<<');
  if (tail < 0) return;
  for (let column = start + tail + 3; column < end; column++) {
    if (chars[line]![column] === '<') continue;
    const filler = probabilities[rowOf(line, column) + ALPHABET.indexOf('<')]!;
    if (filler < REPAIR_FLOOR) continue;
    chars[line]![column] = '<';
    kept[line]![column] = filler;
  }
}

/** Below this the model is taken to have ruled a zero out. */
const ZERO_FLOOR = 0.1;

/**
 * OCR-B's O and 0 differ by a few pixels, and a pair of O/0 swaps can cancel out in a check digit.
 * Many issuers leave the letter O out of document numbers (it is the digit far more often), so when
 * the model rates both plausible there, the digit is read; a real O still comes back through the
 * check-digit repair if the digit makes the check fail.
 */
function preferZero(probabilities: Float32Array, row: number, allowed: string): { char: string; probability: number } {
  const best = bestOf(probabilities, row, allowed);
  const zero = probabilities[row + ALPHABET.indexOf('0')]!;
  return best.char === 'O' && zero >= ZERO_FLOOR ? { char: '0', probability: zero } : best;
}

function bestOf(probabilities: Float32Array, row: number, allowed: string): { char: string; probability: number } {
  let char = allowed[0]!;
  let probability = -1;
  for (const candidate of allowed) {
    const p = probabilities[row + ALPHABET.indexOf(candidate)]!;
    if (p > probability) {
      probability = p;
      char = candidate;
    }
  }
  return { char, probability };
}

const CHAR_VALUES = new Map<string, number>([...ALPHABET].map((char, index) => [char, char === '<' ? 0 : index - 1]));

export function checkDigit(text: string): number {
  const weights = [7, 3, 1];
  let sum = 0;
  for (let i = 0; i < text.length; i++) sum += CHAR_VALUES.get(text[i]!)! * weights[i % 3]!;
  return sum % 10;
}

function holds(chars: string[][], group: CheckGroup): boolean {
  const [line, column] = group.digit;
  const digit = chars[line]![column]!;
  const text = group.spans.map(([l, start, end]) => chars[l]!.slice(start, end).join('')).join('');
  // An empty optional field may carry a filler instead of its check digit.
  if (digit === '<') return /^<*$/.test(text);
  return checkDigit(text) === Number(digit);
}

interface Option {
  char: string;
  probability: number;
}
/**
 * For each failing check, tries the model's plausible runner-up characters one position at a time
 * (the checked text and the check digit itself). A change is made only when exactly one such change
 * makes every check so far hold: a check digit is one decimal digit, so with several candidates one
 * of them holds by chance, and two changes at once would be a guess.
 */
function repair(
  format: MrzFormat,
  chars: string[][],
  kept: number[][],
  alternatives: (line: number, column: number) => Option[],
): Correction[] {
  const corrections: Correction[] = [];
  const groups = CHECKS[format];
  for (let index = 0; index < groups.length; index++) {
    const group = groups[index]!;
    if (holds(chars, group)) continue;
    const earlier = groups.slice(0, index + 1);
    const positions: Array<readonly [number, number]> = [];
    for (const [line, start, end] of group.spans) for (let column = start; column < end; column++) positions.push([line, column]);
    positions.push(group.digit);
    const fixes: Correction[] = [];
    for (const [line, column] of positions) {
      const read = chars[line]![column]!;
      for (const option of alternatives(line, column)) {
        chars[line]![column] = option.char;
        if (earlier.every((other) => holds(chars, other))) fixes.push({ line, column, read, corrected: option.char, probability: option.probability });
        chars[line]![column] = read;
      }
    }
    if (fixes.length !== 1) continue;
    const fix = fixes[0]!;
    chars[fix.line]![fix.column] = fix.corrected;
    kept[fix.line]![fix.column] = fix.probability;
    corrections.push(fix);
  }
  return corrections;
}

/** Fields that are not part of a visa's layout when it is read with the passport or ID card parser. */
const NOT_ON_VISAS = new Set<FieldName>(['documentCode', 'personalNumber', 'personalNumberCheckDigit', 'optional', 'compositeCheckDigit']);

const FIELD_NAMES: Partial<Record<FieldName, string>> = {
  documentCode: 'document_type',
  issuingState: 'issuing_country',
  lastName: 'last_name',
  firstName: 'first_name',
  documentNumber: 'document_number',
  documentNumberCheckDigit: 'document_number_check_digit',
  nationality: 'nationality',
  birthDate: 'birth_date',
  birthDateCheckDigit: 'birth_date_check_digit',
  sex: 'sex',
  expirationDate: 'expiry_date',
  expirationDateCheckDigit: 'expiry_date_check_digit',
  personalNumber: 'personal_number',
  personalNumberCheckDigit: 'personal_number_check_digit',
  optional: 'optional_data',
  optional1: 'optional_data',
  optional2: 'optional_data_2',
  compositeCheckDigit: 'composite_check_digit',
};

/**
 * The `mrz` library knows TD1, TD2 and TD3 but not visas; a visa is read with the parser of the same
 * line length and its own document code put back, ignoring the fields visas do not have.
 */
function parseLines(format: MrzFormat, lines: string[]): Pick<Decoded, 'valid' | 'fields' | 'invalid_fields'> {
  const visa = format === 'MRVA' || format === 'MRVB';
  const input = visa ? [(format === 'MRVA' ? 'P' : 'I') + lines[0]!.slice(1), lines[1]!] : lines;
  let details: Details[];
  try {
    details = parse(input).details;
  } catch {
    return { valid: false, fields: emptyFields(), invalid_fields: ['document_type'] };
  }
  const relevant = visa ? details.filter((detail) => !detail.field || !NOT_ON_VISAS.has(detail.field)) : details;
  const value = (field: FieldName) => relevant.find((detail) => detail.field === field)?.value ?? null;
  const invalid = relevant.filter((detail) => !detail.valid).map((detail) => (detail.field ? (FIELD_NAMES[detail.field] ?? detail.field) : detail.label));
  const checksHold = relevant.every((detail) => detail.valid || !detail.field?.endsWith('CheckDigit'));
  const sex = value('sex');
  const [nationalityLine, nationalityStart] = format === 'TD1' ? [1, 15] : [1, 10];
  const fields: MrzFields = {
    document_type: visa ? lines[0]!.slice(0, 2).replace(/<+$/, '') : value('documentCode'),
    // Codes outside the library's list (ICAO's specimen state UTO, for one) are reported as read and flagged.
    issuing_country: value('issuingState') ?? countryCode(lines[0]!.slice(2, 5)),
    last_name: value('lastName'),
    first_name: value('firstName'),
    document_number: value('documentNumber'),
    nationality: value('nationality') ?? countryCode(lines[nationalityLine]!.slice(nationalityStart, nationalityStart + 3)),
    birth_date: isoDate(value('birthDate'), 'birth'),
    sex: sex === 'male' ? 'M' : sex === 'female' ? 'F' : sex === 'nonspecified' ? 'X' : null,
    expiry_date: isoDate(value('expirationDate'), 'expiry'),
    personal_number: value('personalNumber') || null,
    optional_data: (visa ? visaOptionalData(format, lines[1]!) : (value('optional') ?? value('optional1'))) || null,
    optional_data_2: value('optional2') || null,
  };
  return { valid: checksHold, fields, invalid_fields: [...new Set(invalid)] };
}

function countryCode(raw: string): string | null {
  const code = raw.replace(/<+$/, '');
  return /^[A-Z]{1,3}$/.test(code) ? code : null;
}

function visaOptionalData(format: MrzFormat, line: string): string {
  return line.slice(28, format === 'MRVA' ? 44 : 36).replace(/<+$/, '').replace(/</g, ' ').trim();
}

export function emptyFields(): MrzFields {
  return {
    document_type: null,
    issuing_country: null,
    last_name: null,
    first_name: null,
    document_number: null,
    nationality: null,
    birth_date: null,
    sex: null,
    expiry_date: null,
    personal_number: null,
    optional_data: null,
    optional_data_2: null,
  };
}

function isoDate(yymmdd: string | null, kind: 'birth' | 'expiry'): string | null {
  if (!yymmdd || !/^\d{6}$/.test(yymmdd)) return null;
  const yy = Number(yymmdd.slice(0, 2));
  const currentYear = new Date().getUTCFullYear();
  const year = kind === 'birth' ? (2000 + yy > currentYear ? 1900 + yy : 2000 + yy) : 2000 + yy > currentYear + 50 ? 1900 + yy : 2000 + yy;
  return `${year}-${yymmdd.slice(2, 4)}-${yymmdd.slice(4, 6)}`;
}
