// The operations behind the commands — plan, apply, destroy, stop — as
// functions with typed options that return values. The CLI renders them;
// tests and other programs call them directly.

import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from './error.ts';
import { execute, type ExecuteSummary } from './execute/executor.ts';
import { teardown, type TeardownSummary } from './execute/teardown.ts';
import { LocalRunner } from './execute/runner.ts';
import { appender } from './execute/appender.ts';
import { observeAndPlan, openSession, resolveTargets, stateDirOf, withSession, type EngineOptions, type SealedSession, type Session } from './engine.ts';
import { OutputGuard } from './graph/analyze.ts';
import type { TaskGraph } from './graph/graph.ts';
import type { TaskId } from './ids.ts';
import { makePlan, teardownOrder, unchangedPlan, wholePlan, type DecidedPlan, type Plan } from './plan/plan.ts';
import { observe } from './plan/observe.ts';
import { bindPlan, planChanges, readSavedPlan, type SavedPlan } from './plan/saved.ts';
import { openState } from './state/open.ts';
import { writeSeal } from './state/seal.ts';
import type { TaskRecord } from './state/record.ts';
import { err, ok, type Result } from './util/result.ts';

/** What a run cost in file-system work (stats, and files whose content was read), and state records it decoded. */
export interface IoCounters {
  readonly stats: number;
  readonly contentReads: number;
  readonly bytesRead: number;
  /** Records the journal kept as text that something read (state/records.ts); a no-op reads none. */
  readonly recordsDecoded: number;
  /** Records this run kept as where it wrote them, not as records (state/records.ts, RecordMap.setWritten), and how many of them it read back. */
  readonly recordsWritten: number;
  readonly recordsReadBack: number;
  /** The state's seal vouched for the whole graph: neither the journal nor the hash cache was loaded (state/seal.ts). */
  readonly sealed: boolean;
  /** The run was planned from the seal: only what the changed files reach was loaded (state/delta.ts). */
  readonly delta: boolean;
}

const ioOf = (session: Session | SealedSession): IoCounters => {
  if ('sealed' in session) return { ...session.io, recordsDecoded: 0, recordsWritten: 0, recordsReadBack: 0, sealed: true, delta: false };
  const { stats, contentReads, bytesRead } = session.cache.counters;
  const { records } = session.state;
  return {
    stats,
    contentReads,
    bytesRead,
    recordsDecoded: records.decoded,
    recordsWritten: records.written,
    recordsReadBack: records.readBacks,
    sealed: false,
    delta: session.delta !== undefined,
  };
};

/** The plan as the whole graph's: a run planned from the seal planned only some tasks, and the rest are unchanged. */
const shownPlan = (session: Session, plan: DecidedPlan): Plan => {
  return session.delta === undefined ? plan.undecided : wholePlan(session.delta.ids, plan);
};

export interface PlanResult {
  readonly plan: Plan;
  /** The plan bound to what it observed, as written to `out`; only made when there is an `out`. */
  readonly saved?: SavedPlan;
  readonly io: IoCounters;
}

export async function planNodefile(options: EngineOptions & { readonly out?: string }): Promise<Result<PlanResult, Failure[]>> {
  // A saved plan is bound to observations, which a sealed run does not make.
  const sealed = options.out === undefined ? (session: SealedSession) => ok({ plan: unchangedPlan(session.ids), io: ioOf(session) }) : undefined;
  return withSession(options, { lock: false }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const plan = shownPlan(session, observed.value.plan);
    // Binding digests every task's definition and observations: only for a plan that is saved.
    if (options.out === undefined) return ok({ plan, io: ioOf(session) });
    const saved = bindPlan(session.graph, observed.value.selected, observed.value.observations, session.state.records, observed.value.plan, {
      targets: options.targets ?? [],
      replace: options.replace ?? [],
    });
    writeFileSync(options.out, `${JSON.stringify(saved)}\n`);
    return ok({ plan, saved, io: ioOf(session) });
  }, sealed);
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
  const sealed = (session: SealedSession): Result<ApplySummary, Failure[]> => {
    const plan = unchangedPlan(session.ids);
    session.emit({ type: 'plan', plan });
    const durationMs = Date.now() - started;
    const upToDate = session.ids.length;
    session.emit({
      type: 'summary',
      command: 'apply',
      durationMs,
      counts: { ran: 0, failed: 0, skipped: 0, canceled: 0, 'up to date': upToDate, destroyed: 0 },
    });
    return ok({
      ran: [],
      failed: [],
      skipped: [],
      canceled: [],
      upToDate,
      // Analysed only if asked for (watch asks, to know what to watch).
      get graph() {
        return session.graph();
      },
      plan,
      destroyed: [],
      durationMs,
      io: ioOf(session),
    });
  };
  return withSession(effective, { lock: true }, async (session) => {
    const observed = await observeAndPlan(session);
    if (!observed.ok) return observed;
    const { plan, selected, observations } = observed.value;
    // Only a run that finds every task unchanged seals with them (writeSeal below): a build lets
    // what observing looked at go before it starts (the paths, 1.5 MB at 50,000 leaves).
    if (plan.counts.unchanged !== plan.size) session.files = undefined;
    if (saved !== undefined) {
      const now = bindPlan(session.graph, selected, observations, session.state.records, plan, { targets: saved.targets, replace: saved.replace });
      const changes = planChanges(saved, now);
      if (changes.length > 0) return err([{ reason: 'plan-stale', path: options.planFile!, changes }]);
    }
    const shown = shownPlan(session, plan);
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
      settled: plan.settled,
      guard: guardOf(options),
    });
    session.store.sync();
    // A whole-graph run saw every file that matters: forget the rest, so the cache does not only grow.
    if (session.targets === undefined && summary.failed.length === 0 && !session.signal.aborted && session.store.failure === undefined) session.cache.prune();
    // A whole-graph run that found everything as it was, and said nothing about it: the next one need not load the state (state/seal.ts).
    if (
      saved === undefined &&
      session.delta === undefined &&
      session.targets === undefined &&
      session.replace.size === 0 &&
      session.files !== undefined &&
      plan.counts.unchanged === plan.size &&
      summary.upToDate === plan.size &&
      !session.store.appended &&
      session.warnings() === 0 &&
      session.state.records.lateWarnings.length === 0 &&
      !session.signal.aborted
    ) {
      writeSeal({
        stateDir: session.state.dir,
        declarations: session.declarations,
        graph: session.graph,
        files: session.files,
        cache: session.cache,
        env: session.env,
        now: session.now,
        lines: session.state.lines,
      });
    }
    // A run planned from the seal that did all it had to: sealed again, if a second look finds it all settled.
    if (
      session.delta !== undefined &&
      summary.failed.length === 0 &&
      summary.skipped.length === 0 &&
      summary.canceled.length === 0 &&
      session.store.failure === undefined &&
      session.warnings() === 0 &&
      session.state.records.lateWarnings.length === 0 &&
      !session.signal.aborted
    ) {
      const again = await observe({ graph: session.graph, nodes: selected, records: session.state.records, cache: session.cache, runner: session.runner, jobs: session.jobs, signal: session.signal, env: session.env });
      const settled = again.ok && makePlan(session.graph, again.value, session.state.records, { only: { nodes: selected, settled: session.delta.settled } }).counts.unchanged === selected.length;
      if (settled) session.delta.seal(summary.ran);
    }
    const durationMs = Date.now() - started;
    // A run planned from the seal ran only some tasks: the others are up to date, as the seal vouched.
    const upToDate = summary.upToDate + (session.delta === undefined ? 0 : session.delta.ids.length - selected.length);
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
    const delta = session.delta;
    return ok({
      ...summary,
      upToDate,
      // The whole graph (watch follows its inputs), analysed only if asked for after a run planned from the seal.
      get graph() {
        return delta === undefined ? session.graph : delta.wholeGraph();
      },
      plan: shown,
      destroyed,
      durationMs,
      io: ioOf(session),
    });
  }, saved === undefined ? sealed : undefined);
}

/**
 * What teardown needs of a session: the graph only if the Nodefile was there
 * to load (teardown works from the state alone), and what never to remove.
 */
type TeardownSession = Pick<Session, 'state' | 'store' | 'runner' | 'signal' | 'emit'> & {
  readonly graph?: TaskGraph | undefined;
  readonly guard: OutputGuard;
};

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
export function destroySet(targets: ReadonlySet<TaskId> | undefined, records: ReadonlyMap<TaskId, TaskRecord>): TaskId[] {
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
    const session = await openSession({ ...options, targets: [] }, { lock: true, observe: false });
    if (!session.ok) return session;
    try {
      return await teardownWith({ ...session.value, guard: guardOf(options) }, options, started);
    } finally {
      session.value.cache.save();
      session.value.state.close();
    }
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
    return await teardownWith(session, options, started);
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
function stopSet(targets: ReadonlySet<TaskId>, records: ReadonlyMap<TaskId, TaskRecord>): TaskId[] {
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
