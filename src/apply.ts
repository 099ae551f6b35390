// Apply, as the commands run it: one apply under the state lock, recorded as a
// generation when the whole graph settles; an atomic one inside a transaction
// (src/transaction/) that commits once the graph is healthy or rolls back; an
// interrupted transaction finished before anything else; `rollback` to an
// earlier generation; the generations listed.

import path from 'node:path';
import { closeSession, defaultJobs, observeAndPlan, openSession, stateDirOf, withState, type EngineOptions, type Session } from './engine.ts';
import type { Failure } from './error.ts';
import { sinkOf } from './events.ts';
import { LocalRunner } from './execute/runner.ts';
import { recipeOf } from './execute/run-task.ts';
import { teardown, type TeardownSummary } from './execute/teardown.ts';
import { execute, type ExecuteSummary } from './execute/scheduler.ts';
import type { TaskGraph, TaskNode } from './graph/graph.ts';
import type { TaskId } from './ids.ts';
import { evaluatedSha256, nodefileModules, nodefileReads } from './nodefile/load.ts';
import { guardOf, ioOf, orphansOf, orphansOfAnother, runTeardown, type IoCounters } from './operations.ts';
import type { Plan } from './plan/plan.ts';
import { bindPlan, planChanges, readSavedPlan, type SavedPlan } from './plan/saved.ts';
import type { ProcessRunner } from './process-runner.ts';
import { stateKey } from './state/key.ts';
import { acquire, borrow } from './state/lock.ts';
import { lockWarnings } from './state/open.ts';
import { advance, beginTransaction, commit, generationProblem, rollBack, type RollbackContext } from './transaction/atomic.ts';
import { describeRestored, DEFAULT_KEEP, GenerationStore } from './transaction/generations.ts';
import { sealSources, sourceFiles, type SourceFiles, type Sources } from './transaction/manifest.ts';
import type { ObservedSources } from './hash/observation.ts';
import { waitHealthy } from './transaction/health.ts';
import { IntentLog, type Intent } from './transaction/intents.ts';
import { readTransaction, transactionDir, type Transaction } from './transaction/record.ts';
import { realPath } from './util/realpath.ts';
import { err, ok, type Result } from './util/result.ts';

export interface ApplySummary extends ExecuteSummary {
  /** The graph that was applied (watch follows its inputs). */
  readonly graph: TaskGraph;
  readonly plan: Plan;
  readonly io: IoCounters;
  readonly destroyed: TaskId[];
  /** Tasks no longer declared that were stopped and kept (`retire: 'stop'`), not destroyed. */
  readonly stopped: TaskId[];
  readonly durationMs: number;
  /** The generation the machine is at after the apply, once one was recorded. */
  readonly generation?: number | undefined;
  /** An interrupted atomic apply this run finished first. */
  readonly recovered?: { readonly from: number | null; readonly to: number; readonly outcome: 'rolled-back' | 'committed' };
}

export interface ApplyOptions extends EngineOptions {
  readonly planFile?: string;
  /** `nodefile` was named (-f): a saved plan of another Nodefile is refused rather than followed. */
  readonly nodefileNamed?: boolean;
  /** Undo the apply if it fails or is not healthy; undefined: as the Nodefile's `ng.settings` says. */
  readonly atomic?: boolean;
  /** Finish an interrupted atomic apply's change rather than roll it back. */
  readonly continue?: boolean;
  /** Generations to keep (DEFAULT_KEEP). */
  readonly keep?: number;
  /** A rollback: the generation it returns to says what stays, whichever Nodefile it was applied from. */
  readonly rollingBack?: true;
}

/**
 * Applies the Nodefile; with `planFile`, only if nothing changed since that
 * plan was made. An interrupted atomic apply is finished first: rolled back,
 * or with `continue`, carried forward. A whole-graph apply that settles
 * records a generation; an atomic one is undone when it fails.
 */
export async function applyNodefile(options: ApplyOptions): Promise<Result<ApplySummary, Failure[]>> {
  let effective: ApplyOptions = options;
  let saved: SavedPlan | undefined;
  if (options.planFile !== undefined) {
    const read = readSavedPlan(options.planFile);
    if (!read.ok) return err([read.error]);
    saved = read.value;
    if (options.nodefileNamed === true && (realPath(options.nodefile) ?? path.resolve(options.nodefile)) !== saved.nodefile) {
      return err([{ reason: 'usage', command: 'apply', message: `the saved plan ${options.planFile} is of ${saved.nodefile}, not of ${options.nodefile}` }]);
    }
    effective = { ...options, nodefile: saved.nodefile, targets: saved.targets, replace: saved.replace };
  }
  if (options.lock !== undefined) return applyWhole(effective, saved, 'as-set');
  const stateDir = stateDirOf(effective);
  return withLock(effective, async (inner) => {
    const pending = readTransaction(stateDir);
    if (!pending.ok) return pending;
    if (pending.value === undefined) {
      if (options.continue === true) return err([{ reason: 'usage', message: 'there is no interrupted atomic apply to continue' }]);
      return await applyWhole(inner, saved, 'as-set');
    }
    const finished = await finishTransaction(inner, pending.value);
    if (!finished.ok) return finished;
    if (finished.value.applied !== undefined) return ok({ ...finished.value.applied, recovered: finished.value.recovered });
    const then = await applyWhole(inner, saved, 'as-set');
    return then.ok ? ok({ ...then.value, recovered: finished.value.recovered }) : then;
  });
}

/**
 * Runs `body` holding the state lock for all its steps (an atomic apply's
 * rollback runs after the apply's own session closed). A state folder that
 * only the lock made, and that holds nothing when it is released, goes with it
 * (state/lock.ts): a failed first apply leaves the project as it found it.
 */
async function withLock<T>(options: ApplyOptions, body: (inner: ApplyOptions) => Promise<Result<T, Failure[]>>): Promise<Result<T, Failure[]>> {
  const stateDir = stateDirOf(options);
  const taken = acquire(stateDir, { command: options.command ?? 'nodegraph' });
  if (!taken.ok) return err([taken.error.reason === 'locked' ? taken.error : { reason: 'state-dir-unwritable', path: taken.error.path, message: taken.error.message }]);
  for (const warning of lockWarnings(taken.value)) options.onEvent?.({ type: 'warning', message: warning });
  options.onPhase?.('lock');
  try {
    return await body({ ...options, lock: borrow(taken.value) });
  } finally {
    taken.value.release();
  }
}

/**
 * How a whole apply treats atomicity: 'as-set' (the options and the
 * Nodefile's settings decide), 'resume' (it carries on a transaction), or
 * 'plain' (a rollback's re-apply of the previous generation: never atomic).
 */
type Atomicity = 'as-set' | 'plain' | { readonly resume: Transaction };

/** What one run over one session did: its summary, and the transaction it ran in, if any. */
interface Run {
  /** Failures that ended the run (before or after its tasks). */
  readonly failures: readonly Failure[];
  /** Present once the tasks ran. */
  readonly summary?: ApplySummary | undefined;
  readonly transaction?: Transaction | undefined;
  /** What the graph no longer declares: retired once an atomic apply is healthy. */
  readonly orphans: readonly TaskId[];
}

/** One apply under the lock the caller holds: one run over one opened session, then an atomic one's settling. */
async function applyWhole(options: ApplyOptions, saved: SavedPlan | undefined, atomicity: Atomicity): Promise<Result<ApplySummary, Failure[]>> {
  const opened = await openSession(options, { lock: true });
  if (!opened.ok) return opened;
  const session = opened.value;
  let run: Run | undefined;
  try {
    run = await runOnce(session, options, saved, atomicity);
  } finally {
    closeSession(session, { lock: true }, run !== undefined && run.failures.length === 0);
  }
  if (run.transaction === undefined) return run.failures.length > 0 ? err([...run.failures]) : ok(run.summary!);
  return settle(options, session, run.transaction, run);
}

/** Observe, plan, (begin a transaction,) execute and record: everything one session does, as one value. */
async function runOnce(session: Session, options: ApplyOptions, saved: SavedPlan | undefined, atomicity: Atomicity): Promise<Run> {
  const started = Date.now();
  const stateDir = stateDirOf(options);
  const store = new GenerationStore(stateDir);
  const whole = session.targets === undefined;
  // A whole apply records its sources: the files are taken while observing, which lets go of what it looked at.
  let files: SourceFiles | undefined;
  const onSources = (seen: ObservedSources): void => void (files = sourceFiles(session.graph, nodefileModules(), seen, nodefileReads(), evaluatedSha256));
  const observed = await observeAndPlan(session, whole ? { onSources } : {});
  if (!observed.ok) return { failures: observed.error, orphans: [] };
  const { plan, selected, observations } = observed.value;
  if (saved !== undefined) {
    const now = bindPlan(session.graph, selected, observations, session.state.records, plan, {
      targets: saved.targets,
      replace: saved.replace,
      createdAt: saved.createdAt,
    });
    const changes = planChanges(saved, now);
    if (changes.length > 0) return { failures: [{ reason: 'plan-stale', path: options.planFile!, changes }], orphans: [] };
  }
  // A whole-graph plan lists the orphans, dependents first: no second search of 50,000 records for them.
  const orphans = orphansOf(plan);
  const refused = options.rollingBack === true ? undefined : orphansOfAnother(stateDir, session.graph, orphans, 'apply');
  if (refused !== undefined) return { failures: [refused], orphans: [] };
  let sources: Sources | undefined;
  if (whole) {
    // The lock is held: the key is made if missing, and manifests that hold env values in plain are sealed first.
    const key = stateKey(stateDir, true);
    if (!key.ok) return { failures: [key.error], orphans: [] };
    const sealed = store.sealPlain(key.value);
    if (!sealed.ok) return { failures: [sealed.error], orphans: [] };
    sources = sealSources(session.graph.file, files!, session.env, key.value);
  }
  const setting = session.graph.settings.atomic;
  let transaction = typeof atomicity === 'object' ? atomicity.resume : undefined;
  const atomic = atomicity === 'as-set' && whole && (setting === 'always' || (options.atomic ?? setting ?? false));
  if (atomic && plan.counts.unchanged < plan.size) {
    const begun = beginTransaction({
      stateDir,
      store,
      records: session.state.records,
      sources: sources!,
      preserve: session.graph.preserve,
      command: options.command ?? 'nodegraph apply',
    });
    if (!begun.ok) return { failures: [begun.error], orphans: [] };
    transaction = begun.value;
    const kept = session.graph.preserve.length;
    session.emit({
      type: 'transaction',
      message: `atomic apply to generation ${transaction.to}${transaction.from === null ? '' : ` (falls back to ${transaction.from})`}${kept === 0 ? '' : `; saved ${kept} preserved path${kept === 1 ? '' : 's'}`}`,
    });
  }
  session.emit({ type: 'plan', plan: plan.undecided });

  // Blue/green: an atomic apply retires what it no longer declares only once the new generation is healthy.
  const removed = transaction === undefined && orphans.length > 0 ? await runTeardown({ ...session, guard: guardOf(options) }, orphans, 'retire') : undefined;
  const { destroyed, stopped } = removed === undefined ? { destroyed: [], stopped: [] } : retiredOf(removed);
  const intents = transaction === undefined ? undefined : new IntentLog(transactionDir(stateDir));
  let summary: ExecuteSummary;
  try {
    summary = await execute({
      graph: session.graph,
      selected,
      observations,
      records: session.state.records,
      store: session.store,
      cache: session.cache,
      runner: session.runner,
      jobs: session.jobs,
      keepGoing: options.keepGoing ?? false,
      replace: session.replace,
      signal: session.signal,
      emit: session.emit,
      planned: plan.decisions,
      guard: guardOf(options),
      ...(intents === undefined ? {} : { intend: (node: TaskNode) => intents.record(intentOf(node)) }),
      stateDir,
    });
  } finally {
    intents?.close();
  }
  // An orphan that would not go failed as a task does: the apply says so, exits 1 and records no generation
  // (an atomic apply retires its orphans once healthy, and one that stays is a warning: see retire).
  if (removed !== undefined) summary = withTeardown(summary, removed);
  session.store.sync();
  session.phase('run', `${summary.ran.length} ran`);
  const settled = summary.failed.length === 0 && summary.skipped.length === 0 && summary.canceled.length === 0 && !session.signal.aborted && session.store.failure === undefined;
  // A whole-graph run saw every file that matters: forget the rest, so the cache does not only grow.
  if (whole && settled) session.cache.prune();
  const durationMs = Date.now() - started;
  session.emit({
    type: 'summary',
    command: 'apply',
    durationMs,
    counts: {
      ran: summary.ran.length,
      failed: summary.failed.length,
      skipped: summary.skipped.length,
      canceled: summary.canceled.length,
      'up-to-date': summary.upToDate,
      destroyed: destroyed.length,
      ...(stopped.length === 0 ? {} : { stopped: stopped.length }),
    },
  });
  let generation = store.current();
  if (whole && settled && transaction === undefined) {
    const recorded = recordGeneration(store, sources!, summary.ran, destroyed, options.keep ?? DEFAULT_KEEP);
    if (typeof recorded === 'string') session.emit({ type: 'warning', message: `no generation recorded: ${recorded}` });
    else generation = recorded;
    session.phase('generation');
  }
  const applied: ApplySummary = { ...summary, graph: session.graph, plan: plan.undecided, destroyed, stopped, durationMs, io: ioOf(session), generation };
  // After the summary: what ran is said either way, and then why the run stopped.
  return { failures: session.store.failure === undefined ? [] : [session.store.failure], summary: applied, transaction, orphans };
}

/** A task's write-ahead intent: what undoes it, as its record would say. */
function intentOf(node: TaskNode): Intent {
  return { id: node.id, recipe: recipeOf(node), edges: { needs: [...node.needs], after: [...node.after] }, outputs: [...node.outputs] };
}

/** Records the sources as a new generation unless they are the current one's; a number, or why not. */
function recordGeneration(store: GenerationStore, sources: Sources, ran: readonly TaskId[], destroyed: readonly TaskId[], keep: number): number | string {
  const current = store.current();
  if (current !== undefined && store.currentDigest() === sources.digest) {
    store.prune(keep); // a lowered --keep takes effect on a no-op too (one readdir when nothing goes)
    return current;
  }
  // Called with the lock held and no transaction open: a pending generation is a crash's debris.
  store.dropPending();
  const n = store.next();
  const recorded = store.record(n, sources, { status: 'applied', ran, destroyed });
  if (!recorded.ok) return generationProblem(recorded.error);
  const set = store.setCurrent(recorded.value);
  if (!set.ok) return generationProblem(set.error);
  store.prune(keep);
  return n;
}

/** Why an atomic apply's run did not hold, or undefined when every task settled. */
function causeOf(run: Run, signal: AbortSignal | undefined): string | undefined {
  const s = run.summary;
  if (run.failures.length > 0 || s === undefined) return `the apply stopped: ${run.failures.map((f) => f.reason).join(', ')}`;
  if (s.failed.length > 0) return `${s.failed[0]} failed`;
  if (s.canceled.length > 0 || signal?.aborted === true) return 'the apply was interrupted';
  if (s.skipped.length > 0) return `${s.skipped[0]} did not run`;
  return undefined;
}

/** After an atomic apply's tasks: health, retirement and commit; or, on any failure, the rollback. */
async function settle(options: ApplyOptions, session: Session, begun: Transaction, run: Run): Promise<Result<ApplySummary, Failure[]>> {
  const stateDir = stateDirOf(options);
  const store = new GenerationStore(stateDir);
  const emit = session.emit;
  let cause = causeOf(run, options.signal);
  let transaction = begun;
  const summary = run.summary;
  if (cause === undefined && summary !== undefined) {
    const advanced = advance(stateDir, transaction, 'health');
    // Recorded as still applying, as a crash here would leave it: the next apply rolls it back.
    if (!advanced.ok) return err([...run.failures, { reason: 'state-dir-unwritable', path: stateDir, message: `${advanced.error}; the apply stopped before its health check, and the next apply rolls the change back (\`apply --continue\` finishes it)` }]);
    transaction = advanced.value;
    emit({ type: 'transaction', message: 'waiting for the graph to be healthy' });
    const health = await waitHealthy(summary.graph, session.runner, options.signal ?? new AbortController().signal, session.jobs, stateDir, options);
    if (!health.ok) cause = `${health.task} is not healthy: ${health.detail}`;
  }
  if (cause === undefined && summary !== undefined) {
    let retired: { destroyed: TaskId[]; stopped: TaskId[] } = { destroyed: [], stopped: [] };
    if (run.orphans.length > 0) {
      emit({ type: 'transaction', message: `healthy: retiring what this generation no longer declares (${run.orphans.length})` });
      retired = await retire(options, session, summary.graph, run.orphans);
    }
    const destroyed = [...summary.destroyed, ...retired.destroyed];
    const problem = commit(stateDir, store, transaction, { ran: summary.ran, destroyed, keep: options.keep ?? DEFAULT_KEEP });
    if (problem !== undefined) return err([{ reason: 'generation-write-failed', path: problem.path, message: `healthy, but the commit is unfinished (the next apply ${problem.next}): ${problem.problem}` }]);
    emit({ type: 'transaction', message: `healthy: generation ${transaction.to} is current` });
    return ok({ ...summary, destroyed, stopped: [...summary.stopped, ...retired.stopped], generation: transaction.to });
  }
  emit({ type: 'transaction', message: `rolling back: ${cause}` });
  const outcome = await rollBack(rollbackContext(options, session.runner, session.jobs), transaction, cause!);
  const failure: Failure = { reason: 'atomic-apply-failed', cause: cause!, from: transaction.from, to: transaction.to, rolledBack: outcome.ok, left: outcome.left };
  return err([...run.failures, failure]);
}

/**
 * Tears down the orphans of a healthy atomic apply. One that will not go stays
 * recorded (the next apply tries again) and is a warning, not a reason to undo
 * a healthy change.
 */
async function retire(options: ApplyOptions, session: Session, graph: TaskGraph, orphans: readonly TaskId[]): Promise<{ destroyed: TaskId[]; stopped: TaskId[] }> {
  const emit = session.emit;
  const removed = await withState(stateDirOf(options), options.lock!, (state, store) =>
    runTeardown({ state, store, runner: session.runner, signal: new AbortController().signal, emit, graph, guard: guardOf(options) }, orphans, 'retire'),
  );
  if (!removed.ok) {
    emit({ type: 'warning', message: `could not retire ${orphans.join(', ')}: ${removed.error.reason}` });
    return { destroyed: [], stopped: [] };
  }
  for (const id of [...removed.value.failed, ...removed.value.kept]) emit({ type: 'warning', message: `${id} was not retired: the next apply tries again` });
  return retiredOf(removed.value);
}

/** The run's summary with the orphans' teardown in it: one that failed or was canceled as such, one kept because a dependent stayed as skipped. */
function withTeardown(summary: ExecuteSummary, removed: TeardownSummary): ExecuteSummary {
  return {
    ...summary,
    failed: [...removed.failed, ...summary.failed],
    canceled: [...removed.canceled, ...summary.canceled],
    skipped: [...removed.kept, ...summary.skipped],
  };
}

/** A retirement's tasks: destroyed, or (`retire: 'stop'`) stopped and kept. */
function retiredOf(summary: TeardownSummary): { destroyed: TaskId[]; stopped: TaskId[] } {
  const stopped = new Set(summary.stopped);
  return { destroyed: summary.done.filter((id) => !stopped.has(id)), stopped: [...stopped] };
}

/** What a rollback is handed: the teardown over the state, the re-apply of the previous generation, and its health. */
function rollbackContext(options: ApplyOptions, runner: ProcessRunner, jobs: number): RollbackContext {
  const stateDir = stateDirOf(options);
  const emit = sinkOf(options);
  const guard = guardOf(options);
  return {
    stateDir,
    store: new GenerationStore(stateDir),
    emit,
    undo: async (body) => {
      const done = await withState(stateDir, options.lock!, (state, store) =>
        body(state.records, (order, mode) => teardown({ order, records: state.records, store, runner, signal: new AbortController().signal, emit, mode, guard })),
      );
      return done.ok ? done.value : [`the state: ${done.error.reason}`];
    },
    reapply: async (env, signal) => {
      setEnv(env);
      const applied = await applyWhole({ ...options, env: process.env, targets: [], replace: [], signal, continue: false }, undefined, 'plain');
      if (!applied.ok) return err(applied.error.map((f) => f.reason).join(', '));
      const s = applied.value;
      if (s.failed.length > 0) return err(`${s.failed[0]} failed`);
      if (s.skipped.length + s.canceled.length > 0) return err(`${s.skipped.length + s.canceled.length} tasks did not run`);
      return ok(s.graph);
    },
    healthy: (graph, signal) => waitHealthy(graph, runner, signal, jobs, stateDir, options),
  };
}

/** The environment a generation was applied with, for the `env` inputs it reads (and the Nodefile, which may read them too). */
function setEnv(env: Readonly<Record<string, string | null>>): void {
  for (const [name, value] of Object.entries(env)) {
    if (value === null) delete process.env[name];
    else process.env[name] = value;
  }
}

/**
 * Finishes a transaction a crash, a kill or a second Ctrl-C left: in the
 * commit phase the change was healthy, and the commit is finished; otherwise
 * it is rolled back, or with `continue`, applied again from its stored sources.
 */
async function finishTransaction(
  options: ApplyOptions,
  transaction: Transaction,
): Promise<Result<{ readonly recovered: NonNullable<ApplySummary['recovered']>; readonly applied?: ApplySummary }, Failure[]>> {
  const stateDir = stateDirOf(options);
  const store = new GenerationStore(stateDir);
  const emit = sinkOf(options);
  const from = transaction.from;
  const recovered = (outcome: 'rolled-back' | 'committed') => ({ from, to: transaction.to, outcome });
  if (transaction.phase === 'commit') {
    emit({ type: 'transaction', message: `finishing the commit of generation ${transaction.to}, which an interrupted apply had proven healthy` });
    const problem = commit(stateDir, store, transaction, { ran: store.read(transaction.to)?.ran ?? [], destroyed: store.read(transaction.to)?.destroyed ?? [], keep: options.keep ?? DEFAULT_KEEP });
    if (problem !== undefined) return err([{ reason: 'generation-write-failed', path: problem.path, message: `the commit is unfinished (the next apply ${problem.next}): ${problem.problem}` }]);
    return ok({ recovered: recovered('committed') });
  }
  if (options.continue === true) {
    emit({ type: 'transaction', message: `continuing the interrupted atomic apply to generation ${transaction.to}` });
    const env = store.env(transaction.to);
    if (!env.ok) return err([env.error]);
    const restored = store.restore(transaction.to);
    if (!restored.ok) return err([restored.error]);
    setEnv(env.value);
    const applied = await applyWhole({ ...options, env: process.env }, undefined, { resume: { ...transaction, phase: 'apply' } });
    return applied.ok ? ok({ applied: applied.value, recovered: recovered('committed') }) : applied;
  }
  const cause = transaction.cause ?? `an interrupted atomic apply (${transaction.phase})`;
  emit({ type: 'transaction', message: `an interrupted atomic apply from ${from === null ? 'no generation' : `generation ${from}`} to ${transaction.to}: rolling it back first` });
  const runner = options.runner ?? new LocalRunner();
  const outcome = await rollBack(rollbackContext(options, runner, Math.max(1, options.jobs ?? defaultJobs())), transaction, cause);
  if (!outcome.ok) return err([{ reason: 'atomic-apply-failed', cause, from, to: transaction.to, rolledBack: false, left: outcome.left }]);
  emit({ type: 'transaction', message: `rolled back to ${from === null ? 'before the interrupted apply' : `generation ${from}`}` });
  return ok({ recovered: recovered('rolled-back') });
}

/**
 * Applies generation `generation` (default: the applied one before the
 * current) again: its sources put back at their paths, verified first, its env
 * values used, then an apply as any other (atomic unless told otherwise).
 */
export async function rollbackNodefile(options: ApplyOptions & { readonly generation?: number }): Promise<Result<ApplySummary, Failure[]>> {
  const stateDir = stateDirOf(options);
  return withLock(options, async (inner) => {
    // A generation a newer nodegraph wrote is neither read nor rolled back to (nor past).
    const store = new GenerationStore(stateDir);
    const newer = store.newer();
    if (newer !== undefined) return err([newer]);
    const pending = readTransaction(stateDir);
    if (!pending.ok) return pending;
    if (pending.value !== undefined) {
      const finished = await finishTransaction({ ...inner, continue: false }, pending.value);
      if (!finished.ok) return finished;
    }
    const current = store.current();
    const { generations, damaged } = store.survey();
    const previous = generations.filter((g) => g.status === 'applied' && current !== undefined && g.number < current).at(-1)?.number;
    // A damaged generation between that one and the current may be the one before: rolling past it unseen would skip it.
    const between = options.generation === undefined ? damaged.findLast((d) => current !== undefined && d.number < current && d.number > (previous ?? 0)) : undefined;
    if (between !== undefined) return err([between]);
    const target = options.generation ?? previous;
    if (target === undefined) return err([{ reason: 'generation-missing', number: (current ?? 1) - 1, known: store.numbers(), before: current ?? null }]);
    // Its env values are opened before anything is restored: one that does not open changes nothing.
    const env = store.env(target);
    if (!env.ok) return err([env.error]);
    const restored = store.restore(target);
    if (!restored.ok) return err([restored.error]);
    const generation = store.read(target)!;
    const changed = describeRestored(restored.value, path.dirname(generation.nodefile));
    options.onEvent?.({ type: 'transaction', message: `rollback to generation ${target}: ${changed === '' ? 'its sources are in place' : changed}` });
    setEnv(env.value);
    return await applyWhole({ ...inner, nodefile: generation.nodefile, env: process.env, rollingBack: true }, undefined, 'as-set');
  });
}
