// A full garbage collection on demand, for the moments the engine knows a large
// part of its heap just died: the state journal's bytes and text, once decoded
// (see openSession in engine.ts), and what planning left before a long build;
// and a compacting one, which gives the pages back, every so many tasks of it.
//
// Node exposes no collector call without --expose-gc at start-up. That flag,
// set later, still applies to contexts created afterwards: a new context made
// through node:vm gets `gc`, and it collects the one heap all contexts share.

type Collector = (options?: { type: 'major'; execution: 'sync'; flavor: 'last-resort' }) => void;

let gc: Collector | undefined;

/**
 * With `compact`, the collection V8 makes as a last resort before running out of
 * memory: it collects until nothing more dies, moves what lives out of sparse
 * pages, and gives the pages it emptied back to the system. A plain full
 * collection frees objects but keeps most of their pages mapped.
 */
export function collectGarbage(options: { readonly compact?: boolean } = {}): void {
  if (gc === undefined) {
    process.getBuiltinModule('node:v8').setFlagsFromString('--expose-gc');
    gc = process.getBuiltinModule('node:vm').runInNewContext('gc') as Collector;
  }
  if (options.compact === true) {
    compacted++;
    gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  } else {
    collected++;
    gc();
  }
  usedAfter = heapUsed();
}

const heapUsed = (): number => process.getBuiltinModule('node:v8').getHeapStatistics().used_heap_size;
/** The heap's used bytes after the last collectGarbage. */
let usedAfter = 0;

/**
 * Collects (without compacting) if the heap has grown by `bytes` or more since
 * collectGarbage last ran; true if it did. V8 starts a full collection on its own
 * only once the old generation has grown by 8 MB or more (and by GROWING_PERCENT),
 * and until then what a long build promotes and drops is garbage in pages it keeps.
 */
export function collectIfGrown(bytes: number): boolean {
  if (heapUsed() - usedAfter < bytes) return false;
  collectGarbage();
  return true;
}

let compacted = 0;
let collected = 0;

/** How many compacting collections this process has made (for tests). */
export const compactions = (): number => compacted;
/** How many other full collections collectGarbage made (for tests). */
export const collections = (): number => collected;

/**
 * How far the old generation may grow, in percent, between full collections once
 * collectAsHeapGrows is called: while a large graph is observed and planned, and while
 * many tasks execute. Planning allocates fast and briefly: a fifth keeps its collections
 * few (still, a 50,000-leaf plan that runs no task takes 5-10 % longer with them). A
 * build allocates slowly for minutes: a tenth costs a collection every 20-30 s at
 * 50,000 tasks and kept that build's resident set 6 MiB lower than a fifth did
 * (BENCHMARKS.md, the eighth sitting of 2026-12-02).
 */
const GROWING_PERCENT = { planning: 20, executing: 10 } as const;

export type HeapPhase = keyof typeof GROWING_PERCENT;

let phase: HeapPhase | undefined;

/**
 * From here on, has V8 collect fully once the old generation has grown by
 * GROWING_PERCENT[now] since the last full collection; collects now, so that the
 * limit is computed with that factor at once (and what the phase before left is freed).
 *
 * V8's own factor lets the heap grow to up to four times what the last full collection
 * kept when collecting is cheap beside allocating. A 50,000-task build grew from 80 MiB
 * after the plan to 290 MiB at its end without a full collection in between: each task
 * holds a little more (its record's place, hash-cache entries) and makes garbage that
 * lives as long as its command runs, so it outlives the young generation and is
 * promoted (executor.ts). Its observing and planning, left to V8, grew the heap from
 * 53 to 119 MiB, 83 of it live, which became the build's peak once the executor
 * collected (engine.ts). The flag holds for the rest of the process; the marking it
 * adds runs mostly on V8's helper thread.
 */
export function collectAsHeapGrows(now: HeapPhase): void {
  if (phase !== now) process.getBuiltinModule('node:v8').setFlagsFromString(`--heap-growing-percent=${GROWING_PERCENT[now]}`);
  phase = now;
  // Not compacted, before executing either: compacting maps new pages for what it moves before
  // the old ones go, and at the plan's end, with what was observed spread over pages among what
  // observing dropped, that took a 50,000-leaf build from 141 to 147.6-150 MiB, its peak. The
  // executor compacts once 5,000 tasks have settled and their observations are gone, and collects
  // as the heap grows meanwhile, so what planning left is used again (BENCHMARKS.md, the fifteenth
  // sitting). Not before planning either: moving a heap that has just loaded a graph was then the peak.
  collectGarbage();
}

/**
 * The phase collectAsHeapGrows was last called for in this process, if any: observing
 * collects as it goes while it is `planning` (plan/observe.ts).
 */
export const heapPhase = (): HeapPhase | undefined => phase;
