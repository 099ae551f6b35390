// PERSISTENCE. A text header line `nodegraph-hashcache 3 <count> <sha256 of the
// body>`, then a binary body of records: u32 LE path length, the path (UTF-8),
// the 32-byte digest, a flags byte (1 = racy), then dev, ino, size, mtime ns and
// ctime ns as 64-bit LE integers. Binary so that loading parses no decimal
// bigints (five per entry, ~1 µs together: a fifth of a stat). Loading checks the checksum and the count,
// decodes only the paths, and parses a record when its path is first asked for;
// saving copies unchanged records byte for byte. A file that fails any check is
// ignored with a warning. Saving happens only when an entry changed (a no-op run
// writes nothing), into a temporary file that is renamed over. It is not
// fsynced: the cache only saves work, and whatever a power loss leaves (the
// old file, or a new one cut short) either passes the checksum and describes
// real files by their stat, or is ignored. Syncing cost a one-file change, such
// as a touched source, more than the no-op it otherwise is.
//

import { closeSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { StatFields } from './racy.ts';
const crypto = process.getBuiltinModule('node:crypto');

const NEWLINE = 0x0a;
export const FORMAT = 'nodegraph-hashcache';
export const VERSION = 3;
/** A SHA-256 digest's bytes: the first field of a record's fixed part. */
export const DIGEST_BYTES = 32;
/** Where a fixed part's flags byte lies (after the digest), and where its stat fields start. */
export const FLAGS_AT = DIGEST_BYTES;
export const STAT_AT = FLAGS_AT + 1;
/** Record bytes after the path: digest, flags, dev, ino, size, mtime, ctime. */
export const FIXED = STAT_AT + 5 * 8;
/** The flags byte's bit for a racy entry. */
export const RACY = 1;
/** Bytes of a record's path length, before the path. */
export const LENGTH_BYTES = 4;

// The stat fields a record holds, as the record holds them (int64 little-endian):
// written into these from a stat, they compare byte for byte without making a bigint.
const STAT_FIELDS = new BigInt64Array(5);
const STAT_BYTES = new Uint8Array(STAT_FIELDS.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A stat's dev, ino, size, mtime and ctime as a record holds them (int64 little-endian, 40 bytes) into `out` at `at`. */
export function writeStat(out: Buffer, at: number, st: Omit<StatFields, 'mode'>): void {
  if (LITTLE_ENDIAN) {
    // Through the typed array: writeBigInt64LE makes bigints of each half.
    STAT_FIELDS[0] = st.dev;
    STAT_FIELDS[1] = st.ino;
    STAT_FIELDS[2] = st.size;
    STAT_FIELDS[3] = st.mtimeNs;
    STAT_FIELDS[4] = st.ctimeNs;
    out.set(STAT_BYTES, at);
    return;
  }
  out.writeBigInt64LE(st.dev, at);
  out.writeBigInt64LE(st.ino, at + 8);
  out.writeBigInt64LE(st.size, at + 16);
  out.writeBigInt64LE(st.mtimeNs, at + 24);
  out.writeBigInt64LE(st.ctimeNs, at + 32);
}

/** Whether the record's dev, ino, size, mtime and ctime (40 bytes at `at`) are the stat's. */
export function storedStatIs(body: Buffer, at: number, st: StatFields): boolean {
  if (!LITTLE_ENDIAN) {
    return (
      body.readBigInt64LE(at) === st.dev &&
      body.readBigInt64LE(at + 8) === st.ino &&
      body.readBigInt64LE(at + 16) === st.size &&
      body.readBigInt64LE(at + 24) === st.mtimeNs &&
      body.readBigInt64LE(at + 32) === st.ctimeNs
    );
  }
  STAT_FIELDS[0] = st.dev;
  STAT_FIELDS[1] = st.ino;
  STAT_FIELDS[2] = st.size;
  STAT_FIELDS[3] = st.mtimeNs;
  STAT_FIELDS[4] = st.ctimeNs;
  for (let i = 0; i < 40; i++) if (body[at + i] !== STAT_BYTES[i]) return false;
  return true;
}

/** Where the fixed part of the record at `at` in a body starts (after its path). */
export const fixedAt = (body: Buffer, at: number): number => at + LENGTH_BYTES + body.readUInt32LE(at);

/** Whether the fixed part at `fixed` (in the body or the arena) was recorded racy: its flags byte, after the digest. */
export const racyAt = (bytes: Buffer, fixed: number): boolean => (bytes[fixed + FLAGS_AT]! & RACY) === RACY;

/**
 * Writes a record at `at`, its fixed part copied from `fixed` at `slot` (the arena); returns where the next one starts.
 * Byte by byte, not with Buffer's write(string, offset) and copy(target, at, start, end): each
 * of those makes a view of the buffer per call, megabytes of them over a whole save of a large
 * cache (at a run's end, where the heap is at its largest); this makes none.
 */
export function writeRecord(out: Buffer, at: number, key: string, pathBytes: number, fixed: Buffer, slot: number): number {
  out.writeUInt32LE(pathBytes, at);
  // As many bytes as UTF-16 units only when every one is ASCII.
  if (pathBytes === key.length) for (let k = 0; k < pathBytes; k++) out[at + 4 + k] = key.charCodeAt(k);
  else out.write(key, at + 4, pathBytes, 'utf8');
  const f = at + 4 + pathBytes;
  copyBytes(fixed, slot, FIXED, out, f);
  return f + FIXED;
}

/** `length` bytes of `from` at `start` into `to` at `at`, making no view (see writeRecord). */
export function copyBytes(from: Uint8Array, start: number, length: number, to: Uint8Array, at: number): number {
  for (let k = 0; k < length; k++) to[at + k] = from[start + k]!;
  return length;
}

/** Loaded: path → offset of its record in `body`, until parsed. */
export type Loaded = { ok: true; body: Buffer; sum: string; entries: Map<string, number> } | { ok: false; reason: string };

export function decode(data: Buffer): Loaded {
  if (data.length === 0) return { ok: false, reason: 'empty file' };
  const headerEnd = data.indexOf(NEWLINE);
  const header = data.toString('latin1', 0, headerEnd < 0 ? Math.min(data.length, 200) : headerEnd).split(' ');
  if (header[0] !== FORMAT) return { ok: false, reason: 'not a nodegraph hash cache' };
  if (headerEnd < 0) return { ok: false, reason: 'truncated header' };
  if (header[1] !== String(VERSION)) return { ok: false, reason: `format version ${header[1] ?? '?'} is not ${VERSION}` };
  const count = Number(header[2]);
  const sum = header[3];
  if (header.length !== 4 || !Number.isSafeInteger(count) || count < 0 || sum === undefined || !/^[0-9a-f]{64}$/.test(sum)) {
    return { ok: false, reason: 'malformed header' };
  }
  const body = data.subarray(headerEnd + 1);
  if (crypto.hash('sha256', body, 'hex') !== sum) return { ok: false, reason: 'checksum mismatch (torn or corrupt)' };
  const entries = new Map<string, number>();
  let at = 0;
  while (at < body.length) {
    const pathEnd = at + 4 + (at + 4 <= body.length ? body.readUInt32LE(at) : 0);
    if (at + 4 > body.length || pathEnd + FIXED > body.length) return { ok: false, reason: `record ${entries.size + 1} is cut short` };
    entries.set(body.toString('utf8', at + 4, pathEnd), at);
    at = pathEnd + FIXED;
  }
  if (entries.size !== count) return { ok: false, reason: `${entries.size} entries where the header says ${count}` };
  return { ok: true, body, sum, entries };
}

/** Writes all of `data`, at `position` if given (else at the file's offset). */
export function writeAll(fd: number, data: Buffer, position?: number): void {
  let at = 0;
  while (at < data.length) at += writeSync(fd, data, at, data.length - at, position === undefined ? null : position + at);
}

/** Visits records in order; puts one into `into` at `from`, returning where it ends. */
export type EachRecord = (visit: (entry: number, key: string) => void) => void;
export type PutRecord = (into: Buffer, from: number, key: string, entry: number, length: number) => number;

/**
 * Writes a whole cache of `lengths.length` records (`total` body bytes, each record's length in
 * `lengths`, in the order `each` visits them) to a temporary file beside `file`, renamed over it.
 * Into one buffer, or through a buffer of `chunk` bytes when the body is larger: a whole save comes
 * at a run's end, where a large build's heap is at its largest. Returns the body's checksum;
 * throws when it cannot write (the temporary file removed).
 */
export function writeWhole(file: string, lengths: Uint32Array, total: number, chunk: number, each: EachRecord, put: PutRecord): string {
  // The header names the body's checksum, 64 hex digits: its length is known before the body is.
  const head = `${FORMAT} ${VERSION} ${lengths.length} `;
  const headLength = head.length + 64 + 1;
  const streamed = total > chunk;
  const out = Buffer.allocUnsafe(streamed ? chunk : total);
  const hash = streamed ? crypto.createHash('sha256') : undefined;
  const temp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    mkdirSync(path.dirname(file), { recursive: true });
    const fd = openSync(temp, 'w', 0o644);
    let sum: string;
    try {
      let position = headLength;
      let at = 0;
      let i = 0;
      const flush = (bytes: Buffer): void => {
        hash!.update(bytes);
        writeAll(fd, bytes, position);
        position += bytes.length;
      };
      each((entry, key) => {
        const length = lengths[i++]!;
        if (streamed && at + length > out.length) {
          flush(out.subarray(0, at));
          at = 0;
        }
        // A record larger than the buffer (a path of a megabyte) goes out by itself.
        if (length > out.length) {
          const alone = Buffer.allocUnsafe(length);
          put(alone, 0, key, entry, length);
          flush(alone);
        } else at = put(out, at, key, entry, length);
      });
      if (streamed) flush(out.subarray(0, at));
      sum = hash === undefined ? crypto.hash('sha256', out, 'hex') : hash.digest('hex');
      if (!streamed) writeAll(fd, out, headLength);
      writeAll(fd, Buffer.from(`${head}${sum}\n`, 'latin1'), 0);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
    return sum;
  } catch (error) {
    try {
      rmSync(temp, { force: true });
    } catch {
      // Nothing was created.
    }
    throw error;
  }
}
