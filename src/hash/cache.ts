// SHA-256 of files, cached by what stat says about them, so an unchanged file
// costs one stat and no read — however large it is.
//
// KEY. path → (device, inode, size, mtime ns, ctime ns, hash). ctime moves on any
// write, chmod or rename-over and cannot be set from user space, so a tool that
// restores mtime after writing (`touch -r`, `utimes`) does not fool it; the inode
// catches a file renamed over another.
//
// The parts: the racy-stat rule (racy.ts, RACY ENTRIES), the file's binary
// format (cache-format.ts, PERSISTENCE), the delta file a small save appends to
// (cache-delta.ts, DELTA) and the arena that holds the entries a run makes
// (arena.ts).

import { readFileSync, rmSync, statSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import { contentHash, HASH_PREFIX, type ContentHash } from '../ids.ts';
import { Arena, flagsOf, isMade, made, offsetOf, SEEN, slotOf, UNSAVED } from './arena.ts';
import { applyDelta, deltaFits, deltaHeader, deltaPath, deltaRecord, writeDelta } from './cache-delta.ts';
import { copyBytes, decode, DIGEST_BYTES, FIXED, FLAGS_AT, fixedAt, LENGTH_BYTES, racyAt, RACY, STAT_AT, storedStatIs, writeRecord, writeStat, writeWhole } from './cache-format.ts';
import { changedUnderUs, hashAndStat, hashAndStatAsync, type FileDigest, type HashedFile } from './file.ts';
import { defaultNow, sameFile, settledAt, type StatFields } from './racy.ts';

export { settledAt, type StatFields } from './racy.ts';
export { writeStat } from './cache-format.ts';

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

/** Files above this size are read off the main thread by hashFileAsync. */
const ASYNC_THRESHOLD = 8n * 1024n * 1024n;
const READ_ATTEMPTS = 3;
/** Bytes a whole save writes at a time once its body is larger (one buffer below). */
const SAVE_CHUNK = 1 << 20;

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
    const st = this.#statOf(key);
    if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    return this.#lookup(key, st) ?? this.#readSync(key, st);
  }

  /** As hashFile, but undefined (nothing read) for a file above ASYNC_THRESHOLD the cache cannot vouch for: hashFileAsync reads it. */
  hashFileUnlessLarge(file: string): FileObservation | undefined {
    const key = keyOf(file);
    const st = this.#statOf(key);
    if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    return this.#lookup(key, st) ?? (st.size > ASYNC_THRESHOLD ? undefined : this.#readSync(key, st));
  }

  /** Reads the content of `key` (its stat: `first`) on the main thread, looking again if it changes under the read. */
  #readSync(key: string, first: BigIntStats): FileObservation {
    let st: BigIntStats | undefined = first;
    for (let attempt = 1; ; attempt++) {
      const started = this.#now();
      const size = st.size;
      const read = this.#attempt(attempt, () => hashAndStat(key, Number(size)));
      const done = this.#conclude(key, st, read, started, attempt);
      if (done !== undefined) return done;
      // Changed (or replaced) while we read it: look again.
      st = this.#statOf(key);
      if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    }
  }

  /** What is at `file` (following symlinks), from one stat: its content is neither read nor cached. */
  kindOf(file: string): FileObservation['kind'] {
    const st = this.#statOf(keyOf(file));
    if (st === undefined) return 'missing';
    if (isRegular(st)) return 'file';
    return (Number(st.mode) & S_IFMT) === S_IFDIR ? 'directory' : 'other';
  }

  /** As hashFile, but a large file's content is read off the main thread, and on `signal` given up (its reason thrown). */
  async hashFileAsync(file: string, signal?: AbortSignal): Promise<FileObservation> {
    const key = keyOf(file);
    let st = this.#statOf(key);
    if (st === undefined || !isRegular(st)) return this.#notFile(key, st);
    const hit = this.#lookup(key, st);
    if (hit !== undefined) return hit;
    for (let attempt = 1; ; attempt++) {
      const started = this.#now();
      const size = st.size;
      const read = size > ASYNC_THRESHOLD ? await this.#attemptAsync(attempt, () => hashAndStatAsync(key, signal)) : this.#attempt(attempt, () => hashAndStat(key, Number(size)));
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
      deltaFits(this.#deltaRecords, this.#unsaved, this.#entries.size, this.#deltaMax);
    return appendable ? this.#appendDelta(this.file) : this.#saveWhole(this.file);
  }

  /** Appends the changed entries to the delta (see DELTA); starts it when it has no records yet. */
  #appendDelta(file: string): boolean {
    const start = this.#deltaRecords === 0;
    const parts: Buffer[] = start ? [deltaHeader(this.#sum!)] : [];
    // forEach, not for-of (see prune). In the map's order: each key is in a delta once, so any order reads the same.
    this.#entries.forEach((entry, key) => {
      if (this.#isMade(entry) && (this.#flagsOf(entry) & UNSAVED) !== 0) parts.push(deltaRecord(key, this.#arena.bytes, this.#slotOf(entry)));
    });
    const records = parts.length - (start ? 1 : 0);
    try {
      writeDelta(file, parts, start);
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
    // Sizes first; then the records, copied as loaded or written from the arena (cache-format.ts, writeWhole).
    const body = this.#body;
    const arena = this.#arena;
    let total = 0;
    let i = 0;
    // forEach, not for-of: no [key, entry] pair made per entry (see prune). Each record's length in one typed array.
    const lengths = new Uint32Array(this.#entries.size);
    this.#entries.forEach((entry, key) => {
      const path = this.#isMade(entry) ? Buffer.byteLength(key, 'utf8') : body.readUInt32LE(offsetOf(entry));
      total += lengths[i++] = LENGTH_BYTES + path + FIXED;
    });
    let sum: string;
    try {
      sum = writeWhole(
        file,
        lengths,
        total,
        this.#saveChunk,
        (visit) => this.#entries.forEach(visit),
        // One as loaded (unparsed, or parsed and unchanged) copied byte for byte, one made in this run written from the arena.
        (into, from, key, entry, length) =>
          this.#isMade(entry)
            ? writeRecord(into, from, key, length - LENGTH_BYTES - FIXED, arena.bytes, this.#slotOf(entry))
            : from + copyBytes(body, offsetOf(entry), length, into, from),
      );
    } catch (error) {
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

  /** Whether an entry was made in this run (arena.ts); else it is a loaded record's offset. */
  #isMade(entry: number): boolean {
    return isMade(entry, this.#body.length);
  }

  #slotOf(entry: number): number {
    return slotOf(entry, this.#body.length);
  }

  #flagsOf(entry: number): number {
    return flagsOf(entry, this.#body.length);
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
      if (f < 0 || !storedStatIs(this.#body, f + STAT_AT, st)) return undefined;
      return this.#loadedHit(f, Number(st.size), permissions(st));
    }
    if ((this.#flagsOf(entry) & SEEN) === 0) this.#entries.set(key, entry + SEEN);
    const arena = this.#arena.bytes;
    const slot = this.#slotOf(entry);
    if (racyAt(arena, slot) || !storedStatIs(arena, slot + STAT_AT, st)) return undefined;
    this.counters.hits++;
    return { kind: 'file', hash: contentHash(arena.toString('hex', slot, slot + DIGEST_BYTES)), size: Number(st.size), mode: permissions(st) };
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
    return { kind: 'file', hash: contentHash(this.#body.toString('hex', f, f + DIGEST_BYTES)), size, mode };
  }

  #counted(read: HashedFile): HashedFile {
    this.counters.stats++;
    this.counters.contentReads++;
    this.counters.bytesRead += read.digest.bytes;
    return this.#simulate === undefined ? read : { digest: read.digest, after: this.#simulate(read.after) };
  }

  /**
   * The answer once a read is done: the file as read if it did not change while
   * being read (or, on the last attempt, if it is still a file: recorded racy);
   * undefined to look again.
   */
  #conclude(key: string, st: StatFields, read: HashedFile | undefined, started: bigint, attempt: number): FileObservation | undefined {
    if (read === undefined) return undefined;
    const last = attempt === READ_ATTEMPTS;
    if (!isRegular(read.after)) return last ? this.#notFile(key, read.after) : undefined;
    const settled = sameFile(st, read.after);
    return settled || last ? this.#record(key, read.after, read.digest, started, !settled) : undefined;
  }

  /** Runs a read; undefined when the file changed under it in a way a new look may explain. */
  #attempt(attempt: number, read: () => HashedFile): HashedFile | undefined {
    try {
      return this.#counted(read());
    } catch (error) {
      if (attempt < READ_ATTEMPTS && changedUnderUs(error)) return undefined;
      throw error;
    }
  }

  async #attemptAsync(attempt: number, read: () => Promise<HashedFile>): Promise<HashedFile | undefined> {
    try {
      return this.#counted(await read());
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
    arena.write(digest.hash.slice(HASH_PREFIX), slot, DIGEST_BYTES, 'hex');
    arena[slot + FLAGS_AT] = racy ? RACY : 0;
    writeStat(arena, slot + STAT_AT, st);
    // Only a settled entry is worth a save: a racy one is read again next time
    // whether it is saved or not (an older entry left on disk no longer matches
    // the file's stat). A touch just before a run then writes nothing. The same
    // digest, flags and stat as before, byte for byte, are nothing to save either.
    this.#put(key, old, slot, !racy && !this.#sameFixed(old, slot));
    return { kind: 'file', hash: digest.hash, size: digest.bytes, mode: permissions(st) };
  }
}
