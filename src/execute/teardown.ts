// Tears down recorded tasks in reverse graph order, from the recipe each
// record carries, so a task that left the Nodefile can still be destroyed.
// A task the Nodefile still declares stops and is destroyed by the commands it
// declares now: a fixed destroy action counts without running the task again.
// What is removed is what the record says the task made, less what must not
// go: the project, the state (OutputGuard), and any path a task that stays
// now declares as its output (a task renamed in the Nodefile is its old self's
// orphan, and its file is the new one's).
// One at a time: teardown order is the point, and it is rarely long.

import type { OutputGuard } from '../graph/analyze.ts';
import type { TaskGraph, TaskNode } from '../graph/graph.ts';
import type { TaskId } from '../ids.ts';
import type { TaskRecord } from '../state/record.ts';
import { upstreamOf } from '../plan/teardown.ts';
import { STOPPED, TEARDOWN_BEGUN } from '../types.ts';
import type { RecordTable } from '../state/records.ts';
import { removePath } from '../util/mounts.ts';
import { holds, projectThen, rebase } from '../util/paths.ts';
import type { Appender } from './appender.ts';
import type { EventSink } from '../events.ts';
import { Claimed, keptBecause } from './kept.ts';
import { definitionOf } from '../plan/definition.ts';
import { recipeOf } from './run-task.ts';
import { describeCommand, heldOutput, type ProcessRunner } from '../process-runner.ts';
import { deadline } from '../util/deadline.ts';

export interface TeardownOptions {
  /** In teardown order: dependents first. */
  readonly order: readonly TaskId[];
  readonly records: RecordTable;
  readonly store: Appender;
  readonly runner: ProcessRunner;
  readonly signal: AbortSignal;
  readonly emit: EventSink;
  /**
   * 'stop' runs stop commands only and keeps everything; 'destroy' also destroys, removes and
   * forgets; 'retire' destroys, except a task with `retire: 'stop'`, which it stops and keeps.
   */
  readonly mode: 'stop' | 'destroy' | 'retire';
  /** The Nodefile's graph, when it was loaded: its tasks' current actions, and the outputs that stay. */
  readonly graph?: TaskGraph | undefined;
  /** Paths never removed, whatever a record says (see OutputGuard). */
  readonly guard?: OutputGuard | undefined;
  /** The folders the project was applied from, as the kept generations say (see relocation). */
  readonly projectsThen?: () => readonly string[];
}

export interface TeardownSummary {
  readonly done: TaskId[];
  /** Of `done`, those only stopped (their files and record kept): a stop, or a retirement with `retire: 'stop'`. */
  readonly stopped: TaskId[];
  readonly failed: TaskId[];
  /** Cut short by the signal (Ctrl-C): recorded as begun, as a failure is, so the next apply does it again. */
  readonly canceled: TaskId[];
  readonly kept: TaskId[];
}

export async function teardown(options: TeardownOptions): Promise<TeardownSummary> {
  const { records, emit } = options;
  const summary: TeardownSummary = { done: [], stopped: [], failed: [], canceled: [], kept: [] };
  const claimed = claimedOutputs(options);
  const relocate = relocation(options);
  // A task whose dependent could not be torn down is kept: it is still needed.
  const blocked = new Map<TaskId, TaskId>();

  // How many this teardown settles (a stop passes by what declares nothing to stop it), said with each start so a
  // reporter counts against the whole: [1/5], [2/5], not [1/1], [2/2].
  const total = options.order.filter((id) => {
    const record = records.get(id);
    if (record === undefined) return false;
    const node = options.graph?.get(id);
    const stop = node === undefined ? record.recipe.stop : recipeOf(node).stop;
    const mode = options.mode === 'retire' ? (record.recipe.retire === 'stop' ? 'stop' : 'destroy') : options.mode;
    return mode !== 'stop' || stop.length > 0;
  }).length;

  for (const id of options.order) {
    const record = records.get(id);
    if (record === undefined) continue;
    const blocker = blocked.get(id);
    if (options.signal.aborted || blocker !== undefined) {
      summary.kept.push(id);
      emit({ type: 'destroy-done', id, outcome: 'skipped', because: blocker === undefined ? 'canceled' : `${blocker} was not torn down` });
      blockUpstream(record, id, blocked);
      continue;
    }
    const node = options.graph?.get(id);
    const recipe = node === undefined ? relocate(record.recipe) : { ...recipeOf(node), remove: madeHere(record, node, options.graph!.dir) };
    const mode = options.mode === 'retire' ? (record.recipe.retire === 'stop' ? 'stop' : 'destroy') : options.mode;
    // Stopping a task that declares nothing to stop it does nothing, and says nothing.
    if (mode === 'stop' && recipe.stop.length === 0) continue;
    const commands = mode === 'stop' ? recipe.stop : [...recipe.stop, ...recipe.destroy];
    emit({ type: 'destroy-start', id, command: commands.map((c) => describeCommand(c)).join(' && ') || undefined, total });
    const begun: TaskRecord = { ...record, status: 'failed', error: TEARDOWN_BEGUN[mode] };
    records.set(begun);
    options.store.append(begun);
    const failure = await runRecipe(id, recipe, { ...options, mode }, claimed);
    if (failure !== undefined) {
      const { canceled, ...said } = failure;
      (canceled ? summary.canceled : summary.failed).push(id);
      emit({ type: 'destroy-done', id, outcome: canceled ? 'canceled' : 'failed', action: mode, ...said });
      blockUpstream(record, id, blocked);
      continue;
    }
    if (mode === 'destroy') {
      records.tombstone(id);
      options.store.append({ v: 1, id, deleted: true });
    } else {
      // What the task made is no longer running: the next apply starts it again,
      // whether or not a check would have noticed.
      const stopped: TaskRecord = { ...record, status: 'failed', error: STOPPED };
      records.set(stopped);
      options.store.append(stopped);
    }
    summary.done.push(id);
    if (mode === 'stop') summary.stopped.push(id);
    emit({ type: 'destroy-done', id, outcome: 'destroyed', action: mode });
  }
  return summary;
}

/**
 * Where the project was when the task's record was made, if it is elsewhere now (moved,
 * or copied with its state) and the task is declared as it was then: a task whose folder
 * changed by an edit of the Nodefile says nothing of where the project was.
 */
function projectBefore(record: TaskRecord, node: TaskNode, dir: string): string | undefined {
  const before = projectThen(record.recipe.cwd, node.cwd, dir);
  return before !== undefined && record.definition === definitionOf(node, dir) ? before : undefined;
}

/**
 * The paths a task's record says its run made, where they lie now: the records of a
 * project moved or copied with its state (`cp -r a b`) name `a`'s files, and a destroy
 * in `b` removes `b`'s, never `a`'s.
 */
function madeHere(record: TaskRecord, node: TaskNode, dir: string): string[] {
  const before = projectBefore(record, node, dir);
  return before === undefined ? record.recipe.remove : record.recipe.remove.map((p) => rebase(p, before, dir));
}

/**
 * A recipe of a task no longer declared, done where the project is now: when the project
 * was in another folder before (moved, or copied with its state), as a kept generation's
 * Nodefile says, a recipe whose folder lies in that one runs in, and removes, the same
 * places in this project. Its commands are as recorded. Looked for only for a recipe
 * outside the project; a folder that holds the project, or lies in it, says nothing.
 */
function relocation({ graph, projectsThen }: TeardownOptions): (recipe: TaskRecord['recipe']) => TaskRecord['recipe'] {
  let befores: readonly string[] | undefined;
  return (recipe) => {
    if (graph === undefined || holds(graph.dir, recipe.cwd)) return recipe;
    befores ??= (projectsThen?.() ?? []).filter((folder) => !holds(folder, graph.dir) && !holds(graph.dir, folder));
    const before = befores.find((folder) => holds(folder, recipe.cwd));
    if (before === undefined) return recipe;
    return { ...recipe, cwd: rebase(recipe.cwd, before, graph.dir), remove: recipe.remove.map((p) => rebase(p, before, graph.dir)) };
  };
}

function blockUpstream(record: TaskRecord, id: TaskId, blocked: Map<TaskId, TaskId>): void {
  for (const up of upstreamOf(record)) if (!blocked.has(up)) blocked.set(up, id);
}

async function runRecipe(
  id: TaskId,
  recipe: TaskRecord['recipe'],
  options: TeardownOptions,
  claimed: Claimed,
): Promise<{ error: string; output: string; exitCode?: number; canceled: boolean } | undefined> {
  let output = '';
  // The task's timeout bounds its stop commands together, and then its destroy commands together.
  for (const phase of options.mode === 'stop' ? [recipe.stop] : [recipe.stop, recipe.destroy]) {
    if (phase.length === 0) continue;
    const limit = deadline(options.signal, recipe.timeout);
    try {
      for (const argv of phase) {
        const result = await options.runner.run(argv, {
          cwd: recipe.cwd,
          ...(recipe.env === undefined ? {} : { env: recipe.env }),
          signal: limit?.signal ?? options.signal,
        });
        output += result.output;
        if (result.held === true) options.emit({ type: 'warning', message: heldOutput(id, `\`${result.command}\``) });
        if (limit?.timedOut() === true && !options.signal.aborted) return { error: `${result.command}: timed out after ${recipe.timeout}, and was stopped`, output, canceled: false };
        // Cut short by the signal, as apply says of a task: canceled (the command is on its destroy-start).
        if (!result.ok && (result.canceled || options.signal.aborted)) return { error: 'canceled', output, canceled: true };
        if (!result.ok) return { error: `${result.command}: ${result.failure ?? 'failed'}`, output, ...(result.exitCode === null ? {} : { exitCode: result.exitCode }), canceled: false };
      }
    } finally {
      limit?.done();
    }
  }
  if (options.mode === 'stop') return undefined;
  for (const target of recipe.remove) {
    const kept = keptBecause(target, options.guard, claimed);
    if (kept !== undefined) {
      options.emit({ type: 'warning', message: `${id}: kept ${target}, which ${kept}` });
      continue;
    }
    const problem = removePath(target);
    if (problem !== undefined) return { error: problem, output, canceled: false };
  }
  return undefined;
}

/** The outputs of the graph's tasks that this teardown leaves in place, with the task that declares each. */
function claimedOutputs(options: TeardownOptions): Claimed {
  const claimed = new Map<string, TaskId>();
  if (options.graph === undefined || options.mode === 'stop') return new Claimed(claimed);
  const going = new Set(options.order);
  for (const node of options.graph.ordered) {
    if (going.has(node.id)) continue;
    for (const output of node.outputs) claimed.set(output, node.id);
  }
  return new Claimed(claimed);
}
