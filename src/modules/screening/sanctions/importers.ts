import { parse as parseCsv } from 'csv-parse/sync';
import { XMLParser } from 'fast-xml-parser';
import { countryToAlpha3 } from './normalize.ts';

export type SanctionSource = 'ofac' | 'un' | 'opensanctions';
export type SanctionSchema = 'person' | 'organization' | 'vessel' | 'aircraft' | 'unknown';

/** One list entry in the shape every importer produces and the matcher indexes. */
export interface SanctionEntry {
  source: SanctionSource;
  source_id: string;
  schema: SanctionSchema;
  name: string;
  aliases: string[];
  /** YYYY or YYYY-MM-DD. */
  birth_dates: string[];
  /** ISO 3166-1 alpha-3 where the list's value names a country, the list's own text otherwise. */
  nationalities: string[];
  /** Simple words: sanction, pep, rca, crime, debarment, wanted, ... */
  topics: string[];
  programs: string[];
  remarks?: string;
}

/**
 * `skipped` counts malformed records (no id, no name, unparseable line, alias of an unknown
 * entry); `ignored` counts well-formed records that are not screening targets (OpenSanctions
 * addresses, sanctions, relationships, non-target entities).
 */
export interface ImportResult {
  entries: SanctionEntry[];
  skipped: number;
  ignored: number;
}

const MONTHS: Record<string, string> = {
  jan: '01', feb: '02', mar: '03', apr: '04', may: '05', jun: '06',
  jul: '07', aug: '08', sep: '09', oct: '10', nov: '11', dec: '12',
};

/** Lists give birth years as ranges when unsure; wider ranges than this say nothing about a person. */
const MAX_BIRTH_YEAR_RANGE = 10;

function yearRange(from: number, to: number): string[] {
  if (to < from || to - from > MAX_BIRTH_YEAR_RANGE) return [String(from), String(to)];
  const years: string[] = [];
  for (let year = from; year <= to; year++) years.push(String(year));
  return years;
}

function unique(values: Iterable<string>): string[] {
  return [...new Set(values)];
}

/** Country values as alpha-3 codes; text that names no country is kept as written, placeholders are dropped. */
function nationalityValues(values: Iterable<string>): string[] {
  const result: string[] = [];
  for (const raw of values) {
    const value = raw.trim().replace(/\.$/, '');
    if (value === '' || /^(?:n\/?a|unknown|undetermined|none identified|-0-)$/i.test(value)) continue;
    result.push(countryToAlpha3(value) ?? value);
  }
  return unique(result);
}

const OFAC_EMPTY = '-0-';

function ofacField(record: string[], index: number): string {
  const value = (record[index] ?? '').trim();
  return value === OFAC_EMPTY ? '' : value;
}

function readOfacCsv(text: string): { records: string[][]; malformed: number } {
  let malformed = 0;
  const records = parseCsv(text.replace(/\x1a\s*$/, ''), {
    relax_column_count: true,
    skip_empty_lines: true,
    skip_records_with_error: true,
    on_skip: () => {
      malformed++;
      return undefined;
    },
  }) as string[][];
  return { records, malformed };
}

/** "DOB 12 Jan 1960", "DOB 1946", "DOB circa 1955", "DOB 1958 to 1962", "DOB Feb 1970". */
function parseOfacBirthDate(value: string): string[] {
  const text = value.replace(/^circa\s+/i, '').replace(/\.$/, '').trim();
  const full = /^(\d{1,2}) ([a-z]{3}) (\d{4})$/i.exec(text);
  if (full) {
    const month = MONTHS[full[2]!.toLowerCase()];
    if (month) return [`${full[3]}-${month}-${full[1]!.padStart(2, '0')}`];
  }
  const years = [...text.matchAll(/\b(\d{4})\b/g)].map((match) => Number(match[1]));
  const [first, last] = [years[0], years[years.length - 1]];
  if (first === undefined || last === undefined) return [];
  return first === last ? [String(first)] : yearRange(first, last);
}

interface OfacRemarks {
  birthDates: string[];
  nationalities: string[];
}

function parseOfacRemarks(remarks: string): OfacRemarks {
  const birthDates: string[] = [];
  const countries: string[] = [];
  for (const segment of remarks.split(';')) {
    const text = segment.trim().replace(/^alt\.\s+/i, '');
    const dob = /^DOB\s+(.+)$/i.exec(text);
    if (dob) birthDates.push(...parseOfacBirthDate(dob[1]!));
    const nationality = /^(?:nationality|citizen)\s+(?:of registration\s+)?(.+)$/i.exec(text);
    if (nationality) countries.push(nationality[1]!);
  }
  return { birthDates: unique(birthDates), nationalities: nationalityValues(countries) };
}

function ofacSchema(type: string): SanctionSchema {
  switch (type.toLowerCase()) {
    case 'individual':
      return 'person';
    case 'vessel':
      return 'vessel';
    case 'aircraft':
      return 'aircraft';
    case '':
      return 'organization';
    default:
      return 'unknown';
  }
}

export interface OfacFiles {
  /** sdn.csv: ent_num, SDN_Name, SDN_Type, Program, Title, Call_Sign, Vess_type, Tonnage, GRT, Vess_flag, Vess_owner, Remarks. */
  sdn: string;
  /** alt.csv: ent_num, alt_num, alt_type, alt_name, alt_remarks. */
  alt?: string;
  /** add.csv: ent_num, add_num, address, city/state/postal code, country, add_remarks. */
  add?: string;
}

/**
 * The OFAC SDN list from its legacy CSV files (no header rows). Birth dates and nationality come
 * from the free-text remarks. OFAC gives organizations, vessels and aircraft no nationality, so
 * their address countries (add.csv) and a vessel's flag stand in for it; a person's address is
 * where they were seen, not who they are, and is not used.
 */
export function parseOfac(files: OfacFiles): ImportResult {
  const sdn = readOfacCsv(files.sdn);
  let skipped = sdn.malformed;
  const byId = new Map<string, SanctionEntry>();
  for (const record of sdn.records) {
    const id = ofacField(record, 0);
    const name = ofacField(record, 1);
    if (!/^\d+$/.test(id) || name === '') {
      skipped++;
      continue;
    }
    const schema = ofacSchema(ofacField(record, 2));
    const remarks = ofacField(record, 11);
    const parsed = parseOfacRemarks(remarks);
    const flag = schema === 'vessel' ? nationalityValues([ofacField(record, 9)]) : [];
    const entry: SanctionEntry = {
      source: 'ofac',
      source_id: id,
      schema,
      name,
      aliases: [],
      birth_dates: parsed.birthDates,
      nationalities: unique([...parsed.nationalities, ...flag]),
      topics: ['sanction'],
      // Several programs come as one field: "SDGT] [IRGC".
      programs: ofacField(record, 3)
        .split(/\]\s*\[/)
        .map((program) => program.replace(/[[\]]/g, '').trim())
        .filter((program) => program !== ''),
    };
    if (remarks !== '') entry.remarks = remarks;
    byId.set(id, entry);
  }

  if (files.alt !== undefined) {
    const alt = readOfacCsv(files.alt);
    skipped += alt.malformed;
    for (const record of alt.records) {
      const entry = byId.get(ofacField(record, 0));
      const alias = ofacField(record, 3);
      if (!entry || alias === '') {
        skipped++;
        continue;
      }
      if (alias !== entry.name && !entry.aliases.includes(alias)) entry.aliases.push(alias);
    }
  }

  if (files.add !== undefined) {
    const add = readOfacCsv(files.add);
    skipped += add.malformed;
    for (const record of add.records) {
      const entry = byId.get(ofacField(record, 0));
      if (!entry) {
        skipped++;
        continue;
      }
      if (entry.schema === 'person') continue;
      entry.nationalities = unique([...entry.nationalities, ...nationalityValues([ofacField(record, 4)])]);
    }
  }

  return { entries: [...byId.values()], skipped, ignored: 0 };
}

const UN_REPEATED_ELEMENTS = new Set([
  'INDIVIDUAL', 'ENTITY', 'INDIVIDUAL_ALIAS', 'ENTITY_ALIAS', 'INDIVIDUAL_DATE_OF_BIRTH',
  'INDIVIDUAL_ADDRESS', 'ENTITY_ADDRESS', 'VALUE',
]);

type XmlNode = Record<string, unknown>;

function isNode(value: unknown): value is XmlNode {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function text(node: XmlNode, key: string): string {
  const value = node[key];
  return typeof value === 'string' || typeof value === 'number' ? String(value).trim() : '';
}

function nodes(node: XmlNode, key: string): XmlNode[] {
  const value = node[key];
  return Array.isArray(value) ? value.filter(isNode) : [];
}

function values(node: XmlNode, key: string): string[] {
  const container = node[key];
  if (!isNode(container)) return [];
  const list = container.VALUE;
  return Array.isArray(list) ? list.map((value) => String(value).trim()).filter((value) => value !== '') : [];
}

function unBirthDates(record: XmlNode): string[] {
  const dates: string[] = [];
  for (const birth of nodes(record, 'INDIVIDUAL_DATE_OF_BIRTH')) {
    const date = /^\d{4}-\d{2}-\d{2}/.exec(text(birth, 'DATE'));
    if (date) dates.push(date[0]);
    const year = text(birth, 'YEAR');
    if (/^\d{4}$/.test(year)) dates.push(year);
    const from = Number(text(birth, 'FROM_YEAR'));
    const to = Number(text(birth, 'TO_YEAR'));
    if (from > 0 && to > 0) dates.push(...yearRange(from, to));
  }
  // Some aliases carry their own date of birth (another identity's papers).
  for (const alias of nodes(record, 'INDIVIDUAL_ALIAS')) {
    const date = /^\d{4}-\d{2}-\d{2}/.exec(text(alias, 'DATE_OF_BIRTH'));
    if (date) dates.push(date[0]);
  }
  return unique(dates);
}

function unEntry(record: XmlNode, schema: 'person' | 'organization'): SanctionEntry | null {
  const id = text(record, 'DATAID');
  const name = ['FIRST_NAME', 'SECOND_NAME', 'THIRD_NAME', 'FOURTH_NAME']
    .map((key) => text(record, key))
    .filter((part) => part !== '')
    .join(' ');
  if (id === '' || name === '') return null;
  const aliasNodes = nodes(record, schema === 'person' ? 'INDIVIDUAL_ALIAS' : 'ENTITY_ALIAS');
  // "Low" quality aliases are the UN's weak a.k.a.s (a kunya, a nickname) that match half the population.
  const aliases = aliasNodes.filter((alias) => text(alias, 'QUALITY').toLowerCase() !== 'low').map((alias) => text(alias, 'ALIAS_NAME'));
  aliases.push(text(record, 'NAME_ORIGINAL_SCRIPT'));
  const countries =
    schema === 'person'
      ? values(record, 'NATIONALITY')
      : nodes(record, 'ENTITY_ADDRESS').map((address) => text(address, 'COUNTRY'));
  const listType = text(record, 'UN_LIST_TYPE');
  const entry: SanctionEntry = {
    source: 'un',
    source_id: id,
    schema,
    name,
    aliases: unique(aliases.filter((alias) => alias !== '' && alias !== name)),
    birth_dates: schema === 'person' ? unBirthDates(record) : [],
    nationalities: nationalityValues(countries),
    topics: ['sanction'],
    programs: listType === '' ? [] : [listType],
  };
  const remarks = text(record, 'COMMENTS1');
  if (remarks !== '') entry.remarks = remarks;
  return entry;
}

/** The UN Security Council consolidated list XML (CONSOLIDATED_LIST with INDIVIDUALS and ENTITIES). */
export function parseUnConsolidated(xml: string): ImportResult {
  const parser = new XMLParser({
    ignoreAttributes: true,
    // Ids and years stay text: DATAID is an identifier, not a number to round.
    parseTagValue: false,
    isArray: (name) => UN_REPEATED_ELEMENTS.has(name),
  });
  const document: unknown = parser.parse(xml);
  const list = isNode(document) ? document.CONSOLIDATED_LIST : undefined;
  if (!isNode(list)) throw new Error('Not a UN consolidated list: no CONSOLIDATED_LIST element.');

  const entries: SanctionEntry[] = [];
  let skipped = 0;
  const groups: [string, string, 'person' | 'organization'][] = [
    ['INDIVIDUALS', 'INDIVIDUAL', 'person'],
    ['ENTITIES', 'ENTITY', 'organization'],
  ];
  for (const [groupKey, recordKey, schema] of groups) {
    const group = list[groupKey];
    if (!isNode(group)) continue;
    const records = group[recordKey];
    for (const record of Array.isArray(records) ? records : []) {
      const entry = isNode(record) ? unEntry(record, schema) : null;
      if (entry) entries.push(entry);
      else skipped++;
    }
  }
  return { entries, skipped, ignored: 0 };
}

const FTM_SCHEMAS: Record<string, SanctionSchema> = {
  Person: 'person',
  Organization: 'organization',
  Company: 'organization',
  LegalEntity: 'organization',
  PublicBody: 'organization',
  Vessel: 'vessel',
  Airplane: 'aircraft',
};

/** FtM topics to the words sanction_topic uses; unknown topics keep their first segment. */
function simpleTopic(topic: string): string {
  if (topic === 'role.pep') return 'pep';
  if (topic === 'role.rca') return 'rca';
  if (topic.startsWith('sanction')) return 'sanction';
  if (topic.startsWith('crime')) return 'crime';
  return topic.split('.')[0]!;
}

function stringList(properties: Record<string, unknown>, key: string): string[] {
  const value = properties[key];
  if (!Array.isArray(value)) return [];
  return value.filter((item): item is string => typeof item === 'string').map((item) => item.trim()).filter((item) => item !== '');
}

type FtmLine = { entry: SanctionEntry } | { ignored: true } | { malformed: true };

function openSanctionsLine(line: string): FtmLine {
  let entity: unknown;
  try {
    entity = JSON.parse(line);
  } catch {
    return { malformed: true };
  }
  if (!isNode(entity) || typeof entity.id !== 'string' || typeof entity.schema !== 'string' || !isNode(entity.properties)) {
    return { malformed: true };
  }
  // Own keys only: a feed's `constructor` or `__proto__` schema is none of ours.
  const schema = Object.hasOwn(FTM_SCHEMAS, entity.schema) ? FTM_SCHEMAS[entity.schema] : undefined;
  if (!schema || entity.target === false) return { ignored: true };

  const properties = entity.properties;
  const names = stringList(properties, 'name');
  const name = names[0] ?? (typeof entity.caption === 'string' ? entity.caption.trim() : '');
  if (name === '') return { malformed: true };
  // Weak aliases (OpenSanctions' own term) are deliberately left out: they are too common to screen on.
  const aliases = unique([...names.slice(1), ...stringList(properties, 'alias'), ...stringList(properties, 'previousName')]).filter(
    (alias) => alias !== name,
  );
  const countryKeys = schema === 'person' ? ['nationality', 'citizenship'] : ['jurisdiction', 'country', 'mainCountry', 'flag'];
  const programIds = stringList(properties, 'programId');
  const datasets = Array.isArray(entity.datasets)
    ? entity.datasets.filter((dataset): dataset is string => typeof dataset === 'string')
    : [];
  const notes = stringList(properties, 'notes');
  const entry: SanctionEntry = {
    source: 'opensanctions',
    source_id: entity.id,
    schema,
    name,
    aliases,
    birth_dates: unique(
      stringList(properties, 'birthDate').flatMap((date) => {
        const full = /^\d{4}-\d{2}-\d{2}/.exec(date);
        if (full) return [full[0]];
        const year = /^\d{4}/.exec(date);
        return year ? [year[0]] : [];
      }),
    ),
    nationalities: nationalityValues(countryKeys.flatMap((key) => stringList(properties, key))),
    topics: unique(stringList(properties, 'topics').map(simpleTopic)),
    programs: programIds.length > 0 ? programIds : datasets,
  };
  if (notes.length > 0) entry.remarks = notes.join('\n');
  return { entry };
}

/**
 * OpenSanctions' FollowTheMoney export, one entity per line. Takes lines rather than one string
 * because the full exports are larger than a JavaScript string can be: pass a readline interface
 * over the file, or `text.split('\n')` for small files.
 */
export async function parseOpenSanctions(lines: Iterable<string> | AsyncIterable<string>): Promise<ImportResult> {
  const entries: SanctionEntry[] = [];
  let skipped = 0;
  let ignored = 0;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    const parsed = openSanctionsLine(line);
    if ('entry' in parsed) entries.push(parsed.entry);
    else if ('ignored' in parsed) ignored++;
    else skipped++;
  }
  return { entries, skipped, ignored };
}
