// The seal: what lets a no-op skip the state.
//
// A no-op's cost at 50,000 tasks was mostly the state: loading the journal's
// 46 MB of records and the hash cache's 11 MB, then comparing every task's
// record with what was observed. ninja reads a 3 MB log. So an apply that found
// the whole graph unchanged — nothing to run, nothing to destroy, nothing to
// warn about — writes a seal into the state folder: a digest of the graph as
// the planner sees it, the journal's stat, and for each file the run looked at
// (observe.ts filesToObserve, in its order) the stat and content hash the hash
// cache vouched for. The next run that finds
//
//   - the same graph digest (every task's definition, inputs as declared,
//     value and env inputs' values, needs, outputs; the engine's version),
//   - the journal at the same stat (the same records), and
//   - every file at its sealed stat, or read again and of the sealed content
//     (a touched file),
//
// would observe what the sealing run observed, from the same records: every
// decision "unchanged". It says so without loading the journal or the hash
// cache or planning. Anything else — a seal missing, torn, of another version,
// or any one of these different — and the run goes the whole way, as without
// a seal. So a seal can make a run faster, never make it decide otherwise.
//
// Trust is the hash cache's (cache.ts, RACY ENTRIES): a stat is sealed only if
// the cache vouches for it (clean, not racy), and a file read again here is
// sealed at its new stat only if it is settled by the same rule. The journal
// is known by its stat: an append changes its size, a compaction its inode.
// The seal is written under the state lock (apply only; plan reads it), after
// the run and before the lock is released, to a temporary file renamed over the
// old one; a checksum covers it. Its stat of the journal is taken then, so a
// run that appended anything never wrote a seal that matches later.
//
// Not sealed: a graph with a check (it runs every time), a glob or tree input
// (a folder's content can change without its stat moving), a run with targets,
// --replace or a saved plan.
//
// FORMAT. A text line `nodegraph-seal 1 <paths> <sha256 of the body>`, then a
// binary body: the graph digest (32 bytes), the journal's stat (40), then per
// path its stat (40) and content digest (32). A stat is dev, ino, size, mtime
// ns and ctime ns as int64 little-endian, as the hash cache keeps them.

import { closeSync, fstatSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync, type BigIntStats } from 'node:fs';
import path from 'node:path';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import { settledAt, type HashCache } from '../hash/cache.ts';
import { sha256FdSync } from '../hash/file.ts';
import type { StatPrefetch } from '../hash/prefetch.ts';
import { sha256Hex } from '../hash/sha256.ts';
import { canonicalJson } from '../hash/value.ts';
import type { FilesToObserve } from '../plan/observe.ts';
import { definitionText } from '../plan/definition.ts';
import { journalPath } from './journal.ts';

export const SEAL_FILE = 'seal';
const FORMAT = 'nodegraph-seal';
const VERSION = 1;
const STAT = 40;
const DIGEST = 32;
const PER_PATH = STAT + DIGEST;
const HEAD = DIGEST + STAT;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/**
 * Files found at another stat are read again, up to this many (or this many
 * bytes): a touched file or two. Past that the run goes the whole way, which
 * reads them anyway, through the hash cache that then keeps them.
 */
const MAX_READS = 64;
const MAX_READ_BYTES = 64 * 2 ** 20;

export const sealPath = (stateDir: string): string => path.join(stateDir, SEAL_FILE);

/**
 * The digest of everything the planner reads of the graph for a whole-graph
 * decision; undefined when the graph cannot be sealed (a check, a glob or tree input).
 */
export function graphDigest(graph: TaskGraph, env: Readonly<Record<string, string | undefined>>): string | undefined {
  const chunks: string[] = [`${FORMAT} ${VERSION} ${engineVersion()} ${JSON.stringify(graph.dir)} ${graph.size}`];
  let text = '';
  const nodes = graph.ordered;
  for (let i = 0; i < nodes.length; i++) {
    const described = describe(nodes[i]!, graph.dir, env);
    if (described === undefined) return undefined;
    text += described;
    // Hashed in pieces: one string of 50,000 tasks would be tens of megabytes.
    if (text.length > 1 << 20) {
      chunks.push(sha256Hex(text));
      text = '';
    }
  }
  chunks.push(sha256Hex(text));
  return sha256Hex(chunks.join('\n'));
}

function describe(node: TaskNode, root: string, env: Readonly<Record<string, string | undefined>>): string | undefined {
  if (node.decl.spec.check !== undefined) return undefined;
  let text = `${JSON.stringify(node.id)}${definitionText(node, root)}`;
  for (const name in node.inputs) {
    const input = node.inputs[name]!;
    switch (input.kind) {
      case 'file':
        text += `f${JSON.stringify(name)}${JSON.stringify(input.path)}`;
        break;
      case 'value':
        text += `v${JSON.stringify(name)}${canonicalJson(input.value)}`;
        break;
      case 'env':
        text += `e${JSON.stringify(name)}${JSON.stringify(input.name)}${JSON.stringify(env[input.name] ?? null)}`;
        break;
      case 'task':
        text += `t${JSON.stringify(name)}${JSON.stringify(input.id)}${JSON.stringify(input.path ?? null)}`;
        break;
      case 'glob':
      case 'tree':
        return undefined;
    }
  }
  return `${text}n${JSON.stringify(node.needs)}\n`;
}

let version: string | undefined;
/** The engine's own version: another engine may decide otherwise. Two folders up from src/state and from dist/lib alike. */
function engineVersion(): string {
  if (version === undefined) {
    try {
      version = String((JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown }).version);
    } catch {
      version = 'unknown';
    }
  }
  return version;
}

/** What a run that trusted a seal did to the files: what a no-op's counters say. */
export interface SealedRun {
  readonly stats: number;
  readonly contentReads: number;
  readonly bytesRead: number;
}

interface ReadSeal {
  readonly body: Buffer;
}

function readSeal(stateDir: string, paths: number): ReadSeal | undefined {
  let data: Buffer;
  try {
    data = readFileSync(sealPath(stateDir));
  } catch {
    return undefined;
  }
  const newline = data.indexOf(10);
  if (newline < 0 || newline > 200) return undefined;
  const [format, version, count, sum] = data.toString('latin1', 0, newline).split(' ');
  if (format !== FORMAT || version !== String(VERSION) || count !== String(paths)) return undefined;
  const body = data.subarray(newline + 1);
  if (body.length !== HEAD + paths * PER_PATH || sha256Hex(body) !== sum) return undefined;
  return { body };
}

/** The stat fields as the seal keeps them, into `out` at `at`. */
function putStat(out: Buffer, at: number, st: BigIntStats): void {
  out.writeBigInt64LE(st.dev, at);
  out.writeBigInt64LE(st.ino, at + 8);
  out.writeBigInt64LE(st.size, at + 16);
  out.writeBigInt64LE(st.mtimeNs, at + 24);
  out.writeBigInt64LE(st.ctimeNs, at + 32);
}

function statOf(file: string): BigIntStats | undefined {
  try {
    return statSync(file, { bigint: true, throwIfNoEntry: false });
  } catch {
    return undefined;
  }
}

const wallClock = (): bigint => BigInt(Date.now()) * 1_000_000n;

const isRegular = (mode: number | bigint): boolean => (Number(mode) & S_IFMT) === S_IFREG;

/**
 * Whether the seal in `stateDir` holds for this graph and these files now (see
 * the top of this file): what it took when it does, undefined when it does not.
 * A file found touched but unchanged is sealed at its new stat, so the next run
 * does not read it again. The caller holds the lock, or only reads (plan).
 */
export function checkSeal(options: {
  readonly stateDir: string;
  readonly graph: TaskGraph;
  readonly files: FilesToObserve;
  readonly prefetched?: StatPrefetch | undefined;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Rewrites the seal for files found touched (apply: under the lock). */
  readonly reseal: boolean;
  /** The wall clock in ns (see cache.ts, RACY ENTRIES). */
  readonly now?: (() => bigint) | undefined;
}): SealedRun | undefined {
  const { stateDir, files, prefetched } = options;
  const { paths } = files;
  if (files.nodes.length !== options.graph.size) return undefined;
  const seal = readSeal(stateDir, paths.length);
  if (seal === undefined) return undefined;
  const { body } = seal;
  const journal = statOf(journalPath(stateDir));
  if (journal === undefined || !sameStat(body, DIGEST, stampOf(journal), 0)) return undefined;
  // The stats come from the other thread meanwhile, on a large graph.
  const digest = graphDigest(options.graph, options.env);
  if (digest === undefined || body.toString('hex', 0, DIGEST) !== digest) return undefined;

  const scratch = Buffer.allocUnsafe(STAT);
  let touched: number[] | undefined;
  let stats = 0;
  for (let slot = 0; slot < paths.length; slot++) {
    const at = HEAD + slot * PER_PATH;
    stats++;
    if (prefetched !== undefined && LITTLE_ENDIAN && prefetched.ready(slot)) {
      if (!isRegular(prefetched.mode(slot))) return undefined;
      if (sameStat(body, at, prefetched.bytes, prefetched.statOffset(slot))) continue;
    } else {
      const st = statOf(paths[slot]!);
      if (st === undefined || !isRegular(st.mode)) return undefined;
      putStat(scratch, 0, st);
      if (sameStat(body, at, scratch, 0)) continue;
    }
    (touched ??= []).push(slot);
    if (touched.length > MAX_READS) return undefined;
  }
  if (touched === undefined) return { stats, contentReads: 0, bytesRead: 0 };

  // Touched files: the same content is the same observation.
  let bytesRead = 0;
  let resealed = false;
  for (const slot of touched) {
    const at = HEAD + slot * PER_PATH;
    const read = readSettled(paths[slot]!, options.now ?? wallClock);
    if (read === undefined || !read.digest.equals(body.subarray(at + STAT, at + PER_PATH))) return undefined;
    bytesRead += read.bytes;
    if (bytesRead > MAX_READ_BYTES) return undefined;
    if (read.settled) {
      putStat(body, at, read.stat);
      resealed = true;
    }
  }
  if (resealed && options.reseal) write(stateDir, body);
  return { stats: stats + touched.length, contentReads: touched.length, bytesRead };
}

/** A file read whole, and whether it was the same file before and after. Undefined if it changed under the read. */
function readSettled(file: string, now: () => bigint): { digest: Buffer; bytes: number; stat: BigIntStats; settled: boolean } | undefined {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch {
    return undefined;
  }
  try {
    const before = fstatSync(fd, { bigint: true });
    if (!isRegular(before.mode)) return undefined;
    const started = now();
    const digest = sha256FdSync(fd, Number(before.size));
    const after = fstatSync(fd, { bigint: true });
    if (
      after.size !== before.size ||
      after.mtimeNs !== before.mtimeNs ||
      after.ctimeNs !== before.ctimeNs ||
      after.ino !== before.ino ||
      digest.bytes !== Number(before.size)
    ) {
      return undefined;
    }
    return { digest: Buffer.from(digest.hash.slice('sha256:'.length), 'hex'), bytes: digest.bytes, stat: after, settled: settledAt(after, started) };
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

function stampOf(st: BigIntStats): Buffer {
  const out = Buffer.allocUnsafe(STAT);
  putStat(out, 0, st);
  return out;
}

function sameStat(a: Uint8Array, at: number, b: Uint8Array, bt: number): boolean {
  for (let i = 0; i < STAT; i++) if (a[at + i] !== b[bt + i]) return false;
  return true;
}

/**
 * Seals the state after a whole-graph run that found every task unchanged: true
 * when it wrote one. Not when the graph cannot be sealed, the cache does not
 * vouch for every file (one is racy, say), or the journal is too new to be known
 * by its stat. The caller holds the lock and appended nothing in this run.
 */
export function writeSeal(options: {
  readonly stateDir: string;
  readonly graph: TaskGraph;
  readonly files: FilesToObserve;
  readonly cache: HashCache;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now?: (() => bigint) | undefined;
}): boolean {
  const { paths } = options.files;
  if (options.files.nodes.length !== options.graph.size) return false;
  const journal = statOf(journalPath(options.stateDir));
  if (journal === undefined || !settledAt(journal, (options.now ?? wallClock)())) return false;
  const body = Buffer.allocUnsafe(HEAD + paths.length * PER_PATH);
  for (let slot = 0; slot < paths.length; slot++) {
    if (!options.cache.vouch(paths[slot]!, body, HEAD + slot * PER_PATH)) return false;
  }
  const digest = graphDigest(options.graph, options.env);
  if (digest === undefined) return false;
  body.write(digest, 0, DIGEST, 'hex');
  putStat(body, DIGEST, journal);
  return write(options.stateDir, body);
}

function write(stateDir: string, body: Buffer): boolean {
  const file = sealPath(stateDir);
  const temp = `${file}.${process.pid}.tmp`;
  try {
    const fd = openSync(temp, 'w', 0o644);
    try {
      const head = Buffer.from(`${FORMAT} ${VERSION} ${(body.length - HEAD) / PER_PATH} ${sha256Hex(body)}\n`, 'latin1');
      for (const part of [head, body]) {
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
