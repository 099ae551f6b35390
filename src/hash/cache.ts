// SHA-256 of files, cached by what stat says about them, so an unchanged file
// costs one stat and no read — however large it is.
//
// KEY. path → (device, inode, size, mtime ns, ctime ns, hash). ctime moves on any
// write, chmod or rename-over and cannot be set from user space, so a tool that
// restores mtime after writing (`touch -r`, `utimes`) does not fool it; the inode
// catches a file renamed over another.
//
// RACY ENTRIES (git's "racily clean" problem). A timestamp is a tick of the
// kernel's coarse clock truncated to the filesystem's granularity (1 ns on
// ext4/xfs/btrfs/tmpfs but advanced only every jiffy, 1–10 ms; 1 s on ext3/HFS+;
// 2 s on FAT). If a file is read in the same tick as its last change, it can be
// changed again in that tick, after the read, without size or times moving, and
// its stale hash would be trusted forever. The rule used here:
//
//   When a file is hashed, `started` is the wall-clock time (Date.now, ns) taken
//   after the stat and before its content is read. The entry is CLEAN only if
//       max(mtime, ctime) < started − margin
//   and RACY otherwise. A racy entry is kept (and saved), but never trusted: the
//   file is read again next time, and the entry becomes clean once a read finds
//   the file old enough.
//
// Why it holds: any change after our read starts is stamped at least
// `started − (clock lag + granularity)`. If margin exceeds lag + granularity,
// that stamp is strictly later than the recorded one, so the stat key moves.
// (Unlike git, which compares with the index file's mtime, this compares with
// the moment the read began, so a slow hashing run cannot open a window between
// the read and the cache write.)
//
// The margin: a file whose ctime has no sub-second part is on a whole-second
// filesystem (or, one time in 10⁹, landed on a whole second): margin 3 s, which
// covers FAT's 2 s truncation plus clock lag. Otherwise the filesystem keeps
// sub-second times (≤ 10 ms granularity on everything Linux mounts) and the
// margin is 100 ms, ten times the worst jiffy. The margin also absorbs skew
// between our clock and a file server's, up to its size; a larger skew needs a
// larger `racyMarginNs`. Max(mtime, ctime) rather than ctime alone keeps files
// with future mtimes (clock skew, archives) racy: re-read every run until their
// time has passed — slow but never wrong.
//
// After reading, the file is stat-ed again: if it changed while being read, it is
// read again (up to 3 times) and, if it keeps changing, recorded racy.
//
// PERSISTENCE. A line file: a header `nodegraph-hashcache 2 <count> <sha256 of
// body>`, then one `<path>\t<hex>\t<r|->\t<dev>\t<ino>\t<size>\t<mtimeNs>\t<ctimeNs>`
// per entry (a path holding a tab, newline or leading quote is JSON-quoted).
// Loading checks the checksum and count, splits off the paths and keeps the rest
// of each line unparsed until that path is asked for. A file that fails any check
// is ignored with a warning. Saving happens only when an entry changed (a no-op
// run writes nothing), into a temporary file that is fsynced and renamed over.

import {
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
  type BigIntStats,
} from 'node:fs';
import { hash as oneShot } from 'node:crypto';
import path from 'node:path';
import { contentHash, type ContentHash } from '../ids.ts';
import { sha256FileAsync, sha256FileSync, type FileDigest } from './file.ts';

export type FileObservation =
  | { readonly kind: 'file'; readonly hash: ContentHash; readonly size: number; readonly mode: number }
  | { readonly kind: 'directory'; readonly mode: number }
  | { readonly kind: 'missing' }
  | { readonly kind: 'other' };

/** What the cache did, for tests and benchmarks (a no-op run: stats = files, contentReads = 0). */
export interface HashCacheStats {
  /** Path stats (one per hashFile call, plus one after each content read). */
  stats: number;
  /** Files whose content was read. */
  contentReads: number;
  bytesRead: number;
  /** hashFile calls answered from the cache. */
  hits: number;
}
/** @deprecated the earlier name of HashCacheStats */
export type HashCacheCounters = HashCacheStats;

/** Stats a path, following symlinks; undefined when nothing is there. */
export type StatFunction = (file: string) => BigIntStats | undefined;

export interface HashCacheOptions {
  /** Fixed racy margin in ns (see the rule above); default: 3 s on whole-second filesystems, else 100 ms. */
  readonly racyMarginNs?: bigint;
  /** Wall clock in ns since the epoch; default Date.now. For tests. */
  readonly now?: () => bigint;
  /** How paths are stat-ed; default statSync(p, { bigint: true }). For tests that simulate coarse filesystems. */
  readonly stat?: StatFunction;
}

interface Entry {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly hex: string;
  readonly racy: boolean;
  /** Looked at in this run. */
  seen: boolean;
}

const FORMAT = 'nodegraph-hashcache';
const VERSION = 2;
const COARSE_MARGIN_NS = 3_000_000_000n;
const FINE_MARGIN_NS = 100_000_000n;
const SECOND_NS = 1_000_000_000n;
/** Files above this size are read off the main thread by hashFileAsync. */
const ASYNC_THRESHOLD = 8 * 1024 * 1024;
const READ_ATTEMPTS = 3;
const HEX64 = /^[0-9a-f]{64}$/;
const NEEDS_QUOTING = /[\t\n\r]|^"/;

const defaultStat: StatFunction = (file) => statSync(file, { bigint: true, throwIfNoEntry: false });
const defaultNow = (): bigint => BigInt(Date.now()) * 1_000_000n;

const permissions = (st: BigIntStats): number => Number(st.mode & 0o7777n);

const sameFile = (a: BigIntStats, b: BigIntStats): boolean =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;

const encodePath = (p: string): string => (NEEDS_QUOTING.test(p) ? JSON.stringify(p) : p);

const formatEntry = (p: string, e: Entry): string =>
  `${encodePath(p)}\t${e.hex}\t${e.racy ? 'r' : '-'}\t${e.dev}\t${e.ino}\t${e.size}\t${e.mtimeNs}\t${e.ctimeNs}\n`;

/** Parses the part of a line after the path; undefined when malformed. */
function parseEntry(rest: string): Entry | undefined {
  const f = rest.split('\t');
  if (f.length !== 7) return undefined;
  const [hex, flag, dev, ino, size, mtime, ctime] = f as [string, string, string, string, string, string, string];
  if (!HEX64.test(hex) || (flag !== 'r' && flag !== '-')) return undefined;
  try {
    return {
      hex,
      racy: flag === 'r',
      dev: BigInt(dev),
      ino: BigInt(ino),
      size: BigInt(size),
      mtimeNs: BigInt(mtime),
      ctimeNs: BigInt(ctime),
      seen: false,
    };
  } catch {
    return undefined;
  }
}

type Loaded = { ok: true; entries: Map<string, Entry | string> } | { ok: false; reason: string };

function decode(data: Buffer): Loaded {
  const headerEnd = data.indexOf(10);
  if (headerEnd < 0) return { ok: false, reason: 'no header line' };
  const header = data.toString('latin1', 0, headerEnd).split(' ');
  if (header[0] !== FORMAT) return { ok: false, reason: 'not a nodegraph hash cache' };
  if (header[1] !== String(VERSION)) return { ok: false, reason: `format version ${header[1] ?? '?'} is not ${VERSION}` };
  const count = Number(header[2]);
  const sum = header[3];
  if (header.length !== 4 || !Number.isSafeInteger(count) || count < 0 || sum === undefined || !HEX64.test(sum)) {
    return { ok: false, reason: 'malformed header' };
  }
  const body = data.subarray(headerEnd + 1);
  if (oneShot('sha256', body, 'hex') !== sum) return { ok: false, reason: 'checksum mismatch (torn or corrupt)' };
  const text = body.toString('utf8');
  const entries = new Map<string, Entry | string>();
  let at = 0;
  while (at < text.length) {
    const end = text.indexOf('\n', at);
    const tab = text.indexOf('\t', at);
    if (end < 0 || tab < 0 || tab > end) return { ok: false, reason: `malformed entry ${entries.size + 1}` };
    let key = text.slice(at, tab);
    if (key.startsWith('"')) {
      try {
        key = JSON.parse(key) as string;
      } catch {
        return { ok: false, reason: `malformed path in entry ${entries.size + 1}` };
      }
    }
    entries.set(key, text.slice(tab + 1, end));
    at = end + 1;
  }
  if (entries.size !== count) return { ok: false, reason: `${entries.size} entries where the header says ${count}` };
  return { ok: true, entries };
}

export class HashCache {
  /** Where save() writes; undefined for a cache that is never saved. */
  readonly file: string | undefined;
  readonly counters: HashCacheStats = { stats: 0, contentReads: 0, bytesRead: 0, hits: 0 };
  /** Why the last save() failed, if it did (a failed save loses nothing but time). */
  saveError: string | undefined;
  /** Parsed entries, or the unparsed rest of their line as loaded. */
  readonly #entries: Map<string, Entry | string>;
  readonly #racyMargin: bigint | undefined;
  readonly #now: () => bigint;
  readonly #stat: StatFunction;
  #dirty: boolean;

  constructor(file?: string, options: HashCacheOptions = {}, entries?: Map<string, Entry | string>) {
    this.file = file;
    this.#entries = entries ?? new Map();
    this.#racyMargin = options.racyMarginNs;
    this.#now = options.now ?? defaultNow;
    this.#stat = options.stat ?? defaultStat;
    this.#dirty = false;
  }

  /**
   * Loads the cache saved at `file`. A missing file gives an empty cache; one that
   * is unreadable, torn, corrupt or of another version gives an empty cache and a
   * warning (it will be replaced on the next save that has something to write).
   */
  static load(file: string, options: HashCacheOptions = {}): { cache: HashCache; warning?: string } {
    let data: Buffer;
    try {
      data = readFileSync(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { cache: new HashCache(file, options) };
      return { cache: new HashCache(file, options), warning: `ignoring the hash cache ${file}: ${(error as Error).message}` };
    }
    const loaded = decode(data);
    if (!loaded.ok) {
      const cache = new HashCache(file, options);
      cache.#dirty = true;
      return { cache, warning: `ignoring the hash cache ${file}: ${loaded.reason}; files will be hashed again` };
    }
    return { cache: new HashCache(file, options, loaded.entries) };
  }

  /** Entries held (loaded or recorded). */
  get size(): number {
    return this.#entries.size;
  }

  /** True when save() would write. */
  get dirty(): boolean {
    return this.#dirty;
  }

  /**
   * Observes `file` (following symlinks): one stat, and a read of its content only
   * if the cache cannot vouch for it. Reads synchronously; see hashFileAsync for
   * large files when the event loop must stay free.
   */
  hashFile(file: string): FileObservation {
    const key = path.resolve(file);
    const st = this.#statOf(key);
    if (st === undefined || !st.isFile()) return this.#notFile(key, st);
    const hit = this.#lookup(key, st);
    if (hit !== undefined) return hit;
    let current = st;
    for (let attempt = 1; ; attempt++) {
      const started = this.#now();
      const digest = this.#read(key, () => sha256FileSync(key));
      if (digest === undefined) return this.#vanished(key);
      const after = this.#statOf(key);
      if (after === undefined || !after.isFile()) return this.#notFile(key, after);
      if (sameFile(current, after) || attempt === READ_ATTEMPTS) {
        return this.#record(key, after, digest, started, !sameFile(current, after));
      }
      current = after;
    }
  }

  /** As hashFile, but a large file's content is read off the main thread. */
  async hashFileAsync(file: string): Promise<FileObservation> {
    const key = path.resolve(file);
    const st = this.#statOf(key);
    if (st === undefined || !st.isFile()) return this.#notFile(key, st);
    const hit = this.#lookup(key, st);
    if (hit !== undefined) return hit;
    let current = st;
    for (let attempt = 1; ; attempt++) {
      const started = this.#now();
      const digest =
        current.size > BigInt(ASYNC_THRESHOLD)
          ? await this.#readAsync(key)
          : this.#read(key, () => sha256FileSync(key));
      if (digest === undefined) return this.#vanished(key);
      const after = this.#statOf(key);
      if (after === undefined || !after.isFile()) return this.#notFile(key, after);
      if (sameFile(current, after) || attempt === READ_ATTEMPTS) {
        return this.#record(key, after, digest, started, !sameFile(current, after));
      }
      current = after;
    }
  }

  /** Drops entries for paths not looked at in this run (a later save writes the smaller cache). */
  prune(): number {
    let dropped = 0;
    for (const [key, entry] of this.#entries) {
      if (typeof entry === 'string' || !entry.seen) {
        this.#entries.delete(key);
        dropped++;
      }
    }
    if (dropped > 0) this.#dirty = true;
    return dropped;
  }

  /**
   * Writes the cache if an entry changed since it was loaded or last saved: to a
   * temporary file beside it, fsynced, then renamed over it. True when it wrote;
   * false when there was nothing to write, no file, or the write failed (then
   * `saveError` says why — the cache only saves work, so losing it is not an error).
   */
  save(): boolean {
    if (!this.#dirty || this.file === undefined) return false;
    const lines: string[] = [];
    for (const [key, entry] of this.#entries) {
      lines.push(typeof entry === 'string' ? `${encodePath(key)}\t${entry}\n` : formatEntry(key, entry));
    }
    const body = Buffer.from(lines.join(''), 'utf8');
    const header = `${FORMAT} ${VERSION} ${lines.length} ${oneShot('sha256', body, 'hex')}\n`;
    const dir = path.dirname(this.file);
    const temp = `${this.file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    try {
      mkdirSync(dir, { recursive: true });
      const fd = openSync(temp, 'w', 0o644);
      try {
        writeAll(fd, Buffer.from(header, 'latin1'));
        writeAll(fd, body);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(temp, this.file);
      syncDirectory(dir);
    } catch (error) {
      rmSync(temp, { force: true });
      this.saveError = (error as Error).message;
      return false;
    }
    this.saveError = undefined;
    this.#dirty = false;
    return true;
  }

  #statOf(key: string): BigIntStats | undefined {
    this.counters.stats++;
    try {
      return this.#stat(key);
    } catch {
      // ENOTDIR, ELOOP, EACCES on a parent…: nothing we can read is there.
      return undefined;
    }
  }

  #notFile(key: string, st: BigIntStats | undefined): FileObservation {
    if (this.#entries.delete(key)) this.#dirty = true;
    if (st === undefined) return { kind: 'missing' };
    if (st.isDirectory()) return { kind: 'directory', mode: permissions(st) };
    return { kind: 'other' };
  }

  #vanished(key: string): FileObservation {
    if (this.#entries.delete(key)) this.#dirty = true;
    return { kind: 'missing' };
  }

  #lookup(key: string, st: BigIntStats): FileObservation | undefined {
    let entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (typeof entry === 'string') {
      const parsed = parseEntry(entry);
      if (parsed === undefined) return undefined;
      this.#entries.set(key, parsed);
      entry = parsed;
    }
    entry.seen = true;
    if (
      entry.racy ||
      entry.ino !== st.ino ||
      entry.size !== st.size ||
      entry.mtimeNs !== st.mtimeNs ||
      entry.ctimeNs !== st.ctimeNs ||
      entry.dev !== st.dev
    ) {
      return undefined;
    }
    this.counters.hits++;
    return { kind: 'file', hash: contentHash(entry.hex), size: Number(st.size), mode: permissions(st) };
  }

  #read(key: string, read: () => FileDigest): FileDigest | undefined {
    try {
      return this.#count(read());
    } catch (error) {
      if (vanishedError(error)) return undefined;
      throw error;
    }
  }

  async #readAsync(key: string): Promise<FileDigest | undefined> {
    try {
      return this.#count(await sha256FileAsync(key));
    } catch (error) {
      if (vanishedError(error)) return undefined;
      throw error;
    }
  }

  #count(digest: FileDigest): FileDigest {
    this.counters.contentReads++;
    this.counters.bytesRead += digest.bytes;
    return digest;
  }

  #record(key: string, st: BigIntStats, digest: FileDigest, started: bigint, unsettled: boolean): FileObservation {
    const hex = digest.hash.slice(7);
    const changed = st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs;
    const margin = this.#racyMargin ?? (st.ctimeNs % SECOND_NS === 0n ? COARSE_MARGIN_NS : FINE_MARGIN_NS);
    const racy = unsettled || changed >= started - margin;
    const old = this.#entries.get(key);
    const previous = typeof old === 'string' ? parseEntry(old) : old;
    if (
      previous === undefined ||
      previous.hex !== hex ||
      previous.racy !== racy ||
      previous.dev !== st.dev ||
      previous.ino !== st.ino ||
      previous.size !== st.size ||
      previous.mtimeNs !== st.mtimeNs ||
      previous.ctimeNs !== st.ctimeNs
    ) {
      this.#dirty = true;
    }
    this.#entries.set(key, {
      dev: st.dev,
      ino: st.ino,
      size: st.size,
      mtimeNs: st.mtimeNs,
      ctimeNs: st.ctimeNs,
      hex,
      racy,
      seen: true,
    });
    return { kind: 'file', hash: digest.hash, size: digest.bytes, mode: permissions(st) };
  }
}

const vanishedError = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
};

function writeAll(fd: number, data: Buffer): void {
  let at = 0;
  while (at < data.length) at += writeSync(fd, data, at, data.length - at);
}

/** Makes a rename durable; not every platform can open a directory, which is fine. */
function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, 'r');
    fsyncSync(fd);
  } catch {
    // Best effort.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
