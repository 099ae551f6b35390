// A small read-only map kept as one flat array of keys and values.
//
// Observe makes one map of input hashes for every task, and a build holds them
// all from the plan until each task has run: a Map of two entries is about
// 430 bytes (its hash table is allocated for eight), which at 50,000 tasks is
// some 21 MiB at the plan. This is an object and an array, about 90 bytes.
// Lookups walk the array: for the few entries a task's inputs have, that is
// no slower than hashing the key.

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
