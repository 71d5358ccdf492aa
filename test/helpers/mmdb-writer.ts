/**
 * A minimal writer of MaxMind DB files (https://maxmind.github.io/MaxMind-DB/), for tests that
 * need a real .mmdb read by the real `maxmind` reader. It writes: the binary search tree over
 * the address bits (24-bit records), the 16 zero bytes that separate it from the data section,
 * the data section, the "\xAB\xCD\xEFMaxMind.com" marker and the metadata map. IPv4 networks in
 * an IPv6 tree go under ::/96, where readers look for them. No pointers inside the data section
 * and no ::ffff:0:0/96 or 2002::/16 aliases: tiny fixtures do not need them.
 */
import { writeFile } from 'node:fs/promises';
import ipaddr from 'ipaddr.js';

export type MmdbValue =
  | string
  | number
  | bigint
  | boolean
  | Uint8Array
  | readonly MmdbValue[]
  | { readonly [key: string]: MmdbValue };

export interface MmdbNetwork {
  /** CIDR, IPv4 or IPv6 */
  network: string;
  data: MmdbValue;
}

export interface MmdbOptions {
  databaseType?: string;
  ipVersion?: 4 | 6;
  languages?: string[];
  description?: Record<string, string>;
  buildEpoch?: number;
}

export async function writeMmdb(path: string, networks: readonly MmdbNetwork[], options: MmdbOptions = {}): Promise<void> {
  await writeFile(path, buildMmdb(networks, options));
}

interface TreeNode {
  children: [TreeRecord, TreeRecord];
}
interface DataLeaf {
  dataOffset: number;
}
type TreeRecord = TreeNode | DataLeaf | null;

const DATA_SECTION_SEPARATOR = 16;
const RECORD_BITS = 24;
const METADATA_MARKER = Buffer.from('ABCDEF4D61784D696E642E636F6D', 'hex');

export function buildMmdb(networks: readonly MmdbNetwork[], options: MmdbOptions = {}): Buffer {
  const ipVersion = options.ipVersion ?? 6;
  const data = new DataSection();
  const root: TreeNode = { children: [null, null] };

  // Broad networks first, so a narrower one inserted later overrides only its own part.
  const parsed = networks.map(({ network, data: value }) => ({ ...toTreeBits(network, ipVersion), value }));
  parsed.sort((left, right) => left.prefix - right.prefix);
  for (const { bytes, prefix, value } of parsed) insert(root, bytes, prefix, { dataOffset: data.add(value) });

  const nodes = numberNodes(root);
  const nodeCount = nodes.size;
  const tree = Buffer.alloc(nodeCount * ((RECORD_BITS * 2) / 8));
  const recordValue = (record: TreeRecord): number => {
    if (record === null) return nodeCount;
    if ('children' in record) return nodes.get(record)!;
    return nodeCount + DATA_SECTION_SEPARATOR + record.dataOffset;
  };
  for (const [node, index] of nodes) {
    const [left, right] = node.children.map(recordValue) as [number, number];
    if (Math.max(left, right) >= 2 ** RECORD_BITS) throw new Error('database too large for 24-bit records');
    tree.writeUIntBE(left, index * 6, 3);
    tree.writeUIntBE(right, index * 6 + 3, 3);
  }

  const metadata = encodeMap([
    ['binary_format_major_version', encodeUnsigned(TYPE.uint16, 2)],
    ['binary_format_minor_version', encodeUnsigned(TYPE.uint16, 0)],
    ['build_epoch', encodeUnsigned(TYPE.uint64, BigInt(options.buildEpoch ?? Math.floor(Date.now() / 1000)))],
    ['database_type', encodeString(options.databaseType ?? 'GeoIP2-Country')],
    ['description', encodeValue(options.description ?? { en: 'Warden test fixture' })],
    ['ip_version', encodeUnsigned(TYPE.uint16, ipVersion)],
    ['languages', encodeValue(options.languages ?? ['en'])],
    ['node_count', encodeUnsigned(TYPE.uint32, nodeCount)],
    ['record_size', encodeUnsigned(TYPE.uint16, RECORD_BITS)],
  ]);

  return Buffer.concat([tree, Buffer.alloc(DATA_SECTION_SEPARATOR), data.bytes(), METADATA_MARKER, metadata]);
}

function toTreeBits(network: string, ipVersion: 4 | 6): { bytes: number[]; prefix: number } {
  const [address, prefix] = ipaddr.parseCIDR(network);
  if (prefix === 0) throw new Error(`${network}: a network must have at least one prefix bit`);
  if (address.kind() === 'ipv4') {
    const bytes = address.toByteArray();
    return ipVersion === 4 ? { bytes, prefix } : { bytes: [...new Array<number>(12).fill(0), ...bytes], prefix: prefix + 96 };
  }
  if (ipVersion === 4) throw new Error(`${network}: IPv6 network in an IPv4 database`);
  return { bytes: address.toByteArray(), prefix };
}

function bitAt(bytes: readonly number[], index: number): 0 | 1 {
  return (((bytes[index >> 3] ?? 0) >> (7 - (index & 7))) & 1) as 0 | 1;
}

function insert(root: TreeNode, bytes: readonly number[], prefix: number, leaf: DataLeaf): void {
  let node = root;
  for (let depth = 0; depth < prefix - 1; depth++) {
    const bit = bitAt(bytes, depth);
    const child = node.children[bit];
    if (child !== null && 'children' in child) {
      node = child;
      continue;
    }
    // An empty record, or a broader network's leaf that has to be split around the new one.
    const next: TreeNode = { children: [child, child] };
    node.children[bit] = next;
    node = next;
  }
  node.children[bitAt(bytes, prefix - 1)] = leaf;
}

function numberNodes(root: TreeNode): Map<TreeNode, number> {
  const numbers = new Map<TreeNode, number>([[root, 0]]);
  const queue = [root];
  for (let next = 0; next < queue.length; next++) {
    for (const child of queue[next]!.children) {
      if (child !== null && 'children' in child && !numbers.has(child)) {
        numbers.set(child, numbers.size);
        queue.push(child);
      }
    }
  }
  return numbers;
}

class DataSection {
  private readonly chunks: Buffer[] = [];
  private readonly offsets = new Map<string, number>();
  private length = 0;

  /** Identical records are stored once, as real databases do. */
  add(value: MmdbValue): number {
    const encoded = encodeValue(value);
    const key = encoded.toString('hex');
    const known = this.offsets.get(key);
    if (known !== undefined) return known;
    const offset = this.length;
    this.chunks.push(encoded);
    this.offsets.set(key, offset);
    this.length += encoded.length;
    return offset;
  }

  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

const TYPE = {
  utf8: 2,
  double: 3,
  bytes: 4,
  uint16: 5,
  uint32: 6,
  map: 7,
  int32: 8,
  uint64: 9,
  uint128: 10,
  array: 11,
  boolean: 14,
} as const;

/** Control byte: type in the top 3 bits (0 = extended, next byte holds type - 7), size below. */
function controlBytes(type: number, size: number): Buffer {
  const typeBits = type <= 7 ? type << 5 : 0;
  const extendedType = type <= 7 ? [] : [type - 7];
  if (size < 29) return Buffer.from([typeBits | size, ...extendedType]);
  if (size < 29 + 256) return Buffer.from([typeBits | 29, ...extendedType, size - 29]);
  if (size < 285 + 65536) {
    const rest = size - 285;
    return Buffer.from([typeBits | 30, ...extendedType, rest >> 8, rest & 0xff]);
  }
  const rest = size - 65821;
  return Buffer.from([typeBits | 31, ...extendedType, (rest >> 16) & 0xff, (rest >> 8) & 0xff, rest & 0xff]);
}

function encodeValue(value: MmdbValue): Buffer {
  if (typeof value === 'string') return encodeString(value);
  if (typeof value === 'boolean') return controlBytes(TYPE.boolean, value ? 1 : 0);
  if (typeof value === 'bigint') return encodeUnsigned(value < 2n ** 64n ? TYPE.uint64 : TYPE.uint128, value);
  if (typeof value === 'number') return encodeNumber(value);
  if (value instanceof Uint8Array) return Buffer.concat([controlBytes(TYPE.bytes, value.length), value]);
  if (Array.isArray(value)) {
    const items = value as readonly MmdbValue[];
    return Buffer.concat([controlBytes(TYPE.array, items.length), ...items.map(encodeValue)]);
  }
  return encodeMap(Object.entries(value).map(([key, item]) => [key, encodeValue(item)]));
}

function encodeNumber(value: number): Buffer {
  if (Number.isInteger(value) && value >= 0 && value < 2 ** 32) return encodeUnsigned(TYPE.uint32, value);
  if (Number.isInteger(value) && value >= -(2 ** 31) && value < 0) {
    const payload = Buffer.alloc(4);
    payload.writeInt32BE(value);
    return Buffer.concat([controlBytes(TYPE.int32, 4), payload]);
  }
  const payload = Buffer.alloc(8);
  payload.writeDoubleBE(value);
  return Buffer.concat([controlBytes(TYPE.double, 8), payload]);
}

function encodeString(value: string): Buffer {
  const payload = Buffer.from(value, 'utf8');
  return Buffer.concat([controlBytes(TYPE.utf8, payload.length), payload]);
}

/** Big-endian with no leading zero bytes; zero has an empty payload. */
function encodeUnsigned(type: number, value: number | bigint): Buffer {
  const bytes: number[] = [];
  for (let rest = BigInt(value); rest > 0n; rest >>= 8n) bytes.unshift(Number(rest & 0xffn));
  return Buffer.concat([controlBytes(type, bytes.length), Buffer.from(bytes)]);
}

function encodeMap(entries: readonly (readonly [string, Buffer])[]): Buffer {
  return Buffer.concat([
    controlBytes(TYPE.map, entries.length),
    ...entries.flatMap(([key, value]) => [encodeString(key), value]),
  ]);
}
