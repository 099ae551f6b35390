// Stats taken ahead, on another thread. A no-op's single largest cost is the
// stat of every input and output (100,000 files at 50,000 tasks): each call
// is a system call plus a BigIntStats of about twenty heap objects, all on the
// main thread. The paths are known as soon as the graph is loaded, so a worker
// thread can stat them, on the other core, while the main thread loads the
// state and the hash cache; observing then takes each stat from shared memory.
//
// Lifecycle:
//
//   start(paths) ──► waiting ──go()──► statting ──► done
//        │              │                  │
//        └──────────────┴─── close() ──────┴──► closed (ready() answers false)
//
// The worker starts statting only on go(), which the engine calls once it
// holds the state lock: a stat taken while another run might still be writing
// files would describe a file that run was about to replace.
//
// What a slot says is exactly what statSync(path, { bigint: true }) said on
// the worker: the hash cache treats it as its own stat (cache.ts hashFile),
// and a path the worker has not reached is waited for. (Given stats to compare
// with, as the seal's check gives it, a slot is instead a verdict on
// that comparison, below; and there the main thread, rather than wait, takes
// paths from the end of the list until it meets the worker, each slot claimed
// by one thread or the other with a compare-and-swap.) Anything that goes
// wrong here — no worker, a worker that dies or stalls — only means the main
// thread stats the path itself.

import type { Worker } from 'node:worker_threads';

/** Bytes in a SharedArrayBuffer: a worker reads them without a copy being made. */
export type SharedBytes = Uint8Array<SharedArrayBuffer>;

/** The stat fields the hash cache uses; what a slot gives back. */
export interface StatFields {
  readonly dev: bigint;
  readonly ino: bigint;
  readonly size: bigint;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  readonly mode: bigint;
}

/**
 * Fewer paths than this are stat'ed in place. Setting the worker up costs the
 * main thread about 2 µs a path, and on a 2-core machine the main thread runs
 * slower while the worker runs: at the benchmark's 10,000 leaves (20,201 paths)
 * the no-op took as long with it as without (hyperfine, 2 × 15 runs: 515 and
 * 558 ms against 502 and 552), at 50,000 (100,551 paths) 7-15 % less.
 * NODEGRAPH_STAT_AHEAD in the environment sets another number, or `off`.
 */
export const PREFETCH_MIN_PATHS = 32_768;

function minimumPaths(): number {
  const set = process.env['NODEGRAPH_STAT_AHEAD'];
  if (set === undefined || set === '') return PREFETCH_MIN_PATHS;
  if (set === 'off') return Infinity;
  const n = Number(set);
  return Number.isInteger(n) && n >= 0 ? n : PREFETCH_MIN_PATHS;
}

// Shared memory: a header of six int32 — [0] go (0 waiting, 1 go, -1 closed),
// [1] how many slots are filled (-1: the worker failed), [2] the file to sum:
// 0 none or not yet, 1 summed, -1 it could not be read, [3] its CRC-32, [4] 1
// when the worker stats with Node's binding (below), [5] unused — then a slot of eight
// int64 per path: state (1 a stat, 2 none), dev, ino, size, mtime, ctime,
// mode, unused. dev…ctime are in the hash cache's record order, so a record
// compares with bytes 8-47 of a slot as they stand.
//
// Or, where the worker is given stats to compare with (the seal's: startJoined's
// `compare`), a slot is one byte, the worker's verdict (below): the main thread
// needs no more of a file at its sealed stat, and 100,000 slots take 100 KB, not 6.4 MB.
const HEADER = 24;
const SLOT_WORDS = 8;
const SLOT_BYTES = SLOT_WORDS * 8;
const GO = 0;
const FILLED = 1;
const SUMMED = 2;
const SUM = 3;
const BINDING = 4;
/** A compared slot taken by one thread or the other, its verdict not yet written. */
const CLAIMED = 255;
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** A compared slot's verdict: the path is a regular file at the stat compared with, or at another, or no regular file is there. */
export const Verdict = { Same: 1, Other: 2, NotFile: 3 } as const;
export type Verdict = (typeof Verdict)[keyof typeof Verdict];

/**
 * Stats the worker compares each path's with: `count` of them in shared memory, the
 * slot-th at offset + slot × stride, each dev, ino, size, mtime ns and ctime ns as
 * int64 little-endian (the hash cache's and the seal's record order).
 */
export interface CompareWith {
  readonly buffer: SharedArrayBuffer;
  readonly offset: number;
  readonly stride: number;
}

/** A worker that fills no slot for this long is given up on. */
const STALL_MS = 2000;
/**
 * Milliseconds on a monotonic clock. Not performance.now(): the global `performance`
 * loads node:perf_hooks and seven modules of its own (about 1 MiB of node's binary
 * mapped), for a clock that only times a stall.
 */
const monotonicMs = (): number => Number(process.hrtime.bigint()) / 1e6;

// How a path is stat'ed and judged, in plain JavaScript, on the worker and (when it helps,
// ready()) on the main thread: given `statSync` and `compare` (startJoined's, or undefined),
// it defines `fast`, `statOf` and its output `mine`, and `judge`.
const STATTING = `// Node's own stat, without the BigIntStats statSync builds of what it returns (a
// fifth of each call): process.binding is internal, so it is used only once it has
// given, for two paths that differ in every field, what statSync gives.
let fast;
try {
  const binding = process.binding('fs');
  const same = (p) => {
    const st = statSync(p, { bigint: true });
    const v = binding.stat(p, true, undefined, false);
    return v instanceof BigInt64Array && v.length >= 16 && v[0] === st.dev && v[1] === st.mode && v[7] === st.ino && v[8] === st.size &&
      v[12] * 1000000000n + v[13] === st.mtimeNs && v[14] * 1000000000n + v[15] === st.ctimeNs;
  };
  if (same(process.execPath) && same('/')) fast = binding;
} catch {
  // not this Node: statSync it is
}
// The stat of a path, into \`mine\`: dev, ino, size, mtime ns, ctime ns (the record order), mode.
// False when nothing readable is there (ENOENT, and ENOTDIR, ELOOP or EACCES on a parent, as the cache's own stat says).
const mine = new BigInt64Array(6);
const mineBytes = new Uint8Array(mine.buffer);
const statOf = (path) => {
  if (fast !== undefined) {
    let v;
    try {
      v = fast.stat(path, true, undefined, false);
    } catch {
      return false;
    }
    if (v === undefined) return false;
    mine[0] = v[0];
    mine[1] = v[7];
    mine[2] = v[8];
    mine[3] = v[12] * 1000000000n + v[13];
    mine[4] = v[14] * 1000000000n + v[15];
    mine[5] = v[1];
    return true;
  }
  let st;
  try {
    st = statSync(path, { bigint: true, throwIfNoEntry: false });
  } catch {
    return false;
  }
  if (st === undefined) return false;
  mine[0] = st.dev;
  mine[1] = st.ino;
  mine[2] = st.size;
  mine[3] = st.mtimeNs;
  mine[4] = st.ctimeNs;
  mine[5] = st.mode;
  return true;
};
// With stats to compare with, a slot is the verdict on the path's stat (Verdict).
const against = compare === undefined ? undefined : new Uint8Array(compare.buffer);
const judge = (i, found) => {
  if (!found || (Number(mine[5]) & 0o170000) !== 0o100000) return ${Verdict.NotFile};
  const at = compare.offset + i * compare.stride;
  for (let k = 0; k < 40; k++) if (mineBytes[k] !== against[at + k]) return ${Verdict.Other};
  return ${Verdict.Same};
};
`;

/** STATTING compiled on this thread. */
interface Statting {
  /** The stat of the path, kept for judge(); false when nothing readable is there. */
  readonly statOf: (path: string) => boolean;
  /** The verdict on the slot's path, from the stat statOf() last took. */
  readonly judge: (slot: number, found: boolean) => Verdict;
}

/** How many paths the main thread takes from the end of the list at a time before it looks at the worker again. */
const TAKE = 64;

function compileStatting(compare: CompareWith | undefined): Statting {
  // The source the worker runs, so that both threads judge alike.
  const make = new Function('statSync', 'compare', `'use strict';\n${STATTING}\nreturn { statOf, judge };`) as (
    statSync: typeof import('node:fs').statSync,
    compare: CompareWith | undefined,
  ) => Statting;
  return make(process.getBuiltinModule('node:fs').statSync, compare);
}

// Plain JavaScript: a worker given source runs it without type stripping.
const WORKER = `'use strict';
const { workerData } = require('node:worker_threads');
const { statSync } = require('node:fs');
const header = new Int32Array(workerData.shared, 0, 6);
while (Atomics.load(header, ${GO}) === 0) Atomics.wait(header, ${GO}, 0);
if (workerData.sumOf !== undefined) {
  // The CRC-32 of a file (the journal the seal vouches for by its content), in 1 MiB pieces, first:
  // it is short, and the main thread asks for it as soon as for the first stats.
  const { openSync, readSync, closeSync } = require('node:fs');
  const { crc32 } = require('node:zlib');
  let fd;
  try {
    fd = openSync(workerData.sumOf, 'r');
    const piece = Buffer.allocUnsafe(1 << 20);
    let sum = 0;
    for (let at = 0, n; Atomics.load(header, ${GO}) === 1 && (n = readSync(fd, piece, 0, piece.length, at)) > 0; at += n) sum = crc32(piece.subarray(0, n), sum);
    Atomics.store(header, ${SUM}, sum | 0);
    Atomics.store(header, ${SUMMED}, Atomics.load(header, ${GO}) === 1 ? 1 : -1);
  } catch {
    Atomics.store(header, ${SUMMED}, -1);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  Atomics.notify(header, ${SUMMED});
}
const compare = workerData.compare;
${STATTING}Atomics.store(header, ${BINDING}, fast === undefined ? 0 : 1);
try {
  const verdicts = compare === undefined ? undefined : new Uint8Array(workerData.shared, ${HEADER}, workerData.count);
  const slots = compare === undefined ? new BigInt64Array(workerData.shared, ${HEADER}) : undefined;
  // One path at a time out of the joined string, or out of the bytes shared with the
  // main thread (no array of them all, and no copy of the bytes: less memory).
  const joined = workerData.paths;
  const bytes = typeof joined === 'string' ? undefined : Buffer.from(joined.buffer, joined.offset, joined.length);
  const end = bytes === undefined ? joined.length : bytes.length;
  for (let i = 0, from = 0; i < workerData.count && Atomics.load(header, ${GO}) === 1; i++) {
    // Where it compares, the main thread may take paths from the end of the list (ready()): a slot is
    // claimed before its path is stat'ed, and the first one the main thread took ends this thread's part.
    if (verdicts !== undefined && Atomics.compareExchange(verdicts, i, 0, ${CLAIMED}) !== 0) break;
    let to = bytes === undefined ? joined.indexOf('\\0', from) : bytes.indexOf(0, from);
    if (to < 0) to = end;
    const path = bytes === undefined ? joined.slice(from, to) : bytes.toString('utf8', from, to);
    from = to + 1;
    const found = statOf(path);
    if (verdicts !== undefined) verdicts[i] = judge(i, found);
    else {
      const at = i * ${SLOT_WORDS};
      if (found) {
        slots.set(mine, at + 1);
        slots[at] = 1n;
      } else slots[at] = 2n;
    }
    Atomics.store(header, ${FILLED}, i + 1);
    if ((i & 255) === 255) Atomics.notify(header, ${FILLED});
  }
} catch {
  Atomics.store(header, ${FILLED}, -1);
}
Atomics.notify(header, ${FILLED});
`;

export class StatPrefetch {
  /** How many paths (slots) there are. */
  readonly count: number;
  readonly #header: Int32Array;
  readonly #words: BigInt64Array;
  /** The same memory, for reading a slot's state, size and mode as numbers (reading a BigInt64Array makes a bigint). */
  readonly #view: DataView;
  /** The shared memory as bytes: what a hash-cache record's stat is compared with. */
  readonly bytes: Uint8Array;
  /** The slots as verdicts, when the worker compares (else empty). */
  readonly #verdicts: Uint8Array;
  /** Whether the worker compares each stat with one given (startJoined's `compare`): slots are verdict()s, not stat()s. */
  readonly comparing: boolean;
  readonly #worker: Worker;
  #state: 'waiting' | 'statting' | 'closed' = 'waiting';

  readonly #summing: boolean;

  // Where the worker compares, this thread takes paths from the end of the list while it
  // would otherwise wait for the worker (ready()): the next slot it would take (-1 once the
  // two have met), where that slot's path ends, and the statting it compiled for it.
  #next: number;
  #nextEnd: number;
  readonly #paths: string | Buffer;
  readonly #compare: CompareWith | undefined;
  #statting: Statting | undefined;
  #takenHere = 0;

  private constructor(
    count: number,
    joined: string | SharedBytes,
    summing: boolean,
    compare: CompareWith | undefined,
    worker: (shared: SharedArrayBuffer) => Worker,
  ) {
    const comparing = compare !== undefined;
    const shared = new SharedArrayBuffer(HEADER + count * (comparing ? 1 : SLOT_BYTES));
    this.#header = new Int32Array(shared, 0, 6);
    this.#words = new BigInt64Array(shared, HEADER, comparing ? 0 : count * SLOT_WORDS);
    this.#verdicts = new Uint8Array(shared, HEADER, comparing ? count : 0);
    this.bytes = new Uint8Array(shared);
    this.#view = new DataView(shared);
    this.count = count;
    this.#summing = summing;
    this.comparing = comparing;
    // Kept only where this thread may take paths: else the joined string would outlive the worker's copy of it.
    this.#paths = !comparing ? '' : typeof joined === 'string' ? joined : Buffer.from(joined.buffer, joined.byteOffset, joined.byteLength);
    this.#compare = compare;
    this.#next = comparing ? count - 1 : -1;
    // The last path need not end with a NUL.
    this.#nextEnd = this.#paths.length > 0 && this.#paths[this.#paths.length - 1] === (typeof joined === 'string' ? '\0' : 0) ? this.#paths.length - 1 : this.#paths.length;
    this.#worker = worker(shared);
  }

  /**
   * A worker that will stat `paths` (absolute, normalized: the hash cache's keys) once
   * go() is called; undefined when there are too few to be worth it (fewer than
   * `min`), a path cannot be passed (it holds a NUL), or no worker could be started.
   */
  static start(paths: readonly string[], min = minimumPaths()): StatPrefetch | undefined {
    if (paths.length === 0 || paths.length < min || paths.some((p) => p.includes('\0'))) return undefined;
    return StatPrefetch.startJoined(paths.join('\0'), paths.length, min);
  }

  /**
   * As start(), for `count` paths given each followed by a NUL, or joined by one (the last need not end
   * with it): as a string, which the worker is given a copy of, or as UTF-8 bytes in shared memory,
   * which it reads where they are. With `sumOf`, the worker first takes that file's CRC-32 (sum()).
   * With `compare`, it compares each path's stat with the one given, and a slot is its verdict(); none is
   * started then on a big-endian machine (the stats given are little-endian).
   */
  static startJoined(joined: string | SharedBytes, count: number, min = minimumPaths(), sumOf?: string, compare?: CompareWith): StatPrefetch | undefined {
    if (count === 0 || count < min || (compare !== undefined && !LITTLE_ENDIAN)) return undefined;
    const { Worker } = process.getBuiltinModule('node:worker_threads');
    try {
      return new StatPrefetch(count, joined, sumOf !== undefined, compare, (shared) => {
        const worker = new Worker(WORKER, {
          eval: true,
          workerData: {
            shared,
            paths: typeof joined === 'string' ? joined : { buffer: joined.buffer, offset: joined.byteOffset, length: joined.byteLength },
            count,
            sumOf,
            compare,
          },
          // Its garbage is one BigIntStats after another: a small young generation is plenty.
          resourceLimits: { maxYoungGenerationSizeMb: 2 },
          stdout: true,
          stderr: true,
        });
        // It must not keep the process alive, and what it could say goes nowhere: a
        // failure shows as FILLED = -1 or a stall, and the main thread stats instead.
        worker.unref();
        worker.on('error', () => {});
        return worker;
      });
    } catch {
      return undefined;
    }
  }

  /** Lets the worker begin (the engine holds the state lock now). */
  go(): void {
    if (this.#state !== 'waiting') return;
    this.#state = 'statting';
    Atomics.store(this.#header, GO, 1);
    Atomics.notify(this.#header, GO);
  }

  /**
   * True once the worker has stat'ed the slot's path (the `slot`-th of the paths
   * given to start()), waiting for it if need be; false when it will not: not
   * started, closed, or the worker failed or stalled. Its stat is then stat(slot).
   */
  ready(slot: number): boolean {
    if (this.#state !== 'statting' || slot < 0 || slot >= this.count) return false;
    let filled = Atomics.load(this.#header, FILLED);
    if (filled > slot || this.#judged(slot)) return true;
    let waited = 0;
    while (filled >= 0 && filled <= slot) {
      // Rather than wait, take a few paths from the end of the list, until the two threads meet.
      if (this.#next >= 0 && this.#takeFromEnd()) {
        if (this.#judged(slot)) return true;
        filled = Atomics.load(this.#header, FILLED);
        waited = 0;
        continue;
      }
      if (this.#judged(slot)) return true;
      const started = monotonicMs();
      Atomics.wait(this.#header, FILLED, filled, 50);
      const now = Atomics.load(this.#header, FILLED);
      waited = now === filled ? waited + monotonicMs() - started : 0;
      filled = now;
      if (waited > STALL_MS) break;
    }
    if (filled > slot) return true;
    this.close();
    return false;
  }

  /** How many paths this thread has taken from the end of the list (for tests). */
  get takenHere(): number {
    return this.#takenHere;
  }

  /** Whether the slot holds a verdict (where the worker compares), by either thread. */
  #judged(slot: number): boolean {
    if (!this.comparing) return false;
    const verdict = Atomics.load(this.#verdicts, slot);
    return verdict !== 0 && verdict !== CLAIMED;
  }

  /**
   * Stats and judges up to TAKE paths from the end of the list on this thread, each slot
   * claimed first as the worker claims its own; false once it reaches one the worker has
   * claimed (the two have met, and every slot is one thread's or the other's).
   */
  #takeFromEnd(): boolean {
    const { statOf, judge } = (this.#statting ??= compileStatting(this.#compare));
    const paths = this.#paths;
    for (let n = 0; n < TAKE; n++) {
      const slot = this.#next;
      if (slot < 0 || Atomics.compareExchange(this.#verdicts, slot, 0, CLAIMED) !== 0) {
        this.#next = -1;
        return false;
      }
      const start = typeof paths === 'string' ? paths.lastIndexOf('\0', this.#nextEnd - 1) + 1 : paths.lastIndexOf(0, this.#nextEnd - 1) + 1;
      const file = typeof paths === 'string' ? paths.slice(start, this.#nextEnd) : paths.toString('utf8', start, this.#nextEnd);
      Atomics.store(this.#verdicts, slot, judge(slot, statOf(file)));
      this.#next = slot - 1;
      this.#nextEnd = start - 1;
      this.#takenHere++;
    }
    return true;
  }

  /**
   * The CRC-32 of the file given as `sumOf`, as read after go(), waiting for it if need be; undefined
   * when there is none: not asked for, not started, closed, unreadable, or the worker failed or stalled.
   */
  sum(): number | undefined {
    if (!this.#summing || this.#state !== 'statting') return undefined;
    let summed = Atomics.load(this.#header, SUMMED);
    // The sum comes before any stat: a worker that has filled no slot and not summed for this long is stalled.
    for (let waited = 0; summed === 0 && Atomics.load(this.#header, FILLED) === 0 && waited < STALL_MS; waited += 50) {
      Atomics.wait(this.#header, SUMMED, 0, 50);
      summed = Atomics.load(this.#header, SUMMED);
    }
    return summed === 1 ? Atomics.load(this.#header, SUM) >>> 0 : undefined;
  }

  /** Whether the worker stats with Node's binding (it found it gives what statSync gives); known once a slot is ready. */
  get binding(): boolean {
    return Atomics.load(this.#header, BINDING) === 1;
  }

  /** The worker's verdict on the slot's path, where it compares (`comparing`); the slot must be ready(). */
  verdict(slot: number): Verdict {
    return this.#verdicts[slot] as Verdict;
  }

  /** The stat the worker took of the slot's path; undefined when nothing is there. */
  stat(slot: number): StatFields | undefined {
    const at = slot * SLOT_WORDS;
    const w = this.#words;
    if (this.#int(slot, 0) !== 1) return undefined;
    return { dev: w[at + 1]!, ino: w[at + 2]!, size: w[at + 3]!, mtimeNs: w[at + 4]!, ctimeNs: w[at + 5]!, mode: w[at + 6]! };
  }

  /** The slot's mode as a number; 0 when nothing is there. */
  mode(slot: number): number {
    return this.#int(slot, 0) === 1 ? this.#int(slot, 6) : 0;
  }

  /** The slot's size as a number. */
  size(slot: number): number {
    return this.#int(slot, 3) + this.#int(slot, 3, 4) * 2 ** 32;
  }

  /** Where the slot's dev, ino, size, mtime and ctime start in `bytes` (int64 each, native byte order). */
  statOffset(slot: number): number {
    return HEADER + slot * SLOT_BYTES + 8;
  }

  /** The low (or, at +4, high) 32 bits of a slot's word, unsigned. */
  #int(slot: number, word: number, high: 0 | 4 = 0): number {
    const at = HEADER + slot * SLOT_BYTES + word * 8;
    return LITTLE_ENDIAN ? this.#view.getUint32(at + high, true) : this.#view.getUint32(at + 4 - high, false);
  }

  /** Stops the worker; ready() answers false from now on. */
  close(): void {
    if (this.#state === 'closed') return;
    this.#state = 'closed';
    Atomics.store(this.#header, GO, -1);
    Atomics.notify(this.#header, GO);
    void this.#worker.terminate().catch(() => {});
  }
}
