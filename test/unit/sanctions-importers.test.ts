import fs from 'node:fs';
import test from 'ava';
import { parseOfac, parseOpenSanctions, parseUnConsolidated } from '../../src/modules/screening/sanctions/importers.ts';

const fixture = (name: string) => fs.readFileSync(new URL(`../fixtures/sanctions/${name}`, import.meta.url), 'utf8');

test('OFAC: sdn rows with aliases, remarks parsed for birth dates and nationality', (t) => {
  const result = parseOfac({ sdn: fixture('sdn.csv'), alt: fixture('alt.csv'), add: fixture('add.csv') });
  // A row with a non-numeric id, a row without a name, an alias of an unknown entry.
  t.is(result.skipped, 3);
  t.is(result.ignored, 0);
  t.deepEqual(
    result.entries.map((entry) => entry.source_id),
    ['90001', '90002', '90003', '90004', '90005', '90006'],
  );
  t.deepEqual(result.entries[0], {
    source: 'ofac',
    source_id: '90001',
    schema: 'person',
    name: 'KARAVELLO, Dmitri Anatolyevich',
    aliases: ['KARAVELO, Dmitriy', 'КАРАВЕЛЛО Дмитрий Анатольевич'],
    birth_dates: ['1971-03-14'],
    // A person's address (Cyprus in add.csv) is not a nationality.
    nationalities: ['RUS'],
    topics: ['sanction'],
    programs: ['RUSSIA-EO14024', 'CYBER2'],
    remarks: 'DOB 14 Mar 1971; POB Vologda, Russia; nationality Russia; Gender Male; Passport 7700112233 (Russia).',
  });
  const [, yusuf, company, vessel, ostrande, quintero] = result.entries;
  t.deepEqual(yusuf!.birth_dates, ['1965', '1966']);
  t.deepEqual(yusuf!.nationalities, ['YEM', 'SAU']);
  t.is(company!.schema, 'organization');
  t.deepEqual(company!.aliases, ['ZELVANIA GENERAL TRADING LLC']);
  t.deepEqual(company!.nationalities, ['IRN', 'ARE']);
  t.is(vessel!.schema, 'vessel');
  t.deepEqual(vessel!.nationalities, ['PRK']);
  t.false('remarks' in vessel!);
  t.deepEqual(ostrande!.birth_dates, ['1958', '1959', '1960']);
  t.deepEqual(ostrande!.nationalities, ['VEN']);
  t.deepEqual(quintero!.birth_dates, ['1980-02-02']);
  t.deepEqual(quintero!.nationalities, ['MEX']);
});

test('OFAC: alt.csv and add.csv are optional', (t) => {
  const result = parseOfac({ sdn: fixture('sdn.csv') });
  t.is(result.entries.length, 6);
  t.is(result.skipped, 2);
  t.deepEqual(result.entries[0]!.aliases, []);
  t.deepEqual(result.entries[2]!.nationalities, []);
});

test('OFAC: a stray quote costs its row, not the file', (t) => {
  const result = parseOfac({ sdn: '1,"GOOD ONE",-0- ,"SDGT"\n2,"BRO"KEN",-0- ,"SDGT"\n3,"GOOD TWO",-0- ,"SDGT"\n' });
  t.deepEqual(
    result.entries.map((entry) => entry.name),
    ['GOOD ONE', 'GOOD TWO'],
  );
  t.is(result.skipped, 1);
});

test('UN consolidated XML: individuals and entities', (t) => {
  const result = parseUnConsolidated(fixture('un.xml'));
  t.is(result.skipped, 1);
  t.deepEqual(result.entries, [
    {
      source: 'un',
      source_id: '8800101',
      schema: 'person',
      name: 'TAMIRU OKELLO BWENDA',
      // The "Low" quality alias is a weak a.k.a. and left out.
      aliases: ['TAMIRU OKELO'],
      birth_dates: ['1969-11-23'],
      nationalities: ['COD', 'UGA'],
      topics: ['sanction'],
      programs: ['DRC'],
      remarks: 'Invented entry for tests.',
    },
    {
      source: 'un',
      source_id: '8800102',
      schema: 'person',
      name: 'RYANG CHOL SU',
      aliases: ['량철수'],
      birth_dates: ['1974', '1975', '1976'],
      nationalities: ['PRK'],
      topics: ['sanction'],
      programs: ['DPRK'],
    },
    {
      source: 'un',
      source_id: '8800201',
      schema: 'organization',
      name: 'NORTHWIND MARITIME SERVICES',
      aliases: ['Northwind Marine'],
      birth_dates: [],
      nationalities: ['YEM'],
      topics: ['sanction'],
      programs: ['Yemen'],
    },
  ]);
});

test('UN consolidated XML: a document of another kind is refused', (t) => {
  t.throws(() => parseUnConsolidated('<?xml version="1.0"?><html><body/></html>'), { message: /CONSOLIDATED_LIST/ });
});

test('OpenSanctions: persons and companies kept, other schemas and non-targets ignored, bad lines skipped', async (t) => {
  const result = await parseOpenSanctions(fixture('opensanctions.jsonl').split('\n'));
  t.is(result.skipped, 2);
  t.is(result.ignored, 2);
  t.deepEqual(result.entries, [
    {
      source: 'opensanctions',
      source_id: 'NK-fix-001',
      schema: 'person',
      name: 'Lorenzo Vittadini',
      // weakAlias is left out on purpose.
      aliases: ['Renzo Vittadini'],
      birth_dates: ['1962-07-30'],
      nationalities: ['ITA'],
      topics: ['pep'],
      programs: ['it_fixture'],
    },
    {
      source: 'opensanctions',
      source_id: 'NK-fix-002',
      schema: 'person',
      name: 'Svetlana Mirokhina',
      aliases: ['Светлана Мирохина'],
      birth_dates: ['1977'],
      nationalities: ['RUS', 'CYP'],
      topics: ['sanction', 'crime'],
      programs: ['EU-RUS-833'],
      remarks: 'Invented entry for tests.',
    },
    {
      source: 'opensanctions',
      source_id: 'NK-fix-003',
      schema: 'organization',
      name: 'Heliodor Capital GmbH',
      aliases: ['Heliodor Invest AG'],
      birth_dates: [],
      nationalities: ['DEU', 'CHE'],
      topics: ['sanction'],
      programs: ['de_fixture'],
    },
  ]);
});

test('OpenSanctions: reads lines from an async source', async (t) => {
  async function* lines() {
    yield '{"id":"NK-a","schema":"Vessel","properties":{"name":["Sea Lantern"],"flag":["pa"],"topics":["sanction"]}}';
    yield '';
    yield '{"id":"NK-b","schema":"Airplane","properties":{"name":["EP-XYZ"],"topics":["export.control"]}}';
  }
  const result = await parseOpenSanctions(lines());
  t.deepEqual(
    result.entries.map((entry) => [entry.source_id, entry.schema, entry.topics, entry.nationalities]),
    [
      ['NK-a', 'vessel', ['sanction'], ['PAN']],
      ['NK-b', 'aircraft', ['export'], []],
    ],
  );
  t.is(result.skipped, 0);
});
