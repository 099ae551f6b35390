// An Exec for kit unit tests: the real process runner (tar, sh), or a
// scripted one that records what it was asked.

import type { ExecOptions, ExecResult } from '../../src/nodefile/types.ts';
import { LocalRunner } from '../../src/execute/runner.ts';
import type { Exec } from '../../src/node/exec.ts';

export function realExec(cwd = process.cwd()): Exec {
  const runner = new LocalRunner();
  return async (argv, options: ExecOptions = {}) => {
    const result = await runner.run(argv, {
      cwd: options.cwd ?? cwd,
      ...(options.env === undefined ? {} : { env: options.env }),
      ...(options.input === undefined ? {} : { input: options.input }),
    });
    if (!result.ok && options.reject !== false) throw new Error(`${result.command}: ${result.failure}\n${result.output}`);
    return { exitCode: result.exitCode ?? -1, stdout: result.stdout, stderr: result.stderr };
  };
}

export interface ScriptedExec {
  readonly exec: Exec;
  readonly calls: string[][];
}

/** Answers each command with `answer(argv)`; a non-zero exit throws unless `reject: false`. */
export function scriptedExec(answer: (argv: readonly string[]) => Partial<ExecResult> | undefined): ScriptedExec {
  const calls: string[][] = [];
  const exec: Exec = async (argv, options = {}) => {
    calls.push([...argv]);
    const got = answer(argv) ?? {};
    const result: ExecResult = { exitCode: got.exitCode ?? 0, stdout: got.stdout ?? '', stderr: got.stderr ?? '' };
    if (result.exitCode !== 0 && options.reject !== false) throw new Error(`${argv.join(' ')}: exited with code ${result.exitCode}`);
    return result;
  };
  return { exec, calls };
}
