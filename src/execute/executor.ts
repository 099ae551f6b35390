// Runs the stale tasks of a graph in dependency order, in parallel, with
// pools; decides each task only once its upstream tasks have settled (early
// cutoff), records each result the moment it finishes, and stops cleanly on
// abort.
//
// A task's life:
//
//   waiting ──upstreams settled──▶ deciding ──unchanged──▶ up-to-date
//                                     │
//                                     ├─upstream failed──▶ skipped
//                                     ▼
//                                  queued ──slot free──▶ running ──▶ ran | failed | canceled

import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { ContentHash, TaskId } from '../ids.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import type { HashCache } from '../hash/cache.ts';
import { hashParts, hashValue } from '../hash/value.ts';
import type { Json } from '../nodefile/types.ts';
import { decide, fingerprintOf, type Decision, type TaskObservation, type UpstreamState } from '../plan/decide.ts';
import { definitionOf, forgetDefinition } from '../plan/definition.ts';
import { verbFor } from '../plan/plan.ts';
import { reasonsLine } from '../plan/reasons.ts';
import type { TaskRecord } from '../state/record.ts';
import type { RecordTable } from '../state/records.ts';
import type { Appender } from './appender.ts';
import { Queue } from '../util/queue.ts';
import { runAction, runCheck, type ActionResult } from './action.ts';
import type { EventSink, TaskOutcome } from '../events.ts';
import { observeOutputs } from './outputs.ts';
import { Claimed, keptBecause } from './kept.ts';
import { removePath } from '../util/mounts.ts';
import { realPath } from '../util/realpath.ts';
import { holds, type OutputGuard } from '../graph/analyze.ts';
import type { ProcessRunner } from './runner.ts';

export interface ExecuteOptions {
  readonly graph: TaskGraph;
  readonly selected: readonly TaskNode[];
  /**
   * What was observed of each task. This and `planned` are consumed: a task's
   * entry is dropped once it is settled, so a build does not hold to its end
   * what it observed and decided of the 50,000 tasks done before (about
   * 0.7 KB a task).
   */
  readonly observations: Map<TaskId, TaskObservation>;
  /** The live records; updated as tasks finish. */
  readonly records: RecordTable;
  readonly store: Appender;
  readonly cache: HashCache;
  readonly runner: ProcessRunner;
  readonly jobs: number;
  readonly keepGoing: boolean;
  readonly replace: ReadonlySet<TaskId>;
  readonly signal: AbortSignal;
  readonly emit: EventSink;
  /**
   * The plan's decisions: reused for a task decided with every upstream settled
   * and none of whose upstream tasks ran since (so nothing it saw has moved).
   */
  readonly planned?: Map<TaskId, Decision>;
  /**
   * The plan's tasks settled unchanged, with their output hashes. None of them
   * runs (see below), so this stays true, and their records are not decoded.
   */
  readonly settled?: ReadonlyMap<TaskId, UpstreamState>;
  /** Paths never removed (the project, the state): see OutputGuard and removeStale below. */
  readonly guard?: OutputGuard;
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
  const { graph, records, emit, signal } = options;
  const summary = { ran: [] as TaskId[], failed: [] as TaskId[], skipped: [] as TaskId[], canceled: [] as TaskId[], upToDate: 0 };
  // A task the plan settled as unchanged, with every upstream known, is up to
  // date whatever runs: what it needs was settled unchanged too, so none of it
  // runs (an order-only upstream does not matter to a task that does not run).
  // Only the others go through the loop below: after one leaf of 50,000 changed,
  // 3 tasks and not 50,501 (a no-op skips the loop altogether).
  const { planned } = options;
  let selected = options.selected;
  if (planned !== undefined && !signal.aborted) {
    selected = selected.filter((n) => !isSettledUnchanged(planned.get(n.id)));
    summary.upToDate = options.selected.length - selected.length;
    if (selected.length === 0) return summary;
  }
  // A task's state in this run, in arrays by its order in the graph rather than
  // Maps by id: at 50,000 tasks, four Maps and Sets were some 6 MiB to the end.
  const span = graph.span;
  const inPlan = new Uint8Array(span);
  for (const node of selected) inPlan[node.order] = 1;
  const waitingOn = new Int32Array(span);
  const settled = new Uint8Array(span); // an OUTCOMES index + 1 once settled, else 0
  const ranNow = new Uint8Array(span);
  const orderOf = (id: TaskId): number => graph.get(id)?.order ?? -1;
  const inPlanHas = (id: TaskId): boolean => inPlan[orderOf(id)] === 1;
  const ran = (id: TaskId): boolean => ranNow[orderOf(id)] === 1;
  const isSettled = (node: TaskNode): boolean => settled[node.order] !== 0;
  const ready = new Queue<TaskNode>();
  // Tasks that waited for a pool slot go before newly ready ones.
  const resumed = new Queue<TaskNode>();
  const queued = new Map<string, TaskNode[]>(); // pool → tasks waiting for a slot
  const poolUse = new Map<string, number>();
  let running = 0;
  let stopping = false;
  // Output folders already made in this run: ninja-style, but once per folder.
  const made = new Set<string>();

  for (const node of selected) {
    let count = 0;
    for (const up of node.needs) if (inPlanHas(up)) count++;
    for (const up of node.after) if (inPlanHas(up)) count++;
    waitingOn[node.order] = count;
    if (count === 0) ready.push(node);
  }

  const upstreamOf = (id: TaskId): UpstreamState => {
    const known = options.settled?.get(id);
    if (known !== undefined) return known;
    const head = records.head(id);
    if (head?.status !== 'ok') return { settled: false };
    return { settled: true, outputHash: head.outputHash, ran: ran(id) };
  };

  let wake: (() => void) | undefined;
  const finished = (): void => {
    wake?.();
  };

  const settle = (node: TaskNode, outcome: TaskOutcome): void => {
    settled[node.order] = OUTCOMES.indexOf(outcome) + 1;
    options.observations.delete(node.id);
    planned?.delete(node.id);
    forgetDefinition(node);
    graph.forEachDependent(node, readyWhenLast);
  };
  const readyWhenLast = (down: TaskNode): void => {
    if (inPlan[down.order] !== 1) return;
    if (--waitingOn[down.order]! === 0) ready.push(down);
  };

  const failedIn = (ups: readonly TaskId[]): TaskId | undefined => {
    for (const up of ups) {
      const s = OUTCOMES[settled[orderOf(up)]! - 1];
      if (s !== undefined && s !== 'ran' && s !== 'up-to-date') return up;
    }
    return undefined;
  };
  const failedUpstream = (node: TaskNode): TaskId | undefined => failedIn(node.needs) ?? failedIn(node.after);

  const poolOf = (node: TaskNode): string => node.decl.spec.pool ?? '';
  const poolFree = (pool: string): boolean =>
    pool === '' || (poolUse.get(pool) ?? 0) < (graph.pools.get(pool) ?? 1);

  const start = (node: TaskNode, reason: string, verb: string, forcedFresh: boolean, decision: ReturnType<typeof decide>): void => {
    running++;
    const pool = poolOf(node);
    if (pool !== '') poolUse.set(pool, (poolUse.get(pool) ?? 0) + 1);
    const conclude = (outcome: TaskOutcome): void => {
      running--;
      if (pool !== '') {
        poolUse.set(pool, poolUse.get(pool)! - 1);
        const next = queued.get(pool)?.shift();
        if (next !== undefined) resumed.push(next);
      }
      if (outcome === 'ran') {
        summary.ran.push(node.id);
        ranNow[node.order] = 1;
      } else if (outcome === 'failed') {
        summary.failed.push(node.id);
        if (!options.keepGoing) stopping = true;
      } else if (outcome === 'canceled') summary.canceled.push(node.id);
      settle(node, outcome);
      finished();
    };
    void runOne(node, reason, verb, forcedFresh, decision).then(conclude, (error: unknown) => conclude(unexpected(node, error)));
  };

  /**
   * A throw from recording a task's result, not from the task: the task
   * counts as failed rather than the engine exiting with children still
   * running and the lock left behind.
   */
  const unexpected = (node: TaskNode, error: unknown): TaskOutcome => {
    const message = `nodegraph could not record the result: ${error instanceof Error ? error.message : String(error)}`;
    try {
      return unsuccessful(node, 'failed', message, new Date(), 0);
    } catch {
      // the record's absence or an older one: the task runs again either way
      emit({ type: 'task-done', id: node.id, outcome: 'failed', durationMs: 0, error: message });
      return 'failed';
    }
  };

  /** A task that did not succeed: nothing it did is trusted, so it is recorded as failed (the next run starts it again), and said. */
  const unsuccessful = (
    node: TaskNode,
    outcome: 'failed' | 'canceled',
    error: string,
    startedAt: Date,
    durationMs: number,
    shown: { readonly command?: string | undefined; readonly output?: string | undefined } = {},
  ): TaskOutcome => {
    record(failedRecord(node, graph, records.get(node.id), startedAt, durationMs, error));
    emit({ type: 'task-done', id: node.id, outcome, durationMs, error, ...shown });
    return outcome;
  };

  const runOne = async (
    node: TaskNode,
    reason: string,
    verb: string,
    firstRun: boolean,
    decision: ReturnType<typeof decide>,
  ): Promise<TaskOutcome> => {
    const startedAt = new Date();
    const observation = options.observations.get(node.id)!;
    for (const output of node.outputs) {
      const parent = path.dirname(output);
      if (made.has(parent)) continue;
      try {
        mkdirSync(parent, { recursive: true });
      } catch (error) {
        // A read-only or full file system: the task cannot run, and did not.
        const message = `could not make the folder for its output ${path.relative(graph.dir, output) || output}: ${(error as Error).message}`;
        emit({ type: 'task-start', id: node.id, verb, reason, command: undefined });
        return unsuccessful(node, 'failed', message, startedAt, 0);
      }
      made.add(parent);
    }
    const result: ActionResult = await runAction(node, {
      runner: options.runner,
      signal,
      reason,
      verb,
      firstRun,
      changedInputs: decision.changedInputs ?? [...observation.inputs.keys()],
      changedUpstream: decision.changedUpstream,
      ran: (id) => ran(id as TaskId),
      emit,
    });
    const durationMs = Date.now() - startedAt.getTime();
    const previous = records.get(node.id);
    const failed = (outcome: 'failed' | 'canceled', error: string): TaskOutcome =>
      unsuccessful(node, outcome, error, startedAt, durationMs, { command: result.command, output: result.output });
    if (!result.ok) return failed(result.canceled ? 'canceled' : 'failed', result.error);
    const outputs = observeOutputs(node.outputs, options.cache);
    const missing = [...outputs].filter(([, hash]) => hash === 'missing').map(([p]) => p);
    if (missing.length > 0) {
      return failed('failed', `declared output ${missing.map((p) => path.relative(graph.dir, p) || p).join(', ')} was not produced`);
    }
    if (node.decl.spec.check !== undefined) {
      // What the task manages must be in place now: a run that leaves its check failing
      // has not converged (Terraform's "inconsistent result after apply"), and saying ✔
      // on every apply while status says drifted would hide it.
      const verified = await runCheck(node, options.runner, signal);
      if (signal.aborted) return failed('canceled', 'canceled');
      if (verified !== undefined && !verified.ok) {
        return failed('failed', `ran, but its check still fails${verified.detail === '' ? '' : `: ${verified.detail}`}`);
      }
    }
    const outputHashes: Record<string, ContentHash> = {};
    for (const [p, hash] of outputs) outputHashes[p] = hash as ContentHash;
    const outputHash = combineOutputs(node, outputHashes, result.value, startedAt);
    const definition = definitionOf(node, graph.dir);
    const fingerprint = fingerprintOf(definition, observation.inputs, decision.upstream);
    record({
      v: 1,
      id: node.id,
      status: 'ok',
      fingerprint,
      definition,
      inputs: Object.fromEntries(observation.inputs),
      upstream: decision.upstream,
      outputs: outputHashes,
      outputHash,
      edges: { needs: [...node.needs], after: [...node.after] },
      recipe: recipeOf(node),
      startedAt: startedAt.toISOString(),
      durationMs,
    });
    removeStale(node, previous);
    emit({
      type: 'task-done',
      id: node.id,
      outcome: 'ran',
      durationMs,
      outputsChanged: previous?.status !== 'ok' || previous.outputHash !== outputHash,
      // What a command printed, as ninja shows it (a function's ctx.log went out as task-log events).
      ...(result.command !== undefined && result.output !== '' ? { command: result.command, output: result.output } : {}),
    });
    return 'ran';
  };

  // Every declared output, with its task: made once, and only if a task left an output behind.
  let declared: Claimed | undefined;
  /**
   * The outputs the task's last run made that it no longer declares (a renamed
   * file, a dropped drop-in) are removed once it ran, as a destroy would remove
   * them: a machine converges to what the Nodefile says, and a stale systemd
   * drop-in left behind would still be read. Not for a task that keeps its
   * outputs (`removeOutputs: false`), and never a path the project or the state
   * is in, nor one a task declares now (or that holds or lies in one). Nor one
   * outside the project that lies in the folder the task last ran in, when it
   * runs elsewhere now: that is a state copied with its project (`cp -r a b`),
   * whose records name the original's files, and those are the original's.
   */
  const removeStale = (node: TaskNode, previous: TaskRecord | undefined): void => {
    if (previous === undefined || node.decl.spec.removeOutputs === false) return;
    const now = new Set(node.outputs);
    for (const old of Object.keys(previous.outputs)) {
      if (now.has(old)) continue;
      if (declared === undefined) {
        const owners = new Map<string, TaskId>();
        for (const n of graph.ordered) for (const output of n.outputs) owners.set(output, n.id);
        declared = new Claimed(owners);
      }
      const shown = path.relative(graph.dir, old) || old;
      // A file that now lies in a declared folder (the task's own, say) belongs to that folder's task;
      // and a path that is one of its outputs by another spelling (a symlink on the way) is one of them.
      const kept = keptBecause(old, options.guard, declared, true) ?? sameAsOutput(old, node.outputs) ?? elsewhere(old, previous, node, graph.dir);
      if (kept !== undefined) {
        emit({ type: 'task-log', id: node.id, message: `kept ${shown}, no longer one of its outputs, which ${kept}` });
        continue;
      }
      const problem = removePath(old);
      emit({ type: 'task-log', id: node.id, message: problem ?? `removed ${shown}, no longer one of its outputs` });
    }
  };

  const record = (r: TaskRecord): void => {
    const where = options.store.append(r);
    // A build keeps where each record went, not the record: nothing this run does reads it again.
    if (where !== undefined) records.setWritten(r, where, options.store.readBack);
    else records.set(r);
    // A state that cannot be written must not be run ahead of.
    if (options.store.failure !== undefined) stopping = true;
  };

  // The scheduling loop: decide what is ready, start what fits, wait for a finish.
  while (true) {
    while (ready.length + resumed.length > 0 && running < options.jobs) {
      if (signal.aborted || stopping) {
        // Nothing new starts; what is waiting is skipped once the running tasks are done.
        break;
      }
      const node = (resumed.shift() ?? ready.shift())!;
      if (isSettled(node)) continue;
      const because = failedUpstream(node);
      if (because !== undefined) {
        summary.skipped.push(node.id);
        emit({ type: 'task-done', id: node.id, outcome: 'skipped', durationMs: 0, because });
        settle(node, 'skipped');
        continue;
      }
      const plannedNow = planned?.get(node.id);
      const decision =
        plannedNow !== undefined && plannedNow.complete && !node.needs.some(ran)
          ? plannedNow
          : decide(node, () => definitionOf(node, graph.dir), options.observations.get(node.id)!, records, upstreamOf, options.replace.has(node.id));
      if (decision.action === 'unchanged') {
        summary.upToDate++;
        // Worth saying only when something it depends on ran: that is early cutoff at work.
        if (node.needs.some(ran)) emit({ type: 'task-done', id: node.id, outcome: 'up-to-date', durationMs: 0 });
        settle(node, 'up-to-date');
        continue;
      }
      const pool = poolOf(node);
      if (!poolFree(pool)) {
        let list = queued.get(pool);
        if (list === undefined) queued.set(pool, (list = []));
        list.push(node);
        continue;
      }
      const verb = verbFor(node, decision.action, decision.onlyBecauseOf, decision.stopped);
      start(node, reasonsLine(decision.reasons), verb, records.get(node.id) === undefined, decision);
    }
    if (running === 0) break;
    await new Promise<void>((resolve) => {
      wake = resolve;
    });
    wake = undefined;
  }

  // Anything not settled was never started: because of a failure, or an abort.
  for (const node of selected) {
    if (isSettled(node)) continue;
    summary.skipped.push(node.id);
    const because = failedUpstream(node);
    emit({ type: 'task-done', id: node.id, outcome: 'skipped', durationMs: 0, ...(because === undefined ? {} : { because }) });
  }
  return summary;
}

/** What `settled` holds of a task, by index (plus one). */
const OUTCOMES: readonly TaskOutcome[] = ['ran', 'up-to-date', 'failed', 'skipped', 'canceled'];


const isSettledUnchanged = (decision: Decision | undefined): boolean =>
  decision !== undefined && decision.complete && decision.action === 'unchanged';

/** Whether `old` really is (or holds, or lies in) one of `outputs`, followed through symlinks. */
function sameAsOutput(old: string, outputs: readonly string[]): string | undefined {
  const resolved = realPath(old);
  if (resolved === undefined) return undefined;
  for (const output of outputs) {
    const now = realPath(output);
    if (now !== undefined && (holds(now, resolved) || holds(resolved, now))) return `is ${output} by another path`;
  }
  return undefined;
}

/** Why a stale output is left to the copy of the project the state came from (see removeStale), or undefined. */
function elsewhere(old: string, previous: TaskRecord, node: TaskNode, dir: string): string | undefined {
  const before = previous.recipe.cwd;
  if (before === node.cwd || holds(dir, old) || !holds(before, old)) return undefined;
  return `lies in ${before}, where the task last ran, outside this project: the state seems to come from a copy of the project there`;
}

function combineOutputs(
  node: TaskNode,
  outputs: Record<string, ContentHash>,
  value: Json | undefined,
  startedAt: Date,
): ContentHash {
  const parts: string[] = [];
  for (const p of node.outputs) parts.push(p, outputs[p]!);
  if (value !== undefined) parts.push('value', hashValue(value));
  // A task with nothing to compare stands for "it ran": its dependents follow every run.
  if (parts.length === 0) parts.push('stamp', node.id, startedAt.toISOString(), String(process.hrtime.bigint()));
  return hashParts(parts);
}

export function recipeOf(node: TaskNode): TaskRecord['recipe'] {
  const { spec } = node.decl;
  const list = (c: typeof spec.stop): string[][] => {
    if (c === undefined) return [];
    const many = Array.isArray(c) && c.length > 0 && typeof c[0] !== 'string' ? (c as readonly unknown[]) : [c];
    return many.map((one) =>
      typeof one === 'object' && one !== null && 'shell' in one ? ['/bin/sh', '-c', (one as { shell: string }).shell] : [...(one as string[])],
    );
  };
  return {
    cwd: node.cwd,
    remove: spec.removeOutputs === false ? [] : [...node.outputs],
    destroy: list(spec.destroy),
    stop: list(spec.stop),
    ...(spec.env === undefined ? {} : { env: { ...spec.env } }),
  };
}

function failedRecord(
  node: TaskNode,
  graph: TaskGraph,
  previous: TaskRecord | undefined,
  startedAt: Date,
  durationMs: number,
  error: string,
): TaskRecord {
  return {
    v: 1,
    id: node.id,
    status: 'failed',
    fingerprint: previous?.fingerprint ?? hashParts(['failed']),
    definition: definitionOf(node, graph.dir),
    inputs: {},
    upstream: {},
    outputs: previous?.outputs ?? {},
    outputHash: hashParts(['failed', node.id, startedAt.toISOString()]),
    edges: { needs: [...node.needs], after: [...node.after] },
    recipe: recipeOf(node),
    startedAt: startedAt.toISOString(),
    durationMs,
    error,
  };
}
