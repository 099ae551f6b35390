// The engine's I/O shell: load the Nodefile, open the state, observe, plan,
// execute, tear down. Commands in src/cli/ and tests call these functions;
// every expected failure comes back as a Failure value.

import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from './error.ts';
import type { ExecuteSummary } from './execute/executor.ts';
import type { EventSink } from './events.ts';
import { LocalRunner, type ProcessRunner } from './execute/runner.ts';
import { analyze } from './graph/analyze.ts';
import type { TaskGraph, TaskNode } from './graph/graph.ts';
import { HashCache } from './hash/cache.ts';
import { StatPrefetch } from './hash/prefetch.ts';
import { taskId, type IdList, type TaskId } from './ids.ts';
import { loadNodefile } from './nodefile/load.ts';
import type { Declarations } from './nodefile/builder.ts';
import type { TaskObservation, UpstreamState } from './plan/decide.ts';
import { filesToObserve, observe, type FilesToObserve } from './plan/observe.ts';
import { makePlan, selectTasks, type DecidedPlan } from './plan/plan.ts';
import { lockWarnings, openState, openStateWith, type OpenState } from './state/open.ts';
import { acquire, type Lock } from './state/lock.ts';
import { checkSeal, knownFrom, openSeal, sealCompare, sealDelta, sealPath, type OpenedSeal, type SealedRun } from './state/seal.ts';
import { openDelta } from './state/delta.ts';
import { defaultCompactWhen, journalPath } from './state/journal.ts';
import { appender, type Appender } from './execute/appender.ts';
import { collectAsHeapGrows, collectGarbage } from './util/gc.ts';
import { err, ok, type Result } from './util/result.ts';

// Built-ins by getBuiltinModule rather than import: see cli/main.ts.
const { availableParallelism } = process.getBuiltinModule('node:os');

export interface EngineOptions {
  /** Path of the Nodefile. */
  readonly nodefile: string;
  /** Where the state lives; `.nodegraph` beside the Nodefile by default. */
  readonly stateDir?: string;
  readonly runner?: ProcessRunner;
  readonly jobs?: number;
  /** Task ids (or `prefix/*` patterns) to limit the run to; with what they need. */
  readonly targets?: readonly string[];
  readonly replace?: readonly string[];
  readonly keepGoing?: boolean;
  readonly signal?: AbortSignal;
  readonly onEvent?: EventSink;
  /** The environment `env` inputs read; process.env by default. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /** Recorded as the lock holder's command. */
  readonly command?: string;
  /**
   * The wall clock in ns, for the rule that decides when a file is known by its stat
   * (hash/cache.ts, RACY ENTRIES); Date.now by default. Tests set it.
   */
  readonly now?: () => bigint;
}

export const defaultJobs = (): number => availableParallelism();

export function stateDirOf(options: Pick<EngineOptions, 'nodefile' | 'stateDir'>): string {
  return path.resolve(options.stateDir ?? path.join(path.dirname(path.resolve(options.nodefile)), '.nodegraph'));
}

/** Everything a command works on once the Nodefile is loaded and the state is open. */
export interface Session {
  readonly graph: TaskGraph;
  /** What the Nodefile declared, the graph's source (state/seal.ts digests it). */
  readonly declarations: Declarations;
  readonly state: OpenState;
  /** Where task results are recorded (the state's journal). */
  readonly store: Appender;
  readonly cache: HashCache;
  readonly runner: ProcessRunner;
  readonly signal: AbortSignal;
  readonly emit: EventSink;
  /**
   * What observing will look at, and its stats taken ahead on another thread (large graphs only); used
   * once, and again by a seal written after the run. An apply that will not seal lets `files` go.
   */
  files?: FilesToObserve | undefined;
  readonly prefetched?: StatPrefetch | undefined;
  readonly jobs: number;
  readonly targets: ReadonlySet<TaskId> | undefined;
  readonly replace: ReadonlySet<TaskId>;
  /** What `env` inputs read. */
  readonly env: Readonly<Record<string, string | undefined>>;
  /** How many warnings were emitted so far (a run that warned is not sealed: state/seal.ts). */
  readonly warnings: () => number;
  readonly now: (() => bigint) | undefined;
  /** Set when the run was planned from the seal (state/delta.ts): the graph, the records and the cache hold only what the changed files reach. */
  readonly delta?: DeltaRun | undefined;
}

/** A run planned from the seal: only some tasks are observed, planned and run; the rest are unchanged. */
export interface DeltaRun {
  /** Every task, in the order a plan lists them. */
  readonly ids: readonly TaskId[];
  /** The upstream tasks outside the run, at their recorded output hashes. */
  readonly settled: ReadonlyMap<TaskId, UpstreamState>;
  /** The whole graph, analysed when first asked for. */
  wholeGraph(): TaskGraph;
  /**
   * Seals the state again, for a run whose reached tasks all ran or were found
   * unchanged and would now be planned unchanged (the caller checks that): true
   * when it wrote the seal (state/seal.ts, sealDelta). Only with the lock.
   */
  seal(ran: readonly TaskId[]): boolean;
}

/**
 * A whole-graph session the state's seal vouched for (state/seal.ts): every
 * task is unchanged, and neither the journal nor the hash cache was loaded.
 */
export interface SealedSession {
  readonly sealed: true;
  /** The tasks, in the order a plan lists them (made strings as they are asked for). */
  readonly ids: IdList;
  /** The graph, analysed when first asked for (a sealed run does not need it). */
  graph(): TaskGraph;
  readonly io: SealedRun;
  readonly emit: EventSink;
  /** Releases the lock, if one was taken. */
  close(): void;
}

/**
 * Loads and checks the Nodefile. Declarations are first loaded without their
 * sites (fast); when something is wrong they are loaded again with them, so
 * the diagnostics can point into the Nodefile.
 */
export async function loadGraph(nodefile: string, stateDir?: string): Promise<Result<TaskGraph, Failure[]>> {
  const fast = await loadNodefile(nodefile, { sites: false });
  if (!fast.ok) return fast;
  return analyzeLoaded(nodefile, fast.value, stateDir);
}

/** Analyses declarations loaded without their sites (loadGraph), loading them again with sites if they fail. */
async function analyzeLoaded(nodefile: string, declarations: Declarations, stateDir?: string): Promise<Result<TaskGraph, Failure[]>> {
  const options = stateDir === undefined ? {} : { stateDir };
  const graph = analyze(declarations, options);
  if (graph.ok) return graph;
  const slow = await loadNodefile(nodefile, { sites: true });
  if (!slow.ok) return slow;
  const again = analyze(slow.value, options);
  return again.ok ? err(graph.error) : again;
}

/** Fills in the Nodefile sites of failures found after loading (a missing input, say). */
export async function withSites(nodefile: string, failures: Failure[]): Promise<Failure[]> {
  if (!failures.some((f) => f.reason === 'missing-input' && f.site === undefined)) return failures;
  const slow = await loadNodefile(nodefile, { sites: true });
  if (!slow.ok) return failures;
  const byId = new Map(slow.value.tasks.map((t) => [t.id as string, t]));
  return failures.map((f) => (f.reason === 'missing-input' && f.site === undefined ? { ...f, site: byId.get(f.task)?.site.get() } : f));
}

/** Resolves target words to task ids: exact ids, or `prefix/*` for every task below a prefix. */
export function resolveTargets(
  words: readonly string[] | undefined,
  known: (id: TaskId) => boolean,
  all: () => Iterable<TaskId>,
): Result<Set<TaskId> | undefined, Failure[]> {
  if (words === undefined || words.length === 0) return ok(undefined);
  const found = new Set<TaskId>();
  const failures: Failure[] = [];
  for (const word of words) {
    if (word.endsWith('/*')) {
      const prefix = word.slice(0, -1);
      let any = false;
      for (const id of all()) {
        if (id.startsWith(prefix)) {
          found.add(id);
          any = true;
        }
      }
      if (!any) failures.push({ reason: 'unknown-target', target: word });
    } else if (known(taskId(word))) found.add(taskId(word));
    else failures.push({ reason: 'unknown-target', target: word });
  }
  return failures.length > 0 ? err(failures) : ok(found);
}

/**
 * Past this size the journal's bytes and decoded text, garbage once loaded, are
 * collected at once, before observing adds to the heap. A 50,000-task no-op
 * (45 MB of journal) peaks at about 346 MiB with it, against 400-460 MiB
 * without, in the same time; 10,000 tasks (9 MB), 128 against 135 MiB. Below
 * it there is little to free, and a full collection still costs milliseconds.
 */
const COLLECT_AFTER_STATE_BYTES = 8 * 2 ** 20;

/**
 * From this many tasks to observe, V8 collects as the heap grows (util/gc.ts) from
 * before observing, not only from the executor's start. Left to V8, the heap of a
 * 50,000-leaf first build grew from the 53 MiB kept by the last full collection V8 chose
 * to 119 MiB by the end of planning (83 MiB of it live), and the process to 186 MiB: the
 * build's peak, the executor's own collections keeping it lower afterwards. With it,
 * planning peaks near 170 MiB (BENCHMARKS.md, the eighth sitting of 2026-12-02). Below
 * it, planning's garbage is small beside a full collection's cost.
 */
const COLLECT_WHILE_PLANNING_FROM = 10_000;

export async function openSession(
  options: EngineOptions,
  /** observe: false for a session that will not observe (a teardown): nothing is stat'ed ahead. */
  mode: { readonly lock: boolean; readonly observe?: boolean },
): Promise<Result<Session, Failure[]>> {
  return (await open(options, mode, false)) as Result<Session, Failure[]>;
}

/** As openSession, but a whole-graph run that the state's seal vouches for comes back sealed (state/seal.ts). */
export function openSessionOrSealed(options: EngineOptions, mode: { readonly lock: boolean }): Promise<Result<Session | SealedSession, Failure[]>> {
  return open(options, mode, true);
}

async function open(
  options: EngineOptions,
  mode: { readonly lock: boolean; readonly observe?: boolean },
  sealable: boolean,
): Promise<Result<Session | SealedSession, Failure[]>> {
  const stateDir = stateDirOf(options);
  const command = options.command ?? 'nodegraph';
  // With a seal in the state folder (state/seal.ts), the lock is taken first and the
  // seal's paths are stat'ed on another thread while the Nodefile loads: a sealed
  // no-op then waits for no stat. Without one, the lock is taken once the graph is known.
  let held: Lock | undefined;
  let seal: OpenedSeal | undefined;
  let early: StatPrefetch | undefined;
  const wholeGraph = (options.targets ?? []).length === 0 && (options.replace ?? []).length === 0;
  if (sealable && wholeGraph && existsSync(sealPath(stateDir))) {
    if (mode.lock) {
      const lock = acquire(stateDir, { command });
      if (!lock.ok) return err([lock.error]);
      held = lock.value;
    }
    seal = openSeal(held?.stateDir ?? stateDir);
    if (seal !== undefined) {
      early = StatPrefetch.startJoined(seal.paths, seal.count, undefined, seal.racyJournal ? journalPath(held?.stateDir ?? stateDir) : undefined, sealCompare(seal));
      early?.go();
    }
  }
  let opened: Result<Session | SealedSession, Failure[]> | undefined;
  try {
    opened = await openWith(options, mode, stateDir, command, held, seal, early);
    return opened;
  } finally {
    // Whatever happened, the stats taken ahead are no longer needed; the lock goes with a failure.
    early?.close();
    if (opened?.ok !== true) held?.release();
  }
}

async function openWith(
  options: EngineOptions,
  mode: { readonly lock: boolean; readonly observe?: boolean },
  stateDir: string,
  command: string,
  taken: Lock | undefined,
  seal: OpenedSeal | undefined,
  early: StatPrefetch | undefined,
): Promise<Result<Session | SealedSession, Failure[]>> {
  let held = taken;
  const declared = await loadNodefile(options.nodefile, { sites: false });
  if (!declared.ok) return declared;
  const env = options.env ?? process.env;
  const sink = options.onEvent ?? (() => {});
  let warnings = 0;
  const emit: EventSink = (event) => {
    if (event.type === 'warning') warnings++;
    sink(event);
  };
  // What every session has, whichever way it was opened (made only when one is: a sealed run needs none of it).
  const shared = (state: OpenState) => ({
    declarations: declared.value,
    state,
    store: appender(state.store),
    runner: options.runner ?? new LocalRunner(),
    signal: options.signal ?? new AbortController().signal,
    emit,
    jobs: Math.max(1, options.jobs ?? defaultJobs()),
    env,
    warnings: () => warnings,
    now: options.now,
  });
  if (seal !== undefined && mode.observe !== false) {
    const dir = held?.stateDir ?? stateDir;
    const sealed = checkSeal({ stateDir: dir, seal, declarations: declared.value, prefetched: early, env, reseal: held !== undefined, now: options.now });
    let graph: TaskGraph | undefined;
    const analysed = (): TaskGraph => {
      if (graph !== undefined) return graph;
      const result = analyze(declared.value, { stateDir });
      // The same declarations were analysed when the seal was written.
      if (!result.ok) throw new Error(`the sealed declarations no longer analyse: ${JSON.stringify(result.error[0])}`);
      return (graph = result.value);
    };
    if (sealed !== undefined && sealed.changed.length === 0) {
      for (const warning of held === undefined ? [] : lockWarnings(held)) emit({ type: 'warning', message: warning });
      return ok({ sealed: true, ids: sealed.ids, graph: analysed, io: sealed.run, emit, close: () => void held?.release() });
    }
    // Some files changed: a run of what they reach, if the seal's shape can say what that is (state/delta.ts).
    // Not once the journal has grown enough that a load would compact it: that run goes the whole way, and compacts.
    const delta =
      sealed === undefined || defaultCompactWhen({ lines: seal.journalLines, live: sealed.ids.length })
        ? undefined
        : openDelta({ stateDir: dir, declarations: declared.value, shape: seal.shape, ids: sealed.ids.all(), paths: sealed.pathOf, pathCount: seal.count, changed: sealed.changed });
    if (sealed !== undefined && delta !== undefined) {
      knownFrom(seal, sealed, delta.slots);
      const state = openStateWith(dir, delta.records, held);
      if (!state.ok) return err([state.error]);
      for (const warning of state.value.warnings) emit({ type: 'warning', message: warning });
      return ok({
        ...shared(state.value),
        graph: delta.graph,
        cache: sealed.reader,
        targets: undefined,
        replace: new Set(),
        files: filesToObserve(delta.nodes, delta.graph.dir),
        prefetched: undefined,
        delta: {
          ids: sealed.ids.all(),
          settled: delta.settled,
          wholeGraph: analysed,
          seal: (ran) =>
            held !== undefined &&
            sealDelta({
              stateDir: dir,
              seal,
              cache: sealed.reader,
              pathOf: sealed.pathOf,
              slots: delta.slots,
              ran: ran.map((id) => ({ id, position: delta.graph.get(id)!.order })),
              resealed: sealed.resealed,
              now: options.now,
            }),
        },
      });
    }
  }
  const graph = await analyzeLoaded(options.nodefile, declared.value, stateDir);
  if (!graph.ok) return graph;
  const targets = resolveTargets(options.targets, (id) => graph.value.has(id), () => graph.value.ordered.map((n) => n.id));
  if (!targets.ok) return targets;
  const replace = resolveTargets(options.replace, (id) => graph.value.has(id), () => graph.value.ordered.map((n) => n.id));
  if (!replace.ok) return replace;
  const files = mode.observe === false ? undefined : filesToObserve(selectTasks(graph.value, targets.value), graph.value.dir);
  early?.close();
  // Started now, to be ready by the time loading the state and the cache is done; it
  // stats nothing before the lock is held (see prefetch.ts). Not on a first run: with
  // no hash cache every file is read anyway, and a worker only adds its memory.
  const prefetched = files === undefined || !existsSync(path.join(stateDir, 'hashcache')) ? undefined : StatPrefetch.start(files.paths);
  if (mode.lock && held === undefined) {
    const lock = acquire(stateDir, { command });
    if (!lock.ok) {
      prefetched?.close();
      return err([lock.error]);
    }
    held = lock.value;
  }
  prefetched?.go();
  const state = openState(stateDir, { lock: mode.lock, command, ...(held === undefined ? {} : { held }) });
  if (!state.ok) {
    // openState released the lock it was given.
    prefetched?.close();
    return err([state.error]);
  }
  // A large graph's observing and planning is collected as the heap grows, from a full
  // collection now, which frees the Nodefile's garbage and the journal's (COLLECT_WHILE_PLANNING_FROM).
  if (files !== undefined && files.nodes.length >= COLLECT_WHILE_PLANNING_FROM) collectAsHeapGrows('planning');
  else if (state.value.bytes >= COLLECT_AFTER_STATE_BYTES) collectGarbage();
  for (const warning of state.value.warnings) emit({ type: 'warning', message: warning });
  const loaded = HashCache.load(path.join(state.value.dir, 'hashcache'), options.now === undefined ? {} : { now: options.now });
  if (loaded.warning !== undefined) emit({ type: 'warning', message: loaded.warning });
  if (files !== undefined) loaded.cache.reserve(files.paths.length);
  return ok({
    ...shared(state.value),
    graph: graph.value,
    cache: loaded.cache,
    targets: targets.value,
    replace: replace.value ?? new Set(),
    files,
    prefetched,
  });
}

export interface Observed {
  readonly selected: readonly TaskNode[];
  /** The executor drops each task's observation once the task is settled (execute/executor.ts). */
  readonly observations: Map<TaskId, TaskObservation>;
  readonly plan: DecidedPlan;
}

export async function observeAndPlan(session: Session): Promise<Result<Observed, Failure[]>> {
  const selected = session.files?.nodes ?? selectTasks(session.graph, session.targets);
  const observations = await observe({
    graph: session.graph,
    nodes: selected,
    records: session.state.records,
    cache: session.cache,
    runner: session.runner,
    jobs: session.jobs,
    signal: session.signal,
    env: session.env,
    files: session.files,
    prefetched: session.prefetched,
  });
  session.prefetched?.close();
  if (!observations.ok) return err(await withSites(session.graph.file, observations.error));
  const plan = makePlan(session.graph, observations.value, session.state.records, {
    ...(session.targets === undefined ? {} : { targets: session.targets }),
    replace: session.replace,
    ...(session.delta === undefined ? {} : { only: { nodes: selected, settled: session.delta.settled } }),
  });
  emitLateWarnings(session);
  return ok({ selected, observations: observations.value, plan });
}

/** Warnings about records found invalid only when something read them (state/records.ts). */
export function emitLateWarnings(session: Session): void {
  for (const warning of session.state.records.lateWarnings.splice(0)) session.emit({ type: 'warning', message: warning.message });
}

/**
 * Runs `body` with a session and always closes it: state synced, cache saved,
 * lock released. With `sealed`, a whole-graph run the state's seal vouches for
 * runs that instead (state/seal.ts).
 */
export async function withSession<T>(
  options: EngineOptions,
  mode: { readonly lock: boolean },
  body: (session: Session) => Promise<Result<T, Failure[]>>,
  sealed?: (session: SealedSession) => Result<T, Failure[]>,
): Promise<Result<T, Failure[]>> {
  const opened = sealed === undefined ? await openSession(options, mode) : await openSessionOrSealed(options, mode);
  if (!opened.ok) return opened;
  const session = opened.value;
  if ('sealed' in session) {
    try {
      return sealed!(session);
    } finally {
      session.close();
    }
  }
  try {
    return await body(session);
  } finally {
    session.prefetched?.close();
    emitLateWarnings(session);
    // A read-only command (plan, status, explain) keeps what it hashed for the next run,
    // but does not make the state folder for it: a dry run on a new project writes nothing.
    if (mode.lock || existsSync(session.state.dir)) session.cache.save();
    session.state.close();
  }
}

export type { ExecuteSummary };
