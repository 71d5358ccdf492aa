import type { SanctionEntry, SanctionSchema, SanctionSource } from './importers.ts';
import { countryToAlpha3, joinedParts, keyParticle, lettersOf, nameForms, phoneticKeys, startsWithParticle, tokenParticle } from './normalize.ts';

export interface ScreeningQuery {
  name: string;
  /** YYYY or YYYY-MM-DD (a longer ISO timestamp is cut to its date). */
  birthDate?: string | null;
  /** ISO 3166-1 alpha-2 or alpha-3 code, or an English country name. */
  nationality?: string | null;
  /** Leaves out entries of another known schema: a person is not a company or a ship. */
  schema?: 'person' | 'organization';
}

export interface ScreeningOptions {
  /** Reporting threshold for `matches` and `topics` (default 70). */
  minScore?: number;
  /** Most matches reported (default 10). */
  limit?: number;
}

export type Agreement = 'match' | 'mismatch' | 'unknown';

export interface MatchFeatures {
  /** 0-1: Jaro-Winkler of each token with its best counterpart, both names' tokens, weighted by rarity. */
  name_similarity: number;
  /** 0-1: weighted share of tokens whose Double Metaphone codes agree with a token of the other name. */
  phonetic: number;
  birth_date: Agreement;
  nationality: Agreement;
}

export interface ScreeningMatch {
  source: SanctionSource;
  source_id: string;
  name: string;
  /** The entry's name or alias that matched best, as the list writes it. */
  matched_name: string;
  score: number;
  topics: string[];
  features: MatchFeatures;
}

export interface ScreeningResult {
  /** 0-100, the best candidate's score, reported even when it is below the threshold. */
  score: number;
  /** Topics of the reported matches, best match first, without repeats. */
  topics: string[];
  matches: ScreeningMatch[];
}

const DEFAULT_MIN_SCORE = 70;
const DEFAULT_LIMIT = 10;
/** Names fully scored per query: the narrowing ranks by shared rare tokens, Jaro-Winkler decides. */
const CANDIDATES_SCORED = 64;
/**
 * Joined forms of names (see PlainSanctionsIndex.schemaStart) fully scored besides, for a query
 * with a token that may be a joined one's spelling: they have a narrowing of their own, so that
 * they never crowd out the names as listed (the names a query without such a token scores are
 * those it scored before joined forms were indexed).
 */
const JOINED_CANDIDATES = 16;
/** Names as listed fully scored for a query's joined form, besides those of the name as written (see screen): what only its joined tokens find ranks high. */
const JOINED_FORM_CANDIDATES = 32;
/** Candidate slots of a query: one per entry, for the name as written and for its joined form (see screen). */
const SLOTS = 2 * (CANDIDATES_SCORED + JOINED_CANDIDATES);
/** Characters of a token that form its prefix key, catching spellings Double Metaphone hears differently (Kakolele, Kakorere). */
const PREFIX_KEY_LENGTH = 4;
/** Token pairs less alike than this are different words, not spellings of one word. */
const MIN_TOKEN_SIMILARITY = 0.8;
/** Tokens that do not sound alike must be spelled closer still: "Kakolele" and "Kakorere" are, "Maria" and "Martha" are not. */
const MIN_SPELLING_SIMILARITY = 0.88;
const SHORT_TOKEN_LENGTH = 3;
/** Share of a token's weight that a name earns in the narrowing when it only sounds alike. */
const SOUND_ALIKE_CREDIT = 0.6;
/** An initial ("M.") stands for any name with that first letter, with less certainty than the name itself. */
const INITIAL_SIMILARITY = 0.8;
const NAME_WEIGHT = 0.8;
const PHONETIC_WEIGHT = 0.2;
const SAME_DATE_BONUS = 8;
const SAME_YEAR_BONUS = 5;
/** Lists write approximate years, so one year apart costs less than a clearly different person. */
const NEAR_YEAR_PENALTY = 8;
const OTHER_YEAR_PENALTY = 20;
const SAME_NATIONALITY_BONUS = 5;
const OTHER_NATIONALITY_PENALTY = 10;

const MAX_BONUS = SAME_DATE_BONUS + SAME_NATIONALITY_BONUS;
/** Query tokens remembered (see SanctionsIndex.queryTokens); the memo starts over when full. */
const QUERY_TOKEN_MEMO_SIZE = 50_000;
const NO_NAME = 0x7fffffff;
/** Buckets of the per-query map from entry to candidate slot: a power of two, at least twice SLOTS. */
const ENTRY_BUCKET_BITS = 9;
const ENTRY_BUCKETS = 1 << ENTRY_BUCKET_BITS;
/** Names per entry of blockWeight: within a schema names go lightest first, so a block's weights lie close together. */
const WEIGHT_BLOCK_SHIFT = 6;
/**
 * A name's record (PlainSanctionsIndex.nameRecords): its weight (Float32 bits: the sum of its
 * tokens' weights in the precision ranks use); its position in list order (entry, then its name
 * before its aliases), by which equal ranks go to the name listed first; its entry; where its
 * entry's facts start in entryFacts; its token count; then its tokens, or, for a name with more
 * than NAME_INLINE_TOKENS, where they start in nameOverflow. Eight numbers, 32 bytes: a record
 * never straddles a cache line.
 */
const NAME_STRIDE = 8;
const NAME_WEIGHT_AT = 0;
const NAME_LISTED = 1;
const NAME_ENTRY = 2;
const NAME_FACTS = 3;
const NAME_TOKEN_COUNT = 4;
const NAME_TOKENS = 5;
const NAME_INLINE_TOKENS = NAME_STRIDE - NAME_TOKENS;
/**
 * A token's record (PlainSanctionsIndex.tokenRecords): its primary, secondary and prefix key ids
 * (-1 where one repeats another); characterBits of its text; its weight, the inverse document
 * frequency over names, so that common name parts count for less (a Float64 at Float64 index
 * token x TOKEN_STRIDE / 2 + TOKEN_WEIGHT_AT); where its characters start in tokenChars, and
 * how many (its letters: normalize.ts lettersOf), with above them its particles' length and
 * spelling (normalize.ts tokenParticle), DROPPED_PARTICLES where names drop them all, and
 * JOINED_TOKEN for a token that a joined form made by joining particles to a word. Eight numbers,
 * 32 bytes.
 */
const TOKEN_STRIDE = 8;
const TOKEN_PRIMARY = 0;
const TOKEN_SECONDARY = 1;
const TOKEN_PREFIX = 2;
const TOKEN_BITS = 3;
const TOKEN_WEIGHT_AT = 2;
const TOKEN_CHARS = 6;
const TOKEN_LENGTH = 7;
const PARTICLE_SHIFT = 16;
const LENGTH_MASK = (1 << PARTICLE_SHIFT) - 1;
const PARTICLE_MASK = 0x3f;
const SPELLING_SHIFT = 22;
const SPELLING_MASK = 0x7;
const DROPPED_PARTICLES = 1 << 25;
const JOINED_TOKEN = 1 << 26;
/** An unreadable birth year in entryFacts (years are at most four characters, so never this). */
const NO_YEAR = -0x80000000;

const SCHEMA_CODES: Record<SanctionSchema, number> = { unknown: 0, person: 1, organization: 2, vessel: 3, aircraft: 4 };
const SCHEMA_COUNT = 5;

/** What screening reports of an entry; programs and remarks stay in the database. */
export type IndexedEntry = Omit<SanctionEntry, 'programs' | 'remarks'>;

/**
 * The index as plain data for handing to worker threads: typed arrays, strings and the entries.
 * It survives structured cloning, and the typed arrays may live in SharedArrayBuffers:
 * `fromPlain` reads them and never writes, and only rebuilds two lookup maps and its own
 * scratch space (tens of milliseconds for 100,000 entries; moving the entries to the worker
 * costs more).
 */
export interface PlainSanctionsIndex {
  entries: IndexedEntry[];
  tokenText: string[];
  /**
   * Per token, TOKEN_STRIDE numbers from token x TOKEN_STRIDE (the TOKEN_* constants): what scoring a
   * candidate's token reads, in one place (one cache miss, where one array per fact cost one
   * each). Its weight is a Float64 over the same memory (see tokenWeights).
   */
  tokenRecords: Int32Array;
  /** The tokens' characters (a token is [a-z0-9]+), each token's from its record's TOKEN_CHARS on. */
  tokenChars: Uint16Array;
  keyText: string[];
  /**
   * Per name, NAME_STRIDE numbers from name x NAME_STRIDE: what ranking and scoring it reads, in
   * one place (the NAME_* constants), so that a name the narrowing ranks or the scoring compares costs
   * one cache miss, where one array per fact cost one each. Its weight is a Float32 over the same
   * memory (see nameWeights).
   */
  nameRecords: Int32Array;
  /** Per name: -1 for the entry's name, otherwise the alias index (read only for a reported match); a joined form's is its name's. */
  nameAlias: Int32Array;
  /** The tokens of names with more than NAME_INLINE_TOKENS of them, from their record's NAME_TOKENS on. */
  nameOverflow: Int32Array;
  postingStart: Int32Array;
  postings: Int32Array;
  /**
   * Per block of 2^WEIGHT_BLOCK_SHIFT names: the lightest weight in it. The narrowing's skips need only a
   * lower bound of the next name's weight, and this table stays in the cache where reading each
   * posting's own weight missed it.
   */
  blockWeight: Float32Array;
  /**
   * Names are numbered by schema code: those of schema code s are schemaStart[s] up to
   * schemaStart[s + 1]. After the names as listed, from schemaStart[SCHEMA_COUNT] on, come the
   * joined forms of names, by schema code likewise (group SCHEMA_COUNT + s): normalize.ts
   * nameForms, "BIN LADEN, Hamza" as bin|laden, hamza, where that differs from every name of the
   * entry. A name written with its particles joined ("Hamza BINLADEN") finds them; one written with
   * them apart finds the names listed joined through its own joined form (see screen).
   */
  schemaStart: Int32Array;
  /**
   * The joined prefix keys (see wordKeys) of the tokens of names as listed that start with a
   * particle ("binladen", "alqaida"): a query's joined form can only find a name that writes its
   * particles joined where one of its joined tokens starts like one of these (see narrow).
   */
  writtenJoined: string[];
  /**
   * Per entry, from its names' NAME_FACTS, what birth date and nationality are compared with: the
   * count of its birth dates, then each date's year (NO_YEAR where unreadable) and, for a full
   * YYYY-MM-DD date, YYYYMMDD (otherwise -1); the count of its nationalities that are country
   * codes, then each as an index into countryCodes. One place per entry: the comparisons read it
   * for each of a query's few dozen candidates, at random.
   */
  entryFacts: Int32Array;
  countryCodes: string[];
}

interface QueryToken {
  /** As normalize.ts gives it: a joined token with JOIN_MARK ("bin|laden"). */
  text: string;
  /** The index's id of the same text, -1 for a token the list has never seen. */
  id: number;
  weight: number;
  /** Key ids of its letters (without JOIN_MARK), -1 for a key no indexed token has: what it shares with names as listed. */
  primary: number;
  secondary: number;
  /** Prefix key id, -1 when no indexed token starts like this one. */
  prefix: number;
  /**
   * Key ids of the word after its particles and its joined prefix key (see wordKeys): what it
   * shares with the joined tokens of joined forms. For a token without particles its own.
   */
  wordPrimary: number;
  wordSecondary: number;
  joinedPrefix: number;
  bits: number;
  /** The character codes of its letters (without JOIN_MARK). */
  chars: Uint16Array;
  /** Its particles (normalize.ts tokenParticle): how many letters, their spelling, whether names drop them all. */
  particleLength: number;
  particleSpelling: number;
  particleDropped: boolean;
  /** A token of a joined form made by joining particles to a word (see pairSlot). */
  joined: boolean;
  /** Whether its keys are taken after a particle (normalize.ts keyParticle; see wordKeys). */
  keyed: boolean;
  /**
   * Whether a joined token of the index may be its spelling: one starts like it (its joined
   * prefix key), or it starts with a particle that too few letters follow for the key. Only then
   * are joined forms of names narrowed for it (see narrow).
   */
  mayJoin: boolean;
  /** For a joined token: whether a token of a name as listed may be its spelling, written joined (see PlainSanctionsIndex.writtenJoined). */
  mayBeWritten: boolean;
}

let jaroFlagsA = new Uint8Array(64);
let jaroFlagsB = new Uint8Array(64);

/** Jaro-Winkler (prefix scale 0.1, boost above 0.7). */
export function jaroWinkler(a: string, b: string): number {
  if (a === b) return 1;
  return jaroWinklerCodes(codesOf(a), 0, a.length, codesOf(b), 0, b.length);
}

/** The text's UTF-16 code units (Uint16Array.from(text) would go by code points). */
function codesOf(text: string): Uint16Array {
  const codes = new Uint16Array(text.length);
  for (let i = 0; i < text.length; i++) codes[i] = text.charCodeAt(i);
  return codes;
}

/**
 * Jaro-Winkler of a[aStart, aStart + lengthA) and b[bStart, bStart + lengthB), character codes,
 * without allocating: it runs for every token pair of a query's candidates that the bound leaves,
 * and the index keeps its tokens' characters side by side (tokenChars).
 */
function jaroWinklerCodes(a: Uint16Array, aStart: number, lengthA: number, b: Uint16Array, bStart: number, lengthB: number): number {
  if (lengthA === 0 || lengthB === 0) return 0;
  if (jaroFlagsA.length < lengthA) jaroFlagsA = new Uint8Array(lengthA * 2);
  if (jaroFlagsB.length < lengthB) jaroFlagsB = new Uint8Array(lengthB * 2);
  const flagsA = jaroFlagsA;
  const flagsB = jaroFlagsB;
  for (let i = 0; i < lengthA; i++) flagsA[i] = 0;
  for (let j = 0; j < lengthB; j++) flagsB[j] = 0;
  const range = Math.max(0, (Math.max(lengthA, lengthB) >> 1) - 1);
  let matches = 0;
  for (let i = 0; i < lengthA; i++) {
    const code = a[aStart + i]!;
    const end = Math.min(lengthB - 1, i + range);
    for (let j = Math.max(0, i - range); j <= end; j++) {
      if (flagsB[j] === 0 && b[bStart + j] === code) {
        flagsA[i] = 1;
        flagsB[j] = 1;
        matches++;
        break;
      }
    }
  }
  if (matches === 0) return 0;
  let halfTranspositions = 0;
  for (let i = 0, j = 0; i < lengthA; i++) {
    if (flagsA[i] === 0) continue;
    while (flagsB[j] === 0) j++;
    if (a[aStart + i] !== b[bStart + j]) halfTranspositions++;
    j++;
  }
  const transpositions = halfTranspositions >> 1;
  const jaro = (matches / lengthA + matches / lengthB + (matches - transpositions) / matches) / 3;
  return winklerBoost(a, aStart, lengthA, b, bStart, lengthB, jaro);
}

/** Winkler's boost of a Jaro similarity above 0.7 by the common prefix (up to 4 characters, scale 0.1). */
function winklerBoost(a: Uint16Array, aStart: number, lengthA: number, b: Uint16Array, bStart: number, lengthB: number, jaro: number): number {
  if (jaro <= 0.7) return jaro;
  const prefixLimit = Math.min(4, lengthA, lengthB);
  let prefix = 0;
  while (prefix < prefixLimit && a[aStart + prefix] === b[bStart + prefix]) prefix++;
  return jaro + prefix * 0.1 * (1 - jaro);
}

/** The characters of a token as bits (code modulo 32: two characters may share a bit, which only loosens jaroWinklerBound). */
function characterBits(token: string): number {
  let bits = 0;
  for (let i = 0; i < token.length; i++) bits |= 1 << (token.charCodeAt(i) & 31);
  return bits;
}

/**
 * The keys that joined tokens are indexed under: the Double Metaphone codes of the word after the
 * particle (normalize.ts keyParticle: "bin|laden" sounds like "laden", where the particle would
 * fill a code of four) and the first PREFIX_KEY_LENGTH letters after it, with it ("binlade"), so
 * that the joined tokens of a common particle do not all share one key ("alha", "abdu") and crowd
 * out the one asked for. Without such a particle, a token's own codes and first letters, as for a
 * token of a name as listed (see build).
 */
function wordKeys(letters: string): [string, string, string] {
  const particleLength = keyParticle(letters)?.length ?? 0;
  const [primary, secondary] = phoneticKeys(letters.slice(particleLength));
  return [primary, secondary, letters.slice(0, particleLength + PREFIX_KEY_LENGTH)];
}

/** Whether a[aStart, aStart + length) and b[bStart, bStart + length) are the same codes. */
function sameCodes(a: Uint16Array, aStart: number, b: Uint16Array, bStart: number, length: number): boolean {
  for (let i = 0; i < length; i++) if (a[aStart + i] !== b[bStart + i]) return false;
  return true;
}

/** The number of bits set. */
function bitCount(bits: number): number {
  bits -= (bits >>> 1) & 0x55555555;
  bits = (bits & 0x33333333) + ((bits >>> 2) & 0x33333333);
  return (Math.imul((bits + (bits >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24);
}

/** How many of a token's characters occur in the other token (by its bits): Jaro's matches can be no more. */
function charactersIn(codes: Uint16Array, start: number, length: number, otherBits: number): number {
  let count = 0;
  for (let i = start; i < start + length; i++) if ((otherBits >>> (codes[i]! & 31)) & 1) count++;
  return count;
}

/**
 * The similarity of a query token and an index token (their codes from aStart and bStart) when at
 * least the bar, otherwise 0. The same token is 1 (the caller knows it by its id).
 *
 * Most token pairs of a candidate are different words. The bound rules them out for a fraction
 * of Jaro-Winkler's cost: the most Jaro-Winkler could give two tokens, from how many of each
 * one's characters the other has at all (by their bits), Jaro with every such character matched
 * and nothing transposed, boosted by the common prefix.
 */
function tokenSimilarity(
  a: Uint16Array,
  aStart: number,
  lengthA: number,
  b: Uint16Array,
  bStart: number,
  lengthB: number,
  soundAlike: boolean,
  bitsA: number,
  bitsB: number,
): number {
  if ((lengthA === 1 || lengthB === 1) && a[aStart] === b[bStart]) return INITIAL_SIMILARITY;
  // One letter is a third of a short token: "Li" and "Lin" are two surnames, "Jon" and "John" one name.
  if (Math.min(lengthA, lengthB) <= SHORT_TOKEN_LENGTH && !soundAlike) return 0;
  const bar = soundAlike ? MIN_TOKEN_SIMILARITY : MIN_SPELLING_SIMILARITY;
  // First from the bits alone, without reading the characters (a cache miss for the index token's):
  // each character whose bit the other token lacks is one fewer that can match. Bounded like the
  // count below and at most that, with the longest prefix Winkler could credit; a wider margin.
  const mostMatches = Math.min(lengthA - bitCount(bitsA & ~bitsB), lengthB - bitCount(bitsB & ~bitsA));
  if (mostMatches <= 0) return 0;
  const mostJaro = (mostMatches / lengthA + mostMatches / lengthB + 1) / 3;
  if (mostJaro <= 0.7 ? mostJaro < bar - 1e-6 : mostJaro + Math.min(4, lengthA, lengthB) * 0.1 * (1 - mostJaro) < bar - 1e-6) return 0;
  const matches = Math.min(charactersIn(a, aStart, lengthA, bitsB), charactersIn(b, bStart, lengthB, bitsA));
  if (matches === 0) return 0;
  const bound = winklerBoost(a, aStart, lengthA, b, bStart, lengthB, (matches / lengthA + matches / lengthB + 1) / 3);
  // (The margin keeps rounding in the bound from ruling out a pair right at the bar.)
  if (bound < bar - 1e-9) return 0;
  const similarity = jaroWinklerCodes(a, aStart, lengthA, b, bStart, lengthB);
  return similarity >= bar ? similarity : 0;
}

/** Key ids of a query token are -1 when the index has never seen the code; those agree with nothing. */
function keysAgree(primaryA: number, secondaryA: number, primaryB: number, secondaryB: number): boolean {
  if (primaryA < 0 && secondaryA < 0) return false;
  return primaryA === primaryB || primaryA === secondaryB || secondaryA === primaryB || secondaryA === secondaryB;
}

const UNKNOWN = 0;
const MATCH = 1;
const MISMATCH = 2;
const AGREEMENTS: readonly Agreement[] = ['unknown', 'match', 'mismatch'];

/** YYYYMMDD of a full YYYY-MM-DD date, -1 for anything else: equal numbers mean equal dates as written. */
function dayNumber(date: string): number {
  return /^\d{4}-\d{2}-\d{2}$/.test(date) ? Number(date.slice(0, 4)) * 10000 + Number(date.slice(5, 7)) * 100 + Number(date.slice(8, 10)) : -1;
}

/** An entry's nationalities that are country codes: values the importers could not turn into a code ("former Soviet Union") neither confirm nor contradict. */
function isCountryCode(value: string): boolean {
  return /^[A-Z]{3}$/.test(value);
}

function swap(names: Int32Array, ranks: Float64Array, listed: Int32Array, i: number, j: number): void {
  const name = names[i]!;
  names[i] = names[j]!;
  names[j] = name;
  const rank = ranks[i]!;
  ranks[i] = ranks[j]!;
  ranks[j] = rank;
  const position = listed[i]!;
  listed[i] = listed[j]!;
  listed[j] = position;
}

/** The first position from `low` up to `high` whose value is at least `target` (`high` when none is); values ascending. */
function lowerBound(values: Int32Array, low: number, high: number, target: number): number {
  while (low < high) {
    const middle = (low + high) >> 1;
    if (values[middle]! < target) low = middle + 1;
    else high = middle;
  }
  return low;
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

/**
 * Sanctions list entries indexed in memory for fuzzy name screening. Every name and alias is a
 * "name" of its entry; each name's tokens are posted under their Double Metaphone codes and
 * their first characters. A query adds up the rarity (inverse document frequency) of the tokens
 * it shares with each name, fully scores the best few dozen with Jaro-Winkler plus phonetic
 * agreement, and adjusts each entry's best name score by birth date and nationality. Names with
 * particles are indexed in their joined form too, and a query with particles apart is screened
 * in its joined form too, so that "BIN LADEN" and "BINLADEN", "Abdul Rahman" and "Abdulrahman"
 * find each other either way round (normalize.ts nameForms; see pairSlot for how a joined token
 * is compared).
 *
 * Name score = 100 x (0.8 x name_similarity + 0.2 x phonetic). Then, where both the query and
 * the entry have them: the same birth date +8, the same year +5, one year apart -8, further -20;
 * a shared nationality +5, none shared -10; clamped to 0-100.
 *
 * `screen` reuses scratch buffers and is not reentrant, which a single worker thread never is.
 * `build` takes under a second per 100,000 entries; building once and handing workers `toPlain()`
 * for `fromPlain` saves each worker that CPU time and, with shared typed arrays, the memory.
 */
export class SanctionsIndex {
  private readonly keyIds: Map<string, number>;
  private readonly tokenIds: Map<string, number>;
  private readonly maxTokenWeight: number;
  /** Query tokens by text: given names and common surnames recur from query to query (their keys are the index's, so it keeps them). */
  private readonly queryTokenMemo = new Map<string, QueryToken>();
  /** tokenRecords read as Float64, for the weight at token x TOKEN_STRIDE / 2 + TOKEN_WEIGHT_AT. */
  private readonly tokenWeights: Float64Array;
  /** nameRecords read as Float32, for the weight at name x NAME_STRIDE + NAME_WEIGHT_AT. */
  private readonly nameWeights: Float32Array;
  /** The narrowing's cursors over the query's posting lists (see openCursors). */
  private cursorAt = new Int32Array(0);
  private cursorEnd = new Int32Array(0);
  private cursorName = new Int32Array(0);
  private cursorCredit = new Float64Array(0);
  private cursorToken = new Int32Array(0);
  private cursorOrder = new Int32Array(0);
  /** Per query token, in the narrowing: the largest credit counted so far. */
  private tokenCredit = new Float64Array(8);
  /** The narrowing's heap of the best names so far. */
  private readonly heapNames = new Int32Array(CANDIDATES_SCORED);
  private readonly heapRanks = new Float64Array(CANDIDATES_SCORED);
  /** The list position of each name in the heap, so that ties are broken without a lookup per comparison. */
  private readonly heapListed = new Int32Array(CANDIDATES_SCORED);
  /** What the narrowing chose, best first. */
  private readonly candidates = new Int32Array(CANDIDATES_SCORED + JOINED_CANDIDATES);
  private candidateBest = new Float64Array(16);
  private candidateHeard = new Uint8Array(16);
  private candidateSlots = new Int32Array(16);
  /** Per index token, side by side (token x 2): the query that last compared it (queryStamp) and its slot then (see pairSlot). */
  private readonly pairState: Int32Array;
  private pairsUsed = 0;
  private pairSimilarity = new Float64Array(256);
  private pairAgree = new Uint8Array(256);
  /** What `scoreName` measured besides the score it returns. */
  private scoredSimilarity = 0;
  private scoredPhonetic = 0;
  /** What `birthAgreement` and `nationalityAgreement` found. */
  private agreement = UNKNOWN;
  private adjustment = 0;
  /**
   * The current query's entries (entry + 1, 0 for an empty bucket) and their candidate slots, by
   * open addressing: a table this small stays in the cache, where one entry per index entry missed it.
   */
  private readonly bucketEntry = new Int32Array(ENTRY_BUCKETS);
  private readonly bucketSlot = new Int32Array(ENTRY_BUCKETS);
  /** Counts the queries screened: what the token stamps (pairStamp) are compared with. */
  private queryStamp = 0;
  private readonly codeIds: Map<string, number>;
  /** PlainSanctionsIndex.writtenJoined. */
  private readonly writtenJoined: Set<string>;
  /** Per candidate slot of the current query: its entry, best name of that entry and the name's scores. */
  private readonly slotEntry = new Int32Array(SLOTS);
  private readonly slotName = new Int32Array(SLOTS);
  private readonly slotSimilarity = new Float64Array(SLOTS);
  private readonly slotPhonetic = new Float64Array(SLOTS);
  private readonly slotScore = new Float64Array(SLOTS);
  private readonly byNameScore = new Int32Array(SLOTS);

  private constructor(private readonly data: PlainSanctionsIndex) {
    this.keyIds = new Map(data.keyText.map((key, id) => [key, id]));
    this.tokenIds = new Map(data.tokenText.map((token, id) => [token, id]));
    this.nameWeights = new Float32Array(data.nameRecords.buffer, data.nameRecords.byteOffset, data.nameRecords.length);
    this.maxTokenWeight = Math.log(1 + Math.max(1, data.schemaStart[SCHEMA_COUNT]!));
    this.tokenWeights = new Float64Array(data.tokenRecords.buffer, data.tokenRecords.byteOffset, data.tokenRecords.length / 2);
    this.pairState = new Int32Array(data.tokenText.length * 2);
    this.codeIds = new Map(data.countryCodes.map((code, id) => [code, id]));
    this.writtenJoined = new Set(data.writtenJoined);
  }

  get size(): number {
    return this.data.entries.length;
  }

  static build(entries: SanctionEntry[]): SanctionsIndex {
    const tokenIds = new Map<string, number>();
    const tokenText: string[] = [];
    const tokenKeys: number[] = [];
    const keyIds = new Map<string, number>();
    const keyText: string[] = [];
    const keyId = (key: string): number => {
      let id = keyIds.get(key);
      if (id === undefined) {
        id = keyText.length;
        keyIds.set(key, id);
        keyText.push(key);
      }
      return id;
    };
    const tokenId = (token: string): number => {
      let id = tokenIds.get(token);
      if (id === undefined) {
        id = tokenText.length;
        tokenIds.set(token, id);
        tokenText.push(token);
      }
      return id;
    };

    const listedEntry: number[] = [];
    const listedAlias: number[] = [];
    const listedTokens: number[][] = [];
    /** Per listed name: whether it is a joined form (see PlainSanctionsIndex.schemaStart). */
    const listedJoined: boolean[] = [];
    const list = (entryIndex: number, alias: number, tokens: string[], joined: boolean): void => {
      listedEntry.push(entryIndex);
      listedAlias.push(alias);
      listedTokens.push(tokens.map(tokenId));
      listedJoined.push(joined);
    };
    entries.forEach((entry, entryIndex) => {
      const seen = new Set<string>();
      const joinedForms: { alias: number; tokens: string[] }[] = [];
      [entry.name, ...entry.aliases].forEach((name, position) => {
        const { tokens, joined } = nameForms(name);
        if (joined !== tokens) joinedForms.push({ alias: position - 1, tokens: joined });
        const signature = tokens.join(' ');
        if (tokens.length === 0 || seen.has(signature)) return;
        seen.add(signature);
        list(entryIndex, position - 1, tokens, false);
      });
      // Then the entry's joined forms that are none of its names (normalize.ts nameForms).
      for (const { alias, tokens } of joinedForms) {
        const signature = tokens.map(lettersOf).join(' ');
        if (seen.has(signature)) continue;
        seen.add(signature);
        list(entryIndex, alias, tokens, true);
      }
    });
    const nameCount = listedTokens.length;
    const listedNames = listedJoined.reduce((count, joined) => count + (joined ? 0 : 1), 0);

    // A token's keys (phonetic codes are upper case and prefixes lower case, so a sound never
    // passes for a spelling), its particles, and its weight. Tokens are unique within a name, so
    // counting occurrences counts names: the names as listed. A joined token weighs what the
    // tokens it joins do ("bin|laden" what "laden" does, "abdul|rahman" what "abdul" and "rahman"
    // do), as the name written apart, so that a joined form neither gains nor loses weight against
    // the name; a part no name as listed has counts the joined forms the token is in.
    const tokenFrequency = new Int32Array(tokenText.length);
    const joinedFrequency = new Int32Array(tokenText.length);
    listedTokens.forEach((tokens, listed) => {
      const frequency = listedJoined[listed] ? joinedFrequency : tokenFrequency;
      for (const token of tokens) frequency[token]!++;
    });
    const tokenLetters = tokenText.map(lettersOf);
    const tokenRecords = new Int32Array(tokenText.length * TOKEN_STRIDE);
    const tokenWeights = new Float64Array(tokenRecords.buffer);
    const tokenChars = new Uint16Array(tokenLetters.reduce((length, letters) => length + letters.length, 0));
    let charsUsed = 0;
    tokenText.forEach((token, id) => {
      const record = id * TOKEN_STRIDE;
      const letters = tokenLetters[id]!;
      const joined = letters !== token;
      const particle = tokenParticle(token);
      const [primary, secondary, prefix] = joined ? wordKeys(letters) : [...phoneticKeys(letters), letters.slice(0, PREFIX_KEY_LENGTH)];
      const primaryId = keyId(primary);
      const secondaryId = keyId(secondary);
      const prefixId = keyId(prefix);
      tokenKeys.push(primaryId, secondaryId === primaryId ? -1 : secondaryId, prefixId === primaryId || prefixId === secondaryId ? -1 : prefixId);
      tokenRecords[record + TOKEN_PRIMARY] = tokenKeys[id * 3]!;
      tokenRecords[record + TOKEN_SECONDARY] = tokenKeys[id * 3 + 1]!;
      tokenRecords[record + TOKEN_PREFIX] = tokenKeys[id * 3 + 2]!;
      tokenRecords[record + TOKEN_BITS] = characterBits(letters);
      const frequencyOf = (part: string): number => {
        const partId = tokenIds.get(part);
        return partId !== undefined && tokenFrequency[partId]! > 0 ? tokenFrequency[partId]! : joinedFrequency[id]!;
      };
      tokenWeights[record / 2 + TOKEN_WEIGHT_AT] = joined
        ? joinedParts(token).reduce((weight, part) => weight + Math.log(1 + listedNames / Math.max(1, frequencyOf(part))), 0)
        : Math.log(1 + listedNames / Math.max(1, tokenFrequency[id]!));
      tokenRecords[record + TOKEN_CHARS] = charsUsed;
      tokenRecords[record + TOKEN_LENGTH] =
        letters.length |
        (particle.length << PARTICLE_SHIFT) |
        (particle.spelling << SPELLING_SHIFT) |
        (particle.dropped ? DROPPED_PARTICLES : 0) |
        (joined ? JOINED_TOKEN : 0);
      for (let i = 0; i < letters.length; i++) tokenChars[charsUsed++] = letters.charCodeAt(i);
    });
    const listedWeight = Float64Array.from(listedTokens, (tokens) =>
      tokens.reduce((weight, token) => weight + tokenWeights[token * (TOKEN_STRIDE / 2) + TOKEN_WEIGHT_AT]!, 0),
    );

    // Names are numbered by schema, then by weight (as Float32, the precision narrow ranks with),
    // lightest first, so that within a schema every posting list, sorted by name, is sorted by
    // weight too: see narrow. The joined forms come after the names as listed, likewise.
    const listedGroup = Int32Array.from(listedEntry, (entry, listed) => SCHEMA_CODES[entries[entry]!.schema] + (listedJoined[listed] ? SCHEMA_COUNT : 0));
    const byWeight = Int32Array.from({ length: nameCount }, (_, listed) => listed).sort(
      (a, b) => listedGroup[a]! - listedGroup[b]! || Math.fround(listedWeight[a]!) - Math.fround(listedWeight[b]!) || a - b,
    );
    const schemaStart = new Int32Array(2 * SCHEMA_COUNT + 1);
    for (const group of listedGroup) schemaStart[group + 1]!++;
    for (let group = 0; group < 2 * SCHEMA_COUNT; group++) schemaStart[group + 1]! += schemaStart[group]!;
    const entryFactStart: number[] = [];
    const entryFacts: number[] = [];
    const codeIds = new Map<string, number>();
    for (const entry of entries) {
      entryFactStart.push(entryFacts.length);
      entryFacts.push(entry.birth_dates.length);
      for (const date of entry.birth_dates) {
        const year = Number(date.slice(0, 4));
        entryFacts.push(Number.isNaN(year) ? NO_YEAR : year, dayNumber(date));
      }
      const codes = entry.nationalities.filter(isCountryCode);
      entryFacts.push(codes.length);
      for (const code of codes) {
        if (!codeIds.has(code)) codeIds.set(code, codeIds.size);
        entryFacts.push(codeIds.get(code)!);
      }
    }

    const nameRecords = new Int32Array(nameCount * NAME_STRIDE);
    const nameWeights = new Float32Array(nameRecords.buffer);
    const nameAlias = new Int32Array(nameCount);
    const nameOverflow: number[] = [];
    // Names were listed entry by entry, each entry's name before its aliases: list order.
    byWeight.forEach((listed, name) => {
      const record = name * NAME_STRIDE;
      const tokens = listedTokens[listed]!;
      nameWeights[record + NAME_WEIGHT_AT] = listedWeight[listed]!;
      nameRecords[record + NAME_LISTED] = listed;
      nameRecords[record + NAME_ENTRY] = listedEntry[listed]!;
      nameRecords[record + NAME_FACTS] = entryFactStart[listedEntry[listed]!]!;
      nameRecords[record + NAME_TOKEN_COUNT] = tokens.length;
      if (tokens.length <= NAME_INLINE_TOKENS) nameRecords.set(tokens, record + NAME_TOKENS);
      else {
        nameRecords[record + NAME_TOKENS] = nameOverflow.length;
        nameOverflow.push(...tokens);
      }
      nameAlias[name] = listedAlias[listed]!;
    });
    const blockWeight = new Float32Array((nameCount >> WEIGHT_BLOCK_SHIFT) + 1).fill(Infinity);
    for (let name = 0; name < nameCount; name++) {
      const block = name >> WEIGHT_BLOCK_SHIFT;
      blockWeight[block] = Math.min(blockWeight[block]!, nameWeights[name * NAME_STRIDE + NAME_WEIGHT_AT]!);
    }

    const keyCount = keyText.length;
    const keyStamp = new Int32Array(keyCount).fill(-1);
    const documentFrequency = new Int32Array(keyCount);
    const forEachNameKey = (name: number, visit: (key: number) => void): void => {
      for (const token of listedTokens[byWeight[name]!]!) {
        for (let k = 0; k < 3; k++) {
          const key = tokenKeys[token * 3 + k]!;
          if (key >= 0 && keyStamp[key] !== name) {
            keyStamp[key] = name;
            visit(key);
          }
        }
      }
    };
    for (let name = 0; name < nameCount; name++) forEachNameKey(name, (key) => documentFrequency[key]!++);

    const postingStart = new Int32Array(keyCount + 1);
    for (let key = 0; key < keyCount; key++) postingStart[key + 1] = postingStart[key]! + documentFrequency[key]!;
    const postings = new Int32Array(postingStart[keyCount]!);
    const fill = postingStart.slice(0, keyCount);
    keyStamp.fill(-1);
    for (let name = 0; name < nameCount; name++) forEachNameKey(name, (key) => (postings[fill[key]!++] = name));

    const writtenJoined = new Set<string>();
    for (let id = 0; id < tokenText.length; id++) {
      if (tokenFrequency[id]! > 0 && keyParticle(tokenLetters[id]!) !== undefined) writtenJoined.add(wordKeys(tokenLetters[id]!)[2]);
    }

    return new SanctionsIndex({
      schemaStart,
      writtenJoined: [...writtenJoined],
      entryFacts: Int32Array.from(entryFacts),
      countryCodes: [...codeIds.keys()],
      entries: entries.map(({ programs, remarks, ...indexed }) => indexed),
      tokenText,
      tokenRecords,
      tokenChars,
      keyText,
      nameRecords,
      nameAlias,
      nameOverflow: Int32Array.from(nameOverflow),
      blockWeight,
      postingStart,
      postings,
    });
  }

  /** A name's parts as plain values, for inspection (the narrowing's reference test): its entry, alias index, list position, tokens, and whether it is a joined form. */
  private nameParts(name: number): { entry: number; alias: number; listed: number; tokens: number[]; joined: boolean } {
    const { nameRecords, nameOverflow, nameAlias } = this.data;
    const record = name * NAME_STRIDE;
    const count = nameRecords[record + NAME_TOKEN_COUNT]!;
    const inline = count <= NAME_INLINE_TOKENS;
    const start = inline ? record + NAME_TOKENS : nameRecords[record + NAME_TOKENS]!;
    const tokens = (inline ? nameRecords : nameOverflow).subarray(start, start + count);
    return {
      entry: nameRecords[record + NAME_ENTRY]!,
      alias: nameAlias[name]!,
      listed: nameRecords[record + NAME_LISTED]!,
      tokens: Array.from(tokens),
      joined: name >= this.data.schemaStart[SCHEMA_COUNT]!,
    };
  }

  /** A token's key ids (primary, secondary, prefix; -1 where one repeats another) and weight, for inspection like nameParts. */
  private tokenParts(token: number): { keys: number[]; weight: number } {
    const record = token * TOKEN_STRIDE;
    return {
      keys: Array.from(this.data.tokenRecords.subarray(record + TOKEN_PRIMARY, record + TOKEN_PREFIX + 1)),
      weight: this.tokenWeights[token * (TOKEN_STRIDE / 2) + TOKEN_WEIGHT_AT]!,
    };
  }

  static fromPlain(plain: PlainSanctionsIndex): SanctionsIndex {
    return new SanctionsIndex(plain);
  }

  toPlain(): PlainSanctionsIndex {
    return this.data;
  }

  screen(query: ScreeningQuery, options: ScreeningOptions = {}): ScreeningResult {
    const minScore = options.minScore ?? DEFAULT_MIN_SCORE;
    const limit = options.limit ?? DEFAULT_LIMIT;
    const forms = nameForms(query.name);
    if (forms.tokens.length === 0) return { score: 0, topics: [], matches: [] };

    // Each entry's best-scoring name, in the order entries were first met (that order breaks ties):
    // the name as written, then, where it has particles apart ("Hamza bin Laden"), its joined
    // form, which finds the names listed with them joined ("BINLADEN, Hamza"; those listed apart
    // have their joined forms in the index, see PlainSanctionsIndex.schemaStart).
    const schema = query.schema ? SCHEMA_CODES[query.schema] : 0;
    const { slotEntry, slotName, slotSimilarity, slotPhonetic, slotScore } = this;
    this.bucketEntry.fill(0);
    let slots = this.scoreCandidates(this.queryTokens(forms.tokens), schema, 0, false);
    if (forms.joined !== forms.tokens) slots = this.scoreCandidates(this.queryTokens(forms.joined), schema, slots, true);

    const birthDate = query.birthDate ? (/^\d{4}(?:-\d{2}-\d{2})?/.exec(query.birthDate.trim())?.[0] ?? null) : null;
    const queryYear = birthDate === null ? NaN : Number(birthDate.slice(0, 4));
    const queryDay = birthDate !== null && birthDate.length === 10 ? dayNumber(birthDate) : -1;
    const nationality = query.nationality ? countryToAlpha3(query.nationality) : null;
    // A code no entry has agrees with none (-2 is no index); -1 stands for no nationality asked.
    const queryCode = nationality === null ? -1 : (this.codeIds.get(nationality) ?? -2);
    // Slots by name score, best first, equal scores in slot order (a stable insertion sort: a few dozen slots).
    const byNameScore = this.byNameScore;
    for (let slot = 0; slot < slots; slot++) {
      const score = slotScore[slot]!;
      let at = slot;
      for (; at > 0 && slotScore[byNameScore[at - 1]!]! < score; at--) byNameScore[at] = byNameScore[at - 1]!;
      byNameScore[at] = slot;
    }
    // Every slot looked at counts for the best score; only those reaching minScore (one or two a
    // query) are ordered for the matches: by score, then name similarity, best first, equal ones in
    // name score order (a stable insertion sort). Sorting every slot looked at, as objects, cost a
    // query more than its birth date and nationality comparisons.
    const reaching: { slot: number; birth: number; country: number; score: number }[] = [];
    let best = 0;
    for (let position = 0; position < slots; position++) {
      const slot = byNameScore[position]!;
      const nameScore = slotScore[slot]!;
      // Stop once no bonus could lift a name to either bar.
      const reachable = Math.round(nameScore + MAX_BONUS);
      if (reachable < minScore && reachable <= best) break;
      const facts = this.data.nameRecords[slotName[slot]! * NAME_STRIDE + NAME_FACTS]!;
      this.birthAgreement(facts, birthDate !== null, queryYear, queryDay);
      const birth = this.agreement;
      const birthAdjustment = this.adjustment;
      this.nationalityAgreement(facts, queryCode);
      const score = Math.max(0, Math.min(100, Math.round(nameScore + birthAdjustment + this.adjustment)));
      best = Math.max(best, score);
      if (score < minScore) continue;
      const item = { slot, birth, country: this.agreement, score };
      let at = reaching.length;
      reaching.push(item);
      for (; at > 0; at--) {
        const before = reaching[at - 1]!;
        if (before.score > score || (before.score === score && slotSimilarity[before.slot]! >= slotSimilarity[slot]!)) break;
        reaching[at] = before;
      }
      reaching[at] = item;
    }

    const matches = reaching.slice(0, limit).map(({ slot, birth, country, score }): ScreeningMatch => {
      const entry = this.data.entries[slotEntry[slot]!]!;
      const alias = this.data.nameAlias[slotName[slot]!]!;
      return {
        source: entry.source,
        source_id: entry.source_id,
        name: entry.name,
        matched_name: alias < 0 ? entry.name : entry.aliases[alias]!,
        score,
        topics: entry.topics,
        features: {
          name_similarity: round3(slotSimilarity[slot]!),
          phonetic: round3(slotPhonetic[slot]!),
          birth_date: AGREEMENTS[birth]!,
          nationality: AGREEMENTS[country]!,
        },
      };
    });
    // The matches' topics, each once, in the order met.
    const topics: string[] = [];
    for (const match of matches) for (const topic of match.topics) if (!topics.includes(topic)) topics.push(topic);
    return { score: best, topics, matches };
  }

  /**
   * Narrows the candidates of the query's tokens (of its joined form: `joinedForm`) and scores
   * them into the entries' slots, of which `slots` are taken (a new entry takes the next, an
   * entry's slot keeps its best name); returns how many are taken after.
   */
  private scoreCandidates(queryTokens: QueryToken[], schema: number, slots: number, joinedForm: boolean): number {
    const candidateCount = this.narrow(queryTokens, schema, joinedForm);
    if (this.queryStamp === 0x7fffffff) {
      this.pairState.fill(0);
      this.queryStamp = 0;
    }
    // The token comparisons remembered (pairSlot) are this token list's.
    this.queryStamp++;
    this.pairsUsed = 0;
    const { bucketEntry, bucketSlot, slotEntry, slotName, slotSimilarity, slotPhonetic, slotScore } = this;
    for (let candidate = 0; candidate < candidateCount; candidate++) {
      const name = this.candidates[candidate]!;
      const nameScore = this.scoreName(queryTokens, name);
      const entry = this.data.nameRecords[name * NAME_STRIDE + NAME_ENTRY]!;
      // The entry's bucket: its own, or the empty one where it goes.
      let bucket = Math.imul(entry, 0x9e3779b1) >>> (32 - ENTRY_BUCKET_BITS);
      while (bucketEntry[bucket] !== 0 && bucketEntry[bucket] !== entry + 1) bucket = (bucket + 1) & (ENTRY_BUCKETS - 1);
      let slot = bucketSlot[bucket]!;
      if (bucketEntry[bucket] === 0) {
        bucketEntry[bucket] = entry + 1;
        slot = bucketSlot[bucket] = slots++;
      } else if (nameScore <= slotScore[slot]!) continue;
      slotEntry[slot] = entry;
      slotName[slot] = name;
      slotSimilarity[slot] = this.scoredSimilarity;
      slotPhonetic[slot] = this.scoredPhonetic;
      slotScore[slot] = nameScore;
    }
    return slots;
  }

  /**
   * Birth date: the same date +8, the same year +5, the closest year one apart -8, further -20;
   * unknown where either side has none. Left in `agreement` and `adjustment`.
   */
  private birthAgreement(facts: number, asked: boolean, queryYear: number, queryDay: number): void {
    const { entryFacts } = this.data;
    const start = facts + 1;
    const end = start + entryFacts[start - 1]! * 2;
    this.agreement = UNKNOWN;
    this.adjustment = 0;
    if (!asked || start === end) return;
    let closest = Infinity;
    for (let at = start; at < end; at += 2) {
      if (queryDay >= 0 && entryFacts[at + 1] === queryDay) {
        this.agreement = MATCH;
        this.adjustment = SAME_DATE_BONUS;
        return;
      }
      // An unreadable year leaves the closest unknown (NaN): a mismatch.
      closest = Math.min(closest, entryFacts[at] === NO_YEAR ? NaN : Math.abs(entryFacts[at]! - queryYear));
    }
    this.agreement = closest === 0 ? MATCH : MISMATCH;
    this.adjustment = closest === 0 ? SAME_YEAR_BONUS : closest === 1 ? -NEAR_YEAR_PENALTY : -OTHER_YEAR_PENALTY;
  }

  /** A shared nationality +5, none shared -10; unknown where either side has no country code. */
  private nationalityAgreement(facts: number, queryCode: number): void {
    const { entryFacts } = this.data;
    const dates = facts;
    const start = dates + 1 + entryFacts[dates]! * 2 + 1;
    const end = start + entryFacts[start - 1]!;
    this.agreement = UNKNOWN;
    this.adjustment = 0;
    if (queryCode === -1 || start === end) return;
    for (let at = start; at < end; at++) {
      if (entryFacts[at] === queryCode) {
        this.agreement = MATCH;
        this.adjustment = SAME_NATIONALITY_BONUS;
        return;
      }
    }
    this.agreement = MISMATCH;
    this.adjustment = -OTHER_NATIONALITY_PENALTY;
  }

  /** The tokens of a name's form (normalize.ts nameForms), from the memo where it has them. */
  private queryTokens(texts: string[]): QueryToken[] {
    return texts.map((text) => {
      let token = this.queryTokenMemo.get(text);
      if (token) return token;
      const letters = lettersOf(text);
      const joined = letters !== text;
      const particle = tokenParticle(text);
      const [primaryCode, secondaryCode] = phoneticKeys(letters);
      const keyed = keyParticle(letters) !== undefined;
      const [wordPrimary, wordSecondary, joinedPrefix] = keyed ? wordKeys(letters) : [primaryCode, secondaryCode, ''];
      const joinedPrefixId = keyed ? (this.keyIds.get(joinedPrefix) ?? -1) : -1;
      const tokenId = this.tokenIds.get(text);
      // A token the list has never seen is as rare as a token can be; a joined one weighs what its parts do (see build).
      const weightOf = (part: string): number => {
        const partId = this.tokenIds.get(part);
        return partId === undefined ? this.maxTokenWeight : this.tokenWeights[partId * (TOKEN_STRIDE / 2) + TOKEN_WEIGHT_AT]!;
      };
      token = {
        text,
        id: tokenId ?? -1,
        weight: tokenId !== undefined || !joined ? weightOf(text) : joinedParts(text).reduce((weight, part) => weight + weightOf(part), 0),
        primary: this.keyIds.get(primaryCode) ?? -1,
        secondary: this.keyIds.get(secondaryCode) ?? -1,
        prefix: this.keyIds.get(letters.slice(0, PREFIX_KEY_LENGTH)) ?? -1,
        wordPrimary: this.keyIds.get(wordPrimary) ?? -1,
        wordSecondary: this.keyIds.get(wordSecondary) ?? -1,
        joinedPrefix: joinedPrefixId,
        keyed,
        bits: characterBits(letters),
        chars: codesOf(letters),
        particleLength: particle.length,
        particleSpelling: particle.spelling,
        particleDropped: particle.dropped,
        joined,
        // A joined token of the index starts like it (its joined prefix key), or it is too short for one.
        mayJoin: keyed ? joinedPrefixId >= 0 : startsWithParticle(letters),
        mayBeWritten: joined && (!keyed || this.writtenJoined.has(joinedPrefix)),
      };
      if (this.queryTokenMemo.size >= QUERY_TOKEN_MEMO_SIZE) this.queryTokenMemo.clear();
      this.queryTokenMemo.set(text, token);
      return token;
    });
  }

  /**
   * Names sharing a key with the query, best first by an estimate of the final score: the shared
   * token weight as a share of both names' weight. A name that only sounds alike earns
   * less than one that is also spelled alike, and nothing much for a short token, where sounding
   * alike is not enough ("Kim" and "KM").
   *
   * The query's posting lists are walked side by side in name order, once per schema the query
   * may match (names are numbered by schema, then by weight: see build), and each name is ranked
   * once, with its credits from every list. Once the heap of the best holds CANDIDATES_SCORED
   * names, a name can only enter it with a rank above the worst kept, and a heavier name needs
   * more credit for that: lists whose credits together fall short of that for the lightest name
   * still ahead are skipped forward (WAND: Broder et al., "Efficient query evaluation using a
   * two-level retrieval process", 2003). Names skipped could not have entered, so the heap ends
   * as a walk through every posting would leave it.
   *
   * Leaves the names, best first, in `candidates`, and returns their count.
   */
  private narrow(queryTokens: QueryToken[], schema: number, joinedForm: boolean): number {
    if (this.tokenCredit.length < queryTokens.length) this.tokenCredit = new Float64Array(queryTokens.length);
    let queryWeight = 0;
    for (const token of queryTokens) queryWeight += token.weight;
    // Names of an unknown schema match any query; a query of no schema matches every name. A
    // query's joined form looks for names as listed only where they may write one of its joined
    // tokens joined: what else it would find, the name as written found.
    const { schemaStart } = this.data;
    const names = !joinedForm || queryTokens.some((token) => token.mayBeWritten);
    let kept = 0;
    for (let group = 0; names && group < SCHEMA_COUNT; group++) {
      if (schema !== 0 && group !== 0 && group !== schema) continue;
      kept = this.walk(queryTokens, queryWeight, schemaStart[group]!, schemaStart[group + 1]!, kept, joinedForm ? JOINED_FORM_CANDIDATES : CANDIDATES_SCORED, false);
    }
    this.takeCandidates(kept, 0);
    // The joined forms of names, in a narrowing of their own, where a token of the query may be
    // a joined token's spelling: only then can a joined form score above its name as listed.
    if (!queryTokens.some((token) => token.mayJoin)) return kept;
    let joined = 0;
    for (let group = 0; group < SCHEMA_COUNT; group++) {
      if (schema !== 0 && group !== 0 && group !== schema) continue;
      const first = schemaStart[SCHEMA_COUNT + group]!;
      const end = schemaStart[SCHEMA_COUNT + group + 1]!;
      if (first < end) joined = this.walk(queryTokens, queryWeight, first, end, joined, JOINED_CANDIDATES, true);
    }
    this.takeCandidates(joined, kept);
    return kept + joined;
  }

  /** Empties the heap of `kept` names into `candidates` from `at` on, best first. */
  private takeCandidates(kept: number, at: number): void {
    // Best first: the heap gives up its worst name each time, from the back.
    const { heapNames, heapRanks, heapListed, candidates } = this;
    for (let count = kept; count > 0; ) {
      candidates[at + --count] = heapNames[0]!;
      heapNames[0] = heapNames[count]!;
      heapRanks[0] = heapRanks[count]!;
      heapListed[0] = heapListed[count]!;
      this.siftDown(0, count);
    }
  }

  /**
   * The walk of narrow over the names from `first` up to `end` (one schema's, so lightest first),
   * into the heap that holds `kept` names of at most `capacity`; returns how many it holds after.
   * `joined`: the names are joined forms (see openCursors).
   */
  private walk(
    queryTokens: QueryToken[],
    queryWeight: number,
    first: number,
    end: number,
    kept: number,
    capacity: number,
    joined: boolean,
  ): number {
    const { nameRecords, blockWeight } = this.data;
    const { nameWeights } = this;
    const tokenCount = queryTokens.length;
    const cursors = this.openCursors(queryTokens, first, end, joined);
    if (cursors === 0) return kept;
    const { cursorAt, cursorName, cursorCredit, cursorToken, cursorOrder, heapNames, heapRanks, heapListed, tokenCredit } = this;
    for (;;) {
      const lightest = cursorName[cursorOrder[0]!]!;
      if (lightest === NO_NAME) break;
      // The pivot: the first cursor (in name order) at which the credits of the cursors up to it
      // could lift the lightest name ahead to the heap's worst rank: a token's credit counted once,
      // its largest. Names before the pivot's name sit only in the cursors before it, and fall
      // short. (The margin covers Float32 sums.)
      let pivot = 0;
      if (kept === capacity) {
        // (With the lightest weight of the name's block: a lower bound, so that no name that could enter is skipped.)
        const needed = heapRanks[0]! * (queryWeight + blockWeight[lightest >> WEIGHT_BLOCK_SHIFT]!);
        for (let token = 0; token < tokenCount; token++) tokenCredit[token] = 0;
        let credit = 0;
        for (pivot = 0; pivot < cursors; pivot++) {
          const cursor = cursorOrder[pivot]!;
          if (cursorName[cursor] === NO_NAME) break;
          const token = cursorToken[cursor]!;
          const more = cursorCredit[cursor]! - tokenCredit[token]!;
          if (more > 0) {
            credit += more;
            tokenCredit[token] = cursorCredit[cursor]!;
          }
          if (credit * (1 + 1e-5) >= needed) break;
        }
        if (pivot === cursors || cursorName[cursorOrder[pivot]!] === NO_NAME) break;
      }
      const name = cursorName[cursorOrder[pivot]!]!;
      if (lightest !== name) {
        // Skip the cursors before the pivot forward to its name, and put them back in order.
        for (let i = 0; i < pivot; i++) this.seek(cursorOrder[i]!, name);
        this.sortCursors(cursors);
        continue;
      }
      // Every cursor at the name is at the front of the order. Its credits, one per token (the
      // larger where it is both spelled and sounds alike), summed in query token order in Float32.
      const weight = nameWeights[name * NAME_STRIDE + NAME_WEIGHT_AT]!;
      const listed = nameRecords[name * NAME_STRIDE + NAME_LISTED]!;
      for (let token = 0; token < tokenCount; token++) tokenCredit[token] = 0;
      let at = 0;
      for (; at < cursors; at++) {
        const cursor = cursorOrder[at]!;
        if (cursorName[cursor] !== name) break;
        const token = cursorToken[cursor]!;
        if (cursorCredit[cursor]! > tokenCredit[token]!) tokenCredit[token] = cursorCredit[cursor]!;
        this.moveCursor(cursor, cursorAt[cursor]! + 1);
      }
      let shared = 0;
      for (let token = 0; token < tokenCount; token++) if (tokenCredit[token]! > 0) shared = Math.fround(shared + tokenCredit[token]!);
      // Only the cursors that moved can be out of order.
      if (at > 0) this.sortCursors(cursors);
      const rank = shared / (queryWeight + weight);
      if (kept < capacity) {
        // Sift up from the new leaf.
        let leaf = kept++;
        heapNames[leaf] = name;
        heapRanks[leaf] = rank;
        heapListed[leaf] = listed;
        while (leaf > 0) {
          const parent = (leaf - 1) >> 1;
          if (!this.worse(leaf, parent)) break;
          swap(heapNames, heapRanks, heapListed, leaf, parent);
          leaf = parent;
        }
      } else if (rank > heapRanks[0]! || (rank === heapRanks[0] && listed < heapListed[0]!)) {
        // Replace the root and sift down.
        heapNames[0] = name;
        heapRanks[0] = rank;
        heapListed[0] = listed;
        this.siftDown(0, kept);
      }
    }
    return kept;
  }

  /** Whether heap slot `i` holds a worse name than slot `j`: a lower rank, or on an equal rank the name listed later. */
  private worse(i: number, j: number): boolean {
    const { heapRanks, heapListed } = this;
    return heapRanks[i]! < heapRanks[j]! || (heapRanks[i] === heapRanks[j] && heapListed[j]! < heapListed[i]!);
  }

  /** Restores the heap of `count` names below slot `at` (its root the worst kept). */
  private siftDown(at: number, count: number): void {
    for (;;) {
      const left = at * 2 + 1;
      if (left >= count) break;
      const right = left + 1;
      const child = right < count && this.worse(right, left) ? right : left;
      if (!this.worse(child, at)) break;
      swap(this.heapNames, this.heapRanks, this.heapListed, at, child);
      at = child;
    }
  }

  /**
   * One cursor per posting list of the query, in query token order, each token's prefix key
   * first: its position, end, current name and the credit a name there earns. Over joined forms
   * (`joined`) a token that starts with a particle has the lists of its joined prefix key and its
   * word's codes instead (see wordKeys), which joined tokens are indexed under: the shorter keys of
   * a common particle ("abdu", APTL) would rank every name with such a token alike. Returns the
   * count; `cursorOrder` holds them sorted by current name.
   */
  private openCursors(queryTokens: QueryToken[], first: number, end: number, joined: boolean): number {
    const { postingStart, postings } = this.data;
    const needed = queryTokens.length * 3;
    if (this.cursorAt.length < needed) {
      this.cursorAt = new Int32Array(needed);
      this.cursorEnd = new Int32Array(needed);
      this.cursorName = new Int32Array(needed);
      this.cursorCredit = new Float64Array(needed);
      this.cursorToken = new Int32Array(needed);
      this.cursorOrder = new Int32Array(needed);
    }
    let cursors = 0;
    for (let index = 0; index < queryTokens.length; index++) {
      const token = queryTokens[index]!;
      const soundAlikeWeight = token.weight * (token.chars.length <= SHORT_TOKEN_LENGTH ? PHONETIC_WEIGHT : SOUND_ALIKE_CREDIT);
      const byWord = joined && token.keyed;
      const primary = byWord ? token.wordPrimary : token.primary;
      const secondary = byWord ? token.wordSecondary : token.secondary;
      for (let list = 0; list < 3; list++) {
        const key = list === 0 ? (byWord ? token.joinedPrefix : token.prefix) : list === 1 ? primary : secondary === primary ? -1 : secondary;
        if (key < 0) continue;
        const start = lowerBound(postings, postingStart[key]!, postingStart[key + 1]!, first);
        const stop = lowerBound(postings, start, postingStart[key + 1]!, end);
        if (start === stop) continue;
        const cursor = cursors++;
        this.cursorEnd[cursor] = stop;
        this.moveCursor(cursor, start);
        this.cursorCredit[cursor] = list === 0 ? token.weight : soundAlikeWeight;
        this.cursorToken[cursor] = index;
        this.cursorOrder[cursor] = cursor;
      }
    }
    this.sortCursors(cursors);
    return cursors;
  }

  /** Insertion sort of the cursor order by current name: a few cursors, mostly in order already. */
  private sortCursors(cursors: number): void {
    const { cursorOrder, cursorName } = this;
    for (let i = 1; i < cursors; i++) {
      const cursor = cursorOrder[i]!;
      const name = cursorName[cursor]!;
      let j = i;
      for (; j > 0 && cursorName[cursorOrder[j - 1]!]! > name; j--) cursorOrder[j] = cursorOrder[j - 1]!;
      cursorOrder[j] = cursor;
    }
  }

  /** Moves a cursor to the first name at or after `target` (galloping, then binary search). */
  private seek(cursor: number, target: number): void {
    const postings = this.data.postings;
    const end = this.cursorEnd[cursor]!;
    let low = this.cursorAt[cursor]!;
    if (postings[low]! >= target) return;
    let step = 1;
    while (low + step < end && postings[low + step]! < target) {
      low += step;
      step *= 2;
    }
    let high = Math.min(low + step, end);
    low++;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (postings[middle]! < target) low = middle + 1;
      else high = middle;
    }
    this.moveCursor(cursor, low);
  }

  /** Puts a cursor at position `at` of its list: its name there, or NO_NAME past its end. */
  private moveCursor(cursor: number, at: number): void {
    this.cursorAt[cursor] = at;
    this.cursorName[cursor] = at < this.cursorEnd[cursor]! ? this.data.postings[at]! : NO_NAME;
  }

  /**
   * The slot of an index token's comparison with each query token, in this query: its
   * similarity and whether the two sound alike, at slot x query token count + query token.
   */
  private pairSlot(queryTokens: QueryToken[], candidateToken: number): number {
    const { pairState } = this;
    if (pairState[candidateToken * 2] === this.queryStamp) return pairState[candidateToken * 2 + 1]!;
    const { tokenRecords, tokenChars } = this.data;
    const tokens = queryTokens.length;
    const slot = this.pairsUsed++;
    if ((slot + 1) * tokens > this.pairSimilarity.length) {
      const similarity = new Float64Array((slot + 1) * tokens * 2);
      similarity.set(this.pairSimilarity);
      this.pairSimilarity = similarity;
      const agree = new Uint8Array(similarity.length);
      agree.set(this.pairAgree);
      this.pairAgree = agree;
    }
    const record = candidateToken * TOKEN_STRIDE;
    const primary = tokenRecords[record + TOKEN_PRIMARY]!;
    const secondary = tokenRecords[record + TOKEN_SECONDARY]!;
    const bits = tokenRecords[record + TOKEN_BITS]!;
    const charsAt = tokenRecords[record + TOKEN_CHARS]!;
    const facts = tokenRecords[record + TOKEN_LENGTH]!;
    const length = facts & LENGTH_MASK;
    const joined = (facts & JOINED_TOKEN) !== 0;
    const { pairAgree, pairSimilarity } = this;
    for (let k = 0; k < tokens; k++) {
      const token = queryTokens[k]!;
      const pair = slot * tokens + k;
      if (!joined && !token.joined) {
        const agree = keysAgree(token.primary, token.secondary, primary, secondary < 0 ? primary : secondary);
        pairAgree[pair] = agree ? 1 : 0;
        // The same token (ids are per text) is the one comparison that needs no characters read.
        pairSimilarity[pair] =
          token.id === candidateToken ? 1 : tokenSimilarity(token.chars, 0, token.chars.length, tokenChars, charsAt, length, agree, token.bits, bits);
        continue;
      }
      // A joined token ("bin|laden"): the same letters are the same name ("binladen"). Otherwise
      // it is compared by its word ("laden"), with the other token's word where that starts with
      // a spelling of the same particle, or with the whole other token where names drop its
      // particles, as they do written apart; and not at all where they keep them: "al Qaida" and
      // "Alqasim" are as different as "qaida" and "qasim", "Abdul Malik" and "Abdelhay" as "malik"
      // and "hay", and "Abdul Baazaoui" is no spelling of "Abdul" nor "Abdul Mazai" of "Mazai",
      // where the particles' letters and Double Metaphone codes would make them so. (Without the
      // bits, which are the whole tokens'.)
      const queryLength = token.chars.length;
      if (token.id === candidateToken || (queryLength === length && sameCodes(token.chars, 0, tokenChars, charsAt, length))) {
        pairAgree[pair] = 1;
        pairSimilarity[pair] = 1;
        continue;
      }
      const indexLength = (facts >>> PARTICLE_SHIFT) & PARTICLE_MASK;
      const indexSpelling = (facts >>> SPELLING_SHIFT) & SPELLING_MASK;
      const sameParticle = token.particleSpelling !== 0 && token.particleSpelling === indexSpelling;
      const indexDropped = (facts & DROPPED_PARTICLES) !== 0;
      let querySkip = 0;
      let indexSkip = 0;
      if (sameParticle || (token.joined && joined && token.particleDropped && indexDropped)) {
        querySkip = token.particleLength;
        indexSkip = indexLength;
      } else if (token.joined && !joined && token.particleDropped) querySkip = token.particleLength;
      else if (joined && !token.joined && indexDropped) indexSkip = indexLength;
      else {
        pairAgree[pair] = 0;
        pairSimilarity[pair] = 0;
        continue;
      }
      const other = secondary < 0 ? primary : secondary;
      const agree = keysAgree(token.wordPrimary, token.wordSecondary, primary, other) || keysAgree(token.primary, token.secondary, primary, other);
      const similarity = tokenSimilarity(token.chars, querySkip, queryLength - querySkip, tokenChars, charsAt + indexSkip, length - indexSkip, agree, -1, -1);
      // The codes of a token that starts with a particle are the particle's more than the word's ("abdalla" and "abd|al|ghafar"): they agree only where the words are alike.
      pairAgree[pair] = agree && similarity > 0 ? 1 : 0;
      pairSimilarity[pair] = similarity;
    }
    pairState[candidateToken * 2] = this.queryStamp;
    pairState[candidateToken * 2 + 1] = slot;
    return slot;
  }

  /** The name's score (0-100 before birth date and nationality); its similarity and phonetic parts are left in `scoredSimilarity` and `scoredPhonetic`. */
  private scoreName(queryTokens: QueryToken[], name: number): number {
    const { nameRecords, nameOverflow } = this.data;
    const { tokenWeights } = this;
    const record = name * NAME_STRIDE;
    const candidateCount = nameRecords[record + NAME_TOKEN_COUNT]!;
    // The name's tokens: in its record, or from nameOverflow.
    const inline = candidateCount <= NAME_INLINE_TOKENS;
    const tokenArray = inline ? nameRecords : nameOverflow;
    const start = inline ? record + NAME_TOKENS : nameRecords[record + NAME_TOKENS]!;
    if (this.candidateBest.length < candidateCount) {
      this.candidateBest = new Float64Array(candidateCount);
      this.candidateHeard = new Uint8Array(candidateCount);
      this.candidateSlots = new Int32Array(candidateCount);
    }
    const candidateBest = this.candidateBest.fill(0, 0, candidateCount);
    const candidateHeard = this.candidateHeard.fill(0, 0, candidateCount);
    let querySimilarity = 0;
    let queryPhonetic = 0;
    let queryWeight = 0;
    const tokens = queryTokens.length;
    // The candidates of one query share most of their tokens: each token is compared with the
    // query's once per query (a few dozen distinct tokens among a hundred or more).
    const slots = this.candidateSlots;
    for (let c = 0; c < candidateCount; c++) slots[c] = this.pairSlot(queryTokens, tokenArray[start + c]!);
    const { pairSimilarity, pairAgree } = this;
    for (let k = 0; k < tokens; k++) {
      const token = queryTokens[k]!;
      let best = 0;
      let heard = false;
      for (let c = 0; c < candidateCount; c++) {
        const pair = slots[c]! * tokens + k;
        const agree = pairAgree[pair] === 1;
        const similarity = pairSimilarity[pair]!;
        if (similarity > best) best = similarity;
        if (similarity > candidateBest[c]!) candidateBest[c] = similarity;
        if (agree) {
          heard = true;
          candidateHeard[c] = 1;
        }
      }
      queryWeight += token.weight;
      querySimilarity += token.weight * best;
      if (heard) queryPhonetic += token.weight;
    }
    let candidateSimilarity = 0;
    let candidatePhonetic = 0;
    let candidateWeight = 0;
    for (let c = 0; c < candidateCount; c++) {
      const weight = tokenWeights[tokenArray[start + c]! * (TOKEN_STRIDE / 2) + TOKEN_WEIGHT_AT]!;
      candidateWeight += weight;
      candidateSimilarity += weight * candidateBest[c]!;
      if (candidateHeard[c] === 1) candidatePhonetic += weight;
    }
    // Both sides' tokens in one weighted sum: a token either side cannot explain counts by its weight.
    const totalWeight = queryWeight + candidateWeight;
    const similarity = (querySimilarity + candidateSimilarity) / totalWeight;
    const phonetic = (queryPhonetic + candidatePhonetic) / totalWeight;
    this.scoredSimilarity = similarity;
    this.scoredPhonetic = phonetic;
    return 100 * (NAME_WEIGHT * similarity + PHONETIC_WEIGHT * phonetic);
  }
}
