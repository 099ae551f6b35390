// A small read-only map kept in the fields of one object.
//
// Observe makes a map of input hashes for every task, and a build holds them
// all from the plan until each task has run. A Map of two entries and its hash
// table are about 180 bytes; a PairMap of two pairs is one object of 64, its
// first two pairs in fields of their own and any more in one flat array. Lookups
// walk the pairs, which for the few inputs most tasks have is no slower than
// hashing the key; smallMap gives a Map to a task with many.

/** Pairs above which a lookup's walk costs more than a hash: a Map then. */
export const WALK_MAX = 8;

/** A key slot with no pair in it (a Symbol no caller has). */
const NONE: unknown = Symbol('none');

/** `flat` (key, value, key, value…, each key once) as a PairMap, or a Map when it has more than a few pairs. */
export function smallMap<K, V>(flat: readonly (K | V)[]): ReadonlyMap<K, V> {
  if (flat.length <= 2 * WALK_MAX) return new PairMap<K, V>(flat);
  const map = new Map<K, V>();
  for (let i = 0; i < flat.length; i += 2) map.set(flat[i] as K, flat[i + 1] as V);
  return map;
}

export class PairMap<K, V> implements ReadonlyMap<K, V> {
  #k0: unknown = NONE;
  #v0: unknown = undefined;
  #k1: unknown = NONE;
  #v1: unknown = undefined;
  /** Key, value, key, value… after the first two pairs, or undefined. */
  #more: readonly (K | V)[] | undefined = undefined;

  /** `flat` as key, value, key, value…, each key once; read, not kept. */
  constructor(flat: readonly (K | V)[]) {
    if (flat.length >= 2) {
      this.#k0 = flat[0];
      this.#v0 = flat[1];
    }
    if (flat.length >= 4) {
      this.#k1 = flat[2];
      this.#v1 = flat[3];
    }
    if (flat.length > 4) this.#more = flat.slice(4);
  }

  get size(): number {
    if (this.#k0 === NONE) return 0;
    if (this.#k1 === NONE) return 1;
    return 2 + (this.#more === undefined ? 0 : this.#more.length >> 1);
  }

  get(key: K): V | undefined {
    if (this.#k0 === key) return this.#v0 as V;
    if (this.#k1 === key) return this.#v1 as V;
    const more = this.#more;
    if (more !== undefined) for (let i = 0; i < more.length; i += 2) if (more[i] === key) return more[i + 1] as V;
    return undefined;
  }

  has(key: K): boolean {
    if (this.#k0 === key || this.#k1 === key) return true;
    const more = this.#more;
    if (more !== undefined) for (let i = 0; i < more.length; i += 2) if (more[i] === key) return true;
    return false;
  }

  forEach(visit: (value: V, key: K, map: ReadonlyMap<K, V>) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) visit.call(thisArg, value, key, this);
  }

  *keys(): MapIterator<K> {
    if (this.#k0 === NONE) return;
    yield this.#k0 as K;
    if (this.#k1 === NONE) return;
    yield this.#k1 as K;
    const more = this.#more;
    if (more !== undefined) for (let i = 0; i < more.length; i += 2) yield more[i] as K;
  }

  *values(): MapIterator<V> {
    if (this.#k0 === NONE) return;
    yield this.#v0 as V;
    if (this.#k1 === NONE) return;
    yield this.#v1 as V;
    const more = this.#more;
    if (more !== undefined) for (let i = 0; i < more.length; i += 2) yield more[i + 1] as V;
  }

  *entries(): MapIterator<[K, V]> {
    if (this.#k0 === NONE) return;
    yield [this.#k0 as K, this.#v0 as V];
    if (this.#k1 === NONE) return;
    yield [this.#k1 as K, this.#v1 as V];
    const more = this.#more;
    if (more !== undefined) for (let i = 0; i < more.length; i += 2) yield [more[i] as K, more[i + 1] as V];
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }
}
