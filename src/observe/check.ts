// Runs a task's check — a command through the process runner, or a function
// with a TaskContext — and gives its verdict as a value.

import type { TaskNode } from '../graph/graph.ts';
import { taskContext } from './context.ts';
import type { CheckFunction, Command } from '../nodefile/types.ts';
import { describeCommand, type ProcessRunner } from '../process-runner.ts';

/** Runs a task's check: true when what it manages is in place, with a word of detail when not. */
export async function runCheck(
  node: TaskNode,
  runner: ProcessRunner,
  signal: AbortSignal,
): Promise<{ ok: boolean; detail: string } | undefined> {
  const check = node.decl.spec.check;
  if (check === undefined) return undefined;
  if (typeof check !== 'function') {
    const options = { cwd: node.cwd, env: node.decl.spec.env, signal };
    // The lean path, as for a task's command: a no-op whose checks are commands loads no execa.
    const result = await (runner.runTask === undefined ? runner.run(check as Command, options) : runner.runTask(check as Command, options));
    const last = result.output.trim().split('\n').at(-1) ?? '';
    return { ok: result.ok, detail: result.ok ? '' : `${describeCommand(check as Command)} ${result.failure ?? ''}${last === '' ? '' : ` (${last})`}` };
  }
  const ctx = taskContext(
    node,
    { runner, signal, reason: 'check', firstRun: false, forced: false, changedInputs: [], changedUpstream: [], ran: () => false, log: () => {} },
    [],
  );
  try {
    const verdict = await (check as CheckFunction)(ctx);
    if (verdict === true) return { ok: true, detail: '' };
    return { ok: false, detail: typeof verdict === 'string' ? verdict : '' };
  } catch (error) {
    return { ok: false, detail: error instanceof Error ? error.message : String(error) };
  }
}

