// The one way the kit runs a program: the task context's exec, which goes
// through nodegraph's process runner (a fake in unit tests). The kit never
// spawns a process itself.

import type { Argv, ExecOptions, ExecResult, TaskContext } from '../nodefile/types.ts';

export type Exec = (argv: Argv, options?: ExecOptions) => Promise<ExecResult>;

/** The exec of a task context, detached from the context object. */
export const execOf = (ctx: Pick<TaskContext, 'exec'>): Exec => (argv, options) => ctx.exec(argv, options);

/** Runs argv, returning the result even when it exits non-zero. */
export const tryExec = (exec: Exec, argv: Argv, options: ExecOptions = {}): Promise<ExecResult> =>
  exec(argv, { ...options, reject: false });

/** The last non-empty line a command printed, for error messages. */
export function lastLine(result: ExecResult): string {
  const lines = `${result.stdout}\n${result.stderr}`.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  return lines.at(-1) ?? '';
}
