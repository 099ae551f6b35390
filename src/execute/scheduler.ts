// Runs the stale tasks of a graph in dependency order, in parallel within
// `jobs` and each pool's size, and stops cleanly: the schedule (ninja's Plan)
// says what may run next; the builder (run-task.ts) decides and runs each.
//
// A task's life:
//
//   waiting ──upstreams settled──▶ ready ──upstream failed──▶ skipped
//                                    │
//                                    ├──decided unchanged──▶ up-to-date
//                                    ▼
//                    (its pool full: parked, resumed first) ──slot free──▶ running ──▶ ran | failed | canceled
//
// An abort, a failure without keepGoing, or a state that cannot be written:
// nothing new starts, the running tasks finish, and what never started is skipped.

import type { TaskOutcome } from '../events.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import type { TaskId } from '../ids.ts';
import type { Decision } from '../plan/decide.ts';
import { Queue } from '../util/queue.ts';
import { Builder, type BuilderOptions } from './run-task.ts';

export interface ExecuteOptions extends BuilderOptions {
  readonly selected: readonly TaskNode[];
  readonly jobs: number;
  readonly keepGoing: boolean;
}

export interface ExecuteSummary {
  /** Tasks that ran successfully, in the order they finished. */
  readonly ran: TaskId[];
  readonly failed: TaskId[];
  readonly skipped: TaskId[];
  readonly canceled: TaskId[];
  readonly upToDate: number;
}

export async function execute(options: ExecuteOptions): Promise<ExecuteSummary> {
  const { graph, emit, signal, planned } = options;
  const summary = { ran: [] as TaskId[], failed: [] as TaskId[], skipped: [] as TaskId[], canceled: [] as TaskId[], upToDate: 0 };
  // A task the plan settled as unchanged, with every upstream known, is up to
  // date whatever runs: what it needs was settled unchanged too, so none of it
  // runs (an order-only upstream does not matter to a task that does not run).
  // Only the others are scheduled: after one leaf of 50,000 changed, 3 tasks
  // and not 50,501 (a no-op schedules none).
  let selected = options.selected;
  if (planned !== undefined && !signal.aborted) {
    selected = selected.filter((n) => {
      const decision = planned.get(n.id);
      if (!isSettledUnchanged(decision)) return true;
      // Up to date, but recorded with a secret's plain hash: its record is re-keyed (plan/decide.ts), and the old line compacted away.
      if (decision!.rekeyed !== undefined) options.records.setWritten(decision!.rekeyed, options.store.append(decision!.rekeyed, true), options.store.readBack);
      return false;
    });
    summary.upToDate = options.selected.length - selected.length;
    if (selected.length === 0) return summary;
  }
  const schedule = new Schedule(graph, selected, options.jobs, signal);
  const builder = new Builder(options, { ran: (id) => schedule.ran(id), stop: () => schedule.stop() });

  const settle = (node: TaskNode, outcome: TaskOutcome): void => {
    schedule.settle(node, outcome);
    builder.forget(node);
  };
  let wake: (() => void) | undefined;
  const conclude = (node: TaskNode, outcome: TaskOutcome): void => {
    schedule.finished(node, outcome);
    if (outcome === 'ran') summary.ran.push(node.id);
    else if (outcome === 'failed') {
      summary.failed.push(node.id);
      if (!options.keepGoing) schedule.stop();
    } else if (outcome === 'canceled') summary.canceled.push(node.id);
    settle(node, outcome);
    wake?.();
  };

  // Decide what is ready, start what fits, wait for a finish.
  for (;;) {
    for (let node = schedule.next(); node !== undefined; node = schedule.next()) {
      const because = schedule.failedUpstream(node);
      if (because !== undefined) {
        summary.skipped.push(node.id);
        emit({ type: 'task-done', id: node.id, outcome: 'skipped', durationMs: 0, because });
        settle(node, 'skipped');
        continue;
      }
      const decision = builder.decide(node);
      if (decision.action === 'unchanged') {
        summary.upToDate++;
        // The plan listed it (known after apply), so it settles visibly; without a plan, only early cutoff is worth saying.
        if (planned !== undefined || node.needs.some((id) => schedule.ran(id))) emit({ type: 'task-done', id: node.id, outcome: 'up-to-date', durationMs: 0 });
        settle(node, 'up-to-date');
        continue;
      }
      if (!schedule.start(node)) continue;
      const started = node;
      builder.run(started, decision, (outcome) => conclude(started, outcome));
    }
    if (schedule.running === 0) break;
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
    wake = undefined;
  }

  // Anything not settled was never started: because of a failure, or an abort.
  for (const node of selected) {
    if (schedule.isSettled(node)) continue;
    summary.skipped.push(node.id);
    const because = schedule.failedUpstream(node);
    emit({ type: 'task-done', id: node.id, outcome: 'skipped', durationMs: 0, ...(because === undefined ? {} : { because }) });
  }
  return summary;
}

const isSettledUnchanged = (decision: Decision | undefined): boolean =>
  decision !== undefined && decision.complete && decision.action === 'unchanged';

/** What `settled` holds of a task, by index (plus one). */
const OUTCOMES: readonly TaskOutcome[] = ['ran', 'up-to-date', 'failed', 'skipped', 'canceled'];

/**
 * What may run next: a task is ready once every upstream task of this run has
 * settled, and starts when one of `jobs` slots and one of its pool's are free.
 * A task's state is kept in arrays by its order in the graph rather than Maps
 * by id: at 50,000 tasks, Maps and Sets of it would be some 6 MiB to the end.
 */
class Schedule {
  readonly #graph: TaskGraph;
  readonly #jobs: number;
  readonly #signal: AbortSignal;
  readonly #inPlan: Uint8Array;
  /** Upstream tasks of this run not yet settled. */
  readonly #waitingOn: Int32Array;
  /** An OUTCOMES index + 1 once settled, else 0. */
  readonly #settled: Uint8Array;
  readonly #ranNow: Uint8Array;
  readonly #ready = new Queue<TaskNode>();
  /** Tasks that waited for a pool slot: they go before newly ready ones. */
  readonly #resumed = new Queue<TaskNode>();
  /** Pool → tasks waiting for a slot. */
  readonly #parked = new Map<string, TaskNode[]>();
  readonly #poolUse = new Map<string, number>();
  #running = 0;
  #stopping = false;

  constructor(graph: TaskGraph, selected: readonly TaskNode[], jobs: number, signal: AbortSignal) {
    this.#graph = graph;
    this.#jobs = jobs;
    this.#signal = signal;
    const size = graph.size;
    this.#inPlan = new Uint8Array(size);
    this.#waitingOn = new Int32Array(size);
    this.#settled = new Uint8Array(size);
    this.#ranNow = new Uint8Array(size);
    for (const node of selected) this.#inPlan[node.order] = 1;
    for (const node of selected) {
      let count = 0;
      for (const up of node.needs) if (this.#inPlanHas(up)) count++;
      for (const up of node.after) if (this.#inPlanHas(up)) count++;
      this.#waitingOn[node.order] = count;
      if (count === 0) this.#ready.push(node);
    }
  }

  get running(): number {
    return this.#running;
  }

  /** The next task to look at, while a slot is free and nothing stopped the run. */
  next(): TaskNode | undefined {
    while (this.#ready.length + this.#resumed.length > 0 && this.#running < this.#jobs) {
      // Nothing new starts; what is waiting is skipped once the running tasks are done.
      if (this.#signal.aborted || this.#stopping) return undefined;
      const node = (this.#resumed.shift() ?? this.#ready.shift())!;
      if (!this.isSettled(node)) return node;
    }
    return undefined;
  }

  /** Takes a slot for `node`: false, and it waits for its pool, when the pool is full. */
  start(node: TaskNode): boolean {
    const pool = poolOf(node);
    if (pool !== '' && (this.#poolUse.get(pool) ?? 0) >= (this.#graph.pools.get(pool) ?? 1)) {
      let list = this.#parked.get(pool);
      if (list === undefined) this.#parked.set(pool, (list = []));
      list.push(node);
      return false;
    }
    this.#running++;
    if (pool !== '') this.#poolUse.set(pool, (this.#poolUse.get(pool) ?? 0) + 1);
    return true;
  }

  /** Gives back a started task's slot, to the first task waiting for its pool if any; settle follows. */
  finished(node: TaskNode, outcome: TaskOutcome): void {
    this.#running--;
    const pool = poolOf(node);
    if (pool !== '') {
      this.#poolUse.set(pool, this.#poolUse.get(pool)! - 1);
      const next = this.#parked.get(pool)?.shift();
      if (next !== undefined) this.#resumed.push(next);
    }
    if (outcome === 'ran') this.#ranNow[node.order] = 1;
  }

  /** Records how a task ended, and readies each dependent it was the last upstream of. */
  settle(node: TaskNode, outcome: TaskOutcome): void {
    this.#settled[node.order] = OUTCOMES.indexOf(outcome) + 1;
    this.#graph.forEachDependent(node, this.#readyWhenLast);
  }

  stop(): void {
    this.#stopping = true;
  }

  isSettled(node: TaskNode): boolean {
    return this.#settled[node.order] !== 0;
  }

  ran(id: TaskId): boolean {
    return this.#ranNow[this.#orderOf(id)] === 1;
  }

  /** An upstream task (needed or ordered after) that settled other than ran or up to date. */
  failedUpstream(node: TaskNode): TaskId | undefined {
    return this.#failedIn(node.needs) ?? this.#failedIn(node.after);
  }

  #failedIn(ups: readonly TaskId[]): TaskId | undefined {
    for (const up of ups) {
      const s = OUTCOMES[this.#settled[this.#orderOf(up)]! - 1];
      if (s !== undefined && s !== 'ran' && s !== 'up-to-date') return up;
    }
    return undefined;
  }

  readonly #readyWhenLast = (down: TaskNode): void => {
    if (this.#inPlan[down.order] !== 1) return;
    if (--this.#waitingOn[down.order]! === 0) this.#ready.push(down);
  };

  #orderOf(id: TaskId): number {
    return this.#graph.get(id)?.order ?? -1;
  }

  #inPlanHas(id: TaskId): boolean {
    return this.#inPlan[this.#orderOf(id)] === 1;
  }
}

const poolOf = (node: TaskNode): string => node.decl.spec.pool ?? '';
