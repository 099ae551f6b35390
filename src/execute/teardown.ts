// Tears down recorded tasks in reverse graph order, from the recipe each
// record carries, so a task that left the Nodefile can still be destroyed.
// One at a time: teardown order is the point, and it is rarely long.

import type { TaskId } from '../ids.ts';
import type { TaskRecord } from '../state/record.ts';
import { removePath } from '../util/mounts.ts';
import type { Appender } from './appender.ts';
import type { EventSink } from './events.ts';
import { describeCommand, type ProcessRunner } from './runner.ts';

export interface TeardownOptions {
  /** In teardown order: dependents first. */
  readonly order: readonly TaskId[];
  readonly records: Map<TaskId, TaskRecord>;
  readonly store: Appender;
  readonly runner: ProcessRunner;
  readonly signal: AbortSignal;
  readonly emit: EventSink;
  /** 'stop' runs stop commands only and keeps everything; 'destroy' also destroys, removes and forgets. */
  readonly mode: 'stop' | 'destroy';
}

export interface TeardownSummary {
  readonly done: TaskId[];
  readonly failed: TaskId[];
  readonly kept: TaskId[];
}

export async function teardown(options: TeardownOptions): Promise<TeardownSummary> {
  const { records, emit } = options;
  const summary: TeardownSummary = { done: [], failed: [], kept: [] };
  // A task whose dependent could not be torn down is kept: it is still needed.
  const blocked = new Map<TaskId, TaskId>();

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
    const commands = options.mode === 'stop' ? record.recipe.stop : [...record.recipe.stop, ...record.recipe.destroy];
    emit({ type: 'destroy-start', id, command: commands.map((c) => describeCommand(c)).join(' && ') || undefined });
    const failure = await runRecipe(record, commands, options);
    if (failure !== undefined) {
      summary.failed.push(id);
      emit({ type: 'destroy-done', id, outcome: 'failed', error: failure.error, output: failure.output });
      blockUpstream(record, id, blocked);
      continue;
    }
    if (options.mode === 'destroy') {
      records.delete(id);
      options.store.append({ v: 1, id, deleted: true });
    }
    summary.done.push(id);
    emit({ type: 'destroy-done', id, outcome: 'destroyed' });
  }
  return summary;
}

function blockUpstream(record: TaskRecord, id: TaskId, blocked: Map<TaskId, TaskId>): void {
  for (const up of [...record.edges.needs, ...record.edges.after]) if (!blocked.has(up)) blocked.set(up, id);
}

async function runRecipe(
  record: TaskRecord,
  commands: readonly (readonly string[])[],
  options: TeardownOptions,
): Promise<{ error: string; output: string } | undefined> {
  let output = '';
  for (const argv of commands) {
    const result = await options.runner.run(argv, {
      cwd: record.recipe.cwd,
      ...(record.recipe.env === undefined ? {} : { env: record.recipe.env }),
      signal: options.signal,
    });
    output += result.output;
    if (!result.ok) return { error: `${result.command}: ${result.failure ?? 'failed'}`, output };
  }
  if (options.mode === 'stop') return undefined;
  for (const target of record.recipe.remove) {
    const problem = removePath(target);
    if (problem !== undefined) return { error: problem, output };
  }
  return undefined;
}
