// The seal: what lets a no-op skip the state, and the analysis.
//
// A no-op's cost at 50,000 tasks was mostly the state: loading the journal's
// 46 MB of records and the hash cache's 11 MB, then comparing every task's
// record with what was observed. ninja reads a 3 MB log. So an apply that found
// the whole graph unchanged — nothing to run, nothing to destroy, nothing to
// warn about — writes a seal into the state folder: a digest of the Nodefile's
// declarations, the journal's stat, and for each file the run looked at
// (observe.ts filesToObserve, in its order) the stat and content hash the hash
// cache knew. The next run that finds
//
//   - the same declarations (every task's command, cwd, env, outputs, inputs
//     as declared, order-only edges, pool and verbs; the values of its value
//     and env inputs; the pools; the Nodefile's and the state's folders; the
//     engine's version and its own files' sizes and mtimes),
//   - the journal at the same stat (the same records), and
//   - every file at its sealed stat, or read again and of the sealed content
//     (a touched file),
//
// would build the same graph from them (analysis is a function of the
// declarations alone), observe what the sealing run observed, and decide, from
// the same records, every task "unchanged". It says so without analysing the
// declarations, loading the journal or the hash cache, or planning. With the
// same declarations and journal but some files of other content, only what
// those files reach can be anything but unchanged: delta.ts plans and runs
// that alone, from the graph's shape the seal also keeps, and seals again
// after (sealDelta). Anything else — a seal missing, torn, of another
// version, or the declarations or journal different — and the run goes the
// whole way, as without a seal. So a seal can make a run faster, never make it
// decide otherwise.
//
// Trust is the hash cache's (cache.ts, RACY ENTRIES): a stat is sealed only if
// the cache trusts it (not racy), and a file read again here is sealed at its
// new stat only if it is settled by the same rule. A file too new to be known
// by its stat (touched just before the run) is sealed by its content alone, and
// read again by the next run: its stat is sealed as zeros, which no stat is.
// The journal is known by its stat: an append changes its size, a compaction
// its inode; and, by the same rule, when that stat was too new (a seal written
// just after a run appended), by its content: the seal keeps its CRC-32, and
// the next run reads it again (openSeal). The seal is written under the state
// lock (apply only; plan reads it), after the run and before the lock is
// released, to a temporary file renamed over the old one; a checksum covers
// it. Its stat of the journal is taken then, so a run that appended anything
// after it never leaves a seal that matches.
//
// Not sealed: a graph with a check (it runs every time), a glob or tree input
// (a folder's content can change without its stat moving), a run with targets,
// --replace or a saved plan.
//
// FORMAT. A text line `nodegraph-seal 5 <paths> <tasks> <path bytes> <shape bytes> <CRC-32 of the rest, 8 hex digits>`,
// then a binary body: the declarations' digest (32 bytes), the journal's stat
// (40), its CRC-32, too-new flag and record lines (u32 each, and 4 bytes
// unused), then per path its stat (40) and content digest (32); then the graph's
// shape (delta.ts), then the paths, then the task ids in the order the plan
// lists them, each in UTF-8 and ended by a NUL. A stat is dev, ino, size, mtime ns and ctime ns as int64
// little-endian, as the hash cache keeps them. The paths let the engine stat
// them on another thread while the Nodefile loads (engine.ts); the ids, say
// what a sealed plan lists without building the graph.

import { closeSync, fstatSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmSync, statSync, writeSync, type BigIntStats } from 'node:fs';
import type { Hash } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TaskGraph } from '../graph/graph.ts';
import type { TaskId } from '../ids.ts';
import type { Declarations, DeclaredTask } from '../nodefile/builder.ts';
import { HashCache, settledAt, writeStat } from '../hash/cache.ts';
import { Verdict, type CompareWith, type StatPrefetch } from '../hash/prefetch.ts';
import { crc32 } from '../util/crc32.ts';
import { canonicalJson } from '../hash/value.ts';
import type { FilesToObserve } from '../plan/observe.ts';
import { journalPath, scanRecordLines, type RecordLine } from './journal.ts';
import { encodeShape, pointAt } from './delta.ts';

export const SEAL_FILE = 'seal';
const FORMAT = 'nodegraph-seal';
const VERSION = 5;
const STAT = 40;
const DIGEST = 32;
const PER_PATH = STAT + DIGEST;
/**
 * After the journal's stat: the CRC-32 of its content (u32), 1 when that stat
 * was too new to know it by (u32), and how many record lines it has (u32, then
 * 4 bytes unused): runs planned from the seal append without loading it, and
 * stop doing so once a load would compact it (delta.ts).
 */
const JOURNAL_SUM = DIGEST + STAT;
const JOURNAL_RACY = JOURNAL_SUM + 4;
const JOURNAL_LINES = JOURNAL_RACY + 4;
const HEAD = JOURNAL_LINES + 8;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
/**
 * Files found at another stat are read again, up to this many (or this many
 * bytes): a touched file or two. Past that the run goes the whole way, which
 * reads them anyway, through the hash cache that then keeps them.
 */
const MAX_READS = 64;
const MAX_READ_BYTES = 64 * 2 ** 20;

export const sealPath = (stateDir: string): string => path.join(stateDir, SEAL_FILE);

/**
 * The digest of the declarations, as far as analysis and the planner read
 * them for a whole-graph decision; undefined when they cannot be sealed (a
 * check, a glob or tree input, a declaration that failed).
 *
 * Each field is written, with its length, into a buffer hashed as it fills.
 * Not as text: building a string per task made 200 MB of garbage at 50,000
 * tasks, 200 collections and half the sealed no-op's time.
 */
export function declarationsDigest(
  declarations: Declarations,
  env: Readonly<Record<string, string | undefined>>,
  stateDir: string,
): string | undefined {
  if (declarations.failures.length > 0) return undefined;
  const out = new DigestWriter();
  out.str(`${FORMAT} ${VERSION}`);
  out.str(engineStamp());
  out.str(declarations.file);
  out.str(declarations.dir);
  out.str(stateDir);
  out.u32(declarations.pools.size);
  for (const name of [...declarations.pools.keys()].sort()) {
    out.str(name);
    out.u32(declarations.pools.get(name)!);
  }
  const tasks = declarations.tasks;
  out.u32(tasks.length);
  for (let i = 0; i < tasks.length; i++) if (!describe(out, tasks[i]!, env)) return undefined;
  return out.digest();
}

/** Field tags: each field is a tag byte, then its content; a string is its byte length, then its UTF-8. */
const Tag = {
  Task: 1,
  Argv: 2,
  Shell: 3,
  Function: 4,
  Env: 5,
  NoEnv: 6,
  File: 7,
  Value: 8,
  EnvInput: 9,
  Unset: 10,
  TaskInput: 11,
  NoPath: 12,
  End: 13,
  Cwd: 14,
  NoCwd: 15,
  Version: 16,
  NoVersion: 17,
  Pool: 18,
  NoPool: 19,
  Verbs: 20,
  NoVerbs: 21,
} as const;

function describe(out: DigestWriter, decl: DeclaredTask, env: Readonly<Record<string, string | undefined>>): boolean {
  const { spec } = decl;
  if (spec.check !== undefined) return false;
  out.tag(Tag.Task);
  out.str(decl.id);
  // What definition.ts hashes: run (a function by its version or its source), cwd, env, outputs.
  const run = spec.run;
  if (typeof run === 'function') {
    out.tag(Tag.Function);
    out.str(run.toString());
  } else if (Array.isArray(run)) {
    out.tag(Tag.Argv);
    out.u32(run.length);
    for (let i = 0; i < run.length; i++) out.str(run[i]!);
  } else {
    out.tag(Tag.Shell);
    out.str(canonicalJson(run));
  }
  optional(out, spec.version, Tag.Version, Tag.NoVersion);
  optional(out, spec.cwd, Tag.Cwd, Tag.NoCwd);
  if (spec.env === undefined) out.tag(Tag.NoEnv);
  else {
    out.tag(Tag.Env);
    out.str(canonicalJson(spec.env));
  }
  out.u32(decl.outputs.length);
  for (let i = 0; i < decl.outputs.length; i++) out.str(decl.outputs[i]!);
  // The inputs as declared, and what they read outside files.
  for (const name in decl.inputs) {
    const input = decl.inputs[name]!;
    switch (input.kind) {
      case 'file':
        out.tag(Tag.File);
        out.str(name);
        out.str(input.path);
        break;
      case 'value':
        out.tag(Tag.Value);
        out.str(name);
        out.str(canonicalJson(input.value));
        break;
      case 'env': {
        out.tag(Tag.EnvInput);
        out.str(name);
        out.str(input.name);
        const value = env[input.name];
        if (value === undefined) out.tag(Tag.Unset);
        else out.str(value);
        break;
      }
      case 'task':
        out.tag(Tag.TaskInput);
        out.str(name);
        out.str(input.id);
        if (input.path === undefined) out.tag(Tag.NoPath);
        else out.str(input.path);
        break;
      default:
        // glob, tree, or anything else: not sealed.
        return false;
    }
  }
  out.tag(Tag.End);
  out.u32(decl.after.length);
  for (let i = 0; i < decl.after.length; i++) out.str(decl.after[i]!);
  optional(out, spec.pool, Tag.Pool, Tag.NoPool);
  if (spec.verbs === undefined) out.tag(Tag.NoVerbs);
  else {
    out.tag(Tag.Verbs);
    out.str(canonicalJson(spec.verbs));
  }
  return true;
}

function optional(out: DigestWriter, value: string | undefined, some: number, none: number): void {
  if (value === undefined) out.tag(none);
  else {
    out.tag(some);
    out.str(value);
  }
}

/**
 * SHA-256 of fields written into a reused buffer: a string is copied in, not
 * concatenated. Fields that fit in the buffer are hashed in one shot; a Hash
 * object takes them only once it fills.
 */
class DigestWriter {
  #hash: Hash | undefined;
  readonly #buf = Buffer.allocUnsafe(1 << 16);
  #at = 0;

  tag(tag: number): void {
    if (this.#at + 1 > this.#buf.length) this.#flush();
    this.#buf[this.#at++] = tag;
  }

  u32(n: number): void {
    if (this.#at + 4 > this.#buf.length) this.#flush();
    this.#buf.writeUInt32LE(n, this.#at);
    this.#at += 4;
  }

  str(s: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit.
    if (this.#at + 4 + 3 * s.length > this.#buf.length) {
      this.#flush();
      if (4 + 3 * s.length > this.#buf.length) {
        const bytes = Buffer.from(s, 'utf8');
        this.u32(bytes.length);
        this.#flush();
        this.#hash!.update(bytes);
        return;
      }
    }
    const buf = this.#buf;
    const start = this.#at + 4;
    let n = 0;
    // A short ASCII string (ids, paths, arguments: nearly all of them) is copied here; a call
    // into Buffer.write for each of half a million strings cost more than the copying.
    if (s.length <= 64) {
      for (; n < s.length; n++) {
        const c = s.charCodeAt(n);
        if (c > 0x7f) break;
        buf[start + n] = c;
      }
    }
    if (n < s.length) n = buf.write(s, start);
    buf[this.#at] = n & 0xff;
    buf[this.#at + 1] = (n >>> 8) & 0xff;
    buf[this.#at + 2] = (n >>> 16) & 0xff;
    buf[this.#at + 3] = n >>> 24;
    this.#at = start + n;
  }

  digest(): string {
    if (this.#hash === undefined) return process.getBuiltinModule('node:crypto').hash('sha256', this.#buf.subarray(0, this.#at), 'hex');
    this.#flush();
    return this.#hash.digest('hex');
  }

  #flush(): void {
    this.#hash ??= process.getBuiltinModule('node:crypto').createHash('sha256');
    if (this.#at > 0) this.#hash.update(this.#buf.subarray(0, this.#at));
    this.#at = 0;
  }
}

/**
 * The engine itself: another engine may decide otherwise. Its version, and the
 * size and mtime of each of its own files: a checkout's edits do not change
 * the version, and a developer's change to how decisions are made must not
 * meet a seal written before it. About 100 stats of the sources in a checkout
 * (under a millisecond), the bundle's few files in a package. Two folders up
 * from src/state and from dist/lib alike.
 */
export function engineStamp(root: URL = new URL('../../', import.meta.url)): string {
  let version = 'unknown';
  try {
    version = String((JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { version?: unknown }).version);
  } catch {
    // Without it, the files alone.
  }
  const code = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? 'src/' : 'dist/lib/', root));
  let stamp = version;
  try {
    const files = readdirSync(code, { recursive: true, encoding: 'utf8' }).sort();
    for (const file of files) {
      const st = statSync(path.join(code, file), { throwIfNoEntry: false });
      if (st?.isFile()) stamp += `\0${file}\0${st.size}\0${st.mtimeMs}`;
    }
  } catch {
    // Unreadable: the version alone.
  }
  return stamp;
}

/** What a run that trusted a seal did to the files: what a no-op's counters say. */
export interface SealedRun {
  readonly stats: number;
  readonly contentReads: number;
  readonly bytesRead: number;
}

/** A seal read whole, its checksum and its journal's stat found good: what checkSeal compares with. */
export interface OpenedSeal {
  readonly body: Buffer;
  /** How many paths it seals. */
  readonly count: number;
  /**
   * The paths in UTF-8, each ended by a NUL (as prefetch.ts takes them): bytes in shared
   * memory, which the stat worker reads where they are, decoded here only as needed.
   */
  readonly paths: Buffer<SharedArrayBuffer>;
  /** How many tasks, and their ids in the plan's order in UTF-8, each ended by a NUL. */
  readonly tasks: number;
  readonly ids: Buffer;
  /** The graph's shape, for a run of the tasks a changed file reaches (delta.ts). */
  readonly shape: Buffer;
  /**
   * The journal was sealed by its content (its stat was too new): checkSeal compares its CRC-32 with
   * `journalSum` before it trusts anything of the seal (taken on the stat worker, as its first job).
   */
  readonly racyJournal: boolean;
  readonly journalSum: number;
  /** Record lines in the journal. */
  readonly journalLines: number;
  /** The file's header line as read (checkSeal rewrites it in place), and all after it, `body` included. */
  readonly header: string;
  readonly rest: Buffer;
}

/**
 * The seal in `stateDir`, if there is one that is whole and whose journal is
 * at the stat it sealed (the caller holds the lock, or only reads); undefined
 * otherwise. The declarations, the files, and a racy journal's content are
 * checkSeal's to compare.
 */
export function openSeal(stateDir: string): OpenedSeal | undefined {
  let fd: number;
  try {
    fd = openSync(sealPath(stateDir), 'r');
  } catch {
    return undefined;
  }
  try {
    // The header and the journal's stat first: after any run that changed the
    // state they differ, and the rest (14 MB at 50,000 tasks) need not be read.
    const start = Buffer.allocUnsafe(512);
    const got = readSync(fd, start, 0, start.length, 0);
    const newline = start.subarray(0, got).indexOf(10);
    if (newline < 0 || newline + 1 + HEAD > got) return undefined;
    const [format, version, countText, tasksText, pathBytesText, shapeBytesText, sum] = start.toString('latin1', 0, newline).split(' ');
    const [count, tasks, pathBytes, shapeBytes] = [countText, tasksText, pathBytesText, shapeBytesText].map(Number) as [number, number, number, number];
    if (format !== FORMAT || version !== String(VERSION) || ![count, tasks, pathBytes, shapeBytes].every((n) => Number.isSafeInteger(n) && n >= 0)) return undefined;
    const journal = statOf(journalPath(stateDir));
    if (journal === undefined || !sameStat(start, newline + 1 + DIGEST, stampOf(journal), 0)) return undefined;
    // Sealed just after it was written, the journal's stat does not tell it from a
    // same-size rewrite in the same clock tick: its content does (RACY ENTRIES, cache.ts), which
    // checkSeal compares, so that the stat worker can read it while the Nodefile loads.
    const racyJournal = start.readUInt32LE(newline + 1 + JOURNAL_RACY) !== 0;
    const size = fstatSync(fd).size - newline - 1;
    const end = HEAD + count * PER_PATH;
    const shapeEnd = end + shapeBytes;
    if (size < shapeEnd + pathBytes) return undefined;
    // In shared memory: the stat worker reads the paths out of it (no copy of 3.5 MB at 50,000 tasks).
    const rest = Buffer.from(new SharedArrayBuffer(size));
    let at = 0;
    while (at < size) {
      const n = readSync(fd, rest, at, size - at, newline + 1 + at);
      if (n === 0) return undefined;
      at += n;
    }
    if (checksum(rest) !== sum) return undefined;
    return {
      body: rest.subarray(0, end),
      count,
      paths: rest.subarray(shapeEnd, shapeEnd + pathBytes) as Buffer<SharedArrayBuffer>,
      tasks,
      ids: rest.subarray(shapeEnd + pathBytes),
      shape: rest.subarray(end, shapeEnd),
      racyJournal,
      journalSum: start.readUInt32LE(newline + 1 + JOURNAL_SUM),
      journalLines: start.readUInt32LE(newline + 1 + JOURNAL_LINES),
      header: start.toString('latin1', 0, newline + 1),
      rest,
    };
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** What the stat worker compares each of the seal's paths with: the stat it sealed (checkSeal takes its verdicts). */
export function sealCompare(seal: OpenedSeal): CompareWith {
  return { buffer: seal.body.buffer as SharedArrayBuffer, offset: seal.body.byteOffset + HEAD, stride: PER_PATH };
}

function statOf(file: string): BigIntStats | undefined {
  try {
    return statSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

function isZero(bytes: Uint8Array, at: number, length: number): boolean {
  for (let i = at; i < at + length; i++) if (bytes[i] !== 0) return false;
  return true;
}

const isRegular = (mode: number | bigint): boolean => (Number(mode) & S_IFMT) === S_IFREG;

/** What checking a seal found: what it took, and the tasks in the plan's order. */
export interface Sealed {
  readonly run: SealedRun;
  readonly ids: SealedIds;
  /**
   * The paths (as numbered in the seal) whose file is not as sealed: gone, not
   * a regular file, or read again and of other content. None: the seal holds,
   * and every task is unchanged. Some: only what they reach can be otherwise (delta.ts).
   */
  readonly changed: readonly number[];
  /** What this check read (a hash cache that is never saved): a delta run goes on with it. */
  readonly reader: HashCache;
  /** Paths found touched but the same, at a new stat the seal in memory now holds (written with the seal's next change). */
  readonly resealed: readonly number[];
  /** The seal's path numbered `slot`. */
  readonly pathOf: (slot: number) => string;
}

/**
 * Whether the seal holds for these declarations and the files now (see the
 * top of this file), and if not, which of its files differ; undefined when
 * the declarations or the journal differ, or too many files do. A file found
 * touched but unchanged is sealed at its new stat when the seal holds, so the
 * next run does not read it again. The caller holds the lock, or only reads (plan).
 */
export function checkSeal(options: {
  readonly stateDir: string;
  readonly seal: OpenedSeal;
  readonly declarations: Declarations;
  /** Stats taken ahead of the seal's paths, each compared with the sealed one by the worker (sealCompare); with none, this thread stats them. */
  readonly prefetched?: StatPrefetch | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Rewrites the seal for files found touched (apply: under the lock). */
  readonly reseal: boolean;
  /** The wall clock in ns (see cache.ts, RACY ENTRIES). */
  readonly now?: (() => bigint) | undefined;
}): Sealed | undefined {
  const { stateDir, prefetched, seal } = options;
  const { body, count } = seal;
  if (options.declarations.tasks.length !== seal.tasks) return undefined;
  // The stats come from the other thread meanwhile, on a large graph. The same
  // declarations make the same graph, which names the same files: the seal's.
  const digest = declarationsDigest(options.declarations, options.env, stateDir);
  if (digest === undefined || body.toString('hex', 0, DIGEST) !== digest) return undefined;
  // A journal sealed by its content is that content still (the worker summed it meanwhile, if there is one).
  if (seal.racyJournal && (prefetched?.sum() ?? journalSum(journalPath(stateDir))) !== seal.journalSum) return undefined;

  // A path as a string only when needed: all of them where this thread stats them, a touched one's where another did.
  let paths: string[] | undefined;
  let starts: Int32Array | undefined;
  const pathOf = (slot: number): string => {
    if (prefetched === undefined) return (paths ??= seal.paths.toString('utf8').split('\0'))[slot]!;
    starts ??= startsOf(seal.paths, count);
    return seal.paths.toString('utf8', starts[slot]!, starts[slot + 1]! - 1);
  };
  const scratch = Buffer.allocUnsafe(STAT);
  let touched: number[] | undefined;
  const changed: number[] = [];
  for (let slot = 0; slot < count; slot++) {
    const at = HEAD + slot * PER_PATH;
    if (prefetched?.comparing === true && prefetched.ready(slot)) {
      // The worker compared the file's stat with the sealed one (sealCompare).
      const verdict = prefetched.verdict(slot);
      if (verdict === Verdict.Same) continue;
      if (verdict === Verdict.NotFile) {
        if (changed.push(slot) > MAX_READS) return undefined;
        continue;
      }
    } else {
      const st = statOf(pathOf(slot));
      if (st === undefined || !isRegular(st.mode)) {
        if (changed.push(slot) > MAX_READS) return undefined;
        continue;
      }
      writeStat(scratch, 0, st);
      if (sameStat(body, at, scratch, 0)) continue;
    }
    (touched ??= []).push(slot);
    if (touched.length > MAX_READS) return undefined;
  }

  // Touched files: the same content is the same observation. Read as the hash
  // cache reads (again if it changes meanwhile), and judged settled by its rule.
  const resealed: number[] = [];
  const reader = new HashCache(undefined, options.now === undefined ? {} : { now: options.now });
  const seen = Buffer.allocUnsafe(PER_PATH);
  for (const slot of touched ?? []) {
    const at = HEAD + slot * PER_PATH;
    const file = pathOf(slot);
    if (reader.counters.bytesRead > MAX_READ_BYTES) return undefined;
    if (reader.hashFile(file).kind !== 'file' || !reader.vouch(file, seen, 0) || !seen.subarray(STAT).equals(body.subarray(at + STAT, at + PER_PATH))) {
      if (changed.push(slot) > MAX_READS) return undefined;
      continue;
    }
    // A racy read's stat comes back as zeros: left as it is, the file is read again next time.
    if (!isZero(seen, 0, STAT) && !seen.subarray(0, STAT).equals(body.subarray(at, at + STAT))) {
      seen.copy(body, at, 0, STAT);
      resealed.push(slot);
    }
  }
  if (changed.length === 0 && options.reseal) {
    const ranges = resealed.map((slot): [number, number] => [HEAD + slot * PER_PATH, STAT]);
    // A journal sealed by its content, now old enough to be known by its stat: the next run need not read it.
    const journal = seal.racyJournal ? statOf(journalPath(stateDir)) : undefined;
    if (journal !== undefined && settledAt(journal, options.now?.())) {
      seal.rest.writeUInt32LE(0, JOURNAL_RACY);
      ranges.push([JOURNAL_RACY, 4]);
    }
    if (ranges.length > 0) reseal(stateDir, seal, ranges);
  }
  const { contentReads, bytesRead } = reader.counters;
  const ids = new SealedIds(seal.ids, seal.tasks);
  return { run: { stats: count + reader.counters.stats, contentReads, bytesRead }, ids, changed, reader, pathOf, resealed };
}

/**
 * Tells the check's hash cache what the seal knows of these paths (as numbered
 * in the seal), each found at its sealed stat by the check, or read by it: a
 * delta run (delta.ts) then reads none of them again. Not a changed one.
 */
export function knownFrom(seal: OpenedSeal, sealed: Sealed, slots: readonly number[]): void {
  const changed = new Set(sealed.changed);
  for (const slot of slots) if (!changed.has(slot)) sealed.reader.know(sealed.pathOf(slot), seal.body, HEAD + slot * PER_PATH);
}

/**
 * Writes these ranges of the seal (offset and length in its body, changed in
 * `seal.rest`) where they lie, then its header with the new checksum: a few
 * bytes, not the whole file (11 MB at 50,000 tasks; a touched run rewrote it
 * in 30 ms). Torn by a crash or read midway, it fails its checksum and is
 * ignored, as a torn seal is. The caller holds the lock: no one else writes the seal.
 */
function reseal(stateDir: string, seal: OpenedSeal, ranges: readonly (readonly [number, number])[]): boolean {
  const head = Buffer.from(seal.header, 'latin1');
  const sum = checksum(seal.rest);
  const header = Buffer.from(`${seal.header.slice(0, seal.header.lastIndexOf(' ') + 1)}${sum}\n`, 'latin1');
  if (header.length !== head.length) return false;
  let fd: number | undefined;
  try {
    fd = openSync(sealPath(stateDir), 'r+');
    for (const [at, length] of ranges) writeSync(fd, seal.rest, at, length, head.length + at);
    writeSync(fd, header, 0, header.length, 0);
    return true;
  } catch {
    // The seal on disk still describes a state that held; or, torn, it fails its checksum.
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * What guards the seal against a torn write or a damaged disk: CRC-32, as the
 * journal's lines have (util/crc32.ts). SHA-256 of a 50,000-task seal (14 MB)
 * took 8 ms of every sealed run.
 */
const checksum = (data: Uint8Array): string => (crc32(data) >>> 0).toString(16).padStart(8, '0');

/**
 * The seal's task ids, in the plan's order: its bytes, made strings only as they
 * are asked for (a sealed no-op lists none of them but in --json: 50,000 strings
 * it need not make).
 */
export class SealedIds {
  readonly length: number;
  readonly #bytes: Buffer;
  #starts: Int32Array | undefined;
  #all: TaskId[] | undefined;

  constructor(bytes: Buffer, length: number) {
    this.#bytes = bytes;
    this.length = length;
  }

  at(index: number): TaskId | undefined {
    if (this.#all !== undefined) return this.#all[index];
    if (!Number.isInteger(index) || index < 0 || index >= this.length) return undefined;
    const starts = (this.#starts ??= startsOf(this.#bytes, this.length));
    return this.#bytes.toString('utf8', starts[index]!, starts[index + 1]! - 1) as TaskId;
  }

  /** All of them, as an array. */
  all(): readonly TaskId[] {
    return (this.#all ??= this.#bytes.toString('utf8').split('\0', this.length) as TaskId[]);
  }
}

/** Where each of `count` NUL-ended strings starts in `joined`, and one past the last. */
function startsOf(joined: Uint8Array, count: number): Int32Array {
  const starts = new Int32Array(count + 1);
  for (let i = 0, at = 0; i < count; i++) {
    starts[i] = at;
    at = joined.indexOf(0, at) + 1;
    starts[i + 1] = at;
  }
  return starts;
}

function stampOf(st: BigIntStats): Buffer {
  const out = Buffer.allocUnsafe(STAT);
  writeStat(out, 0, st);
  return out;
}

function sameStat(a: Uint8Array, at: number, b: Uint8Array, bt: number): boolean {
  for (let i = 0; i < STAT; i++) if (a[at + i] !== b[bt + i]) return false;
  return true;
}

/**
 * Seals the state after a whole-graph run that found every task unchanged: true
 * when it wrote one. Not when the declarations cannot be sealed, this run did
 * not hash every file through the cache, or the journal is too new to be known
 * by its stat. The caller holds the lock and appended nothing in this run.
 */
export function writeSeal(options: {
  readonly stateDir: string;
  readonly declarations: Declarations;
  readonly graph: TaskGraph;
  readonly files: FilesToObserve;
  readonly cache: HashCache;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now?: (() => bigint) | undefined;
  /** Record lines in the journal (OpenState.lines). */
  readonly lines: number;
}): boolean {
  const { paths } = options.files;
  if (options.files.nodes.length !== options.graph.size) return false;
  const journal = statOf(journalPath(options.stateDir));
  if (journal === undefined || !settledAt(journal, options.now?.())) return false;
  const digest = declarationsDigest(options.declarations, options.env, options.stateDir);
  if (digest === undefined) return false;
  const body = Buffer.allocUnsafe(HEAD + paths.length * PER_PATH);
  for (let slot = 0; slot < paths.length; slot++) {
    if (!options.cache.vouch(paths[slot]!, body, HEAD + slot * PER_PATH)) return false;
  }
  // The journal's content, read once: its checksum, which a seal written after a run planned
  // from this one continues (sealDelta), and where each task's record lies (the shape).
  let content: Buffer;
  try {
    content = readFileSync(journalPath(options.stateDir));
  } catch {
    return false;
  }
  if (BigInt(content.length) !== journal.size) return false;
  body.write(digest, 0, DIGEST, 'hex');
  writeStat(body, DIGEST, journal);
  body.writeUInt32LE(crc32(content), JOURNAL_SUM);
  body.writeUInt32LE(0, JOURNAL_RACY);
  body.writeUInt32LE(Math.min(options.lines, 0xffffffff), JOURNAL_LINES);
  body.writeUInt32LE(0, JOURNAL_LINES + 4);
  // Without a shape (a record it cannot point at), the seal still serves a no-op.
  const shape = encodeShape(options.declarations, options.graph, options.files, content) ?? Buffer.alloc(0);
  return write(options.stateDir, body, shape, terminated(paths), terminated(options.graph.ordered.map((n) => n.id)));
}

/** Each ended by a NUL (neither a path nor a task id can hold one). */
function terminated(list: readonly string[]): string {
  return list.length === 0 ? '' : `${list.join('\0')}\0`;
}

function write(stateDir: string, body: Buffer, shape: Buffer, paths: string, ids: string): boolean {
  const pathBytes = Buffer.from(paths, 'utf8');
  const idBytes = Buffer.from(ids, 'utf8');
  const rest = Buffer.concat([body, shape, pathBytes, idBytes]);
  const tasks = ids === '' ? 0 : ids.split('\0').length - 1;
  const head = Buffer.from(`${FORMAT} ${VERSION} ${(body.length - HEAD) / PER_PATH} ${tasks} ${pathBytes.length} ${shape.length} ${checksum(rest)}\n`, 'latin1');
  return writeWhole(stateDir, [head, rest]);
}

/** Writes the seal to a temporary file renamed over the old one. */
function writeWhole(stateDir: string, parts: readonly Buffer[]): boolean {
  const file = sealPath(stateDir);
  const temp = `${file}.${process.pid}.tmp`;
  try {
    const fd = openSync(temp, 'w', 0o644);
    try {
      for (const part of parts) {
        let at = 0;
        while (at < part.length) at += writeSync(fd, part, at, part.length - at);
      }
    } finally {
      closeSync(fd);
    }
    renameSync(temp, file);
    return true;
  } catch {
    try {
      rmSync(temp, { force: true });
    } catch {
      // Nothing was made.
    }
    return false;
  }
}

/** The CRC-32 of the journal's content, read in pieces (not into one buffer the size of the journal); -1 when it cannot be read. */
function journalSum(file: string): number {
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    const piece = Buffer.allocUnsafe(1 << 20);
    let sum = 0;
    for (let at = 0; ; ) {
      const n = readSync(fd, piece, 0, piece.length, at);
      if (n === 0) return sum;
      sum = crc32(piece.subarray(0, n), sum);
      at += n;
    }
  } catch {
    return -1;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * Seals the state again after a run planned from the seal (delta.ts) that ran
 * what the changed files reach and found it all unchanged after (the caller
 * checked, as a whole run would decide: nothing failed, nothing warned, and a
 * second look plans every reached task unchanged). The rest of the seal holds
 * as it was: the same declarations, and only the reached tasks' files and
 * records moved. So the seal is the one read, changed where it lies (as a
 * touched file is resealed: a few bytes and the header, not 14 MB at 50,000
 * tasks): each reached task's files as this run's cache knows them, where the
 * records of the tasks that ran now lie (they were appended to the journal
 * this run), and the journal's new stat and checksum — the old checksum
 * continued over what was appended, so the journal is not read whole. Its stat, a moment old, cannot tell it from a
 * same-size rewrite in the same clock tick: the next run checks its content
 * (openSeal) unless it is old enough by then. False when it wrote none (the
 * old one, its journal's stat moved, is then ignored by the next run).
 */
export function sealDelta(options: {
  readonly stateDir: string;
  readonly seal: OpenedSeal;
  readonly cache: HashCache;
  readonly pathOf: (slot: number) => string;
  /** The reached tasks' paths, as numbered in the seal. */
  readonly slots: readonly number[];
  /** The tasks that ran, with their position in the plan's order. */
  readonly ran: readonly { readonly id: TaskId; readonly position: number }[];
  /** Paths the check found touched but the same (Sealed.resealed). */
  readonly resealed: readonly number[];
  readonly now?: (() => bigint) | undefined;
}): boolean {
  const { seal } = options;
  const rest = seal.rest;
  const file = journalPath(options.stateDir);
  const sealedSize = Number(rest.readBigInt64LE(DIGEST + 16));
  let journal: BigIntStats;
  const lines = new Map<string, RecordLine>();
  let sum: number;
  let fd: number | undefined;
  try {
    fd = openSync(file, 'r');
    journal = fstatSync(fd, { bigint: true });
    // The same file (a compaction would have replaced it), only grown.
    if (journal.dev !== rest.readBigInt64LE(DIGEST) || journal.ino !== rest.readBigInt64LE(DIGEST + 8) || Number(journal.size) < sealedSize) return false;
    const tail = Buffer.allocUnsafe(Number(journal.size) - sealedSize);
    for (let at = 0; at < tail.length; ) {
      const n = readSync(fd, tail, at, tail.length - at, sealedSize + at);
      if (n === 0) return false;
      at += n;
    }
    sum = crc32(tail, rest.readUInt32LE(JOURNAL_SUM));
    scanRecordLines(tail, 0, sealedSize, lines);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  // Checked before anything is changed: a seal in memory half updated is never written.
  if (options.ran.some(({ id }) => lines.get(id) === undefined)) return false;
  const ranges: [number, number][] = [[DIGEST, HEAD - DIGEST]];
  for (const slot of options.slots) {
    if (!options.cache.vouch(options.pathOf(slot), rest, HEAD + slot * PER_PATH)) return false;
    ranges.push([HEAD + slot * PER_PATH, PER_PATH]);
  }
  for (const slot of options.resealed) ranges.push([HEAD + slot * PER_PATH, STAT]);
  const shapeAt = seal.shape.byteOffset - rest.byteOffset;
  for (const { id, position } of options.ran) {
    for (const [at, length] of pointAt(seal.shape, seal.tasks, position, lines.get(id)!)) ranges.push([shapeAt + at, length]);
  }
  writeStat(rest, DIGEST, journal);
  rest.writeUInt32LE(sum, JOURNAL_SUM);
  rest.writeUInt32LE(settledAt(journal, options.now?.()) ? 0 : 1, JOURNAL_RACY);
  rest.writeUInt32LE(Math.min(rest.readUInt32LE(JOURNAL_LINES) + options.ran.length, 0xffffffff), JOURNAL_LINES);
  return reseal(options.stateDir, seal, ranges);
}
