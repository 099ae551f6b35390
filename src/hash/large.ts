// A whole made of files (a tree, a glob's files, a task's outputs) hashed as one
// file is (cache.ts): each file answered from one stat, or read at once when
// small; a large one the cache cannot vouch for is left unread, then read off the
// main thread by hashFileAsync, which gives up between chunks on the signal, and
// the whole is hashed again with that file known. A whole of small or unchanged
// files costs one synchronous pass.

import type { FileObservation, HashCache } from './cache.ts';

/** How a whole looks at one of its files; undefined: a large file left unread (the whole made then is thrown away). */
export type Look = (file: string) => FileObservation | undefined;

/** Every file through the cache, read on the main thread whatever its size. */
export const lookThrough = (files: HashCache | Look): Look => (typeof files === 'function' ? files : (file) => files.hashFile(file));

/** A whole that met large files: none of them read yet. */
export class Unread<T> {
  readonly #cache: HashCache;
  readonly #whole: (look: Look) => T;
  readonly #large: readonly string[];

  constructor(cache: HashCache, whole: (look: Look) => T, large: readonly string[]) {
    this.#cache = cache;
    this.#whole = whole;
    this.#large = large;
  }

  /** Reads the large files off the main thread, then makes the whole with them known; on `signal` gives up (its reason thrown). */
  async read(signal: AbortSignal): Promise<T> {
    const read = new Map<string, FileObservation>();
    let large = this.#large;
    for (;;) {
      for (const file of large) read.set(file, await this.#cache.hashFileAsync(file, signal));
      const met: string[] = [];
      const whole = this.#whole((file) => {
        // A file just read may be recorded racy, so no hit: what was read stands for this pass.
        const seen = this.#cache.hashFileUnlessLarge(file) ?? read.get(file);
        if (seen === undefined) met.push(file);
        return seen;
      });
      if (met.length === 0) return whole;
      // Files that grew large since the last look.
      large = met;
    }
  }
}

/** The whole `whole` makes on the main thread; Unread when it met large files the cache cannot vouch for. */
export function hashUnlessLarge<T>(cache: HashCache, whole: (look: Look) => T): T | Unread<T> {
  let large: string[] | undefined;
  const made = whole((file) => {
    const seen = cache.hashFileUnlessLarge(file);
    if (seen === undefined) (large ??= []).push(file);
    return seen;
  });
  return large === undefined ? made : new Unread(cache, whole, large);
}

/** The whole `whole` makes, its large files read off the main thread; on `signal` given up (its reason thrown). */
export async function hashAsync<T>(cache: HashCache, signal: AbortSignal, whole: (look: Look) => T): Promise<T> {
  const first = hashUnlessLarge(cache, whole);
  return first instanceof Unread ? await first.read(signal) : first;
}
