// The operations behind the commands — plan, apply, destroy, stop — as
// functions with typed options that return values. The CLI renders them;
// tests and other programs call them directly.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from './error.ts';
import { execute, type ExecuteSummary } from './execute/scheduler.ts';
import { teardown, type TeardownSummary } from './execute/teardown.ts';
import { LocalRunner } from './execute/runner.ts';
import { appender } from './execute/appender.ts';
import { observeAndPlan, resolveTargets, stateDirOf, withSession, type EngineOptions, type Session } from './engine.ts';
import { OutputGuard } from './graph/analyze.ts';
import type { TaskGraph } from './graph/graph.ts';
import type { TaskId } from './ids.ts';
import { teardownOrder, type Plan, type RecordReader } from './plan/plan.ts';
import { bindPlan, parseSavedPlan, planChanges, type SavedPlan } from './plan/saved.ts';
import { openState } from './state/open.ts';
import type { Records } from './state/records.ts';
import { err, ok, type Result } from './util/result.ts';

/** What a run cost in file-system work (stats, and files whose content was read), and state records it decoded. */
export interface IoCounters {
  readonly stats: number;
  readonly contentReads: number;
  readonly bytesRead: number;
  /** Records whose JSON was parsed (state/records.ts): a no-op parses none. */
  readonly recordsDecoded: number;
}

const ioOf = (session: Session): IoCounters => {
  const { stats, contentReads, bytesRead } = session.cache.counters;
  return { stats, contentReads, bytesRead, recordsDecoded: session.state.records.decoded };
};

export interface PlanResult {
  readonly plan: Plan;
  /** The plan bound to what it observed, as written to `out`; only made when there is an `out`. */
  readonly saved?: SavedPlan;
  readonly io: IoCounters;
}

export async function planNodefile(options: EngineOptions & { readonly out?: string }): Promise<Result<PlanResult, Failure[]>> {
  return withSession(options, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const plan = observed.value.plan.undecided;
    // Binding digests every task's definition and observations: only for a plan that is saved.
    if (options.out === undefined) return ok({ plan, io: ioOf(session) });
    const saved = bindPlan(session.graph, observed.value.selected, observed.value.observations, session.state.records, observed.value.plan, {
      targets: options.targets ?? [],
      replace: options.replace ?? [],
      createdAt: new Date().toISOString(),
    });
    writeFileSync(options.out, `${JSON.stringify(saved)}\n`);
    return ok({ plan, saved, io: ioOf(session) });
  });
}

export interface ApplySummary extends ExecuteSummary {
  /** The graph that was applied (watch follows its inputs). */
  readonly graph: TaskGraph;
  readonly plan: Plan;
  readonly io: IoCounters;
  readonly destroyed: TaskId[];
  readonly durationMs: number;
}

/** Applies the Nodefile; with `planFile`, only if nothing changed since that plan was made. */
export async function applyNodefile(options: EngineOptions & { readonly planFile?: string }): Promise<Result<ApplySummary, Failure[]>> {
  let effective: EngineOptions = options;
  let saved: SavedPlan | undefined;
  if (options.planFile !== undefined) {
    const read = readSavedPlan(options.planFile);
    if (!read.ok) return err([read.error]);
    saved = read.value;
    effective = { ...options, nodefile: saved.nodefile, targets: saved.targets, replace: saved.replace };
  }
  const started = Date.now();
  return withSession(effective, { lock: true }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const { plan, selected, observations } = observed.value;
    if (saved !== undefined) {
      const now = bindPlan(session.graph, selected, observations, session.state.records, plan, {
        targets: saved.targets,
        replace: saved.replace,
        createdAt: saved.createdAt,
      });
      const changes = planChanges(saved, now);
      if (changes.length > 0) return err([{ reason: 'plan-stale', path: options.planFile!, changes }]);
    }
    const shown = plan.undecided;
    session.emit({ type: 'plan', plan: shown });

    const destroyed: TaskId[] = [];
    // A whole-graph plan lists the orphans, dependents first: no second search of 50,000 records for them.
    if (plan.counts.destroy > 0) {
      const orphans: TaskId[] = [];
      for (const e of plan) if (e.action === 'destroy') orphans.push(e.id);
      const removed = await runTeardown({ ...session, guard: guardOf(options) }, orphans, 'destroy');
      for (const id of removed.done) destroyed.push(id);
    }
    const summary = await execute({
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
    });
    session.store.sync();
    // A whole-graph run saw every file that matters: forget the rest, so the cache does not only grow.
    if (session.targets === undefined && summary.failed.length === 0 && !session.signal.aborted && session.store.failure === undefined) session.cache.prune();
    const durationMs = Date.now() - started;
    const upToDate = summary.upToDate;
    session.emit({
      type: 'summary',
      command: 'apply',
      durationMs,
      counts: {
        ran: summary.ran.length,
        failed: summary.failed.length,
        skipped: summary.skipped.length,
        canceled: summary.canceled.length,
        'up to date': upToDate,
        destroyed: destroyed.length,
      },
    });
    // After the summary: what ran is said either way, and then why the run stopped.
    if (session.store.failure !== undefined) return err([session.store.failure]);
    return ok({
      ...summary,
      upToDate,
      graph: session.graph,
      plan: shown,
      destroyed,
      durationMs,
      io: ioOf(session),
    });
  });
}

/**
 * What teardown needs of a session: the graph only if the Nodefile was there
 * to load (teardown works from the state alone), and what never to remove.
 */
type TeardownSession = Pick<Session, 'state' | 'store' | 'runner' | 'signal' | 'emit'> & {
  readonly graph?: TaskGraph | undefined;
  readonly guard: OutputGuard;
};

/** The plan that `plan --out` wrote to `file`. */
function readSavedPlan(file: string): Result<SavedPlan, Failure> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    return err({ reason: 'plan-file-invalid', path: file, message: (error as Error).message });
  }
  return parseSavedPlan(file, text);
}

function runTeardown(session: TeardownSession, order: readonly TaskId[], mode: 'stop' | 'destroy'): Promise<TeardownSummary> {
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
  });
}

/** The project and the state, which no teardown removes (see OutputGuard). */
function guardOf(options: EngineOptions): OutputGuard {
  const nodefile = path.resolve(options.nodefile);
  return new OutputGuard(nodefile, path.dirname(nodefile), stateDirOf(options));
}

export interface TeardownResult extends TeardownSummary {
  /** What was chosen to tear down, in order. */
  readonly order: readonly TaskId[];
  readonly durationMs: number;
}

/**
 * Chooses what a destroy of `targets` takes: the targets, everything that
 * depends on them, and then any upstream task nothing else needs any more.
 */
export function destroySet(targets: ReadonlySet<TaskId> | undefined, records: Records): TaskId[] {
  if (targets === undefined) return teardownOrder([...records.keys()], records);
  const dependents = new Map<TaskId, TaskId[]>();
  for (const record of records.values()) {
    for (const up of [...record.edges.needs, ...record.edges.after]) {
      let list = dependents.get(up);
      if (list === undefined) dependents.set(up, (list = []));
      list.push(record.id);
    }
  }
  const chosen = new Set<TaskId>();
  const stack = [...targets].filter((id) => records.has(id));
  while (stack.length > 0) {
    const id = stack.pop()!;
    if (chosen.has(id)) continue;
    chosen.add(id);
    for (const down of dependents.get(id) ?? []) stack.push(down);
  }
  // Shared upstream goes once nothing outside the chosen set still depends on it.
  let grew = true;
  while (grew) {
    grew = false;
    for (const id of [...chosen]) {
      for (const up of [...(records.get(id)?.edges.needs ?? []), ...(records.get(id)?.edges.after ?? [])]) {
        if (chosen.has(up) || !records.has(up)) continue;
        if ((dependents.get(up) ?? []).every((d) => chosen.has(d) || !records.has(d))) {
          chosen.add(up);
          grew = true;
        }
      }
    }
  }
  return teardownOrder([...chosen], records);
}

/**
 * Destroys (or, with mode 'stop', stops) what the state records, in reverse
 * graph order. Works from the state alone: the Nodefile need not exist.
 */
export async function teardownNodefile(
  options: EngineOptions & { readonly mode: 'stop' | 'destroy'; readonly confirm?: (order: readonly TaskId[]) => Promise<boolean> },
): Promise<Result<TeardownResult, Failure[]>> {
  const started = Date.now();
  const stateDir = stateDirOf(options);
  if (existsSync(path.resolve(options.nodefile))) {
    // The Nodefile must at least load: a broken one may mean the user is mid-edit.
    return withSession({ ...options, targets: [] }, { lock: true }, (session) => teardownWith({ ...session, guard: guardOf(options) }, options, started));
  }
  const state = openState(stateDir, { lock: true, command: options.command ?? 'nodegraph' });
  if (!state.ok) return err([state.error]);
  const emit = options.onEvent ?? (() => {});
  for (const warning of state.value.warnings) emit({ type: 'warning', message: warning });
  emit({ type: 'warning', message: `${options.nodefile} does not exist: tearing down from the state alone` });
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

async function teardownWith(
  session: TeardownSession,
  options: EngineOptions & { readonly mode: 'stop' | 'destroy'; readonly confirm?: (order: readonly TaskId[]) => Promise<boolean> },
  started: number,
): Promise<Result<TeardownResult, Failure[]>> {
  const records = session.state.records;
  const targets = resolveTargets(options.targets, (id) => records.has(id), () => records.keys());
  if (!targets.ok) return targets;
  const order = options.mode === 'stop' && targets.value !== undefined ? stopSet(targets.value, records) : destroySet(targets.value, records);
  if (options.confirm !== undefined && order.length > 0 && !(await options.confirm(order))) {
    return err([{ reason: 'not-confirmed' }]);
  }
  const summary = await runTeardown(session, order, options.mode);
  session.store.sync();
  if (session.store.failure !== undefined) return err([session.store.failure]);
  const durationMs = Date.now() - started;
  session.emit({
    type: 'summary',
    command: options.mode,
    durationMs,
    counts: { [options.mode === 'stop' ? 'stopped' : 'destroyed']: summary.done.length, failed: summary.failed.length, kept: summary.kept.length },
  });
  return ok({ ...summary, order, durationMs });
}

/** Stopping a task stops what depends on it first, and nothing upstream. */
function stopSet(targets: ReadonlySet<TaskId>, records: Records): TaskId[] {
  const chosen = new Set<TaskId>(targets);
  let grew = true;
  while (grew) {
    grew = false;
    for (const record of records.values()) {
      if (chosen.has(record.id)) continue;
      if ([...record.edges.needs, ...record.edges.after].some((up) => chosen.has(up))) {
        chosen.add(record.id);
        grew = true;
      }
    }
  }
  return teardownOrder([...chosen], records);
}
