// DELTA. A run that changed a few entries (a touched or edited source) appends them
// to `<file>.delta` instead of rewriting the whole cache, 10 MB at 100,000 files:
// a line `nodegraph-hashcache-delta 1 <sha256 of the cache body it extends>`, then
// per entry a u32 LE length, the record as in the body, and the first 16 bytes of
// the record's SHA-256. Loading applies it over the cache whose body it names,
// later records winning, and stops at the first record that is cut short or fails
// its checksum (a crash while appending); a delta naming another body is ignored.
// A save rewrites the whole cache (and so orphans the delta) when an entry was
// dropped, when there is no cache file to extend, when the delta's tail was bad,
// or when the delta would hold more than 1,024 records (about 3 ms to load) or
// more than an eighth of the entries (past 64): a delta that every later load
// applies must stay small beside the cache it extends. A
// stale entry in a delta is harmless either way: it describes a file by a stat
// the file no longer has. The delta is not fsynced either.


import { closeSync, openSync } from 'node:fs';
import { made, type Arena } from './arena.ts';
import { FIXED, LENGTH_BYTES, writeAll, writeRecord } from './cache-format.ts';
const crypto = process.getBuiltinModule('node:crypto');

const DELTA_FORMAT = 'nodegraph-hashcache-delta';
const DELTA_VERSION = 1;
/** A delta record's checksum: the first 16 bytes of its SHA-256. */
const DELTA_SUM = 16;
/** Most records a delta holds: each costs every later load a few µs, a whole save 1 µs an entry once. */
export const DELTA_MAX = 1024;
/** ...and at most an eighth of the entries, once it holds more than this. */
const DELTA_FLOOR = 64;
export const deltaPath = (file: string): string => `${file}.delta`;

/** Whether a delta that holds `records` can take `more` in a cache of `entries` (see DELTA). */
export const deltaFits = (records: number, more: number, entries: number, max = DELTA_MAX): boolean =>
  records + more <= Math.min(max, Math.max(DELTA_FLOOR, entries >> 3));

/** The first line of a delta over the body whose checksum is `sum`. */
export const deltaHeader = (sum: string): Buffer => Buffer.from(`${DELTA_FORMAT} ${DELTA_VERSION} ${sum}\n`, 'latin1');

/** One delta record: its length, the record as a body holds it (its fixed part from `fixed` at `slot`), its checksum. */
export function deltaRecord(key: string, fixed: Buffer, slot: number): Buffer {
  const n = Buffer.byteLength(key, 'utf8');
  const length = LENGTH_BYTES + n + FIXED;
  const out = Buffer.allocUnsafe(LENGTH_BYTES + length + DELTA_SUM);
  out.writeUInt32LE(length, 0);
  writeRecord(out, LENGTH_BYTES, key, n, fixed, slot);
  const end = LENGTH_BYTES + length;
  out.write(crypto.hash('sha256', out.subarray(LENGTH_BYTES, end), 'hex').slice(0, 2 * DELTA_SUM), end, DELTA_SUM, 'hex');
  return out;
}

/** Writes `parts` to the delta of `file` in one write (appends of concurrent runs stay whole records); `start`: a new delta. Throws on failure. */
export function writeDelta(file: string, parts: Buffer[], start: boolean): void {
  const fd = openSync(deltaPath(file), start ? 'w' : 'a', 0o644);
  try {
    writeAll(fd, Buffer.concat(parts));
  } finally {
    closeSync(fd);
  }
}

/**
 * Applies a delta (see DELTA) over `entries` if it extends the body whose checksum
 * is `sum`. Returns how many records it applied, and whether it ended cleanly
 * (false: a record was cut short or corrupt, and the rest was ignored).
 */
export function applyDelta(data: Buffer, sum: string, entries: Map<string, number>, base: number, arena: Arena): { records: number; clean: boolean } {
  const headerEnd = data.indexOf(10);
  if (headerEnd < 0 || data.toString('latin1', 0, headerEnd) !== `${DELTA_FORMAT} ${DELTA_VERSION} ${sum}`) return { records: 0, clean: false };
  let records = 0;
  let at = headerEnd + 1;
  while (at < data.length) {
    if (at + 4 > data.length) return { records, clean: false };
    const length = data.readUInt32LE(at);
    const end = at + 4 + length;
    if (length < 4 + FIXED || end + DELTA_SUM > data.length) return { records, clean: false };
    const record = data.subarray(at + 4, end);
    const pathBytes = record.readUInt32LE(0);
    const digest = Buffer.from(crypto.hash('sha256', record, 'hex').slice(0, 2 * DELTA_SUM), 'hex');
    if (!digest.equals(data.subarray(end, end + DELTA_SUM)) || 4 + pathBytes + FIXED !== length) return { records, clean: false };
    const slot = arena.take();
    record.copy(arena.bytes, slot, 4 + pathBytes, 4 + pathBytes + FIXED);
    entries.set(record.toString('utf8', 4, 4 + pathBytes), made(base, slot, 0));
    records++;
    at = end + DELTA_SUM;
  }
  return { records, clean: true };
}

