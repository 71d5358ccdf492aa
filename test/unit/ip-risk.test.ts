import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import fc from 'fast-check';
import { open, type CityResponse } from 'maxmind';
import {
  IP_RISK_WEIGHTS,
  IpNetworkSet,
  countryToAlpha2,
  createIpRiskContext,
  scoreIp,
  type IpRiskContext,
  type IpRiskResult,
} from '../../src/modules/screening/ip-risk.ts';
import { IpRangeList, parseIp } from '../../src/net/ip-ranges.ts';
import { writeMmdb } from '../helpers/mmdb-writer.ts';

let directory: string;
let bare: IpRiskContext;
let full: IpRiskContext;

const DATACENTER_LIST = [
  '# hosting ranges',
  '34.0.0.0/8',
  '8.8.8.0/24 ; trailing comment',
  '',
  '2001:4860::/32',
  '::ffff:52.0.0.0/104',
].join('\n');
const TOR_LIST = ['185.220.101.5', '185.220.101.33', '2a0b:f4c2::1'].join('\n');

test.before(async () => {
  directory = await mkdtemp(join(tmpdir(), 'warden-ip-risk-'));
  await writeMmdb(join(directory, 'country.mmdb'), [
    { network: '81.2.69.0/24', data: { country: { iso_code: 'GB', names: { en: 'United Kingdom' } } } },
    { network: '81.0.0.0/8', data: { country: { iso_code: 'FR' } } },
    { network: '185.220.101.0/24', data: { country: { iso_code: 'DE' } } },
    { network: '34.0.0.0/8', data: { country: { iso_code: 'US' } } },
    { network: '1.0.0.0/24', data: { registered_country: { iso_code: 'AU' } } },
    { network: '2a02:ff00::/32', data: { country: { iso_code: 'IT' } } },
  ]);
  await writeFile(join(directory, 'datacenter.txt'), DATACENTER_LIST);
  await writeFile(join(directory, 'tor.txt'), TOR_LIST);
  bare = await createIpRiskContext({});
  full = await createIpRiskContext({
    geoipDbPath: join(directory, 'country.mmdb'),
    datacenterListPath: join(directory, 'datacenter.txt'),
    torListPath: join(directory, 'tor.txt'),
  });
});

test.after.always(async () => {
  await rm(directory, { recursive: true, force: true });
});

function kindOf(ip: string, context = bare): Pick<IpRiskResult, 'kind' | 'reasons' | 'score'> {
  const { kind, reasons, score } = scoreIp({ ip }, context);
  return { kind, reasons, score };
}

test('a missing address scores 0 with no_ip', (t) => {
  for (const ip of [null, undefined, '', '  ']) {
    t.deepEqual(scoreIp({ ip }, full), { score: 0, reasons: ['no_ip'], country: null, kind: 'missing' });
  }
});

test('malformed addresses are invalid', (t) => {
  for (const ip of ['abc', '999.1.1.1', '1.2.3', '010.0.0.1', '0x7f.0.0.1', '1.2.3.4/24', '1.2.3.4.5', ':::1', '2001:db8::g', '1'.repeat(80)]) {
    t.deepEqual(scoreIp({ ip }, full), { score: 60, reasons: ['invalid_ip'], country: null, kind: 'invalid' }, ip);
  }
});

test('surrounding whitespace is ignored', (t) => {
  t.is(kindOf(' 10.0.0.1 ').kind, 'private');
});

test('non-public ranges are classified, IPv4 and IPv6', (t) => {
  const expectations: [string, IpRiskResult['kind'], number][] = [
    ['10.1.2.3', 'private', 20],
    ['172.31.255.255', 'private', 20],
    ['192.168.0.1', 'private', 20],
    ['fd12:3456::1', 'private', 20],
    ['100.64.0.1', 'cgnat', 20],
    ['127.0.0.1', 'loopback', 30],
    ['::1', 'loopback', 30],
    ['169.254.10.1', 'link_local', 30],
    ['fe80::1', 'link_local', 30],
    ['fe80::1%eth0', 'link_local', 30],
    ['224.0.0.251', 'multicast', 50],
    ['ff02::1', 'multicast', 50],
    ['192.0.2.10', 'documentation', 50],
    ['203.0.113.7', 'documentation', 50],
    ['2001:db8::1', 'documentation', 50],
    ['0.0.0.0', 'reserved', 50],
    ['240.0.0.1', 'reserved', 50],
    ['255.255.255.255', 'reserved', 50],
    ['198.18.0.1', 'reserved', 50],
    ['::', 'reserved', 50],
    ['100::1', 'reserved', 50],
    ['4000::1', 'bogon', 60],
    ['5f00::1', 'bogon', 60],
  ];
  for (const [ip, kind, score] of expectations) {
    const result = scoreIp({ ip, customerCountry: 'GB' }, full);
    t.is(result.kind, kind, ip);
    t.is(result.score, score, ip);
    t.is(result.reasons.length, 1, ip);
    t.is(result.country, null, `${ip} is not geolocated`);
  }
  t.deepEqual(kindOf('172.32.0.1'), { kind: 'public', reasons: [], score: 0 }, 'just outside 172.16.0.0/12');
});

test('IPv4-mapped IPv6 is judged as the IPv4 address it carries', (t) => {
  t.is(kindOf('::ffff:127.0.0.1').kind, 'loopback');
  t.is(kindOf('::ffff:10.0.0.1').kind, 'private');
  t.deepEqual(scoreIp({ ip: '::ffff:81.2.69.160', customerCountry: 'GB' }, full), {
    score: 0,
    reasons: [],
    country: 'GB',
    kind: 'public',
  });
});

test('public addresses without any configuration score 0', (t) => {
  for (const ip of ['8.8.8.8', '81.2.69.160', '2a00:1450:4001:82b::200e', '2002:c000:0204::1']) {
    t.deepEqual(scoreIp({ ip, customerCountry: 'DE' }, bare), { score: 0, reasons: [], country: null, kind: 'public' }, ip);
  }
});

test('data-centre ranges from the list file are flagged', (t) => {
  t.deepEqual(kindOf('8.8.8.8', full).reasons, ['datacenter', 'country_unknown']);
  t.deepEqual(scoreIp({ ip: '34.120.1.2', customerCountry: 'US' }, full), {
    score: 30,
    reasons: ['datacenter'],
    country: 'US',
    kind: 'public',
  });
  t.deepEqual(kindOf('2001:4860:4860::8888', full).reasons, ['datacenter', 'country_unknown']);
  t.deepEqual(kindOf('52.1.2.3', full).reasons, ['datacenter', 'country_unknown'], 'IPv4-mapped list entry');
  t.deepEqual(kindOf('8.8.9.1', full).reasons, ['country_unknown'], 'just outside 8.8.8.0/24');
});

test('Tor exits from the list file are flagged', (t) => {
  t.deepEqual(scoreIp({ ip: '185.220.101.5', customerCountry: 'DE' }, full), {
    score: 70,
    reasons: ['tor_exit'],
    country: 'DE',
    kind: 'public',
  });
  t.deepEqual(scoreIp({ ip: '185.220.101.6', customerCountry: 'DE' }, full).reasons, [], 'neighbouring address');
  t.deepEqual(kindOf('2a0b:f4c2:0:0:0:0:0:1', full).reasons, ['tor_exit', 'country_unknown'], 'uncompressed IPv6');
});

test('signals add up and are clamped at 100', (t) => {
  t.deepEqual(scoreIp({ ip: '185.220.101.5', customerCountry: 'GBR' }, full), {
    score: 100,
    reasons: ['tor_exit', 'country_mismatch'],
    country: 'DE',
    kind: 'public',
  });
});

test('geolocation matches the customer country given as alpha-2, alpha-3 or name', (t) => {
  for (const customerCountry of ['GB', 'gb', 'GBR', 'United Kingdom', 'UK', ' united kingdom ']) {
    t.deepEqual(scoreIp({ ip: '81.2.69.160', customerCountry }, full), { score: 0, reasons: [], country: 'GB', kind: 'public' }, customerCountry);
  }
});

test('geolocation in another country than the customer is a mismatch', (t) => {
  for (const customerCountry of ['DE', 'DEU', 'Germany']) {
    t.deepEqual(scoreIp({ ip: '81.2.69.160', customerCountry }, full), {
      score: 30,
      reasons: ['country_mismatch'],
      country: 'GB',
      kind: 'public',
    });
  }
  t.deepEqual(scoreIp({ ip: '81.2.70.1', customerCountry: 'GB' }, full).country, 'FR', 'the enclosing /8');
  t.deepEqual(scoreIp({ ip: '2a02:ff00::1', customerCountry: 'France' }, full).reasons, ['country_mismatch']);
});

test('an unknown or missing customer country is not a mismatch', (t) => {
  for (const customerCountry of [null, undefined, '', 'Narnia', 'XX', 'ZZZ']) {
    t.deepEqual(scoreIp({ ip: '81.2.69.160', customerCountry }, full).reasons, [], String(customerCountry));
  }
});

test('registered_country stands in when the database has no usage country', (t) => {
  t.deepEqual(scoreIp({ ip: '1.0.0.77', customerCountry: 'AUS' }, full), { score: 0, reasons: [], country: 'AU', kind: 'public' });
});

test('an address the database does not know is country_unknown', (t) => {
  t.deepEqual(scoreIp({ ip: '5.5.5.5', customerCountry: 'GB' }, full), {
    score: 10,
    reasons: ['country_unknown'],
    country: null,
    kind: 'public',
  });
});

test('countryToAlpha2 reads codes and English names', (t) => {
  t.is(countryToAlpha2('de'), 'DE');
  t.is(countryToAlpha2('CZE'), 'CZ');
  t.is(countryToAlpha2('Czech Republic'), 'CZ');
  t.is(countryToAlpha2('United States'), 'US');
  t.is(countryToAlpha2('USA'), 'US');
  t.is(countryToAlpha2('Türkiye'), 'TR');
  t.is(countryToAlpha2('XK'), 'XK');
  t.is(countryToAlpha2('Atlantis'), null);
});

test('a malformed list line fails the context with its file and line', async (t) => {
  const path = join(directory, 'broken.txt');
  await writeFile(path, '1.2.3.0/24\n# fine\n10/8\n');
  await t.throwsAsync(createIpRiskContext({ datacenterListPath: path }), { message: `${path}:3: "10/8" is not an IP address or CIDR range` });
  for (const entry of ['1.2.3.4/33', '::/129', '1.2.3.4/x', '1.2.3.4/24/1', 'example.com']) {
    t.false(new IpNetworkSet().add(entry), entry);
  }
});

test('a database that has no countries is refused at start', async (t) => {
  const path = join(directory, 'asn.mmdb');
  await writeMmdb(path, [{ network: '8.8.8.0/24', data: { autonomous_system_number: 15169 } }], { databaseType: 'GeoLite2-ASN' });
  await t.throwsAsync(createIpRiskContext({ geoipDbPath: path }), { message: /GeoLite2-ASN database, not a country or city database/ });
});

test('an IPv4-only database leaves IPv6 addresses without a country', async (t) => {
  const path = join(directory, 'v4.mmdb');
  await writeMmdb(path, [{ network: '81.2.69.0/24', data: { country: { iso_code: 'GB' } } }], { ipVersion: 4 });
  const context = await createIpRiskContext({ geoipDbPath: path });
  t.is(scoreIp({ ip: '81.2.69.1' }, context).country, 'GB');
  t.deepEqual(scoreIp({ ip: '2a02:ff00::1' }, context).reasons, ['country_unknown']);
});

test('IpNetworkSet agrees with IpRangeList on random networks and addresses', (t) => {
  const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((octets) => octets.join('.'));
  const ipv6 = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 }).map((parts) => parts.map((part) => part.toString(16)).join(':'));
  // Few distinct leading bits, so that addresses often fall inside the generated networks.
  const nearby4 = fc.tuple(fc.constantFrom(10, 34), fc.nat(3), fc.nat(255), fc.nat(255)).map((octets) => octets.join('.'));
  const nearby6 = fc.tuple(fc.constantFrom('2001:db8', '2a02:ff00'), fc.nat(3), fc.nat(0xffff)).map(([prefix, a, b]) => `${prefix}:${a}::${b.toString(16)}`);
  const network = fc.oneof(
    fc.tuple(fc.oneof(ipv4, nearby4), fc.integer({ min: 0, max: 32 })).map(([address, bits]) => `${address}/${bits}`),
    fc.tuple(fc.oneof(ipv6, nearby6), fc.integer({ min: 0, max: 128 })).map(([address, bits]) => `${address}/${bits}`),
    fc.oneof(ipv4, nearby4, nearby6),
  );
  const address = fc.oneof(ipv4, nearby4, ipv6, nearby6, nearby4.map((ip) => `::ffff:${ip}`));
  fc.assert(
    fc.property(fc.array(network, { maxLength: 40 }), fc.array(address, { minLength: 1, maxLength: 20 }), (entries, addresses) => {
      const set = new IpNetworkSet();
      for (const entry of entries) set.add(entry);
      const reference = new IpRangeList(entries);
      return set.size === entries.length && addresses.every((ip) => set.has(parseIp(ip)!) === reference.contains(ip));
    }),
    { numRuns: 500 },
  );
  t.pass();
});

test('never throws and always scores 0..100 on arbitrary input', (t) => {
  const ip = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary', maxLength: 100 }),
    fc.ipV4(),
    fc.ipV4Extended(),
    fc.ipV6(),
    fc.constantFrom(null, undefined),
  );
  const country = fc.option(fc.oneof(fc.string(), fc.constantFrom('GB', 'GBR', 'Germany', 'uk')), { nil: undefined });
  fc.assert(
    fc.property(ip, country, (address, customerCountry) => {
      const result = scoreIp({ ip: address, customerCountry }, full);
      return (
        Number.isInteger(result.score) &&
        result.score >= 0 &&
        result.score <= 100 &&
        result.reasons.every((reason) => reason in IP_RISK_WEIGHTS) &&
        (result.country === null || /^[A-Z]{2}$/.test(result.country))
      );
    }),
    { numRuns: 3000 },
  );
  t.pass();
});

test('mmdb writer: the maxmind reader reads back networks, prefixes and metadata', async (t) => {
  const path = join(directory, 'readback.mmdb');
  await writeMmdb(
    path,
    [
      { network: '81.2.69.0/24', data: { country: { iso_code: 'GB' } } },
      { network: '81.0.0.0/8', data: { country: { iso_code: 'FR' } } },
      { network: '2a02:ff00::/32', data: { country: { iso_code: 'IT' } } },
      { network: '9.9.9.9/32', data: { country: { iso_code: 'GB' } } },
    ],
    { databaseType: 'GeoIP2-City', languages: ['en', 'de'], description: { en: 'fixture' }, buildEpoch: 1_700_000_000 },
  );
  const reader = await open<CityResponse>(path);
  t.like(reader.metadata, {
    binaryFormatMajorVersion: 2,
    binaryFormatMinorVersion: 0,
    databaseType: 'GeoIP2-City',
    ipVersion: 6,
    languages: ['en', 'de'],
    description: { en: 'fixture' },
    recordSize: 24,
  });
  t.is(reader.metadata.buildEpoch.toISOString(), '2023-11-14T22:13:20.000Z');
  t.deepEqual(reader.getWithPrefixLength('81.2.69.160'), [{ country: { iso_code: 'GB' } }, 24]);
  t.deepEqual(reader.get('81.200.1.1'), { country: { iso_code: 'FR' } });
  t.deepEqual(reader.get('9.9.9.9'), { country: { iso_code: 'GB' } });
  t.is(reader.get('9.9.9.8'), null);
  t.is(reader.get('82.1.1.1'), null);
  t.deepEqual(reader.getWithPrefixLength('2a02:ff00:1234::1'), [{ country: { iso_code: 'IT' } }, 32]);
  t.is(reader.get('2a02:ff01::1'), null);
});

test('mmdb writer: every data type round-trips through the maxmind reader', async (t) => {
  const path = join(directory, 'types.mmdb');
  const record = {
    text: 'Zürich',
    medium: 'm'.repeat(100),
    long: 'l'.repeat(300),
    huge: 'h'.repeat(70_000),
    zero: 0,
    small: 7,
    wide: 4_000_000_000,
    negative: -5,
    fraction: 2.5,
    yes: true,
    no: false,
    big: 2n ** 40n,
    bigger: 2n ** 100n,
    bytes: new Uint8Array([1, 2, 3]),
    list: [1, 'two', [3]],
    nested: { deeper: { deepest: 'x' } },
  };
  await writeMmdb(path, [{ network: '203.0.113.0/24', data: record }], { ipVersion: 4 });
  const reader = await open<Record<string, unknown>>(path);
  const read = reader.get('203.0.113.9');
  t.deepEqual({ ...read, bytes: [...(read!.bytes as Uint8Array)] }, { ...record, bytes: [1, 2, 3] });
  t.is(reader.metadata.ipVersion, 4);
});
