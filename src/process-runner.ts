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
