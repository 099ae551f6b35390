// Where the entries made in a run keep their records' fixed parts, and how an
// entry's number says where its record lies and what was done with it.

import { FIXED } from './cache-format.ts';

/**
 * An entry made in this run (or read from the delta) is a number, as a loaded
 * one is: its record's fixed part (digest, flags, dev, ino, size, mtime, ctime:
 * FIXED bytes, as a record on disk holds them) lies in the cache's arena at a
 * slot, and its number is past every loaded record's offset (the body's
 * length, `base`), by four times the slot's index plus its SEEN and UNSAVED
 * flags; whether it is racy is the fixed part's own flag. A build of 50,000
 * tasks makes 100,000 of these: as objects of a slot and flags they would be 40
 * bytes each (4 MB), as five bigints and a hash string each about 300.
 */
export const made = (base: number, slot: number, flags: number): number => base + (slot / FIXED) * 4 + flags;

/** Looked at in this run. */
export const SEEN = 1;
/** Changed since the cache was last on disk: what a delta would append (a flag, not a set of keys beside the map: its table would be 2.5 MiB at 100,000). */
export const UNSAVED = 2;

/** Where entries' fixed parts go, FIXED bytes each, in a buffer that doubles when full (none until the first). */
export class Arena {
  bytes = Buffer.alloc(0);
  #used = 0;
  /** Room for `count` more fixed parts, made now: exactly that, where doubling might leave up to half unused. */
  reserve(count: number): void {
    const wanted = this.#used + count * FIXED;
    if (wanted > this.bytes.length) this.#growTo(wanted);
  }

  /** A slot for one fixed part, to be written whole before it is read. */
  take(): number {
    if (this.#used + FIXED > this.bytes.length) this.#growTo(Math.max(FIXED * 1024, this.bytes.length * 2));
    const slot = this.#used;
    this.#used += FIXED;
    return slot;
  }

  /** A buffer of `size` bytes with the used part copied over. */
  #growTo(size: number): void {
    const grown = Buffer.allocUnsafe(size);
    this.bytes.copy(grown, 0, 0, this.#used);
    this.bytes = grown;
  }
}

/** Whether an entry was made in this run (see `made`); else it is a loaded record's offset in a body of `base` bytes. */
export const isMade = (entry: number, base: number): boolean => entry >= base;

/** A made entry's slot in the arena. */
export const slotOf = (entry: number, base: number): number => Math.floor((entry - base) / 4) * FIXED;

/** A made entry's SEEN and UNSAVED flags. */
export const flagsOf = (entry: number, base: number): number => (entry - base) % 4;

/** A loaded record's offset in the body: stored complemented (negative) once the record was looked up. */
export const offsetOf = (entry: number): number => (entry < 0 ? ~entry : entry);
