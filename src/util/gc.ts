// A full garbage collection on demand, for the one moment the engine knows a
// large part of its heap just died: the state journal's bytes and text, once
// decoded (see openSession in engine.ts).
//
// Node exposes no collector call without --expose-gc at start-up. That flag,
// set later, still applies to contexts created afterwards: a new context made
// through node:vm gets `gc`, and it collects the one heap all contexts share.

let gc: (() => void) | undefined;

export function collectGarbage(): void {
  if (gc === undefined) {
    process.getBuiltinModule('node:v8').setFlagsFromString('--expose-gc');
    gc = process.getBuiltinModule('node:vm').runInNewContext('gc') as () => void;
  }
  gc();
}

let tightened = false;

/**
 * From here on, has V8 collect fully once the old generation has grown by a fifth
 * (HEAP_GROWING_PERCENT) since the last full collection; collects now, so that the
 * limit is computed with that factor at once.
 *
 * For a run about to execute many tasks (executor.ts): each holds a little more (its
 * record's place, hash-cache entries) and makes garbage that lives as long as its
 * command runs, so it outlives the young generation and is promoted. V8's own factor
 * lets the heap grow to up to four times what the last full collection kept when
 * collecting is cheap beside allocating: on a 50,000-task build, from 80 MiB after the
 * plan to 290 MiB at the end without a full collection in between (BENCHMARKS.md).
 * The flag holds for the rest of the process; the marking it adds runs mostly on
 * V8's helper thread.
 */
export function collectAsHeapGrows(): void {
  if (tightened) return;
  tightened = true;
  process.getBuiltinModule('node:v8').setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
  collectGarbage();
}

/** Whether collectAsHeapGrows was called in this process (for tests). */
export const collectsAsHeapGrows = (): boolean => tightened;

const HEAP_GROWING_PERCENT = 20;
