import anyAscii from 'any-ascii';
import countries from 'i18n-iso-countries';

/** Names compared as the MRZ writes them: ASCII, upper case, letters only, order-free. */
function nameTokens(value: unknown): string[] {
  if (typeof value !== 'string') return [];
  return anyAscii(value).toUpperCase().replace(/[^A-Z]+/g, ' ').trim().split(' ').filter(Boolean).sort();
}

function permutations(tokens: string[]): string[][] {
  if (tokens.length <= 1) return [tokens];
  return tokens.flatMap((token, i) => permutations([...tokens.slice(0, i), ...tokens.slice(i + 1)]).map((rest) => [token, ...rest]));
}

/** Whether two spellings name the same person; `document` may be cut short (an MRZ truncates), `record` is taken as complete. */
export function sameName(document: unknown, record: unknown): boolean {
  const read = nameTokens(document);
  const known = nameTokens(record);
  if (read.length === 0 || known.length === 0) return true;
  // OCR of printed names may drop the space between names ("ANNAMARIA").
  if (known.length <= 4 && permutations(known).some((order) => order.join('') === read.join(''))) return true;
  // The MRZ truncates long names: a known token may be cut short in the document.
  return known.every((token) => read.some((candidate) => candidate === token || (candidate.length >= 3 && token.startsWith(candidate))));
}

/** Given names and surname as one name, for documents that print them as one value. */
function wholeName(person: Record<string, unknown>): string | undefined {
  const parts = [person.first_name, person.last_name].filter((part): part is string => typeof part === 'string' && part.trim() !== '');
  return parts.length ? parts.join(' ') : undefined;
}

/** ICAO 9303 nationality codes that are not ISO 3166 alpha-3 codes, mapped to the ISO code. */
const ICAO_CODES: ReadonlyMap<string, string> = new Map([['D', 'DEU'], ['GBD', 'GBR'], ['GBN', 'GBR'], ['GBO', 'GBR'], ['GBP', 'GBR'], ['GBS', 'GBR'], ['RKS', 'XKX']]);

/** A nationality as an ISO alpha-3 code: from alpha-2, alpha-3, or an ICAO document code (D<< is Germany). */
export function alpha3(value: unknown): string | null {
  if (typeof value !== 'string' || !value.replace(/</g, '').trim()) return null;
  const text = value.replace(/</g, '').trim().toUpperCase();
  const icao = ICAO_CODES.get(text);
  if (icao) return icao;
  if (text.length === 2) return countries.alpha2ToAlpha3(text) ?? text;
  return text;
}

const SEX_OF_GENDER: ReadonlyMap<unknown, string> = new Map([['male', 'M'], ['female', 'F']]);

/** What a comparison with a customer_ref that has no customer record reports: it fails, it never passes against nothing. */
export const NO_CUSTOMER_RECORD = 'customer_ref';

/**
 * Fields of a document that disagree with the customer's record, by field name of the document.
 * A field missing on either side is not a mismatch; names ignore case, accents and order. A
 * session whose customer_ref has no customer record mismatches on customer_ref: a document is
 * never taken as verified against a record that does not exist.
 */
export function mismatchedFields(document: Record<string, unknown>, customer: Record<string, unknown> | undefined): string[] {
  if (!customer) return [NO_CUSTOMER_RECORD];
  const mismatches: string[] = [];
  if (!sameName(document.first_name, customer.first_name)) mismatches.push('first_name');
  if (!sameName(document.last_name, customer.last_name)) mismatches.push('last_name');
  if (!sameName(document.full_name, wholeName(customer))) mismatches.push('full_name');
  const birth = customer.birth_date instanceof Date ? customer.birth_date.toISOString().slice(0, 10) : customer.birth_date;
  if (document.birth_date && birth && document.birth_date !== birth) mismatches.push('birth_date');
  const nationality = alpha3(customer.nationality);
  const documentNationality = alpha3(document.nationality);
  if (documentNationality && nationality && documentNationality !== nationality) mismatches.push('nationality');
  const sex = SEX_OF_GENDER.get(customer.gender);
  if (document.sex && sex && document.sex !== sex) mismatches.push('sex');
  const numbers = [customer.passport_number, customer.identity_number].filter((value): value is string => typeof value === 'string' && value.trim() !== '');
  const documentNumber = typeof document.document_number === 'string' ? document.document_number.replace(/</g, '') : '';
  if (documentNumber && numbers.length && !numbers.some((number) => number.replace(/[\s-]/g, '').toUpperCase() === documentNumber)) {
    mismatches.push('document_number');
  }
  return mismatches;
}

/**
 * Fields of a document front that disagree with the MRZ read earlier in the session (names
 * order-free and tolerant of the MRZ's truncation, dates and codes exactly).
 */
export function mismatchedWithMrz(document: Record<string, unknown>, mrz: Record<string, unknown>): string[] {
  const mismatches: string[] = [];
  // The MRZ is the side that truncates, so it goes first.
  if (!sameName(mrz.first_name, document.first_name)) mismatches.push('first_name');
  if (!sameName(mrz.last_name, document.last_name)) mismatches.push('last_name');
  if (!sameName(wholeName(mrz), document.full_name)) mismatches.push('full_name');
  for (const field of ['birth_date', 'expiry_date', 'sex'] as const) {
    if (document[field] && mrz[field] && document[field] !== mrz[field]) mismatches.push(field);
  }
  const [printed, coded] = [alpha3(document.nationality), alpha3(mrz.nationality)];
  if (printed && coded && printed !== coded) mismatches.push('nationality');
  const strip = (value: unknown) => (typeof value === 'string' ? value.replace(/[<\s-]/g, '').toUpperCase() : '');
  if (strip(document.document_number) && strip(mrz.document_number) && strip(document.document_number) !== strip(mrz.document_number)) mismatches.push('document_number');
  return mismatches;
}
