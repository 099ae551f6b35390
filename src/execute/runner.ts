// The process runner: the one module that imports execa. Commands run
// without a shell unless a task asks for one; output is buffered (stdout and
// stderr interleaved) so it can be shown with the command when it fails.

import type { Command } from '../nodefile/types.ts';

export interface RunOptions {
  readonly cwd: string;
  /** Added to the inherited environment. */
  readonly env?: Readonly<Record<string, string>>;
  readonly signal?: AbortSignal;
  readonly input?: string;
  /** 'ignore': stdout and stderr go nowhere (nothing is captured). */
  readonly output?: 'capture' | 'ignore';
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
}

export function describeCommand(command: Command): string {
  if ('shell' in command) return command.shell;
  return command.map((arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`)).join(' ');
}

// Loaded on the first command: a no-op run that spawns nothing should not pay for execa.
let loaded: Promise<typeof import('execa')> | undefined;

export class ExecaRunner implements ProcessRunner {
  async run(command: Command, options: RunOptions): Promise<RunResult> {
    const { execa } = await (loaded ??= import('execa'));
    const common = {
      cwd: options.cwd,
      env: options.env,
      extendEnv: true,
      reject: false,
      all: true,
      stripFinalNewline: false,
      cancelSignal: options.signal,
      forceKillAfterDelay: 5000,
      ...(options.input === undefined ? { stdin: 'ignore' as const } : { input: options.input }),
      ...(options.output === 'ignore' ? { stdout: 'ignore' as const, stderr: 'ignore' as const, all: false } : {}),
    };
    const result =
      'shell' in command
        ? await execa(command.shell, { ...common, shell: '/bin/sh' })
        : await execa(command[0]!, command.slice(1), common);
    const exitCode = typeof result.exitCode === 'number' ? result.exitCode : null;
    const failed = result.failed;
    let failure: string | undefined;
    if (failed) {
      if (result.isCanceled) failure = 'canceled';
      else if (result.signal !== undefined) failure = `killed by ${result.signal}`;
      else if (exitCode !== null) failure = `exited with code ${exitCode}`;
      else failure = result.originalMessage ?? result.shortMessage ?? 'failed to start';
    }
    return {
      command: describeCommand(command),
      exitCode,
      stdout: String(result.stdout ?? ''),
      stderr: String(result.stderr ?? ''),
      output: String(result.all ?? ''),
      ok: !failed,
      canceled: result.isCanceled === true,
      failure,
    };
  }
}
