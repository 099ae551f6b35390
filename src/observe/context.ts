// The TaskContext a Nodefile's function is given, as its run (execute/action.ts)
// or as its check (observe/check.ts): its commands go through the process runner,
// and what it logs or a command prints is kept with its output.

import { chmodSync, chownSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import path from 'node:path';
import type { TaskId } from '../ids.ts';
import { heldOutput, type ProcessRunner } from '../process-runner.ts';
import { realPath } from '../util/realpath.ts';
import type { Argv, ExecOptions, ExecResult, InputSpec, TaskContext } from '../nodefile/types.ts';

/** The task a context is for, as the graph holds it (a TaskNode is one). */
export interface ContextTask {
  readonly id: TaskId;
  readonly cwd: string;
  /** Inputs by name, as analysis left them. */
  readonly inputs: Readonly<Record<string, InputSpec>>;
  readonly decl: { readonly spec: { readonly env?: Readonly<Record<string, string>> } };
}

/** Why the function runs, as the context tells it, and where its commands and its log go. */
export interface ContextOptions extends Pick<TaskContext, 'signal' | 'reason' | 'firstRun' | 'forced' | 'changedInputs' | 'changedUpstream' | 'ran'> {
  readonly stateDir?: string | undefined;
  readonly runner: ProcessRunner;
  /** Each message the function logs, as it logs it. */
  log(message: string): void;
  /** A warning for the run to show (a command it ran left a job holding its output). */
  readonly warn?: (message: string) => void;
  /** What the commands it runs print, as they print it (the live view's last line). */
  readonly onOutput?: (text: string) => void;
}

/** The context for `task`; what it logs and what its commands print is pushed to `output`. */
export function taskContext(task: ContextTask, options: ContextOptions, output: string[]): TaskContext {
  const { spec } = task.decl;
  const env = { ...(process.env as Record<string, string>), ...spec.env };
  return {
    id: task.id,
    cwd: task.cwd,
    env,
    signal: options.signal,
    reason: options.reason,
    firstRun: options.firstRun,
    forced: options.forced,
    stateDir: options.stateDir,
    changedInputs: options.changedInputs,
    changedUpstream: options.changedUpstream,
    ran: (id) => options.ran(id),
    value: (name) => {
      const input = Object.hasOwn(task.inputs, name) ? task.inputs[name] : undefined;
      if (input?.kind !== 'value') throw new Error(`task ${task.id} has no value input named ${name}`);
      return input.value;
    },
    log: (message) => {
      output.push(`${message}\n`);
      options.log(message);
    },
    exec: async (argv: Argv, exec: ExecOptions = {}): Promise<ExecResult> => {
      const result = await options.runner.run(argv, {
        cwd: exec.cwd === undefined ? task.cwd : path.resolve(task.cwd, exec.cwd),
        env: { ...spec.env, ...exec.env },
        signal: options.signal,
        ...(exec.input === undefined ? {} : { input: exec.input }),
        ...(exec.output === undefined ? {} : { output: exec.output }),
        ...(options.onOutput === undefined ? {} : { onOutput: options.onOutput }),
      });
      output.push(`$ ${result.command}\n${result.output}`);
      if (result.held === true) options.warn?.(heldOutput(task.id, `\`${result.command}\``));
      if (!result.ok && exec.reject !== false) {
        const tail = result.output.trim().split('\n').slice(-5).join('\n');
        throw new Error(`${result.command}: ${result.failure ?? 'failed'}${tail === '' ? '' : `\n${tail}`}`);
      }
      return {
        exitCode: result.exitCode ?? -1,
        stdout: result.stdout,
        stderr: result.stderr,
        ...(result.failure === undefined ? {} : { failure: result.failure }),
      };
    },
    writeIfChanged: async (file, content, write = {}) => writeIfChanged(path.resolve(task.cwd, file), content, write.mode),
  };
}

/**
 * Writes atomically and only when the bytes or the mode differ; true when it
 * wrote. A file that exists keeps its mode (unless `mode` says otherwise) and
 * its owner, as `install` and Ansible's copy do: a 0600 secret owned by a
 * service stays so, and does not come back 0644 and root's. A symlink is
 * written through, to the file it names (the link stays a link). The new
 * content is a new file renamed into place, so a reader never sees half of it
 * (and a hard link to the old file keeps the old content).
 */
export function writeIfChanged(file: string, content: string | Uint8Array, mode?: number): boolean {
  const bytes = typeof content === 'string' ? Buffer.from(content) : Buffer.from(content);
  // Not there yet (or a dangling link): written where it is named.
  const target = realPath(file) ?? file;
  let existing: Stats | undefined;
  try {
    existing = statSync(target);
    if (readFileSync(target).equals(bytes) && (mode === undefined || (existing.mode & 0o7777) === mode)) return false;
  } catch {
    existing = undefined;
  }
  mkdirSync(path.dirname(target), { recursive: true });
  const temp = `${target}.nodegraph-${process.pid}.tmp`;
  const wanted = mode ?? (existing === undefined ? undefined : existing.mode & 0o7777);
  try {
    writeFileSync(temp, bytes, wanted === undefined ? {} : { mode: wanted });
    if (wanted !== undefined) chmodSync(temp, wanted);
    if (existing !== undefined && (existing.uid !== process.getuid?.() || existing.gid !== process.getgid?.())) {
      chownSync(temp, existing.uid, existing.gid);
      // chown clears set-uid and set-gid bits: put the mode back.
      if (wanted !== undefined) chmodSync(temp, wanted);
    }
    renameSync(temp, target);
  } catch (error) {
    rmSync(temp, { force: true });
    throw error;
  }
  return true;
}
