// `nodegraph watch`: apply, then apply again when the Nodefile, an input or a
// file the Nodefile's evaluation read changes. The one module that imports chokidar.
//
//   idle ──change──▶ debouncing ──quiet for debounce ms──▶ running ──done──▶ idle
//                      ▲   │change: restart the timer         │change
//                      │   ▼                                  ▼
//                      └──────────────────done─────────── queued
//
// A change during a run never interrupts it: one more run follows it.

import { watch, type FSWatcher } from 'chokidar';
import path from 'node:path';
import { holds } from '../util/paths.ts';
import type { TaskGraph } from '../graph/graph.ts';
import { realPath } from '../util/realpath.ts';
import { writtenBy } from '../graph/written.ts';

export type WatchState = 'idle' | 'debouncing' | 'running' | 'queued';

/** chokidar's events. */
export type WatchEvent = 'add' | 'addDir' | 'change' | 'unlink' | 'unlinkDir';

/** What the Nodefile's evaluation read (src/nodefile/reads.ts): files it read, paths it probed or listed. */
export interface WatchedReads {
  readonly files: ReadonlyMap<string, string>;
  readonly probes: readonly { readonly path: string; readonly kind: string; readonly entries?: readonly string[] }[];
}

/** The paths of `reads`, watched one level deep: a file, a probed path (through its folder when absent), a listed folder's entries. */
export function readPaths(reads: WatchedReads | undefined): string[] {
  return reads === undefined ? [] : [...reads.files.keys(), ...reads.probes.map((p) => p.path)];
}

/**
 * Files and folders whose change should trigger a run: the Nodefile, the modules
 * it imports from its own files (`modules`), and every input that no task writes.
 */
export function watchedPaths(graph: TaskGraph, modules: readonly string[] = []): string[] {
  const paths = new Set<string>([graph.file, ...modules]);
  for (const node of graph.ordered) {
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      if (input.kind === 'file' || input.kind === 'tree') paths.add(path.resolve(graph.dir, input.path));
      else if (input.kind === 'glob') paths.add(path.resolve(graph.dir, globBase(input.pattern)));
    }
  }
  return [...paths];
}

/**
 * Which of the watched folders' changes count. A glob's base folder is watched
 * whole (`*.c` watches `.`), but only a file the pattern matches is a change
 * of the glob's; and nothing in the state folder is a change at all. Otherwise
 * a log written beside the sources (`watch > watch.log`) restarted the debounce
 * with every line it wrote, forever, and every run's own journal writes caused
 * another run. What the evaluation read counts as it was read: a file on any
 * change, a probed path when it appears or goes, a listed folder when an entry
 * does; never a path the tasks write. Without a graph (the Nodefile did not
 * load) every change counts.
 */
export function watchFilter(
  graph: TaskGraph | undefined,
  modules: readonly string[],
  stateDir: string,
  reads?: WatchedReads,
): (file: string, event?: WatchEvent) => boolean {
  // Events name paths as the graph does: from the Nodefile's real folder.
  const state = realPath(stateDir) ?? stateDir;
  const inState = (file: string): boolean => holds(state, file);
  if (graph === undefined) return (file) => !inState(file);
  const exact = new Set<string>([graph.file, ...modules]);
  const read = new Set(reads?.files.keys() ?? []);
  // A probe saw only whether (and as what) a path was there; a listing only which entries a folder had.
  const probed = new Set<string>();
  const listed = new Set<string>();
  for (const probe of reads?.probes ?? []) (probe.entries === undefined ? probed : listed).add(probe.path);
  // What the tasks write is theirs: a Nodefile that reads an output at load is not run again by its own apply.
  const outputs = read.size + probed.size + listed.size === 0 ? undefined : writtenBy(graph).touches;
  const trees: string[] = [];
  const globs: string[] = [];
  for (const node of graph.ordered) {
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      if (input.kind === 'file') exact.add(path.resolve(graph.dir, input.path));
      else if (input.kind === 'tree') trees.push(path.resolve(graph.dir, input.path));
      else if (input.kind === 'glob') globs.push(input.pattern);
    }
  }
  return (file, event) => {
    if (inState(file)) return false;
    if (exact.has(file)) return true;
    if (outputs !== undefined && !outputs(file)) {
      if (read.has(file)) return true;
      if (event !== 'change' && (probed.has(file) || listed.has(file) || listed.has(path.dirname(file)))) return true;
    }
    for (const tree of trees) if (holds(tree, file)) return true;
    for (const pattern of globs) {
      if (path.matchesGlob(path.isAbsolute(pattern) ? file : path.relative(graph.dir, file), pattern)) return true;
    }
    return false;
  };
}

function globBase(pattern: string): string {
  const parts = pattern.split('/');
  const fixed = parts.findIndex((p) => /[*?[\]{}]/.test(p));
  return fixed <= 0 ? (fixed === 0 ? '.' : pattern) : parts.slice(0, fixed).join('/');
}

export interface WatchLoopOptions {
  readonly debounceMs: number;
  readonly signal: AbortSignal;
  /** One apply; returns the graph it loaded (to watch its inputs), or undefined when the Nodefile did not load. */
  readonly runOnce: () => Promise<TaskGraph | undefined>;
  readonly onState?: (state: WatchState, why?: string) => void;
  /** Paths to watch when no graph could be loaded. */
  readonly fallbackPaths: readonly string[];
  /** The modules the Nodefile imports from its own files, as of the last run (watched whether or not it loaded). */
  readonly modules?: () => readonly string[];
  /** What the Nodefile's last evaluation read besides its modules (watched whether or not it loaded). */
  readonly reads?: () => WatchedReads;
  /** The state folder: its changes are nodegraph's own (see watchFilter). */
  readonly stateDir?: string;
}

export async function watchLoop(options: WatchLoopOptions): Promise<void> {
  let state: WatchState = 'idle';
  let timer: NodeJS.Timeout | undefined;
  let watchers: FSWatcher[] = [];
  let watched = '';
  // The first change seen during a run, named when the run it queued starts.
  let queuedBy = '';
  let counts: (file: string, event?: WatchEvent) => boolean = () => true;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));

  const set = (next: WatchState, why?: string): void => {
    state = next;
    options.onState?.(next, why);
  };

  // A watcher is armed only once chokidar has set up its watches ('ready'): a
  // change before that is not seen. So "watching" is said after it, and a new
  // set of paths gets a new watcher, armed before the old one is closed, so
  // that no moment is unwatched. (chokidar's add() says nothing when it is done.)
  // What the evaluation read is watched one level deep: a folder it listed is
  // its entries, and a probe of `/` must not watch the whole machine.
  const rewatch = async (deep: readonly string[], shallow: readonly string[]): Promise<void> => {
    const key = JSON.stringify([[...new Set(deep)].sort(), [...new Set(shallow)].sort()]);
    if (watchers.length > 0 && key === watched) return;
    const fresh = [watch([...new Set(deep)], { ignoreInitial: true, awaitWriteFinish: false })];
    if (shallow.length > 0) fresh.push(watch([...new Set(shallow)], { ignoreInitial: true, awaitWriteFinish: false, depth: 0 }));
    await Promise.all(
      fresh.map((w) => {
        w.on('all', (event, file) => onChange(file, event as WatchEvent));
        return new Promise<void>((resolve) => {
          w.once('ready', resolve);
          w.once('error', () => resolve());
        });
      }),
    );
    if (options.signal.aborted) {
      await Promise.all(fresh.map((w) => w.close()));
      return;
    }
    const old = watchers;
    watchers = fresh;
    watched = key;
    await Promise.all(old.map((w) => w.close()));
  };

  const run = async (): Promise<void> => {
    set('running');
    const graph = await options.runOnce();
    const modules = options.modules?.() ?? [];
    const reads = options.reads?.();
    if (options.stateDir !== undefined) counts = watchFilter(graph, modules, options.stateDir, reads);
    await rewatch(graph === undefined ? [...options.fallbackPaths, ...modules] : watchedPaths(graph, modules), readPaths(reads));
    if (options.signal.aborted) return;
    if (state === 'queued') schedule(`${queuedBy} (changed during the run)`);
    else set('idle');
  };

  const schedule = (why: string): void => {
    clearTimeout(timer);
    set('debouncing', why);
    timer = setTimeout(() => void run(), options.debounceMs);
  };

  const onChange = (file: string, event?: WatchEvent): void => {
    if (!counts(file, event)) return;
    switch (state) {
      case 'idle':
      case 'debouncing':
        schedule(file);
        break;
      case 'running':
        queuedBy = file;
        set('queued', file);
        break;
      case 'queued':
        break;
    }
  };

  options.signal.addEventListener('abort', () => {
    clearTimeout(timer);
    void Promise.all(watchers.map((w) => w.close())).then(done);
  });
  await run();
  await finished;
}
