// The operations behind the commands plan, destroy, stop and generations
// (apply and rollback are apply.ts), as functions with typed options that
// return values. The CLI renders them; tests and other programs call them directly.

import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from './error.ts';
import { sinkOf } from './events.ts';
import { teardown, type TeardownSummary } from './execute/teardown.ts';
import { LocalRunner } from './execute/runner.ts';
import { appender } from './execute/appender.ts';
import { defaultJobs, observeAndPlan, resolveTargets, stateDirOf, withSession, type EngineOptions, type Session } from './engine.ts';
import { findTraces, traceRecord } from './observe/traces.ts';
import { recipeOf } from './execute/run-task.ts';
import { nodefileReads } from './nodefile/load.ts';
import type { OutsideRead } from './nodefile/reads.ts';
import { generationProblem } from './transaction/atomic.ts';
import { GenerationStore } from './transaction/generations.ts';
import { generationChanges } from './transaction/manifest.ts';
import { healthTasks } from './transaction/health.ts';
import { readTransaction, type Transaction } from './transaction/record.ts';
import { StoredContent, textChanges, type TextChange } from './transaction/text-inputs.ts';
import { OutputGuard } from './graph/analyze.ts';
import { writtenBy } from './graph/written.ts';
import type { TaskGraph } from './graph/graph.ts';
import type { TaskId } from './ids.ts';
import type { Plan } from './plan/plan.ts';
import { destroySet, stopSet } from './plan/teardown.ts';
import { bindPlan, type SavedPlan } from './plan/saved.ts';
import { lockWarnings, openState } from './state/open.ts';
import { acquire, borrow, runningHolder } from './state/lock.ts';
import { orphanedTransaction } from './state/transaction-files.ts';
import type { LockHolder } from './error.ts';
import type { Records } from './state/records.ts';
import { err, ok, type Result } from './util/result.ts';
import { writeDurably } from './util/durable.ts';

/** What a run cost in file-system work (stats, and files whose content was read), and state records it decoded. */
export interface IoCounters {
  readonly stats: number;
  readonly contentReads: number;
  readonly bytesRead: number;
  /** Records whose JSON was parsed (state/records.ts): a no-op parses none. */
  readonly recordsDecoded: number;
}

export const ioOf = (session: Session): IoCounters => {
  const { stats, contentReads, bytesRead } = session.cache.counters;
  return { stats, contentReads, bytesRead, recordsDecoded: session.state.records.decoded };
};

/** Where the machine stands in generations, and what an atomic apply of this plan would keep and fall back to. */
export interface GenerationView {
  readonly current: number | null;
  /** When the apply would be atomic. */
  readonly atomic: { readonly preserve: readonly string[]; readonly fallback: number | null; readonly health: readonly string[] } | null;
  /** An interrupted atomic apply (its run is gone) that the next apply rolls back (or `--continue` finishes). */
  readonly interrupted: Pick<Transaction, 'from' | 'to' | 'phase' | 'startedAt'> | null;
  /** An atomic apply whose run holds the lock, so is still going (or, from another host, may be). */
  readonly underWay: (Pick<Transaction, 'from' | 'to' | 'phase' | 'startedAt'> & { readonly holder: LockHolder }) | null;
  /** A transaction folder without its record, left by a killed run: the next run that takes the lock removes it. */
  readonly orphanedTransaction: string | null;
  /** What the Nodefile's evaluation read that no generation can hold (src/nodefile/reads.ts). */
  readonly outside: readonly OutsideRead[];
}

export interface PlanResult {
  readonly plan: Plan;
  readonly generation: GenerationView;
  /** The plan bound to what it observed, as written to `out`; only made when there is an `out`. */
  readonly saved?: SavedPlan;
  /** With `diff`: each task's changed small text file inputs, as applied and as they are now. */
  readonly texts?: ReadonlyMap<TaskId, readonly TextChange[]>;
  /** What an apply of this plan would refuse (orphansOfAnother). */
  readonly refused?: Failure;
  readonly io: IoCounters;
}

export async function planNodefile(options: EngineOptions & { readonly out?: string; readonly atomic?: boolean; readonly diff?: boolean }): Promise<Result<PlanResult, Failure[]>> {
  return withSession(options, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session, options.out === undefined ? { shown: true } : { keyed: true });
    if (!observed.ok) return observed;
    const plan = observed.value.plan.undecided;
    const view = generationView(session, options.atomic);
    if (!view.ok) return view;
    const generation = view.value;
    const texts = options.diff === true ? { texts: changedTexts(session, plan) } : {};
    const refused = orphansOfAnother(session.state.dir, session.graph, orphansOf(plan), 'apply');
    const told = { ...texts, ...(refused === undefined ? {} : { refused }) };
    // Binding digests every task's definition and observations: only for a plan that is saved.
    if (options.out === undefined) return ok({ plan, generation, ...told, io: ioOf(session) });
    const saved = bindPlan(session.graph, observed.value.selected, observed.value.observations, session.state.records, observed.value.plan, {
      targets: options.targets ?? [],
      replace: options.replace ?? [],
      createdAt: new Date().toISOString(),
    });
    // Not over what the graph writes: its task would write over the plan, or the plan over its output.
    if (writtenBy(session.graph).covers(options.out)) return err([{ reason: 'file-write-failed', path: options.out, message: 'a task of the graph writes there' }]);
    try {
      // Beside its place and renamed over it: a full disk leaves the plan before it, not half a plan.
      writeDurably(options.out, `${JSON.stringify(saved)}\n`, 0o666);
    } catch (error) {
      return err([{ reason: 'file-write-failed', path: options.out, message: (error as Error).message }]);
    }
    return ok({ plan, saved, generation, ...told, io: ioOf(session) });
  });
}

/**
 * The refusal of a whole apply or destroy of `graph` that would destroy `orphans` while
 * another Nodefile beside it, one they may belong to, is the state's last (anotherNodefile).
 */
export function orphansOfAnother(stateDir: string, graph: TaskGraph, orphans: readonly TaskId[], command: 'apply' | 'destroy'): Failure | undefined {
  const other = orphans.length === 0 ? undefined : anotherNodefile(stateDir, graph.file);
  return other === undefined ? undefined : { reason: 'orphans-of-another-nodefile', command, nodefile: graph.file, other, tasks: orphans };
}

/** A whole plan's orphans, dependents first: the tasks it destroys (or, with `retire: 'stop'`, stops). */
export const orphansOf = (plan: Plan): TaskId[] => (plan.counts.destroy + plan.counts.stop > 0 ? [...plan].filter((e) => e.action === 'destroy').map((e) => e.id) : []);

/**
 * Another Nodefile beside `nodefile` that the state's current generation was applied from,
 * still there: two Nodefiles in one folder share its `.nodegraph`, and what only that one
 * declares is not this one's to destroy. A Nodefile renamed, or a project moved, leaves
 * none beside it.
 */
function anotherNodefile(stateDir: string, nodefile: string): string | undefined {
  const store = new GenerationStore(stateDir);
  const current = store.current();
  const last = current === undefined ? undefined : store.head(current)?.nodefile;
  if (last === undefined || path.basename(last) === path.basename(nodefile)) return undefined;
  const other = path.join(path.dirname(nodefile), path.basename(last));
  return existsSync(other) ? other : undefined;
}

/** The changed file inputs of the plan's tasks whose applied text the generations keep. */
function changedTexts(session: Session, plan: Plan): Map<TaskId, readonly TextChange[]> {
  const texts = new Map<TaskId, readonly TextChange[]>();
  const store = new StoredContent(new GenerationStore(session.state.dir));
  for (const entry of plan) {
    const names = entry.reasonDetails.flatMap((d) => (d.kind === 'input-changed' && d.sensitive !== true ? [d.input] : []));
    const node = session.graph.get(entry.id);
    if (names.length === 0 || node === undefined) continue;
    const changes = textChanges(store, session.graph.dir, node, session.state.records.get(entry.id), names);
    if (changes.length > 0) texts.set(entry.id, changes);
  }
  return texts;
}

/** The generations as plan and status show them. */
export function generationView(session: Pick<Session, 'state' | 'graph' | 'targets'>, atomic?: boolean): Result<GenerationView, Failure[]> {
  const pending = readTransaction(session.state.dir);
  if (!pending.ok) return pending;
  const current = new GenerationStore(session.state.dir).current() ?? null;
  const transaction = pending.value;
  // Read without the lock: the transaction first, then whether its run still holds the lock. A run
  // that finished in between has removed its transaction, so one still there is interrupted.
  const holder = transaction === undefined ? undefined : runningHolder(session.state.dir);
  const again = transaction === undefined || holder !== undefined ? pending : readTransaction(session.state.dir);
  if (!again.ok) return again;
  const t = again.value;
  const view = t === undefined ? null : { from: t.from, to: t.to, phase: t.phase, startedAt: t.startedAt };
  // A folder without its record is debris only when no run holds the lock (a live one may be between the two).
  const orphaned = runningHolder(session.state.dir) === undefined ? orphanedTransaction(session.state.dir) : undefined;
  const whole = session.targets === undefined;
  const health = healthTasks(session.graph).map((n) => n.id);
  return ok({
    current,
    atomic: whole && (session.graph.settings.atomic === 'always' || (atomic ?? session.graph.settings.atomic ?? false)) ? { preserve: session.graph.preserve, fallback: current, health } : null,
    interrupted: holder === undefined ? view : null,
    underWay: holder === undefined || view === null ? null : { ...view, holder: { pid: holder.pid, host: holder.host, command: holder.command, startedAt: holder.startedAt } },
    orphanedTransaction: orphaned ?? null,
    // The session's evaluation is the last one: the reads are its.
    outside: nodefileReads().outside,
  });
}

/**
 * What teardown needs of a session: the graph only if the Nodefile was there
 * to load (teardown works from the state alone), and what never to remove.
 */
export type TeardownSession = Pick<Session, 'state' | 'store' | 'runner' | 'signal' | 'emit'> & {
  readonly graph?: TaskGraph | undefined;
  readonly guard: OutputGuard;
};

export function runTeardown(session: TeardownSession, order: readonly TaskId[], mode: 'stop' | 'destroy' | 'retire'): Promise<TeardownSummary> {
  return teardown({
    order,
    records: session.state.records,
    store: session.store,
    runner: session.runner,
    signal: session.signal,
    emit: session.emit,
    mode,
    graph: session.graph,
    guard: session.guard,
    projectsThen: () => projectsThen(session.state.dir),
  });
}

/** The folders the kept generations' Nodefiles lay in: where the project was, if it was moved or copied since. */
function projectsThen(stateDir: string): string[] {
  const store = new GenerationStore(stateDir);
  const folders = new Set<string>();
  for (const n of store.numbers()) {
    const nodefile = store.head(n)?.nodefile;
    if (nodefile !== undefined) folders.add(path.dirname(nodefile));
  }
  return [...folders];
}

/** The project and the state, which no teardown removes (see OutputGuard). */
export function guardOf(options: EngineOptions): OutputGuard {
  const nodefile = path.resolve(options.nodefile);
  return new OutputGuard(nodefile, path.dirname(nodefile), stateDirOf(options));
}

export interface TeardownResult extends TeardownSummary {
  /** What was chosen to tear down, in order. */
  readonly order: readonly TaskId[];
  readonly durationMs: number;
}

/**
 * Destroys (or, with mode 'stop', stops) what the state records, in reverse
 * graph order. Works from the state alone: the Nodefile need not exist.
 */
export interface TeardownOptions extends EngineOptions {
  readonly mode: 'stop' | 'destroy';
  readonly confirm?: (order: readonly TaskId[]) => Promise<boolean>;
  /** Also what the Nodefile's tasks find in place that the state does not record (traces.ts): a lost state's node. */
  readonly traces?: boolean;
  /** From the state's records alone, the Nodefile not loaded (as when it does not exist). */
  readonly fromState?: boolean;
}

export async function teardownNodefile(options: TeardownOptions): Promise<Result<TeardownResult, Failure[]>> {
  const started = Date.now();
  const stateDir = stateDirOf(options);
  // The lock first: while another run holds it (an atomic apply under way among them), the refusal names it.
  const taken = acquire(stateDir, { command: options.command ?? 'nodegraph' });
  if (!taken.ok) return err([taken.error]);
  try {
    for (const warning of lockWarnings(taken.value)) options.onEvent?.({ type: 'warning', message: warning });
    // What a half-done atomic apply changed is for its rollback to undo first: a teardown now would lose track.
    const pending = readTransaction(stateDir);
    if (!pending.ok) return pending;
    if (pending.value !== undefined) return err([{ reason: 'transaction-pending', from: pending.value.from, to: pending.value.to, phase: pending.value.phase }]);
    return await teardownLocked({ ...options, lock: borrow(taken.value) }, stateDir, started);
  } finally {
    taken.value.release();
  }
}

async function teardownLocked(options: TeardownOptions, stateDir: string, started: number): Promise<Result<TeardownResult, Failure[]>> {
  if (options.fromState !== true && existsSync(path.resolve(options.nodefile))) {
    // The Nodefile must at least load: a broken one may mean the user is mid-edit.
    return withSession({ ...options, targets: [] }, { lock: true }, (session) => teardownWith({ ...session, guard: guardOf(options) }, options, started));
  }
  const state = openState(stateDir, { lock: true, held: options.lock! });
  if (!state.ok) return err([state.error]);
  const emit = sinkOf(options);
  for (const warning of state.value.warnings) emit({ type: 'warning', message: warning });
  emit({ type: 'warning', message: options.fromState === true ? `--from-state: tearing down from the state alone, ${options.nodefile} not loaded` : `${options.nodefile} does not exist: tearing down from the state alone` });
  try {
    const session: TeardownSession = {
      state: state.value,
      store: appender(state.value.store),
      runner: options.runner ?? new LocalRunner(),
      signal: options.signal ?? new AbortController().signal,
      emit,
      guard: guardOf(options),
    };
    const result = await teardownWith(session, options, started);
    const warning = result.ok ? state.value.tidy() : undefined;
    if (warning !== undefined) emit({ type: 'warning', message: warning });
    return result;
  } finally {
    state.value.close();
  }
}

async function teardownWith(session: TeardownSession, options: TeardownOptions, started: number): Promise<Result<TeardownResult, Failure[]>> {
  const records = session.state.records;
  if (options.traces === true && session.graph !== undefined) {
    const graph = session.graph;
    for (const id of await findTraces(graph, records, session.runner, session.signal, Math.max(1, options.jobs ?? defaultJobs()))) {
      records.set(traceRecord(graph, id, recipeOf(graph.get(id)!)));
    }
  }
  const targets = resolveTargets(options.targets, (id) => records.has(id), () => records.keys());
  if (!targets.ok) return targets;
  const order = options.mode === 'stop' && targets.value !== undefined ? stopSet(targets.value, records) : destroySet(targets.value, records);
  const graph = session.graph;
  if (graph !== undefined && options.mode === 'destroy' && targets.value === undefined) {
    const refused = orphansOfAnother(session.state.dir, graph, order.filter((id) => !graph.has(id)), 'destroy');
    if (refused !== undefined) return err([refused]);
  }
  const unnamed = targets.value === undefined || options.mode === 'stop' ? [] : order.filter((id) => !targets.value!.has(id));
  if (unnamed.length > 0) {
    // Said before anything is removed, with --yes too: more goes than the command line names.
    const list = unnamed.length <= 4 ? unnamed.join(', ') : `${unnamed.slice(0, 3).join(', ')} and ${unnamed.length - 3} more`;
    session.emit({
      type: 'warning',
      message: `destroy also takes ${unnamed.length} task${unnamed.length === 1 ? '' : 's'} not named, what depends on the targets and what only they use (by an input or \`after\`): ${list}`,
    });
  }
  if (options.confirm !== undefined && order.length > 0 && !(await options.confirm(order))) {
    return err([{ reason: 'not-confirmed' }]);
  }
  const summary = await runTeardown(session, order, options.mode);
  session.store.sync();
  if (session.store.failure !== undefined) return err([session.store.failure]);
  // A whole destroy that took everything leaves no generation applied: none is current (the kept ones stay, for rollback N).
  if (options.mode === 'destroy' && targets.value === undefined && summary.failed.length + summary.canceled.length === 0 && records.size === 0) {
    const cleared = new GenerationStore(stateDirOf(options)).setCurrent(undefined);
    if (!cleared.ok) session.emit({ type: 'warning', message: `a generation still reads as current: ${generationProblem(cleared.error)}` });
  }
  const durationMs = Date.now() - started;
  session.emit({
    type: 'summary',
    command: options.mode,
    durationMs,
    counts: { [options.mode === 'stop' ? 'stopped' : 'destroyed']: summary.done.length, failed: summary.failed.length, canceled: summary.canceled.length, kept: summary.kept.length },
  });
  return ok({ ...summary, order, durationMs });
}

/** A generation as `nodegraph generations` shows it: what changed from the one before. */
export interface GenerationEntry {
  readonly number: number;
  readonly createdAt: string;
  readonly status: 'pending' | 'applied' | 'failed';
  readonly files: readonly string[];
  readonly env: readonly string[];
  readonly ran: readonly string[];
  readonly destroyed: readonly string[];
}

export interface GenerationsList {
  readonly generations: readonly GenerationEntry[];
  readonly current: number | undefined;
  readonly transaction: Pick<Transaction, 'from' | 'to' | 'phase' | 'startedAt'> | undefined;
  /** Generations whose manifest or list of files does not read whole: a rollback to one is refused. */
  readonly damaged: readonly { readonly number: number; readonly path: string; readonly message: string }[];
}

/** The state folder's generations, oldest first; reads only. */
export function listGenerations(options: EngineOptions): Result<GenerationsList, Failure[]> {
  const stateDir = stateDirOf(options);
  const store = new GenerationStore(stateDir);
  const pending = readTransaction(stateDir);
  if (!pending.ok) return pending;
  const newer = store.newer();
  if (newer !== undefined) return err([newer]);
  const { generations: all, damaged } = store.survey();
  const generations = all.map((g, i) => {
    const changed = generationChanges(all[i - 1], g);
    return { number: g.number, createdAt: g.createdAt, status: g.status, files: changed.files, env: changed.env, ran: g.ran, destroyed: g.destroyed };
  });
  const t = pending.value;
  return ok({
    generations,
    current: store.current(),
    transaction: t === undefined ? undefined : { from: t.from, to: t.to, phase: t.phase, startedAt: t.startedAt },
    damaged: damaged.map(({ number, path, message }) => ({ number, path, message })),
  });
}
