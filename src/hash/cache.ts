// SHA-256 of files, cached by what stat says about them, so an unchanged
// file costs one stat and no read — however large it is.
//
// The key is (device, inode, size, mtime, ctime) in nanoseconds. ctime moves
// on any write, chmod or rename-over, and cannot be set from user space, so a
// tool that restores mtime after writing does not fool it.
//
// The racy case (git's "racily clean" entries): a file written in the same
// timestamp tick as we read it can change after our read without its times
// moving. So an entry whose mtime or ctime is not older than the moment we
// started reading, less a margin for coarse filesystem clocks, is marked
// racy and re-read next time; once the file is old enough, a re-read clears it.

import { closeSync, fstatSync, openSync, readFileSync, readSync, renameSync, statSync, writeFileSync, type BigIntStats } from 'node:fs';
import { createHash, hash as oneShot } from 'node:crypto';
import path from 'node:path';
import { contentHash, type ContentHash } from '../ids.ts';

export type FileObservation =
  | { readonly kind: 'file'; readonly hash: ContentHash; readonly size: number; readonly mode: number }
  | { readonly kind: 'directory'; readonly mode: number }
  | { readonly kind: 'missing' }
  | { readonly kind: 'other' };

export interface HashCacheCounters {
  stats: number;
  contentReads: number;
  bytesRead: number;
}

interface Entry {
  dev: bigint;
  ino: bigint;
  size: bigint;
  mtime: bigint;
  ctime: bigint;
  hex: string;
  racy: boolean;
}

/** Filesystems with coarse clocks (FAT: 2 s) — anything written this close to a read is suspect. */
const RACY_MARGIN_NS = 2_000_000_000n;
const FORMAT = 'nodegraph-hashcache';
const VERSION = 1;
/** Files up to this size are read in one go; larger ones streamed through a reused buffer. */
const WHOLE_READ_LIMIT = 8 * 1024 * 1024;
const CHUNK = 4 * 1024 * 1024;
let chunk: Buffer | undefined;

export function sha256File(file: string): { hex: string; bytes: number } {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    if (size <= WHOLE_READ_LIMIT) {
      const data = readFileSync(fd);
      return { hex: oneShot('sha256', data, 'hex'), bytes: data.length };
    }
    chunk ??= Buffer.allocUnsafe(CHUNK);
    const digest = createHash('sha256');
    let bytes = 0;
    for (;;) {
      const n = readSync(fd, chunk, 0, CHUNK, null);
      if (n === 0) break;
      digest.update(n === CHUNK ? chunk : chunk.subarray(0, n));
      bytes += n;
    }
    return { hex: digest.digest('hex'), bytes };
  } finally {
    closeSync(fd);
  }
}

const nowNs = (): bigint => BigInt(Date.now()) * 1_000_000n;

export class HashCache {
  readonly file: string | undefined;
  readonly counters: HashCacheCounters = { stats: 0, contentReads: 0, bytesRead: 0 };
  readonly #entries: Map<string, Entry>;
  #dirty = false;

  constructor(file: string | undefined, entries: Map<string, Entry> = new Map()) {
    this.file = file;
    this.#entries = entries;
  }

  /** Loads a saved cache; a missing one is empty, a corrupt one is ignored with a warning. */
  static load(file: string): { cache: HashCache; warning?: string } {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return { cache: new HashCache(file) };
    }
    try {
      const data = JSON.parse(text) as { format?: unknown; version?: unknown; entries?: unknown };
      if (data.format !== FORMAT || data.version !== VERSION || !Array.isArray(data.entries)) throw new Error('not a hash cache of this version');
      const entries = new Map<string, Entry>();
      for (const row of data.entries as unknown[]) {
        if (!Array.isArray(row) || row.length !== 7) throw new Error('malformed entry');
        const [p, dev, ino, size, mtime, ctime, hex] = row as [string, string, string, string, string, string, string];
        if (typeof p !== 'string' || typeof hex !== 'string' || !/^[0-9a-f]{64}$/.test(hex)) throw new Error('malformed entry');
        entries.set(p, { dev: BigInt(dev), ino: BigInt(ino), size: BigInt(size), mtime: BigInt(mtime), ctime: BigInt(ctime), hex, racy: false });
      }
      return { cache: new HashCache(file, entries) };
    } catch (error) {
      return { cache: new HashCache(file), warning: `ignoring the hash cache ${file}: ${(error as Error).message}; files will be hashed again` };
    }
  }

  /** Stats `file` (following links) and hashes it unless the cache vouches for its content. */
  hashFile(file: string): FileObservation {
    let st: BigIntStats | undefined;
    this.counters.stats++;
    try {
      st = statSync(file, { bigint: true, throwIfNoEntry: false });
    } catch {
      return { kind: 'missing' };
    }
    if (st === undefined) return { kind: 'missing' };
    if (st.isDirectory()) return { kind: 'directory', mode: Number(st.mode & 0o7777n) };
    if (!st.isFile()) return { kind: 'other' };
    const mode = Number(st.mode & 0o7777n);
    const cached = this.#entries.get(file);
    if (
      cached !== undefined &&
      !cached.racy &&
      cached.dev === st.dev &&
      cached.ino === st.ino &&
      cached.size === st.size &&
      cached.mtime === st.mtimeNs &&
      cached.ctime === st.ctimeNs
    ) {
      return { kind: 'file', hash: contentHash(cached.hex), size: Number(st.size), mode };
    }
    const started = nowNs();
    const { hex, bytes } = sha256File(file);
    this.counters.contentReads++;
    this.counters.bytesRead += bytes;
    const racy = st.mtimeNs + RACY_MARGIN_NS >= started || st.ctimeNs + RACY_MARGIN_NS >= started;
    this.#entries.set(file, { dev: st.dev, ino: st.ino, size: st.size, mtime: st.mtimeNs, ctime: st.ctimeNs, hex, racy });
    this.#dirty = true;
    return { kind: 'file', hash: contentHash(hex), size: Number(st.size), mode };
  }

  /** Writes the cache (temp file, then rename) if anything changed; true when it wrote. */
  save(): boolean {
    if (!this.#dirty || this.file === undefined) return false;
    const rows: string[] = [];
    for (const [p, e] of this.#entries) {
      // A racy entry is not worth keeping: it will be read again anyway.
      if (e.racy) continue;
      rows.push(JSON.stringify([p, String(e.dev), String(e.ino), String(e.size), String(e.mtime), String(e.ctime), e.hex]));
    }
    const temp = path.join(path.dirname(this.file), `.hashcache.${process.pid}.tmp`);
    try {
      writeFileSync(temp, `{"format":"${FORMAT}","version":${VERSION},"entries":[\n${rows.join(',\n')}\n]}\n`);
      renameSync(temp, this.file);
    } catch {
      // The cache only saves work; failing to save it loses nothing.
      return false;
    }
    this.#dirty = false;
    return true;
  }
}
