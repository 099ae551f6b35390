// Runs a task's check — a command through the process runner, or a function
// with a TaskContext — and gives its verdict as a value.

import type { TaskNode } from '../graph/graph.ts';
import { taskContext } from './context.ts';
import type { CheckFunction, Command } from '../nodefile/types.ts';
import { describeCommand, type ProcessRunner } from '../process-runner.ts';
import { deadline } from '../util/deadline.ts';

/**
 * Runs a task's check: true when what it manages is in place, with a word of detail when not.
 * One still running when the task's `timeout` is up is stopped and fails.
 */
export async function runCheck(
  node: TaskNode,
  runner: ProcessRunner,
  signal: AbortSignal,
): Promise<{ ok: boolean; detail: string } | undefined> {
  if (node.decl.spec.check === undefined) return undefined;
  const limit = deadline(signal, node.decl.spec.timeout);
  if (limit === undefined) return await check(node, runner, signal);
  try {
    // A function that does not heed its signal is not waited for past the timeout.
    const verdict = await limit.race(check(node, runner, limit.signal));
    if (limit.timedOut() && !signal.aborted) return { ok: false, detail: `it did not answer within its timeout of ${node.decl.spec.timeout}, and was stopped` };
    return verdict;
  } finally {
    limit.done();
  }
}

async function check(node: TaskNode, runner: ProcessRunner, signal: AbortSignal): Promise<{ ok: boolean; detail: string } | undefined> {
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

