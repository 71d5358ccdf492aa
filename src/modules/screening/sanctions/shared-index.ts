import { SanctionsIndex, type PlainSanctionsIndex } from './matcher.ts';

/** The kinds of typed array the index is made of. */
const INDEX_ARRAYS = [Int32Array, Uint16Array, Float32Array, Float64Array] as const;
type IndexArray = InstanceType<(typeof INDEX_ARRAYS)[number]>;

/**
 * A built sanctions index laid out in SharedArrayBuffers, so that handing it to a worker with
 * every task costs nothing: typed arrays share their memory, and the string and entry parts are
 * one JSON text in shared bytes that each worker parses once per list version.
 */
export interface SharedSanctionsIndex {
  version: string;
  json: Uint8Array;
  arrays: Record<string, IndexArray>;
}

type ArrayKey = { [K in keyof PlainSanctionsIndex]: PlainSanctionsIndex[K] extends IndexArray ? K : never }[keyof PlainSanctionsIndex];

function toShared<T extends IndexArray>(array: T): T {
  const shared = new (array.constructor as { new (buffer: SharedArrayBuffer): T })(new SharedArrayBuffer(array.byteLength));
  shared.set(array);
  return shared;
}

export function shareIndex(index: SanctionsIndex, version: string): SharedSanctionsIndex {
  const plain = index.toPlain();
  const arrays: Record<string, IndexArray> = {};
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(plain)) {
    if (INDEX_ARRAYS.some((kind) => value instanceof kind)) arrays[key] = toShared(value as IndexArray);
    else rest[key] = value;
  }
  const bytes = new TextEncoder().encode(JSON.stringify(rest));
  const json = new Uint8Array(new SharedArrayBuffer(bytes.byteLength));
  json.set(bytes);
  return { version, json, arrays };
}

let cached: { version: string; index: SanctionsIndex } | undefined;

/** The worker side: the index for this version, rebuilt only when the version changes. */
export function indexFor(shared: SharedSanctionsIndex): SanctionsIndex {
  if (cached?.version === shared.version) return cached.index;
  // TextDecoder refuses views on shared memory: copy the JSON bytes once per version.
  const rest = JSON.parse(new TextDecoder().decode(shared.json.slice())) as Omit<PlainSanctionsIndex, ArrayKey>;
  const index = SanctionsIndex.fromPlain({ ...rest, ...(shared.arrays as Pick<PlainSanctionsIndex, ArrayKey>) });
  cached = { version: shared.version, index };
  return index;
}
