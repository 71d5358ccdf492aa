import anyAscii from 'any-ascii';
import countries from 'i18n-iso-countries';
import doubleMetaphone from 'talisman/phonetics/double-metaphone.js';

/**
 * Legal-form words carry no identity: "Galax Trading Co., Ltd." and "GALAX TRADING LIMITED" are
 * the same company. Dotted abbreviations are joined before this lookup, so "S.A." arrives as "sa".
 */
const LEGAL_FORM_WORDS = new Set([
  'ab', 'ag', 'ao', 'aps', 'as', 'bhd', 'bv', 'ca', 'cjsc', 'co', 'company', 'corp', 'corporation', 'cv',
  'dd', 'doo', 'eirl', 'fzc', 'fzco', 'fze', 'fzllc', 'gmbh', 'inc', 'incorporated', 'jsc', 'kft',
  'kg', 'kk', 'limited', 'llc', 'llp', 'lp', 'ltd', 'ltda', 'mbh', 'nv', 'oao', 'ojsc', 'ooo', 'oy',
  'oyj', 'pao', 'pjsc', 'plc', 'pllc', 'pte', 'pty', 'pvt', 'sa', 'sab', 'sae', 'sal', 'sapi', 'sarl',
  'sas', 'se', 'spa', 'sro', 'srl', 'tbk', 'zao', 'zrt',
]);

/** Multi-word legal forms whose single words ("s", "z", "private") must survive elsewhere in a name. */
const LEGAL_FORM_PHRASES: readonly (readonly string[])[] = [
  ['s', 'de', 'rl'],
  ['s', 'en', 'c'],
  ['sp', 'z', 'oo'],
  ['sdn', 'bhd'],
  ['private', 'limited'],
  ['public', 'limited', 'company'],
  ['limited', 'liability', 'company'],
];

/** Titles that lists attach inconsistently ("AL ZAWAHIRI, Dr. Ayman" next to "AL-ZAWAHIRI, Ayman"). */
const HONORIFICS = new Set([
  'colonel', 'dame', 'dr', 'hadji', 'haji', 'hajji', 'madam', 'maulana', 'maulvi', 'mawlawi', 'miss',
  'mr', 'mrs', 'ms', 'mullah', 'mx', 'prof', 'rev', 'shaikh', 'shaykh', 'sheik', 'sheikh', 'sir',
]);

/**
 * Articles, kinship particles and connectives that lists write, hyphenate or leave out at will
 * ("al-Hassan", "Hassan", "Juan de la Cruz", "Bank of Cuba"). Kept, "al" alone would sit in one
 * name in eight and make "Ali" look like "Al".
 */
const PARTICLES = new Set([
  'al', 'and', 'bin', 'bint', 'da', 'de', 'del', 'dela', 'delas', 'delos', 'der', 'des', 'di', 'du', 'el', 'ibn',
  'la', 'las', 'le', 'los', 'of', 'the', 'van', 'vanden', 'vander', 'von', 'y',
]);

/**
 * Particles that names write apart from the word they belong to or joined to it at will ("BIN
 * LADEN" and "BINLADEN", "Abdul Rahman" and "Abdulrahman", "Al Qaida" and "Alqaida", "van der
 * Berg" and "Vanderberg"). A name's joined form (see nameForms) writes each one joined to the
 * word after it, so that the two writings become the same tokens.
 */
const JOINABLE_PARTICLES: readonly string[] = [
  'abd', 'abdal', 'abdel', 'abdul', 'abdur', 'abou', 'abu', 'al', 'ben', 'bin', 'bint', 'da', 'das', 'de', 'del',
  'dela', 'delas', 'della', 'delos', 'den', 'der', 'di', 'dos', 'du', 'el', 'ibn', 'la', 'las', 'le', 'los', 'van',
  'vanden', 'vander', 'von',
  // Longest first, so that a token is read with the longest particle it starts with.
].sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
const JOINABLE = new Set(JOINABLE_PARTICLES);
/** Spellings of one particle: a token read with one of them is compared with a token read with another by what follows. */
const PARTICLE_SPELLINGS: readonly (readonly string[])[] = [
  ['abd', 'abdal', 'abdel', 'abdul', 'abdur'],
  ['abu', 'abou'],
  ['al', 'el'],
  ['bin', 'ben', 'ibn', 'bint'],
  ['van', 'von', 'vanden', 'vander', 'den', 'der'],
  ['da', 'das', 'de', 'del', 'dela', 'delas', 'della', 'delos', 'di', 'dos', 'du', 'la', 'las', 'le', 'los'],
];
/** Letters a token keeps after its particle for the particle to count as one ("Alan" and "Dean" have none). */
const MIN_PARTICLE_REST = 3;
/** Between the parts of a joined token, its particles and its word ("bin|laden", "abd|al|wahhab"): tokens are [a-z0-9]+ otherwise. */
export const JOIN_MARK = '|';

/** A token's letters: a joined token's without JOIN_MARK. */
export function lettersOf(token: string): string {
  return token.includes(JOIN_MARK) ? token.replaceAll(JOIN_MARK, '') : token;
}

/** The particles a token starts with (see tokenParticle). */
export interface TokenParticle {
  /** How many letters. */
  length: number;
  /** Their spellings' group (PARTICLE_SPELLINGS) plus one, 0 for none. */
  spelling: number;
  /** Whether names drop all of them (PARTICLES: "al", "bin"; not "abdul"), and so the word is the name without them (not a title's: "al|sheikh"). */
  dropped: boolean;
}

function spellingOf(particle: string): number {
  return PARTICLE_SPELLINGS.findIndex((group) => group.includes(particle)) + 1;
}

/** Whether a token starts with a joinable particle and has letters after it ("el45", "labo", "alqaida"). */
export function startsWithParticle(token: string): boolean {
  return JOINABLE_PARTICLES.some((particle) => token.length > particle.length && token.startsWith(particle));
}

/**
 * The particles a token starts with, by which the matcher compares it with a joined token: a
 * joined token's as joined ("abd|al|wahhab": abd, al), another token's the longest joinable
 * particle that at least three letters follow ("alqaida": al; "Alan", "Dean": none).
 */
export function tokenParticle(token: string): TokenParticle {
  const parts = token.split(JOIN_MARK);
  if (parts.length > 1) {
    const particles = parts.slice(0, -1);
    return {
      length: token.length - parts.length + 1 - parts.at(-1)!.length,
      spelling: spellingOf(particles[0]!),
      // A title joined to particles is a name only with them: "al|sheikh" is no spelling of "Cheikh".
      dropped: particles.every((particle) => PARTICLES.has(particle)) && !HONORIFICS.has(parts.at(-1)!),
    };
  }
  const particle = keyParticle(token);
  return particle === undefined ? { length: 0, spelling: 0, dropped: false } : { length: particle.length, spelling: spellingOf(particle), dropped: PARTICLES.has(particle) };
}

/**
 * The particle that a token's keys are taken after (see the matcher's wordKeys): in its letters
 * alone, the longest joinable particle that at least three letters follow, so that the writings
 * of one name ("bin|laden", "bin|la|den", "binladen"; "abd|al|wahab", "abdal|wahab") have the
 * same keys however they ran their particles.
 */
export function keyParticle(letters: string): string | undefined {
  return JOINABLE_PARTICLES.find((particle) => letters.length - particle.length >= MIN_PARTICLE_REST && letters.startsWith(particle));
}

/**
 * The parts of a joined token that the name written apart keeps as tokens of its own: the
 * particles that are no PARTICLES ("abdul|rahman": abdul) and the word (rahman). A joined token
 * weighs what they weigh together.
 */
export function joinedParts(token: string): string[] {
  const parts = token.split(JOIN_MARK);
  return [...parts.slice(0, -1).filter((particle) => !PARTICLES.has(particle)), parts.at(-1)!];
}

/** The name's words; with `commas`, each comma is a token "," of its own. */
function tokenize(text: string, commas = false): string[] {
  return anyAscii(text)
    .toLowerCase()
    // "Sa'id" must stay one token, and "S.A." or "L.L.C." one word rather than single letters,
    // while "J.Smith" is still two.
    .replace(/['`]/g, '')
    .replace(/(?<=\b[a-z])\.(?=[a-z]\b)/g, '')
    .split(commas ? /(,)|[^a-z0-9,]+/ : /[^a-z0-9]+/)
    .filter((token) => token !== undefined && token.length > 0);
}

function phraseAt(tokens: readonly string[], start: number): number {
  for (const phrase of LEGAL_FORM_PHRASES) {
    if (phrase.every((word, offset) => tokens[start + offset] === word)) return phrase.length;
  }
  return 0;
}

/** A name's comparable forms (see normalizeName and nameForms). */
export interface NameForms {
  tokens: string[];
  /** The tokens with the joinable particles joined to the word after them (see nameForms); `tokens` itself when that changes nothing. */
  joined: string[];
}

/**
 * The comparable form of a person's or organization's name: ASCII, lower case, without
 * punctuation, legal forms, titles or particles, as a sorted set of tokens so that word order does
 * not matter ("HASSAN, Muhammad al-" and "Muhammad al Hassan" give the same tokens).
 * A name made only of such words ("Company Limited") keeps them rather than vanishing.
 */
export function normalizeName(name: string): string[] {
  return nameForms(name).tokens;
}

/**
 * normalizeName's tokens and the name's joined form: the same, except that each run of joinable
 * particles is joined to the word after it, with JOIN_MARK between the parts ("BIN LADEN, Hamza"
 * gives hamza, laden and bin|laden, hamza; "van der Berg" gives van|der|berg; after a particle a
 * title is a word: "Ibn al-Shaykh" gives ibn|al|shaykh). A comma ends a run. A run with no word
 * after it stays where the name keeps one of its particles ("KHAN, Abdul") or where
 * two or more make a word ("BIN LA DEN, Usama" gives bin|la|den, "Robinson Du van" du|van), and
 * goes otherwise ("HASSAN, Muhammad al-", "CRUZ, Juan de la"). The two writings of a name,
 * particles apart or joined, have joined forms of the same letters (lettersOf).
 */
export function nameForms(name: string): NameForms {
  const tokens = tokenize(name, true);
  const kept: string[] = [];
  const joined: string[] = [];
  // The run of particles waiting for the word they join, and whether the name keeps one of them on its own ("abu" it does, "al" not).
  const run: string[] = [];
  let runKept = false;
  let joins = false;
  const endRun = (): void => {
    run.length = 0;
    runKept = false;
  };
  const flush = (): void => {
    if (run.length === 1 && runKept) joined.push(run[0]!);
    else if (run.length > 1 && (runKept || !PARTICLES.has(run.join('')))) joined.push(run.join(JOIN_MARK));
    endRun();
  };
  for (let i = 0; i < tokens.length; ) {
    const phraseLength = phraseAt(tokens, i);
    if (phraseLength > 0) {
      i += phraseLength;
      continue;
    }
    const token = tokens[i++]!;
    if (token === ',') {
      flush();
      continue;
    }
    if (LEGAL_FORM_WORDS.has(token)) continue;
    if (HONORIFICS.has(token)) {
      // After a particle a title is a word of the name ("Ibn al-Shaykh", "El Sheikh", "Al Haji").
      if (run.length > 0) joined.push([...run, token].join(JOIN_MARK));
      endRun();
      continue;
    }
    const dropped = PARTICLES.has(token);
    if (JOINABLE.has(token)) {
      if (!dropped) kept.push(token);
      run.push(token);
      runKept ||= !dropped;
      joins = true;
      continue;
    }
    if (dropped) {
      endRun();
      continue;
    }
    kept.push(token);
    joined.push(run.length > 0 ? [...run, token].join(JOIN_MARK) : token);
    endRun();
  }
  flush();
  const sorted = [...new Set(kept.length > 0 ? kept : tokens.filter((token) => token !== ','))].sort();
  if (!joins || joined.length === 0) return { tokens: sorted, joined: sorted };
  const sortedJoined = [...new Set(joined)].sort();
  const same = sortedJoined.length === sorted.length && sortedJoined.every((token, i) => token === sorted[i]);
  return { tokens: sorted, joined: same ? sorted : sortedJoined };
}

/**
 * Double Metaphone codes of one normalized token: [primary, secondary], equal when the word has
 * one pronunciation. Tokens without letters (numbers in company names) are their own key, since
 * Double Metaphone gives an empty code that would make every number sound alike.
 */
export function phoneticKeys(token: string): [string, string] {
  const [primary, secondary] = doubleMetaphone(token);
  if (primary === '') return [token, token];
  return [primary, secondary === '' ? primary : secondary];
}

function countryLookupKey(name: string): string {
  return anyAscii(name)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim()
    .replace(/^(?:region |the )/, '');
}

/** Names the lists use that i18n-iso-countries does not know (OFAC's and the UN's spellings). */
const COUNTRY_ALIASES: Record<string, string> = {
  'british virgin islands': 'VG',
  burma: 'MM',
  'china hong kong special administrative region': 'HK',
  'democratic people s republic of korea': 'KP',
  gaza: 'PS',
  'gaza strip': 'PS',
  kosovo: 'XK',
  'cabo verde': 'CV',
  'former yugoslav republic of macedonia': 'MK',
  laos: 'LA',
  macedonia: 'MK',
  moldova: 'MD',
  palestinian: 'PS',
  syria: 'SY',
  'united kingdom of great britain and northern ireland': 'GB',
  'west bank': 'PS',
};

let countryIndex: Map<string, string> | undefined;

function countryNameIndex(): Map<string, string> {
  if (countryIndex) return countryIndex;
  const index = new Map<string, string>();
  for (const [alpha2, names] of Object.entries(countries.getNames('en', { select: 'all' }))) {
    const alpha3 = countries.alpha2ToAlpha3(alpha2);
    if (!alpha3) continue;
    for (const name of names) index.set(countryLookupKey(name), alpha3);
  }
  for (const [name, alpha2] of Object.entries(COUNTRY_ALIASES)) {
    const alpha3 = countries.alpha2ToAlpha3(alpha2);
    if (alpha3) index.set(name, alpha3);
  }
  countryIndex = index;
  return index;
}

/**
 * ISO 3166-1 alpha-3 code (upper case) for an alpha-2 or alpha-3 code or an English country name
 * as the lists write it ("Korea, North", "Iran (Islamic Republic of)", "nationality possibly
 * Palestinian"); null when the value names no country.
 */
export function countryToAlpha3(value: string): string | null {
  const trimmed = value.trim();
  if (/^[a-z]{2}$/i.test(trimmed)) return countries.alpha2ToAlpha3(trimmed.toUpperCase()) ?? null;
  if (/^[a-z]{3}$/i.test(trimmed)) {
    const upper = trimmed.toUpperCase();
    return countries.isValid(upper) ? upper : null;
  }
  const index = countryNameIndex();
  const key = countryLookupKey(trimmed.replace(/^possibly\s+/i, ''));
  const withoutParenthesis = countryLookupKey(trimmed.replace(/\s*\(.*\)\s*/g, ' '));
  // "Congo, Democratic Republic of the" is "Democratic Republic of the Congo" read backwards.
  const commaParts = trimmed.split(',');
  const inverted = commaParts.length === 2 ? countryLookupKey(`${commaParts[1]} ${commaParts[0]}`) : '';
  return index.get(key) ?? index.get(withoutParenthesis) ?? index.get(inverted) ?? null;
}
