/**
 * IP risk (the customer's ip_address_score): 0-100, higher is riskier, with the reasons, the
 * kind of address and, when a MaxMind database is configured, its country. The context (list
 * files, database) is opened once with createIpRiskContext; scoreIp is synchronous.
 *
 * The score is the sum of the weights of the reasons found, clamped to 0-100:
 *
 * | reason                | weight | when                                                            |
 * |-----------------------|-------:|-----------------------------------------------------------------|
 * | no_ip                 |      0 | no address given (kind missing): nothing to judge               |
 * | invalid_ip            |     60 | not a dotted-quad IPv4 or an IPv6 address (kind invalid)        |
 * | bogon_address         |     60 | IPv6 outside 2000::/3, never allocated for unicast (kind bogon) |
 * | reserved_address      |     50 | special-purpose range, not a host's own address                 |
 * | documentation_address |     50 | example ranges (192.0.2.0/24, 2001:db8::/32): made up           |
 * | multicast_address     |     50 | a group address can never be a customer's                       |
 * | loopback_address      |     30 | the merchant sent its own host's address                        |
 * | link_local_address    |     30 | only meaningful on one network segment                          |
 * | private_address       |     20 | RFC 1918 / unique-local: the merchant sent an internal address  |
 * | cgnat_address         |     20 | carrier-grade NAT space, seen only inside an ISP                |
 * | tor_exit              |     70 | listed in the Tor exit list file                                |
 * | datacenter            |     30 | listed in the data-centre ranges file: hosting, VPN or proxy    |
 * | country_mismatch      |     30 | geolocated country differs from the customer's country          |
 * | country_unknown       |     10 | a database is configured but has no country for the address     |
 *
 * Non-public addresses are unverifiable rather than proven fraud, so they weigh less than the
 * anonymity signals; the ones that cannot come from a real client (documentation, reserved,
 * multicast, bogon) weigh more than the ones a misconfigured merchant proxy produces (private,
 * loopback). Lists and geolocation apply to public addresses only.
 */
import { readFile } from 'node:fs/promises';
import countries from 'i18n-iso-countries/index.js';
import english from 'i18n-iso-countries/langs/en.json' with { type: 'json' };
import ipaddr from 'ipaddr.js';
import { open, type CountryResponse, type Reader } from 'maxmind';
import { isIpAddress, parseStrictIp } from '../../net/ip-ranges.ts';

countries.registerLocale(english);

export const IP_RISK_WEIGHTS = {
  no_ip: 0,
  invalid_ip: 60,
  bogon_address: 60,
  reserved_address: 50,
  documentation_address: 50,
  multicast_address: 50,
  loopback_address: 30,
  link_local_address: 30,
  private_address: 20,
  cgnat_address: 20,
  tor_exit: 70,
  datacenter: 30,
  country_mismatch: 30,
  country_unknown: 10,
} as const;

export type IpRiskReason = keyof typeof IP_RISK_WEIGHTS;

export type IpKind =
  | 'public'
  | 'private'
  | 'cgnat'
  | 'loopback'
  | 'link_local'
  | 'multicast'
  | 'documentation'
  | 'reserved'
  | 'bogon'
  | 'invalid'
  | 'missing';

export interface IpRiskInput {
  ip: string | null | undefined;
  /** ISO 3166-1 alpha-2, alpha-3 or an English country name. */
  customerCountry?: string | null;
}

export interface IpRiskResult {
  score: number;
  reasons: IpRiskReason[];
  /** ISO 3166-1 alpha-2 from geolocation; null without a database or a public address. */
  country: string | null;
  kind: IpKind;
}

export interface IpRiskContext {
  readonly geo: Reader<CountryResponse> | null;
  readonly datacenter: IpNetworkSet | null;
  readonly tor: IpNetworkSet | null;
}

export interface IpRiskOptions {
  /** A GeoIP2/GeoLite2 Country or City .mmdb file (or another vendor's in that layout). */
  geoipDbPath?: string;
  /** One IP or CIDR per line; "#" and ";" start comments. */
  datacenterListPath?: string;
  torListPath?: string;
}

export async function createIpRiskContext(options: IpRiskOptions): Promise<IpRiskContext> {
  const [geo, datacenter, tor] = await Promise.all([
    options.geoipDbPath ? openCountryDatabase(options.geoipDbPath) : null,
    options.datacenterListPath ? readNetworkList(options.datacenterListPath) : null,
    options.torListPath ? readNetworkList(options.torListPath) : null,
  ]);
  return { geo, datacenter, tor };
}

async function openCountryDatabase(path: string): Promise<Reader<CountryResponse>> {
  const reader = await open<CountryResponse>(path);
  // An ASN or anonymous-IP database opens fine and then never yields a country: refuse it at start.
  if (!/country|city/i.test(reader.metadata.databaseType)) {
    throw new Error(`${path} is a ${reader.metadata.databaseType} database, not a country or city database`);
  }
  return reader;
}

async function readNetworkList(path: string): Promise<IpNetworkSet> {
  return IpNetworkSet.fromListText(await readFile(path, 'utf8'), path);
}

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type RangeTable = Record<string, [Address, number][]>;

/**
 * Special-purpose ranges from the IANA IPv4 and IPv6 Special-Purpose Address Registries, grouped
 * by the kind reported. IPv4-mapped IPv6 (::ffff:0:0/96) is absent because parseIp folds it to
 * IPv4 first. Public IPv6 is 2000::/3; anything else not listed here is a bogon.
 *
 * | kind          | IPv4                                           | IPv6                                         |
 * |---------------|------------------------------------------------|----------------------------------------------|
 * | loopback      | 127.0.0.0/8                                    | ::1/128                                      |
 * | private       | 10/8, 172.16/12, 192.168/16 (RFC 1918)         | fc00::/7 (ULA), fec0::/10 (old site-local),  |
 * |               |                                                | 64:ff9b:1::/48 (local NAT64, RFC 8215)       |
 * | cgnat         | 100.64.0.0/10 (RFC 6598)                       |                                              |
 * | link_local    | 169.254.0.0/16                                 | fe80::/10                                    |
 * | multicast     | 224.0.0.0/4                                    | ff00::/8                                     |
 * | documentation | 192.0.2/24, 198.51.100/24, 203.0.113/24        | 2001:db8::/32, 3fff::/20 (RFC 9637)          |
 * | reserved      | 0/8 (this network), 192.0.0/24 (IETF),         | ::/128, 64:ff9b::/96 (NAT64, RFC 6052),      |
 * |               | 192.88.99/24 (6to4 relay), 198.18/15 (bench),  | 100::/64 (discard), 2001::/23 (IETF, Teredo  |
 * |               | 240/4 (future use, broadcast)                  | included)                                    |
 */
const SPECIAL_RANGES: RangeTable = parseRangeTable({
  loopback: ['127.0.0.0/8', '::1/128'],
  private: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7', 'fec0::/10', '64:ff9b:1::/48'],
  cgnat: ['100.64.0.0/10'],
  link_local: ['169.254.0.0/16', 'fe80::/10'],
  multicast: ['224.0.0.0/4', 'ff00::/8'],
  documentation: ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', '2001:db8::/32', '3fff::/20'],
  reserved: [
    '0.0.0.0/8',
    '192.0.0.0/24',
    '192.88.99.0/24',
    '198.18.0.0/15',
    '240.0.0.0/4',
    '::/128',
    '64:ff9b::/96',
    '100::/64',
    '2001::/23',
  ],
});

const IPV6_GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');

function parseRangeTable(table: Record<string, string[]>): RangeTable {
  return Object.fromEntries(
    Object.entries(table).map(([kind, ranges]) => [kind, ranges.map((range) => ipaddr.parseCIDR(range))]),
  );
}

const KIND_REASON: Record<Exclude<IpKind, 'public'>, IpRiskReason> = {
  private: 'private_address',
  cgnat: 'cgnat_address',
  loopback: 'loopback_address',
  link_local: 'link_local_address',
  multicast: 'multicast_address',
  documentation: 'documentation_address',
  reserved: 'reserved_address',
  bogon: 'bogon_address',
  invalid: 'invalid_ip',
  missing: 'no_ip',
};

/** Room for the longest IPv6 text (45 characters) and an interface zone; longer is never an address. */
const MAX_IP_TEXT_LENGTH = 64;

export function scoreIp(input: IpRiskInput, context: IpRiskContext): IpRiskResult {
  const text = typeof input.ip === 'string' ? input.ip.trim() : '';
  if (text === '') return nonPublic('missing');
  const address = text.length <= MAX_IP_TEXT_LENGTH ? parseStrictIp(text) : null;
  if (!address) return nonPublic('invalid');
  const kind = classify(address);
  if (kind !== 'public') return nonPublic(kind);

  const reasons: IpRiskReason[] = [];
  if (context.tor?.has(address)) reasons.push('tor_exit');
  if (context.datacenter?.has(address)) reasons.push('datacenter');
  let country: string | null = null;
  if (context.geo) {
    country = geolocate(context.geo, address);
    if (!country) reasons.push('country_unknown');
    else if (isOtherCountry(input.customerCountry, country)) reasons.push('country_mismatch');
  }
  return { score: scoreOf(reasons), reasons, country, kind };
}

function nonPublic(kind: Exclude<IpKind, 'public'>): IpRiskResult {
  const reason = KIND_REASON[kind];
  return { score: IP_RISK_WEIGHTS[reason], reasons: [reason], country: null, kind };
}

function scoreOf(reasons: readonly IpRiskReason[]): number {
  const sum = reasons.reduce((total, reason) => total + IP_RISK_WEIGHTS[reason], 0);
  return Math.min(100, Math.max(0, sum));
}

function classify(address: Address): IpKind {
  const kind = ipaddr.subnetMatch(address, SPECIAL_RANGES, 'public') as IpKind;
  if (kind === 'public' && address.kind() === 'ipv6' && !address.match(IPV6_GLOBAL_UNICAST)) return 'bogon';
  return kind;
}

/**
 * MaxMind's country is where the address is used; registered_country (where the block is
 * registered) is the fallback for networks such as anycast ranges that have no usage country.
 */
function geolocate(geo: Reader<CountryResponse>, address: Address): string | null {
  // An IPv4-only database walked with 128 bits returns garbage instead of failing.
  if (address.kind() === 'ipv6' && geo.metadata.ipVersion === 4) return null;
  const record = geo.get(address.toString());
  return record?.country?.iso_code ?? record?.registered_country?.iso_code ?? null;
}

function isOtherCountry(customerCountry: string | null | undefined, country: string): boolean {
  if (typeof customerCountry !== 'string') return false;
  const customer = countryToAlpha2(customerCountry);
  return customer !== null && customer !== country.toUpperCase();
}

/** Name lookups scan every country name (about 15 µs); customers' countries repeat, so they are kept. */
const resolvedCountries = new Map<string, string | null>();
const MAX_RESOLVED_COUNTRIES = 4096;

/** ISO 3166-1 alpha-2 for an alpha-2 or alpha-3 code or an English name ("UK", "Czech Republic"). */
export function countryToAlpha2(country: string): string | null {
  const text = country.trim();
  const known = resolvedCountries.get(text);
  if (known !== undefined) return known;
  const resolved = resolveCountry(text);
  if (resolvedCountries.size >= MAX_RESOLVED_COUNTRIES) resolvedCountries.clear();
  resolvedCountries.set(text, resolved);
  return resolved;
}

function resolveCountry(text: string): string | null {
  const upper = text.toUpperCase();
  if (upper.length === 2 && countries.isValid(upper)) return upper;
  if (upper.length === 3) {
    const alpha2 = countries.alpha3ToAlpha2(upper);
    if (alpha2) return alpha2;
  }
  return countries.getAlpha2Code(text, 'en') ?? null;
}

/**
 * Addresses and CIDR ranges indexed by prefix length: a lookup is one hash probe per distinct
 * prefix length in the list. IpRangeList (src/net/ip-ranges.ts) scans every entry and re-parses
 * the address on each call, about 60 µs per lookup on a 4,000-range data-centre list; this stays
 * under a microsecond for IPv4. Parsing follows parseIp, so IPv4-mapped entries and addresses
 * meet as IPv4.
 */
export class IpNetworkSet {
  private readonly v4 = new Map<number, { mask: number; networks: Set<number> }>();
  private readonly v6 = new Map<number, { mask: bigint; networks: Set<bigint> }>();
  private entryCount = 0;

  /** One entry per line; "#" and ";" start comments (Tor bulk lists, FireHOL and Spamhaus DROP files). */
  static fromListText(text: string, source: string): IpNetworkSet {
    const set = new IpNetworkSet();
    text.split('\n').forEach((line, index) => {
      const entry = line.replace(/[#;].*/, '').trim();
      if (entry !== '' && !set.add(entry)) {
        throw new Error(`${source}:${index + 1}: "${entry}" is not an IP address or CIDR range`);
      }
    });
    return set;
  }

  get size(): number {
    return this.entryCount;
  }

  /** Adds an address or CIDR range; false when the entry is neither. */
  add(entry: string): boolean {
    const network = parseNetwork(entry);
    if (!network) return false;
    const [address, bits] = network;
    if (address.kind() === 'ipv4') {
      let bucket = this.v4.get(bits);
      if (!bucket) this.v4.set(bits, (bucket = { mask: ipv4Mask(bits), networks: new Set() }));
      bucket.networks.add((ipv4Value(address as ipaddr.IPv4) & bucket.mask) >>> 0);
    } else {
      let bucket = this.v6.get(bits);
      if (!bucket) this.v6.set(bits, (bucket = { mask: ipv6Mask(bits), networks: new Set() }));
      bucket.networks.add(ipv6Value(address as ipaddr.IPv6) & bucket.mask);
    }
    this.entryCount++;
    return true;
  }

  has(address: Address): boolean {
    if (address.kind() === 'ipv4') {
      const value = ipv4Value(address as ipaddr.IPv4);
      for (const { mask, networks } of this.v4.values()) {
        if (networks.has((value & mask) >>> 0)) return true;
      }
      return false;
    }
    if (this.v6.size === 0) return false;
    const value = ipv6Value(address as ipaddr.IPv6);
    for (const { mask, networks } of this.v6.values()) {
      if (networks.has(value & mask)) return true;
    }
    return false;
  }
}

/** Strict like isIpAddress (no "10/8" or "0x7f.1" shorthands, which ipaddr.parseCIDR accepts). */
function parseNetwork(entry: string): [Address, number] | null {
  const [addressText = '', bitsText, extra] = entry.split('/');
  if (extra !== undefined || !isIpAddress(addressText)) return null;
  const address = ipaddr.parse(addressText);
  const width = address.kind() === 'ipv4' ? 32 : 128;
  const bits = bitsText === undefined ? width : /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : width + 1;
  if (bits > width) return null;
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) {
    return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
  }
  return [address, bits];
}

function ipv4Value(address: ipaddr.IPv4): number {
  const [a = 0, b = 0, c = 0, d = 0] = address.octets;
  return ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
}

function ipv4Mask(bits: number): number {
  return bits === 0 ? 0 : (0xffffffff << (32 - bits)) >>> 0;
}

function ipv6Value(address: ipaddr.IPv6): bigint {
  let value = 0n;
  for (const part of address.parts) value = (value << 16n) | BigInt(part);
  return value;
}

function ipv6Mask(bits: number): bigint {
  return ((1n << BigInt(bits)) - 1n) << BigInt(128 - bits);
}
