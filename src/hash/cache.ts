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
// The stat recorded is an fstat of the open file taken after reading it: if it
// differs from the path's stat taken before, the file changed (or was replaced)
// while being read, and it is read again (up to 3 times); if it keeps changing,
// the last read is returned and recorded racy.
//
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

import {
  closeSync,
  constants,
  fstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
  type BigIntStats,
} from 'node:fs';
import path from 'node:path';
import { contentHash, HASH_PREFIX, type ContentHash } from '../ids.ts';
import { sha256FdSync, sha256HandleAsync, type FileDigest } from './file.ts';
const crypto = process.getBuiltinModule('node:crypto');

export type FileObservation =
  | { readonly kind: 'file'; readonly hash: ContentHash; readonly size: number; readonly mode: number }
  | { readonly kind: 'directory'; readonly mode: number }
  | { readonly kind: 'missing' }
  | { readonly kind: 'other' };

/** What the cache did, for tests and benchmarks (a no-op run: stats = files, contentReads = 0). */
export interface HashCacheStats {
  /** stat calls: one per hashFile call, plus an fstat after each content read. */
  stats: number;
  /** Files whose content was read. */
  contentReads: number;
  bytesRead: number;
  /** hashFile calls answered from the cache. */
  hits: number;
}

export interface HashCacheOptions {
  /** Fixed racy margin in ns (see the rule above); default: 3 s on whole-second filesystems, else 100 ms. */
  readonly racyMarginNs?: bigint;
  /** Wall clock in ns since the epoch; default Date.now. For tests. */
  readonly now?: () => bigint;
  /**
   * Rewrites every stat result (of a path or of an open file) before the cache
   * sees it. For tests that simulate another filesystem, e.g. whole-second
   * timestamps or a ctime that never moves.
   */
  readonly simulateStat?: (st: BigIntStats) => BigIntStats;
  /** Most records a delta holds; default 1,024 (0: every save is whole). */
  readonly deltaMax?: number;
  /** Bytes a whole save writes at a time once the body is larger; default SAVE_CHUNK. For tests. */
  readonly saveChunk?: number;
}

interface Read {
  readonly digest: FileDigest;
  /** fstat of the file read, after reading it. */
  readonly after: BigIntStats;
}

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
const made = (base: number, slot: number, flags: number): number => base + (slot / FIXED) * 4 + flags;

/** Looked at in this run. */
const SEEN = 1;
/** Changed since the cache was last on disk: what a delta would append (a flag, not a set of keys beside the map: its table would be 2.5 MiB at 100,000). */
const UNSAVED = 2;

/** Where entries' fixed parts go, FIXED bytes each, in a buffer that doubles when full (none until the first). */
class Arena {
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

const FORMAT = 'nodegraph-hashcache';
const VERSION = 3;
const COARSE_MARGIN_NS = 3_000_000_000n;
const FINE_MARGIN_NS = 100_000_000n;
const SECOND_NS = 1_000_000_000n;
/** Files above this size are read off the main thread by hashFileAsync. */
const ASYNC_THRESHOLD = 8n * 1024n * 1024n;
const READ_ATTEMPTS = 3;
/** Record bytes after the path: digest, flags, dev, ino, size, mtime, ctime. */
const FIXED = 32 + 1 + 5 * 8;
/** Bytes a whole save writes at a time once its body is larger (one buffer below). */
const SAVE_CHUNK = 1 << 20;
const DELTA_FORMAT = 'nodegraph-hashcache-delta';
const DELTA_VERSION = 1;
/** A delta record's checksum: the first 16 bytes of its SHA-256. */
const DELTA_SUM = 16;
/** Most records a delta holds: each costs every later load a few µs, a whole save 1 µs an entry once. */
const DELTA_MAX = 1024;
/** ...and at most an eighth of the entries, once it holds more than this. */
const DELTA_FLOOR = 64;
const deltaPath = (file: string): string => `${file}.delta`;

/** O_NONBLOCK: if a fifo took the file's place since the stat, open must not wait for a writer. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;
const defaultNow = (): bigint => BigInt(Date.now()) * 1_000_000n;

/**
 * The rule of RACY ENTRIES above: whether a file with this stat, whose read began at
 * `started` (wall clock, ns), can be known by its stat from now on. `margin`: a
 * fixed one, else 3 s on a whole-second filesystem and 100 ms on any other.
 */
/** What the cache keys a file by, from one stat (bigint: nanosecond times). */
export interface StatFields {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly mode: bigint;
}

export function settledAt(st: Pick<StatFields, 'mtimeNs' | 'ctimeNs'>, started: bigint = defaultNow(), margin?: bigint): boolean {
  const changed = st.mtimeNs > st.ctimeNs ? st.mtimeNs : st.ctimeNs;
  return changed < started - (margin ?? (st.ctimeNs % SECOND_NS === 0n ? COARSE_MARGIN_NS : FINE_MARGIN_NS));
}

// File types from the mode as a number: BigIntStats.isFile() builds bigints on every call.
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const isRegular = (st: StatFields): boolean => (Number(st.mode) & S_IFMT) === S_IFREG;
const permissions = (st: StatFields): number => Number(st.mode) & 0o7777;

/** Matches what path.resolve would change in an absolute path: `//`, `/./`, `/../`, a trailing `/`. */
const NOT_NORMAL = /\/\/|\/\.\.?(?:\/|$)|.\/$/;
/** The cache key: the absolute, normalized path (path.resolve only when needed: ~1 µs a call, a fifth of a hit). */
const keyOf = (file: string): string =>
  path.sep === '/' && file.charCodeAt(0) === 47 && !NOT_NORMAL.test(file) ? file : path.resolve(file);

const sameFile = (a: StatFields, b: StatFields): boolean =>
  a.dev === b.dev && a.ino === b.ino && a.size === b.size && a.mtimeNs === b.mtimeNs && a.ctimeNs === b.ctimeNs;

/** A loaded record's offset in the body: stored complemented (negative) once the record was looked up. */
const offsetOf = (entry: number): number => (entry < 0 ? ~entry : entry);

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
function storedStatIs(body: Buffer, at: number, st: StatFields): boolean {
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
const fixedAt = (body: Buffer, at: number): number => at + 4 + body.readUInt32LE(at);

/** Whether the fixed part at `fixed` (in the body or the arena) was recorded racy: its flags byte, after the digest. */
const racyAt = (bytes: Buffer, fixed: number): boolean => (bytes[fixed + 32]! & 1) === 1;

/**
 * Writes a record at `at`, its fixed part copied from the arena; returns where the next one starts.
 * Byte by byte, not with Buffer's write(string, offset) and copy(target, at, start, end): each
 * of those makes a view of the buffer per call, megabytes of them over a whole save of a large
 * cache (at a run's end, where the heap is at its largest); this makes none.
 */
function writeRecord(out: Buffer, at: number, key: string, pathBytes: number, slot: number, arena: Arena): number {
  out.writeUInt32LE(pathBytes, at);
  // As many bytes as UTF-16 units only when every one is ASCII.
  if (pathBytes === key.length) for (let k = 0; k < pathBytes; k++) out[at + 4 + k] = key.charCodeAt(k);
  else out.write(key, at + 4, pathBytes, 'utf8');
  const f = at + 4 + pathBytes;
  copyBytes(arena.bytes, slot, FIXED, out, f);
  return f + FIXED;
}

/** `length` bytes of `from` at `start` into `to` at `at`, making no view (see writeRecord). */
function copyBytes(from: Uint8Array, start: number, length: number, to: Uint8Array, at: number): number {
  for (let k = 0; k < length; k++) to[at + k] = from[start + k]!;
  return length;
}

/** Loaded: path → offset of its record in `body`, until parsed. */
type Loaded = { ok: true; body: Buffer; sum: string; entries: Map<string, number> } | { ok: false; reason: string };

function decode(data: Buffer): Loaded {
  if (data.length === 0) return { ok: false, reason: 'empty file' };
  const headerEnd = data.indexOf(10);
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

/**
 * Applies a delta (see DELTA) over `entries` if it extends the body whose checksum
 * is `sum`. Returns how many records it applied, and whether it ended cleanly
 * (false: a record was cut short or corrupt, and the rest was ignored).
 */
function applyDelta(data: Buffer, sum: string, entries: Map<string, number>, base: number, arena: Arena): { records: number; clean: boolean } {
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

export class HashCache {
  /** Where save() writes; undefined for a cache that is never saved. */
  readonly file: string | undefined;
  readonly counters: HashCacheStats = { stats: 0, contentReads: 0, bytesRead: 0, hits: 0 };
  /** Why the last save() failed, if it did (a failed save loses nothing but time). */
  saveError: string | undefined;
  /**
   * The offset of a loaded record in #body (complemented once looked up: see #lookup), or, from the
   * body's length on, an entry made in this run (see `made`).
   */
  #entries: Map<string, number>;
  /** The body of the loaded cache file. */
  #body: Buffer;
  /** The fixed parts of the entries that are not records of the body as loaded. */
  readonly #arena = new Arena();
  readonly #racyMargin: bigint | undefined;
  readonly #now: () => bigint;
  readonly #simulate: ((st: BigIntStats) => BigIntStats) | undefined;
  readonly #deltaMax: number | undefined;
  readonly #saveChunk: number;
  /** How many entries are unsaved (UNSAVED). */
  #unsaved = 0;
  /** Only a whole save brings the file up to date: an entry was dropped, or the file was unreadable. */
  #rewrite = false;
  /** The checksum of the cache body on disk, when there is one a delta can extend. */
  #sum: string | undefined;
  /** Records in the delta on disk that extends #sum; whether it can be appended to. */
  #deltaRecords = 0;
  #deltaClean = true;

  /** An empty cache; `file` is where save() writes (none: never saved). Use load() to start from a saved one. */
  constructor(file?: string, options: HashCacheOptions = {}) {
    this.file = file;
    this.#entries = new Map();
    this.#body = Buffer.alloc(0);
    this.#racyMargin = options.racyMarginNs;
    this.#now = options.now ?? defaultNow;
    this.#simulate = options.simulateStat;
    this.#deltaMax = options.deltaMax;
    this.#saveChunk = options.saveChunk ?? SAVE_CHUNK;
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
      cache.#rewrite = true;
      return { cache, warning: `ignoring the hash cache ${file}: ${loaded.reason}; files will be hashed again` };
    }
    const cache = new HashCache(file, options);
    cache.#entries = loaded.entries;
    cache.#body = loaded.body;
    cache.#sum = loaded.sum;
    let delta: Buffer | undefined;
    try {
      delta = readFileSync(deltaPath(file));
    } catch {
      // None (or unreadable): the cache as saved whole.
    }
    if (delta !== undefined) {
      const applied = applyDelta(delta, loaded.sum, loaded.entries, loaded.body.length, cache.#arena);
      cache.#deltaRecords = applied.records;
      // A delta of another body, or with a bad tail, is not appended to: the next save is whole.
      cache.#deltaClean = applied.clean;
    }
    return { cache };
  }

  /** Entries held (loaded or recorded). */
  get size(): number {
    return this.#entries.size;
  }

  /** Whether an entry for `file` (a path as the cache keys it) is held: no stat, no read. */
  has(file: string): boolean {
    return this.#entries.has(file);
  }

  /** True when save() would write. */
  get dirty(): boolean {
    return this.#unsaved > 0 || this.#rewrite;
  }

  /**
   * Observes `file` (following symlinks): one stat, and a read of its content only
   * if the cache cannot vouch for it. Reads synchronously; see hashFileAsync for
   * large files when the event loop must stay free.
   */
  hashFile(file: string): FileObservation {
    const key = keyOf(file);
    let st = this.#statOf(key);
    if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    const hit = this.#lookup(key, st);
    if (hit !== undefined) return hit;
    for (let attempt = 1; ; attempt++) {
      const started = this.#now();
      const size = st.size;
      const read = this.#attempt(attempt, () => this.#readSync(key, size));
      const done = this.#conclude(key, st, read, started, attempt);
      if (done !== undefined) return done;
      // Changed (or replaced) while we read it: look again.
      st = this.#statOf(key);
      if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    }
  }

  /** As hashFile, but a large file's content is read off the main thread. */
  async hashFileAsync(file: string): Promise<FileObservation> {
    const key = keyOf(file);
    let st = this.#statOf(key);
    if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    const hit = this.#lookup(key, st);
    if (hit !== undefined) return hit;
    for (let attempt = 1; ; attempt++) {
      const started = this.#now();
      const size = st.size;
      const read =
        size > ASYNC_THRESHOLD
          ? await this.#attemptAsync(attempt, () => this.#readAsync(key))
          : this.#attempt(attempt, () => this.#readSync(key, size));
      const done = this.#conclude(key, st, read, started, attempt);
      if (done !== undefined) return done;
      st = this.#statOf(key);
      if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    }
  }

  /**
   * Makes room at once for the entries of `files` files, when this cache is
   * empty (a first run, where every file gets an entry): a build of 50,000
   * tasks makes 100,000, and an arena doubled as they come held its last
   * smaller buffer too until a collection (4.7 MB). A cache loaded from disk
   * makes entries only for what changed, and grows as needed.
   */
  reserve(files: number): void {
    if (this.#entries.size === 0) this.#arena.reserve(files);
  }

  /** Drops entries for paths not looked at in this run (a later save writes the smaller cache). */
  prune(): number {
    let dropped = 0;
    // forEach, not for-of over entries: that makes a [key, entry] pair per entry (11 MB at 100,000).
    const entries = this.#entries;
    entries.forEach((entry, key) => {
      if (this.#isMade(entry) ? (this.#flagsOf(entry) & SEEN) === 0 : entry >= 0) {
        // Never one made in this run (made seen), so never an unsaved one.
        entries.delete(key);
        dropped++;
      }
    });
    if (dropped > 0) {
      this.#rewrite = true;
    }
    return dropped;
  }

  /**
   * Writes the cache if an entry changed since it was loaded or last saved: to a
   * temporary file beside it, then renamed over it (not fsynced: see PERSISTENCE). True when it wrote;
   * false when there was nothing to write, no file, or the write failed (then
   * `saveError` says why — the cache only saves work, so losing it is not an error).
   */
  save(): boolean {
    if (!this.dirty || this.file === undefined) return false;
    const appendable =
      this.#sum !== undefined &&
      !this.#rewrite &&
      this.#deltaClean &&
      this.#deltaRecords + this.#unsaved <= Math.min(this.#deltaMax ?? DELTA_MAX, Math.max(DELTA_FLOOR, this.#entries.size >> 3));
    return appendable ? this.#appendDelta(this.file) : this.#saveWhole(this.file);
  }

  /** Appends the changed entries to the delta (see DELTA); starts it when it has no records yet. */
  #appendDelta(file: string): boolean {
    const parts: Buffer[] = [];
    if (this.#deltaRecords === 0) parts.push(Buffer.from(`${DELTA_FORMAT} ${DELTA_VERSION} ${this.#sum}\n`, 'latin1'));
    // forEach, not for-of (see prune). In the map's order: each key is in a delta once, so any order reads the same.
    this.#entries.forEach((entry, key) => {
      if (!this.#isMade(entry) || (this.#flagsOf(entry) & UNSAVED) === 0) return;
      const n = Buffer.byteLength(key, 'utf8');
      const length = 4 + n + FIXED;
      const out = Buffer.allocUnsafe(4 + length + DELTA_SUM);
      out.writeUInt32LE(length, 0);
      writeRecord(out, 4, key, n, this.#slotOf(entry), this.#arena);
      out.write(crypto.hash('sha256', out.subarray(4, 4 + length), 'hex').slice(0, 2 * DELTA_SUM), 4 + length, DELTA_SUM, 'hex');
      parts.push(out);
    });
    const records = parts.length - (this.#deltaRecords === 0 ? 1 : 0);
    try {
      // One write: appends of concurrent runs (plan takes no lock) stay whole records.
      const fd = openSync(deltaPath(file), this.#deltaRecords === 0 ? 'w' : 'a', 0o644);
      try {
        writeAll(fd, Buffer.concat(parts));
      } finally {
        closeSync(fd);
      }
    } catch (error) {
      this.saveError = (error as Error).message;
      return false;
    }
    this.#deltaRecords += records;
    this.#saved();
    this.saveError = undefined;
    return true;
  }

  #saveWhole(file: string): boolean {
    // Sizes first; then the records, copied as loaded or written from the arena, into one
    // buffer, or through a buffer of #saveChunk bytes when the body is larger: a whole save
    // comes at a run's end, where a large build's heap is at its largest.
    const body = this.#body;
    const arena = this.#arena;
    let total = 0;
    let i = 0;
    // forEach, not for-of: no [key, entry] pair made per entry (see prune). Each record's length in one typed array.
    const lengths = new Uint32Array(this.#entries.size);
    this.#entries.forEach((entry, key) => {
      const path = this.#isMade(entry) ? Buffer.byteLength(key, 'utf8') : body.readUInt32LE(offsetOf(entry));
      total += lengths[i++] = 4 + path + FIXED;
    });
    // The header names the body's checksum, 64 hex digits: its length is known before the body is.
    const head = `${FORMAT} ${VERSION} ${this.#entries.size} `;
    const headLength = head.length + 64 + 1;
    const streamed = total > this.#saveChunk;
    const out = Buffer.allocUnsafe(streamed ? this.#saveChunk : total);
    const hash = streamed ? crypto.createHash('sha256') : undefined;
    const dir = path.dirname(file);
    const temp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    let sum: string;
    try {
      mkdirSync(dir, { recursive: true });
      const fd = openSync(temp, 'w', 0o644);
      try {
        let position = headLength;
        let at = 0;
        const flush = (bytes: Buffer): void => {
          hash!.update(bytes);
          writeAll(fd, bytes, position);
          position += bytes.length;
        };
        // A record into `into` at `from`: one as loaded (unparsed, or parsed and unchanged) copied byte
        // for byte, one made in this run written from the arena. Where it ends.
        const put = (into: Buffer, from: number, key: string, entry: number, length: number): number =>
          this.#isMade(entry)
            ? writeRecord(into, from, key, length - 4 - FIXED, this.#slotOf(entry), arena)
            : from + copyBytes(body, offsetOf(entry), length, into, from);
        i = 0;
        this.#entries.forEach((entry, key) => {
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
    } catch (error) {
      try {
        rmSync(temp, { force: true });
      } catch {
        // Nothing was created.
      }
      this.saveError = (error as Error).message;
      return false;
    }
    // The delta extended the body just replaced: nothing reads it now.
    try {
      rmSync(deltaPath(file), { force: true });
    } catch {
      // Left behind, it names another body and is ignored.
    }
    this.#sum = sum;
    this.#deltaRecords = 0;
    this.#deltaClean = true;
    this.#saved();
    this.#rewrite = false;
    this.saveError = undefined;
    return true;
  }

  /** Every entry is on disk as it is now. */
  #saved(): void {
    if (this.#unsaved > 0) {
      const entries = this.#entries;
      // Setting a key the walk has passed, or is at, neither adds nor revisits one.
      entries.forEach((entry, key) => {
        if (this.#isMade(entry) && (this.#flagsOf(entry) & UNSAVED) !== 0) entries.set(key, entry - UNSAVED);
      });
    }
    this.#unsaved = 0;
  }

  /** Sets `key`'s entry, made in this run; unsaved when it changed, or when the entry it replaces was still unsaved (as a key stayed in a set of them). */
  #put(key: string, old: number | undefined, slot: number, changed: boolean): void {
    const before = old !== undefined && this.#isMade(old) && (this.#flagsOf(old) & UNSAVED) !== 0;
    this.#entries.set(key, made(this.#body.length, slot, SEEN | (changed || before ? UNSAVED : 0)));
    if (changed && !before) this.#unsaved++;
  }

  /** Whether an entry was made in this run (see `made`); else it is a loaded record's offset. */
  #isMade(entry: number): boolean {
    return entry >= this.#body.length;
  }

  /** A made entry's slot in the arena. */
  #slotOf(entry: number): number {
    return Math.floor((entry - this.#body.length) / 4) * FIXED;
  }

  /** A made entry's SEEN and UNSAVED flags. */
  #flagsOf(entry: number): number {
    return (entry - this.#body.length) % 4;
  }

  #statOf(key: string): BigIntStats | undefined {
    this.counters.stats++;
    let st: BigIntStats | undefined;
    try {
      st = statSync(key, { bigint: true, throwIfNoEntry: false });
    } catch {
      // ENOTDIR, ELOOP, EACCES on a parent…: nothing we can read is there.
      return undefined;
    }
    return st === undefined || this.#simulate === undefined ? st : this.#simulate(st);
  }

  #notFile(key: string, st: StatFields | undefined): FileObservation {
    const old = this.#entries.get(key);
    if (old !== undefined) {
      this.#entries.delete(key);
      if (this.#isMade(old) && (this.#flagsOf(old) & UNSAVED) !== 0) this.#unsaved--;
      this.#rewrite = true;
    }
    if (st === undefined) return { kind: 'missing' };
    if ((Number(st.mode) & S_IFMT) === S_IFDIR) return { kind: 'directory', mode: permissions(st) };
    return { kind: 'other' };
  }

  #lookup(key: string, st: StatFields): FileObservation | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (!this.#isMade(entry)) {
      // A loaded record is compared where it lies in the body: a hit builds no
      // entry and no bigint (a no-op looks up every file). It is marked seen
      // by storing its offset complemented.
      const f = this.#loadedFields(key, entry);
      if (f < 0 || !storedStatIs(this.#body, f + 33, st)) return undefined;
      return this.#loadedHit(f, Number(st.size), permissions(st));
    }
    if ((this.#flagsOf(entry) & SEEN) === 0) this.#entries.set(key, entry + SEEN);
    const arena = this.#arena.bytes;
    const slot = this.#slotOf(entry);
    if (racyAt(arena, slot) || !storedStatIs(arena, slot + 33, st)) return undefined;
    this.counters.hits++;
    return { kind: 'file', hash: contentHash(arena.toString('hex', slot, slot + 32)), size: Number(st.size), mode: permissions(st) };
  }

  /** Marks a loaded record seen; where its fields start in the body, or -1 when it is recorded racy. */
  #loadedFields(key: string, entry: number): number {
    const at = offsetOf(entry);
    if (entry >= 0) this.#entries.set(key, ~at);
    const f = fixedAt(this.#body, at);
    return racyAt(this.#body, f) ? -1 : f;
  }

  #loadedHit(f: number, size: number, mode: number): FileObservation {
    this.counters.hits++;
    return { kind: 'file', hash: contentHash(this.#body.toString('hex', f, f + 32)), size, mode };
  }

  /** Reads and hashes the file, then fstats it: the stat recorded is of the very file read. */
  #readSync(key: string, size: bigint): Read {
    const fd = openSync(key, OPEN_FLAGS);
    try {
      // Reads `size` bytes, not up to EOF: a file that grew fails the size check after.
      const digest = sha256FdSync(fd, Number(size));
      this.counters.stats++;
      return this.#counted(digest, fstatSync(fd, { bigint: true }));
    } finally {
      closeSync(fd);
    }
  }

  async #readAsync(key: string): Promise<Read> {
    // node:fs/promises only when a large file needs it: a no-op does not load it.
    const handle = await process.getBuiltinModule('node:fs/promises').open(key, OPEN_FLAGS);
    try {
      const digest = await sha256HandleAsync(handle);
      this.counters.stats++;
      return this.#counted(digest, await handle.stat({ bigint: true }));
    } finally {
      await handle.close();
    }
  }

  #counted(digest: FileDigest, after: BigIntStats): Read {
    this.counters.contentReads++;
    this.counters.bytesRead += digest.bytes;
    return { digest, after: this.#simulate === undefined ? after : this.#simulate(after) };
  }

  /**
   * The answer once a read is done: the file as read if it did not change while
   * being read (or, on the last attempt, if it is still a file: recorded racy);
   * undefined to look again.
   */
  #conclude(key: string, st: StatFields, read: Read | undefined, started: bigint, attempt: number): FileObservation | undefined {
    if (read === undefined) return undefined;
    const last = attempt === READ_ATTEMPTS;
    if (!isRegular(read.after)) return last ? this.#notFile(key, read.after) : undefined;
    const settled = sameFile(st, read.after);
    return settled || last ? this.#record(key, read.after, read.digest, started, !settled) : undefined;
  }

  /** Runs a read; undefined when the file changed under it in a way a new look may explain. */
  #attempt(attempt: number, read: () => Read): Read | undefined {
    try {
      return read();
    } catch (error) {
      if (attempt < READ_ATTEMPTS && changedUnderUs(error)) return undefined;
      throw error;
    }
  }

  async #attemptAsync(attempt: number, read: () => Promise<Read>): Promise<Read | undefined> {
    try {
      return await read();
    } catch (error) {
      if (attempt < READ_ATTEMPTS && changedUnderUs(error)) return undefined;
      throw error;
    }
  }

  /** Whether `old`'s fixed part (a loaded record's or an arena slot's) is byte for byte the one at `slot`. */
  #sameFixed(old: number | undefined, slot: number): boolean {
    if (old === undefined) return false;
    const arena = this.#arena.bytes;
    if (this.#isMade(old)) {
      const at = this.#slotOf(old);
      return arena.compare(arena, slot, slot + FIXED, at, at + FIXED) === 0;
    }
    const at = fixedAt(this.#body, offsetOf(old));
    return this.#body.compare(arena, slot, slot + FIXED, at, at + FIXED) === 0;
  }

  #record(key: string, st: StatFields, digest: FileDigest, started: bigint, unsettled: boolean): FileObservation {
    const racy = unsettled || !settledAt(st, started, this.#racyMargin);
    const old = this.#entries.get(key);
    const slot = this.#arena.take();
    const arena = this.#arena.bytes;
    arena.write(digest.hash.slice(HASH_PREFIX), slot, 32, 'hex');
    arena[slot + 32] = racy ? 1 : 0;
    writeStat(arena, slot + 33, st);
    // Only a settled entry is worth a save: a racy one is read again next time
    // whether it is saved or not (an older entry left on disk no longer matches
    // the file's stat). A touch just before a run then writes nothing. The same
    // digest, flags and stat as before, byte for byte, are nothing to save either.
    this.#put(key, old, slot, !racy && !this.#sameFixed(old, slot));
    return { kind: 'file', hash: digest.hash, size: digest.bytes, mode: permissions(st) };
  }
}

/** Errors from opening or reading a path that was a regular file at its stat and is no longer. */
const changedUnderUs = (error: unknown): boolean => {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR' || code === 'ELOOP' || code === 'EAGAIN' || code === 'ENXIO';
};

/** Writes all of `data`, at `position` if given (else at the file's offset). */
function writeAll(fd: number, data: Buffer, position?: number): void {
  let at = 0;
  while (at < data.length) at += writeSync(fd, data, at, data.length - at, position === undefined ? null : position + at);
}
