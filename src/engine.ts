// The engine's I/O shell: load the Nodefile, open the state, observe, plan,
// execute, tear down. Commands in src/cli/ and tests call these functions;
// every expected failure comes back as a Failure value.

import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from './error.ts';
import { nearest } from './util/nearest.ts';
import type { ExecuteSummary } from './execute/scheduler.ts';
import { sinkOf, type EventSink } from './events.ts';
import { LocalRunner } from './execute/runner.ts';
import type { ProcessRunner } from './process-runner.ts';
import { analyze } from './graph/analyze.ts';
import type { TaskGraph, TaskNode } from './graph/graph.ts';
import { HashCache } from './hash/cache.ts';
import { taskId, type TaskId } from './ids.ts';
import { loadNodefile } from './nodefile/load.ts';
import type { Declarations } from './nodefile/builder.ts';
import type { TaskObservation } from './plan/decide.ts';
import type { ObservedSources } from './hash/observation.ts';
import { observe } from './observe/observe.ts';
import { makePlan, selectTasks, type DecidedPlan } from './plan/plan.ts';
import { openState, type OpenState } from './state/open.ts';
import type { Lock } from './state/lock.ts';
import { stateKey } from './state/key.ts';
import { appender, type Appender } from './execute/appender.ts';
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
  /**
   * How the engine waits out a time (the health poll's pause, transaction/health.ts); a
   * timer by default. A test that sets `now` to a clock of its own sets this to move it.
   */
  readonly sleep?: (ms: number) => Promise<void>;
  /** The state lock, taken already by the caller, which also releases it (an atomic apply's inner runs). */
  readonly lock?: Lock;
  /** Told what each load of the Nodefile gave, the graph or why not (watch follows the last one's inputs). */
  readonly onLoad?: (loaded: Result<TaskGraph, Failure[]>) => void;
  /** Told as each step of a run ends: the Nodefile, the analysis, the journal, observing… (`--timings`, cli/timings.ts). */
  readonly onPhase?: (phase: string, detail?: string) => void;
  /** How long a check runs before the run says it waits on it (ms, wall clock); SLOW_CHECK_MS by default. */
  readonly slowCheckMs?: number;
}

/** How long a check may run before a run says it is waiting on it, as Terraform says "Still reading… [10s elapsed]". */
export const SLOW_CHECK_MS = 10_000;

export const defaultJobs = (): number => availableParallelism();

/** `1 task`, `2 tasks`: what a step of a run counted (onPhase). */
const count = (n: number, what: string): string => `${n} ${what}${n === 1 ? '' : 's'}`;

export function stateDirOf(options: Pick<EngineOptions, 'nodefile' | 'stateDir'>): string {
  return path.resolve(options.stateDir ?? path.join(path.dirname(path.resolve(options.nodefile)), '.nodegraph'));
}

/** Everything a command works on once the Nodefile is loaded and the state is open. */
export interface Session {
  readonly graph: TaskGraph;
  /** What the Nodefile declared, the graph's source. */
  readonly declarations: Declarations;
  readonly state: OpenState;
  /** Where task results are recorded (the state's journal). */
  readonly store: Appender;
  readonly cache: HashCache;
  readonly runner: ProcessRunner;
  readonly signal: AbortSignal;
  readonly emit: EventSink;
  readonly jobs: number;
  readonly targets: ReadonlySet<TaskId> | undefined;
  readonly replace: ReadonlySet<TaskId>;
  /** What `env` inputs read. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly now: (() => bigint) | undefined;
  /** EngineOptions.onPhase, or nothing. */
  readonly phase: (phase: string, detail?: string) => void;
  readonly slowCheckMs: number;
}

/**
 * Loads and checks the Nodefile. Declarations are first loaded without their
 * sites (fast); when something is wrong they are loaded again with them, so
 * the diagnostics can point into the Nodefile.
 */
export async function loadGraph(nodefile: string, stateDir?: string): Promise<Result<TaskGraph, Failure[]>> {
  const fast = await loadNodefile(nodefile, { sites: false, ...(stateDir === undefined ? {} : { stateDir }) });
  if (!fast.ok) return fast;
  return analyzeLoaded(nodefile, fast.value, stateDir);
}

/** Analyses declarations loaded without their sites (loadGraph), loading them again with sites if they fail. */
async function analyzeLoaded(nodefile: string, declarations: Declarations, stateDir?: string): Promise<Result<TaskGraph, Failure[]>> {
  const options = stateDir === undefined ? {} : { stateDir };
  const graph = analyze(declarations, options);
  if (graph.ok) return graph;
  const slow = await loadNodefile(nodefile, { sites: true, ...options });
  if (!slow.ok) return slow;
  const again = analyze(slow.value, options);
  return again.ok ? err(graph.error) : again;
}

/** Fills in the Nodefile sites of failures found after loading (a missing input, say). */
export async function withSites(nodefile: string, failures: Failure[]): Promise<Failure[]> {
  const siteless = (f: Failure): f is Extract<Failure, { reason: 'missing-input' | 'invalid-field' }> & { task: string } =>
    (f.reason === 'missing-input' || f.reason === 'invalid-field') && f.site === undefined && f.task !== undefined;
  if (!failures.some(siteless)) return failures;
  const slow = await loadNodefile(nodefile, { sites: true });
  if (!slow.ok) return failures;
  const byId = new Map(slow.value.tasks.map((t) => [t.id as string, t]));
  return failures.map((f) => (siteless(f) ? { ...f, site: byId.get(f.task)?.site.get() } : f));
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
    else {
      const suggestion = nearest(word, all());
      failures.push({ reason: 'unknown-target', target: word, ...(suggestion === undefined ? {} : { suggestion }) });
    }
  }
  return failures.length > 0 ? err(failures) : ok(found);
}

/**
 * Loads the Nodefile, given up on the signal: its top level may await anything, and an import cannot be
 * cut short (the command ends at once, and the evaluation with it).
 */
async function loadUnlessInterrupted(file: string, options: { sites: boolean; stateDir: string }, signal: AbortSignal | undefined): Promise<Result<Declarations, Failure[]>> {
  const interrupted = err<Failure[]>([{ reason: 'interrupted', during: 'load' }]);
  if (signal === undefined) return loadNodefile(file, options);
  if (signal.aborted) return interrupted;
  let onAbort = (): void => {};
  const aborted = new Promise<typeof interrupted>((resolve) => signal.addEventListener('abort', (onAbort = () => resolve(interrupted)), { once: true }));
  try {
    const loaded = await Promise.race([loadNodefile(file, options), aborted]);
    return signal.aborted ? interrupted : loaded;
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * Loads the Nodefile, analyses it, and opens the state (with the lock for a
 * command that writes) and the hash cache. Every command goes this way.
 */
export async function openSession(options: EngineOptions, mode: { readonly lock: boolean }): Promise<Result<Session, Failure[]>> {
  const stateDir = stateDirOf(options);
  const command = options.command ?? 'nodegraph';
  const phase = options.onPhase ?? (() => {});
  const declared = await loadUnlessInterrupted(options.nodefile, { sites: false, stateDir }, options.signal);
  if (!declared.ok) {
    options.onLoad?.(declared);
    return declared;
  }
  phase('nodefile', `${count(declared.value.tasks.length, 'task')} declared`);
  const graph = await analyzeLoaded(options.nodefile, declared.value, stateDir);
  options.onLoad?.(graph);
  if (!graph.ok) return graph;
  phase('analysis');
  const targets = resolveTargets(options.targets, (id) => graph.value.has(id), () => graph.value.ordered.map((n) => n.id));
  if (!targets.ok) return targets;
  const replace = resolveTargets(options.replace, (id) => graph.value.has(id), () => graph.value.ordered.map((n) => n.id));
  if (!replace.ok) return replace;
  const state = openState(stateDir, { lock: mode.lock, command, ...(options.lock === undefined ? {} : { held: options.lock }) });
  if (!state.ok) return err([state.error]);
  phase('journal', count(state.value.records.size, 'record'));
  const emit = sinkOf(options);
  for (const warning of state.value.warnings) emit({ type: 'warning', message: warning });
  const loaded = HashCache.load(path.join(state.value.dir, 'hashcache'), options.now === undefined ? {} : { now: options.now });
  if (loaded.warning !== undefined) emit({ type: 'warning', message: loaded.warning });
  phase('hash cache', count(loaded.cache.size, 'file'));
  return ok({
    graph: graph.value,
    declarations: declared.value,
    state: state.value,
    store: appender(state.value.store),
    cache: loaded.cache,
    runner: options.runner ?? new LocalRunner(),
    signal: options.signal ?? new AbortController().signal,
    emit,
    jobs: Math.max(1, options.jobs ?? defaultJobs()),
    targets: targets.value,
    replace: replace.value ?? new Set(),
    env: options.env ?? process.env,
    now: options.now,
    phase,
    slowCheckMs: options.slowCheckMs ?? SLOW_CHECK_MS,
  });
}

export interface Observed {
  readonly selected: readonly TaskNode[];
  /** The executor drops each task's observation once the task is settled (execute/scheduler.ts). */
  readonly observations: Map<TaskId, TaskObservation>;
  readonly plan: DecidedPlan;
}

/**
 * `keyed`: the observation is kept (a saved plan), so a missing state key is made, as a command
 * holding the lock makes it. `shown`: the observation is only shown, so the inputs of a task
 * without a record are not read (observe's unrecordedInputs 'look'). `onSources`: given what
 * observing read of the tasks' sources (observe's onSources).
 */
export async function observeAndPlan(
  session: Session,
  options: { readonly keyed?: boolean; readonly shown?: boolean; readonly onSources?: (sources: ObservedSources) => void } = {},
): Promise<Result<Observed, Failure[]>> {
  const selected = selectTasks(session.graph, session.targets);
  const observations = await observe({
    graph: session.graph,
    nodes: selected,
    records: session.state.records,
    cache: session.cache,
    runner: session.runner,
    jobs: session.jobs,
    signal: session.signal,
    env: session.env,
    // A command holding the lock makes the key when none is there yet; a read-only one does not write.
    key: () => stateKey(session.state.dir, session.state.lock !== undefined || options.keyed === true),
    unrecordedInputs: options.shown === true ? 'look' : 'hash',
    ...(options.onSources === undefined ? {} : { onSources: options.onSources }),
    slowCheck: { afterMs: session.slowCheckMs, say: (node) => session.emit({ type: 'warning', message: slowCheck(node, session.slowCheckMs) }) },
  });
  if (!observations.ok) return err(await withSites(session.graph.file, observations.error));
  const { stats, contentReads } = session.cache.counters;
  session.phase('observe', `${count(selected.length, 'task')}, ${count(stats, 'stat')}, ${count(contentReads, 'file')} read`);
  const plan = makePlan(session.graph, observations.value, session.state.records, {
    ...(session.targets === undefined ? {} : { targets: session.targets }),
    replace: session.replace,
  });
  session.phase('plan');
  emitLateWarnings(session);
  return ok({ selected, observations: observations.value, plan });
}

/** What a run says of a check it has waited on for `ms`: which, and what would bound it. */
function slowCheck(node: TaskNode, ms: number): string {
  const timeout = node.decl.spec.timeout;
  const bound = timeout === undefined ? 'it has no `timeout` to bound it' : `its timeout of ${timeout} bounds it`;
  return `${node.id}: its check has not answered after ${ms / 1000} s, and the run waits for it (${bound}; Ctrl-C stops it)`;
}

/** Warnings about records found invalid only when something read them (state/records.ts). */
export function emitLateWarnings(session: Session): void {
  for (const warning of session.state.records.lateWarnings.splice(0)) session.emit({ type: 'warning', message: warning.message });
}

/**
 * Runs `body` with a session and always closes it (closeSession): what it
 * hashed and the tidied journal are kept only when the body succeeded.
 */
export async function withSession<T>(
  options: EngineOptions,
  mode: { readonly lock: boolean },
  body: (session: Session) => Promise<Result<T, Failure[]>>,
): Promise<Result<T, Failure[]>> {
  const opened = await openSession(options, mode);
  if (!opened.ok) return opened;
  const session = opened.value;
  let result: Result<T, Failure[]> | undefined;
  try {
    result = await body(session);
    return result;
  } finally {
    closeSession(session, mode, result?.ok === true);
  }
}

/**
 * Closes a session: state synced, lock released. What the run hashed is kept
 * for the next (the hash cache), and the journal tidied, only when the command
 * succeeded: a command that fails with an error leaves the state folder as it
 * found it.
 */
export function closeSession(session: Session, mode: { readonly lock: boolean }, succeeded: boolean): void {
  emitLateWarnings(session);
  try {
    if (succeeded) {
      // A read-only command (plan, status, explain) keeps what it hashed for the next run,
      // but does not make the state folder for it: a dry run on a new project writes nothing.
      if (mode.lock || existsSync(session.state.dir)) session.cache.save();
      const warning = session.state.tidy();
      if (warning !== undefined) session.emit({ type: 'warning', message: warning });
    }
  } finally {
    session.state.close();
    session.phase('close');
  }
}

/**
 * Opens the state alone (no Nodefile) under a lock the caller holds, runs
 * `body` over its records and a journal appender, and closes it: what a
 * rollback's teardown and a healthy apply's retirement work on.
 */
export async function withState<T>(stateDir: string, lock: Lock, body: (state: OpenState, store: Appender) => Promise<T>): Promise<Result<T, Failure>> {
  const state = openState(stateDir, { lock: true, held: lock });
  if (!state.ok) return err(state.error);
  try {
    const store = appender(state.value.store);
    const value = await body(state.value, store);
    store.sync();
    return store.failure === undefined ? ok(value) : err(store.failure);
  } finally {
    state.value.close();
  }
}

export type { ExecuteSummary };
