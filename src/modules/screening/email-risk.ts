/**
 * Email risk (the customer's email_risk_score): 0-100, higher is riskier, with the reasons that
 * produced it. Pure and synchronous; the domain lists are loaded once per process or worker.
 *
 * The score is the sum of the weights of the reasons found, clamped to 0-100:
 *
 * | reason               | weight | meaning                                                              |
 * |----------------------|-------:|----------------------------------------------------------------------|
 * | no_email             |      0 | no address given: nothing to judge; a rule can test the field itself |
 * | invalid_format       |     70 | validator's isEmail refuses it: the address cannot receive mail      |
 * | disposable_domain    |     60 | domain (or a parent domain) is a throwaway-mail service              |
 * | domain_typo          |     30 | one keystroke away from a major provider (gamil.com, hotmal.com)     |
 * | random_local_part    |     30 | local part looks machine-generated (see isRandomLocalPart)           |
 * | role_account         |     20 | a shared mailbox (info@, support@, noreply@), not a person's         |
 * | name_mismatch        |     10 | names given, local part has letters, none of them fit the names      |
 * | birth_year_mismatch  |     10 | local part carries a year that is not the birth year                 |
 * | free_provider        |      5 | free webmail: anyone can open one, but most people use one           |
 * | name_match           |    -10 | local part contains the first or last name, or the initials          |
 * | birth_year_match     |     -5 | local part carries the birth year (4 digits, or 2 at the end)        |
 *
 * The negative weights let consistent personal data offset the mild free-provider signal; they
 * cannot push a score below 0. An invalid address still gets its domain judged when there is a
 * domain after the last "@", but its local part is not analysed: without a valid format the
 * split between local part and domain is not trustworthy. Role accounts skip the personal checks
 * (names, birth year, randomness) because a shared mailbox does not describe its holder.
 */
import { readFileSync } from 'node:fs';
import anyAscii from 'any-ascii';
import { distance } from 'fastest-levenshtein';
import { isEmailAddress } from '../../validation/email.ts';

export const EMAIL_RISK_WEIGHTS = {
  no_email: 0,
  invalid_format: 70,
  disposable_domain: 60,
  domain_typo: 30,
  random_local_part: 30,
  role_account: 20,
  name_mismatch: 10,
  birth_year_mismatch: 10,
  free_provider: 5,
  name_match: -10,
  birth_year_match: -5,
} as const;

export type EmailRiskReason = keyof typeof EMAIL_RISK_WEIGHTS;

export interface EmailRiskInput {
  email: string | null | undefined;
  firstName?: string | null;
  lastName?: string | null;
  /** YYYY-MM-DD */
  birthDate?: string | null;
}

export interface EmailRiskResult {
  score: number;
  reasons: EmailRiskReason[];
  valid_format: boolean;
}

export interface EmailLists {
  /** Matched against the domain and each of its parent domains. */
  readonly disposable: ReadonlySet<string>;
  /** Matched against the exact domain only. */
  readonly free: ReadonlySet<string>;
}

const LISTS_DIRECTORY = new URL('./lists/', import.meta.url);

/** Reads the domain lists shipped in ./lists; call once per process or worker and keep the result. */
export function loadEmailLists(): EmailLists {
  return {
    disposable: readDomainList(new URL('disposable-domains.txt', LISTS_DIRECTORY)),
    free: readDomainList(new URL('free-email-providers.txt', LISTS_DIRECTORY)),
  };
}

function readDomainList(file: URL): Set<string> {
  const domains = new Set<string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const domain = line.replace(/#.*/, '').trim().toLowerCase();
    if (domain !== '') domains.add(domain);
  }
  return domains;
}

/** RFC 5321's limit on a forward path; also keeps the string work below bounded. */
const MAX_EMAIL_LENGTH = 254;

export function scoreEmail(input: EmailRiskInput, lists: EmailLists): EmailRiskResult {
  const email = typeof input.email === 'string' ? input.email.trim() : '';
  if (email === '') return { score: 0, reasons: ['no_email'], valid_format: false };

  const withinLength = email.length <= MAX_EMAIL_LENGTH;
  const validFormat = withinLength && isEmailAddress(email);
  const reasons: EmailRiskReason[] = validFormat ? [] : ['invalid_format'];

  const at = email.lastIndexOf('@');
  const domain = withinLength && at > 0 ? email.slice(at + 1).toLowerCase() : '';
  const domainReason = domain === '' ? null : judgeDomain(domain, lists);
  if (domainReason) reasons.push(domainReason);

  if (validFormat) reasons.push(...judgeLocalPart(email.slice(0, at), input));

  return { score: scoreOf(reasons), reasons, valid_format: validFormat };
}

function scoreOf(reasons: readonly EmailRiskReason[]): number {
  const sum = reasons.reduce((total, reason) => total + EMAIL_RISK_WEIGHTS[reason], 0);
  return Math.min(100, Math.max(0, sum));
}

/**
 * Each list's verdicts by domain: a batch's customers share a handful of domains, and the typo
 * check costs a few edit distances each time. The lists never change once loaded, so a verdict
 * never goes stale; the memo starts over when full.
 */
const domainVerdicts = new WeakMap<EmailLists, Map<string, EmailRiskReason | null>>();
const MAX_DOMAIN_VERDICTS = 10_000;

function judgeDomain(domain: string, lists: EmailLists): EmailRiskReason | null {
  let verdicts = domainVerdicts.get(lists);
  if (!verdicts) domainVerdicts.set(lists, (verdicts = new Map()));
  let verdict = verdicts.get(domain);
  if (verdict === undefined) {
    verdict = judgeDomainOnce(domain, lists);
    if (verdicts.size >= MAX_DOMAIN_VERDICTS) verdicts.clear();
    verdicts.set(domain, verdict);
  }
  return verdict;
}

function judgeDomainOnce(domain: string, lists: EmailLists): EmailRiskReason | null {
  if (isListedWithParents(domain, lists.disposable)) return 'disposable_domain';
  if (lists.free.has(domain)) return 'free_provider';
  if (TYPO_TARGETS.some((target) => isOneKeystrokeAway(domain, target))) return 'domain_typo';
  return null;
}

/** Throwaway services hand out subdomains too (x.mailinator.com), so every parent is looked up. */
function isListedWithParents(domain: string, list: ReadonlySet<string>): boolean {
  for (let start = 0; ; ) {
    if (list.has(domain.slice(start))) return true;
    const dot = domain.indexOf('.', start);
    if (dot === -1) return false;
    start = dot + 1;
  }
}

/**
 * Only the providers people mistype most, and only long names: a short target such as aol.com
 * is one edit away from many real companies' domains (aon.com).
 */
const TYPO_TARGETS = [
  'gmail.com',
  'googlemail.com',
  'yahoo.com',
  'yahoo.co.uk',
  'hotmail.com',
  'hotmail.co.uk',
  'outlook.com',
  'icloud.com',
  'protonmail.com',
];

/** One insertion, deletion, substitution or swap of neighbours (gamil.com for gmail.com). */
function isOneKeystrokeAway(candidate: string, target: string): boolean {
  if (candidate === target || Math.abs(candidate.length - target.length) > 1) return false;
  if (distance(candidate, target) === 1) return true;
  if (candidate.length !== target.length) return false;
  let index = 0;
  while (candidate[index] === target[index]) index++;
  return (
    candidate[index] === target[index + 1] &&
    candidate[index + 1] === target[index] &&
    candidate.slice(index + 2) === target.slice(index + 2)
  );
}

/** Compared with separators removed, so no-reply, no_reply and no.reply are one entry. */
const ROLE_ACCOUNTS = new Set([
  'abuse', 'account', 'accounting', 'accounts', 'admin', 'administrator', 'alerts', 'billing',
  'careers', 'compliance', 'contact', 'contactus', 'customercare', 'customerservice',
  'customersupport', 'donotreply', 'enquiries', 'enquiry', 'feedback', 'finance', 'hello', 'help',
  'helpdesk', 'hostmaster', 'hr', 'info', 'information', 'inquiries', 'inquiry', 'invoice',
  'invoices', 'it', 'jobs', 'legal', 'mail', 'mailerdaemon', 'marketing', 'media', 'newsletter',
  'noreply', 'notifications', 'office', 'orders', 'payments', 'postmaster', 'press', 'privacy',
  'reception', 'root', 'sales', 'security', 'service', 'support', 'sysadmin', 'team', 'tech',
  'test', 'webmaster',
]);

function judgeLocalPart(rawLocalPart: string, input: EmailRiskInput): EmailRiskReason[] {
  // The +tag of sub-addressing is chosen per merchant by the holder and says nothing about them.
  const local = (toAscii(rawLocalPart).toLowerCase().split('+', 1)[0] ?? '').trim();
  if (ROLE_ACCOUNTS.has(local.replace(/[._-]/g, ''))) return ['role_account'];

  const reasons: EmailRiskReason[] = [];
  const random = isRandomLocalPart(local);
  if (random) reasons.push('random_local_part');
  const names = judgeNames(local, input.firstName, input.lastName);
  // A generated string is expected not to contain the name: counting that twice would overstate it.
  if (names && !(random && names === 'name_mismatch')) reasons.push(names);
  const birthYear = judgeBirthYear(local, input.birthDate);
  if (birthYear) reasons.push(birthYear);
  return reasons;
}

/**
 * Heuristic for machine-generated local parts (xk7q9zt2w, a8f3k2p9, 5f2c9e1a7b3d), tuned so
 * that real names from many languages (mkrtchyan, brzeczyszczykiewicz, strc.prst) and the usual
 * name+year or name+number patterns stay below the threshold. Three features, each worth points:
 * - vowel starvation: at least 5 letters of which under 15% are vowels (y counts as one). Words
 *   and names in Latin script, transliterations included, sit around 30-50%.
 * - a run of 5 or more consonants inside one separator-delimited chunk, digits removed. Real
 *   names rarely exceed 4 (schm, szcz); keyboard mashing and random strings often do.
 * - interleaving of letters and digits: 3-4 switches between the two classes score 1, 5 or more
 *   score 2. People append numbers (anna1987) or at most swap a letter for a digit (j0hn);
 *   generators scatter digits throughout.
 * Two points make it random. Local parts under 6 characters (separators excluded) are never
 * judged: too short to tell, and digits-only local parts (QQ numbers, phone numbers) are left
 * alone because those are normal on the providers that use them.
 */
function isRandomLocalPart(local: string): boolean {
  // One pass over the local part, for what the three features count: its letters and digits
  // (the compact form), vowels, the longest consonant run (digits skipped, anything else
  // ending it) and the switches between letters and digits.
  let compact = 0;
  let letters = 0;
  let vowels = 0;
  let run = 0;
  let longRun = false;
  let switches = 0;
  let previous = NONE;
  for (let index = 0; index < local.length; index++) {
    const code = local.charCodeAt(index);
    if (isDigit(code)) {
      compact++;
      if (previous === LETTER) switches++;
      previous = DIGIT;
    } else if (code >= 97 && code <= 122) {
      compact++;
      letters++;
      if (VOWELS.has(code)) {
        vowels++;
        run = 0;
      } else if (++run >= 5) longRun = true;
      if (previous === DIGIT) switches++;
      previous = LETTER;
    } else run = 0;
  }
  if (compact < 6) return false;
  let points = 0;
  if (letters >= 5 && vowels / letters < 0.15) points++;
  if (longRun) points++;
  if (switches >= 5) points += 2;
  else if (switches >= 3) points++;
  return points >= 2;
}

const NONE = 0;
const LETTER = 1;
const DIGIT = 2;
/** a, e, i, o, u and y: y counts as a vowel, so it ends a consonant run too. */
const VOWELS = new Set([97, 101, 105, 111, 117, 121]);

function isDigit(code: number): boolean {
  return code >= 48 && code <= 57;
}

/**
 * Transliterated tokens of a name, for the forms people write in addresses: "Jürgen Müller" gives
 * jurgen, muller and the German spellings juergen, mueller; "O'Brien" gives obrien.
 */
function nameTokens(name: string | null | undefined): string[] {
  if (typeof name !== 'string' || name.trim() === '') return [];
  const withoutApostrophes = name.replace(/['’`]/g, '');
  const tokens = new Set<string>();
  addNameTokens(withoutApostrophes, tokens);
  if (GERMAN_UMLAUTS.test(withoutApostrophes)) addNameTokens(expandGermanUmlauts(withoutApostrophes), tokens);
  return [...tokens];
}

function addNameTokens(spelling: string, tokens: Set<string>): void {
  for (const token of toAscii(spelling).toLowerCase().split(/[^a-z]+/)) {
    if (token.length >= 2) tokens.add(token);
  }
}

const GERMAN_UMLAUTS = /[äÄöÖüÜß]/;

function expandGermanUmlauts(text: string): string {
  return text
    .replace(/[äÄ]/g, 'ae')
    .replace(/[öÖ]/g, 'oe')
    .replace(/[üÜ]/g, 'ue')
    .replace(/ß/g, 'ss');
}

/** anyAscii, which leaves ASCII text as it is: most text is ASCII already and need not be walked by it. */
function toAscii(text: string): string {
  return NON_ASCII.test(text) ? anyAscii(text) : text;
}

const NON_ASCII = /[^\x00-\x7f]/;

/**
 * A token of 3 or more letters anywhere in the local part's letters (johnsmith, jsmith85,
 * smith.j); a 2-letter token as a whole chunk (li.wei) or joined to a token or initial of the
 * other name (lina, nali, nli); the initials alone (js, jms); or, for tokens of 5 or more
 * letters, one edit away from a whole chunk (smyth.anna for Smith). A mismatch needs at least 4
 * letters to compare: fewer say too little.
 */
function judgeNames(
  local: string,
  firstName: string | null | undefined,
  lastName: string | null | undefined,
): 'name_match' | 'name_mismatch' | null {
  const first = nameTokens(firstName);
  const last = nameTokens(lastName);
  if (first.length === 0 && last.length === 0) return null;
  const chunks = local.split(/[^a-z]+/).filter((chunk) => chunk !== '');
  const letters = chunks.join('');
  if (letters.length < 2) return null;

  const tokens = [...first, ...last];
  const matches =
    tokens.some((token) => (token.length >= 3 ? letters.includes(token) : chunks.includes(token))) ||
    pairsMatch(letters, first, last) ||
    initialsMatch(letters, first, last) ||
    tokens.some(
      (token) => token.length >= 5 && chunks.some((chunk) => chunk.length >= 4 && distance(chunk, token) <= 1),
    );
  if (matches) return 'name_match';
  return letters.length >= 4 ? 'name_mismatch' : null;
}

function pairsMatch(letters: string, first: readonly string[], last: readonly string[]): boolean {
  return first.some((given) =>
    last.some((family) =>
      [
        given + family,
        family + given,
        given.charAt(0) + family,
        family + given.charAt(0),
        given + family.charAt(0),
        family.charAt(0) + given,
      ].some((pair) => letters.includes(pair)),
    ),
  );
}

function initialsMatch(letters: string, first: readonly string[], last: readonly string[]): boolean {
  const given = first.map((token) => token.charAt(0)).join('');
  const family = last.map((token) => token.charAt(0)).join('');
  return letters === given + family || letters === family + given;
}

const BIRTH_DATE = /^(\d{4})-\d{2}-\d{2}$/;
const FOUR_DIGIT_YEAR = /(?<!\d)(?:19|20)\d{2}(?!\d)/g;
const TRAILING_TWO_DIGITS = /(?<=[^\d])\d{2}$/;

/**
 * Years people put in addresses: four digits from 1900 to 2099 standing alone anywhere, or two
 * digits ending the local part after something else (anna.k91). Other two-digit numbers are too
 * often an age, a lucky number or a counter to count as a year.
 */
function judgeBirthYear(
  local: string,
  birthDate: string | null | undefined,
): 'birth_year_match' | 'birth_year_mismatch' | null {
  const birthYear = typeof birthDate === 'string' ? BIRTH_DATE.exec(birthDate)?.[1] : undefined;
  if (!birthYear) return null;
  const years: readonly string[] = local.match(FOUR_DIGIT_YEAR) ?? [];
  const shortYear = TRAILING_TWO_DIGITS.exec(local)?.[0];
  if (years.length === 0 && !shortYear) return null;
  const matches = years.includes(birthYear) || shortYear === birthYear.slice(2);
  return matches ? 'birth_year_match' : 'birth_year_mismatch';
}
