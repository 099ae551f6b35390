// A small read-only map kept as one flat array of keys and values.
//
// Observe makes a map of input hashes for every task, and a build holds them
// all from the plan until each task has run. A Map of two entries and its hash
// table are about 180 bytes; a PairMap and an array as long as its pairs about
// 120. Lookups walk the array, which for the few inputs most tasks have is no
// slower than hashing the key; smallMap gives a Map to a task with many.

/** Pairs above which a lookup's walk costs more than a hash: a Map then. */
const WALK_MAX = 8;

/** `flat` (key, value, key, value…, each key once) as a PairMap, or a Map when it has more than a few pairs. */
export function smallMap<K, V>(flat: readonly (K | V)[]): ReadonlyMap<K, V> {
  if (flat.length <= 2 * WALK_MAX) return new PairMap<K, V>(flat);
  const map = new Map<K, V>();
  for (let i = 0; i < flat.length; i += 2) map.set(flat[i] as K, flat[i + 1] as V);
  return map;
}

export class PairMap<K, V> implements ReadonlyMap<K, V> {
  /** Key, value, key, value… in insertion order, each key once. */
  readonly #flat: readonly (K | V)[];

  /** `flat` as key, value, key, value…, each key once; kept, not copied. */
  constructor(flat: readonly (K | V)[]) {
    this.#flat = flat;
  }

  get size(): number {
    return this.#flat.length >> 1;
  }

  #at(key: K): number {
    const flat = this.#flat;
    for (let i = 0; i < flat.length; i += 2) if (flat[i] === key) return i;
    return -1;
  }

  get(key: K): V | undefined {
    const i = this.#at(key);
    return i < 0 ? undefined : (this.#flat[i + 1] as V);
  }

  has(key: K): boolean {
    return this.#at(key) >= 0;
  }

  forEach(visit: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    const flat = this.#flat;
    for (let i = 0; i < flat.length; i += 2) visit.call(thisArg, flat[i + 1] as V, flat[i] as K, this);
  }

  *keys(): MapIterator<K> {
    const flat = this.#flat;
    for (let i = 0; i < flat.length; i += 2) yield flat[i] as K;
  }

  *values(): MapIterator<V> {
    const flat = this.#flat;
    for (let i = 0; i < flat.length; i += 2) yield flat[i + 1] as V;
  }

  *entries(): MapIterator<[K, V]> {
    const flat = this.#flat;
    for (let i = 0; i < flat.length; i += 2) yield [flat[i] as K, flat[i + 1] as V];
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }
}
