// The process runner (LocalRunner): how the engine starts processes on this machine.
// Commands run without a shell unless a task asks for one. A task's command and its
// check go to spawnd (spawnd.ts), so that the engine does not fork itself once per
// task; wherever spawnd was not built, does not start or is of another version,
// they are spawned directly (spawn.ts). So is every other command, but for the two
// that need execa: one fed on its stdin, and one whose output goes nowhere.

import type { Command } from '../types.ts';
import { describeCommand, type ProcessRunner, type RunOptions, type RunResult } from '../process-runner.ts';
import { notePending, noteStarted } from '../state/processes.ts';
import { failpoint } from '../util/failpoint.ts';
import { cancelOnAbort } from './group.ts';
import { finished, KILL_AFTER_MS, spawnCommand, spawnFailure } from './spawn.ts';
import { Spawnd } from './spawnd.ts';

/** The one spawnd of this process, shared by every runner (watch makes one per run). */
let shared: Spawnd | undefined;

export interface LocalRunnerOptions {
  /**
   * Where task commands go: the process's shared spawnd (the default; NODEGRAPH_SPAWN_SERVER=off in the
   * environment turns it off), this one, or false to spawn each directly.
   */
  readonly spawnd?: Spawnd | false;
}

// Loaded on the first command: a no-op run that spawns nothing should not pay for execa.
let loaded: Promise<typeof import('execa')> | undefined;

/** Runs commands on this machine: task commands through spawnd where it can, the rest directly, execa for input or ignored output. */
export class LocalRunner implements ProcessRunner {
  readonly #spawnd: Spawnd | false;

  constructor(options: LocalRunnerOptions = {}) {
    this.#spawnd = options.spawnd ?? (process.env['NODEGRAPH_SPAWN_SERVER'] === 'off' ? false : (shared ??= new Spawnd()));
  }

  runTask(command: Command, options: RunOptions): Promise<RunResult> {
    return this.#spawnd === false ? spawnCommand(command, options, KILL_AFTER_MS, true) : this.#spawnd.run(command, options);
  }

  readAhead(paths: readonly string[]): boolean {
    return this.#spawnd !== false && this.#spawnd.readAhead(paths);
  }

  async run(command: Command, options: RunOptions): Promise<RunResult> {
    // What needs nothing execa adds takes the lean path: a function check that asks
    // `runc state` on every no-op should not load execa (about 45 ms) to do it.
    if (options.input === undefined && options.output !== 'ignore') {
      try {
        return await spawnCommand(command, options);
      } catch (error) {
        // What spawn itself refuses (a NUL in an argument): failed, as execa reports it.
        return finished(describeCommand(command), { code: null, signal: null, canceled: false, error: (error as Error).message }, { stdout: '', stderr: '', output: '' });
      }
    }
    const { execa } = await (loaded ??= import('execa'));
    const common = {
      cwd: options.cwd,
      env: options.env,
      extendEnv: true,
      reject: false,
      all: true,
      stripFinalNewline: false,
      // A process group of its own, and a cancel signals the group, as spawnCommand does (group.ts):
      // execa's own cancelSignal would stop the command and leave what it started running.
      detached: true,
      ...(options.input === undefined ? { stdin: 'ignore' as const } : { input: options.input }),
      ...(options.output === 'ignore' ? { stdout: 'ignore' as const, stderr: 'ignore' as const, all: false } : {}),
    };
    const marked = { ...common, env: { ...options.env, ...notePending() } };
    const subprocess =
      'shell' in command ? execa(command.shell, { ...marked, shell: '/bin/sh' }) : execa(command[0]!, command.slice(1), marked);
    failpoint('spawned');
    noteStarted(subprocess.pid);
    const cancel = cancelOnAbort(subprocess, options.signal, KILL_AFTER_MS);
    const result = await subprocess.finally(() => cancel.settled());
    const canceled = cancel.canceled();
    const code = typeof result.exitCode === 'number' ? result.exitCode : null;
    const signal = result.signal ?? null;
    // A failure that neither an exit code, a signal nor a cancel explains: it did not start (or execa gave up on it).
    const unexplained = result.failed && !canceled && signal === null && (code === null || code <= 0);
    return finished(
      describeCommand(command),
      { code, signal, canceled, error: unexplained ? spawnFailure(result.originalMessage ?? result.shortMessage ?? 'failed to start', options.cwd) : undefined },
      { stdout: String(result.stdout ?? ''), stderr: String(result.stderr ?? ''), output: String(result.all ?? '') },
    );
  }
}
