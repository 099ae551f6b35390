// How the engine runs a command: the ProcessRunner interface, which checks
// (observe/) and actions (execute/) both run through. LocalRunner
// (execute/runner.ts) is the real one; tests swap in fakes.

import type { Command } from './types.ts';

export interface RunOptions {
  readonly cwd: string;
  /** Added to the inherited environment. */
  readonly env?: Readonly<Record<string, string>>;
  readonly signal?: AbortSignal;
  readonly input?: string;
  /** 'ignore': stdout and stderr go nowhere (nothing is captured). */
  readonly output?: 'capture' | 'ignore';
  /** Called with output as it comes (at least the tail of each piece read), for a live view; the result has it all. */
  readonly onOutput?: (text: string) => void;
}

export interface RunResult {
  /** The command as a user would type it. */
  readonly command: string;
  /** Null when the process did not exit by itself (killed, or never started). */
  readonly exitCode: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** stdout and stderr interleaved as they came. */
  readonly output: string;
  readonly ok: boolean;
  readonly canceled: boolean;
  /** Why it failed, in words, when it did. */
  readonly failure: string | undefined;
  /** It exited while a job it started held its output, which was then closed unread (spawn.ts, HELD_MS). */
  readonly held?: true;
}

export interface ProcessRunner {
  run(command: Command, options: RunOptions): Promise<RunResult>;
  /**
   * A command the Nodefile declares for a task — its run, or its check, which a
   * no-op runs for every task that has one: no input, output captured. Defaults to run().
   */
  runTask?(command: Command, options: RunOptions): Promise<RunResult>;
  /**
   * Has the kernel read `paths` (absolute) into the page cache ahead of the
   * reads the caller will make, where it can do so off the main thread (spawnd);
   * false when it cannot. Only a hint: nothing is read into the process.
   */
  readAhead?(paths: readonly string[]): boolean;
}

/** The command as a user would type it. */
export function describeCommand(command: Command): string {
  if ('shell' in command) return command.shell;
  return command.map((arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`)).join(' ');
}

/**
 * How long a command's output is still read once it has exited, for what a job it started
 * in the background writes last; then it is closed and the command done (as native/spawnd.c's
 * HELD_MS, and Go's exec.Cmd.WaitDelay): a daemon started with `&` does not hold the run.
 */
export const HELD_MS = 2000;

/** What a run says of a task whose command (`which`) exited while a job it started held its output. */
export const heldOutput = (id: string, which: string): string =>
  `task ${id}: ${which} exited, and a process it started still held its output ${HELD_MS / 1000} s later: nodegraph stopped reading it, and the process runs on (redirect its output, \`> file 2>&1\`, or start it as a service)`;
