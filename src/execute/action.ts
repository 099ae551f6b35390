// Runs one task's action — a command through the process runner, or a
// function with a TaskContext — and reports how it went as a value.

import { chmodSync, chownSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import path from 'node:path';
import type { TaskId } from '../ids.ts';
import type { TaskNode } from '../graph/graph.ts';
import { canonicalJson } from '../hash/value.ts';
import { realPath } from '../util/realpath.ts';
import type { Argv, CheckFunction, Command, ExecOptions, ExecResult, Json, TaskContext, TaskFunction } from '../nodefile/types.ts';
import type { EventSink } from '../events.ts';
import { describeCommand, type ProcessRunner } from './runner.ts';

export interface ActionContext {
  readonly runner: ProcessRunner;
  readonly signal: AbortSignal;
  readonly reason: string;
  readonly verb: string;
  readonly firstRun: boolean;
  readonly changedInputs: readonly string[];
  readonly changedUpstream: readonly TaskId[];
  ran(id: string): boolean;
  readonly emit: EventSink;
}

export type ActionResult =
  | { readonly ok: true; readonly value: Json | undefined; readonly command: string | undefined; readonly output: string }
  | {
      readonly ok: false;
      readonly canceled: boolean;
      readonly error: string;
      readonly command: string | undefined;
      readonly output: string;
    };

export async function runAction(node: TaskNode, context: ActionContext): Promise<ActionResult> {
  const { spec } = node.decl;
  const run = spec.run;
  if (typeof run !== 'function') {
    const command = describeCommand(run);
    context.emit({ type: 'task-start', id: node.id, verb: context.verb, reason: context.reason, command });
    const options = { cwd: node.cwd, env: spec.env, signal: context.signal };
    const result = await (context.runner.runTask === undefined ? context.runner.run(run, options) : context.runner.runTask(run, options));
    if (result.ok) return { ok: true, value: undefined, command, output: result.output };
    return { ok: false, canceled: result.canceled || context.signal.aborted, error: result.failure ?? 'failed', command, output: result.output };
  }
  context.emit({ type: 'task-start', id: node.id, verb: context.verb, reason: context.reason, command: undefined });
  const log: string[] = [];
  const ctx = makeContext(node, context, log);
  try {
    const value = await (run as TaskFunction)(ctx);
    if (context.signal.aborted) return { ok: false, canceled: true, error: 'canceled', command: undefined, output: log.join('') };
    if (value !== undefined) {
      // The value becomes part of the output hash: NaN, a bigint, a function or a cycle cannot.
      try {
        canonicalJson(value);
      } catch (error) {
        const why = (error as Error).message.replace(/^canonicalJson: /, '');
        return { ok: false, canceled: false, error: `returned a value that is not JSON (${why})`, command: undefined, output: log.join('') };
      }
    }
    return { ok: true, value: value === undefined ? undefined : value, command: undefined, output: log.join('') };
  } catch (error) {
    return {
      ok: false,
      canceled: context.signal.aborted,
      error: error instanceof Error ? error.message : String(error),
      command: undefined,
      output: log.join(''),
    };
  }
}

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
  const ctx = makeContext(
    node,
    { runner, signal, reason: 'check', verb: 'check', firstRun: false, changedInputs: [], changedUpstream: [], ran: () => false, emit: () => {} },
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

function makeContext(node: TaskNode, context: ActionContext, log: string[]): TaskContext {
  const { spec } = node.decl;
  const env = { ...(process.env as Record<string, string>), ...spec.env };
  return {
    id: node.id,
    cwd: node.cwd,
    env,
    signal: context.signal,
    reason: context.reason,
    firstRun: context.firstRun,
    changedInputs: context.changedInputs,
    changedUpstream: context.changedUpstream,
    ran: (id) => context.ran(id),
    value: (name) => {
      const input = Object.hasOwn(node.inputs, name) ? node.inputs[name] : undefined;
      if (input?.kind !== 'value') throw new Error(`task ${node.id} has no value input named ${name}`);
      return input.value;
    },
    log: (message) => {
      log.push(`${message}\n`);
      context.emit({ type: 'task-log', id: node.id, message });
    },
    exec: async (argv: Argv, options: ExecOptions = {}): Promise<ExecResult> => {
      const result = await context.runner.run(argv, {
        cwd: options.cwd === undefined ? node.cwd : path.resolve(node.cwd, options.cwd),
        env: { ...spec.env, ...options.env },
        signal: context.signal,
        ...(options.input === undefined ? {} : { input: options.input }),
        ...(options.output === undefined ? {} : { output: options.output }),
      });
      log.push(`$ ${result.command}\n${result.output}`);
      if (!result.ok && options.reject !== false) {
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
    writeIfChanged: async (file, content, options = {}) => writeIfChanged(path.resolve(node.cwd, file), content, options.mode),
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
