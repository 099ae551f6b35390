// `nodegraph watch`: apply, then apply again when the Nodefile or an input
// changes. The one module that imports chokidar.
//
//   idle ──change──▶ debouncing ──quiet for debounce ms──▶ running ──done──▶ idle
//                      ▲   │change: restart the timer         │change
//                      │   ▼                                  ▼
//                      └──────────────────done─────────── queued
//
// A change during a run never interrupts it: one more run follows it.

import { watch, type FSWatcher } from 'chokidar';
import path from 'node:path';
import { holds } from '../graph/analyze.ts';
import type { TaskGraph } from '../graph/graph.ts';
import { realPath } from '../util/realpath.ts';

export type WatchState = 'idle' | 'debouncing' | 'running' | 'queued';

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
 * another run. Without a graph (the Nodefile did not load) every change counts.
 */
export function watchFilter(graph: TaskGraph | undefined, modules: readonly string[], stateDir: string): (file: string) => boolean {
  // Events name paths as the graph does: from the Nodefile's real folder.
  const state = realPath(stateDir) ?? stateDir;
  const inState = (file: string): boolean => holds(state, file);
  if (graph === undefined) return (file) => !inState(file);
  const exact = new Set<string>([graph.file, ...modules]);
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
  return (file) => {
    if (inState(file)) return false;
    if (exact.has(file)) return true;
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
  /** The state folder: its changes are nodegraph's own (see watchFilter). */
  readonly stateDir?: string;
}

export async function watchLoop(options: WatchLoopOptions): Promise<void> {
  let state: WatchState = 'idle';
  let timer: NodeJS.Timeout | undefined;
  let watcher: FSWatcher | undefined;
  let watched = new Set<string>();
  let counts: (file: string) => boolean = () => true;
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
  const rewatch = async (paths: readonly string[]): Promise<void> => {
    const next = new Set(paths);
    if (watcher !== undefined && next.size === watched.size && paths.every((p) => watched.has(p))) return;
    const fresh = watch([...next], { ignoreInitial: true, awaitWriteFinish: false });
    fresh.on('all', (_event, file) => onChange(file));
    await new Promise<void>((resolve) => {
      fresh.once('ready', resolve);
      fresh.once('error', () => resolve());
    });
    if (options.signal.aborted) {
      await fresh.close();
      return;
    }
    const old = watcher;
    watcher = fresh;
    watched = next;
    await old?.close();
  };

  const run = async (): Promise<void> => {
    set('running');
    const graph = await options.runOnce();
    const modules = options.modules?.() ?? [];
    if (options.stateDir !== undefined) counts = watchFilter(graph, modules, options.stateDir);
    await rewatch(graph === undefined ? [...options.fallbackPaths, ...modules] : watchedPaths(graph, modules));
    if (options.signal.aborted) return;
    if (state === 'queued') schedule('changed during the run');
    else set('idle');
  };

  const schedule = (why: string): void => {
    clearTimeout(timer);
    set('debouncing', why);
    timer = setTimeout(() => void run(), options.debounceMs);
  };

  const onChange = (file: string): void => {
    if (!counts(file)) return;
    switch (state) {
      case 'idle':
      case 'debouncing':
        schedule(file);
        break;
      case 'running':
        set('queued', file);
        break;
      case 'queued':
        break;
    }
  };

  options.signal.addEventListener('abort', () => {
    clearTimeout(timer);
    void watcher?.close().then(done);
    if (watcher === undefined) done();
  });
  await run();
  await finished;
}
