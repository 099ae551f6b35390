// Starting one process directly (node:child_process): every command spawnd does
// not take, and every one wherever spawnd is not there. Output is buffered so it can
// be shown with the command when it fails; a task's command writes stdout and stderr
// to one pipe (in the order written), other commands to two.

import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { Command } from '../types.ts';
import { describeCommand, HELD_MS, type RunOptions, type RunResult } from '../process-runner.ts';
import { notePending, noteStarted } from '../state/processes.ts';
import { failpoint } from '../util/failpoint.ts';
import { isFolder } from '../util/realpath.ts';
import { cancelOnAbort } from './group.ts';

// Loaded on the first process: a no-op that starts none should not pay for node:child_process.
export const childProcess = (): typeof import('node:child_process') => process.getBuiltinModule('node:child_process');

/** How long a canceled process gets between SIGTERM and SIGKILL. */
export const KILL_AFTER_MS = 5000;

/**
 * Spawns an argv (or `sh -c` line) with the least machinery: stdin closed, stdout and stderr captured. `merged`
 * (a task's command or check): both are one socket, so the output is in the order the command wrote it, all of it
 * in stdout, as spawnd gives it; otherwise two pipes, interleaved as they came.
 */
export function spawnCommand(command: Command, options: RunOptions, killAfterMs = KILL_AFTER_MS, merged = false, heldMs = HELD_MS): Promise<RunResult> {
  if (!merged) return spawnWith(command, options, killAfterMs, heldMs, undefined);
  return onePipe().then(
    (pair) => spawnWith(command, options, killAfterMs, heldMs, pair),
    () => spawnWith(command, options, killAfterMs, heldMs, undefined),
  );
}

interface SocketPair {
  /** The end the command writes to (its stdout and stderr); closed here once the command has it. */
  readonly write: import('node:net').Socket;
  readonly read: import('node:net').Socket;
}

/**
 * Two connected sockets, one end for both of a command's streams: Node's own stdio 'pipe' is a socket pair too
 * (libuv), so the command sees what it would. Made with a listener on a Linux abstract socket (no file), for one
 * connection, closed once it has it.
 */
function onePipe(): Promise<SocketPair> {
  const net = process.getBuiltinModule('node:net');
  const name = `\0nodegraph-${process.pid}-${process.getBuiltinModule('node:crypto').randomUUID()}`;
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    let read: import('node:net').Socket | undefined;
    server.once('error', reject);
    server.once('connection', (write) => {
      server.close();
      resolve({ write, read: read! });
    });
    server.listen(name, () => {
      read = net.connect(name);
      read.once('error', reject);
    });
  });
}

function spawnWith(command: Command, options: RunOptions, killAfterMs: number, heldMs: number, pair: SocketPair | undefined): Promise<RunResult> {
  const [file, ...args] = 'shell' in command ? ['/bin/sh', '-c', command.shell] : command;
  const described = describeCommand(command);
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let child: ChildProcessWithoutNullStreams;
    try {
      // Marked before it exists, for a kill before noteStarted below (src/state/processes.ts).
      const mark = notePending();
      child = childProcess().spawn(file!, args, {
        cwd: options.cwd,
        env: { ...process.env, ...options.env, ...mark },
        stdio: pair === undefined ? ['ignore', 'pipe', 'pipe'] : ['ignore', pair.write, pair.write],
        // A process group of its own, so that a cancel reaches what it started too (group.ts).
        detached: true,
      }) as ChildProcessWithoutNullStreams;
    } catch (error) {
      // What spawn refuses outright (a NUL byte) is thrown, as spawn throws it.
      pair?.read.destroy();
      throw error;
    } finally {
      pair?.write.destroy();
    }
    failpoint('spawned');
    // Its session, for the next run to end if this one is killed (src/state/processes.ts): no await since spawn().
    noteStarted(child.pid);
    const take = (into: Buffer[]) => (d: Buffer) => {
      chunks.push(d);
      into.push(d);
      options.onOutput?.(d.toString());
    };
    // Done once the process has ended and its output is all read (as Node's 'close' waits for its pipes).
    let waiting = pair === undefined ? 1 : 2;
    let end: { code: number | null; signal: NodeJS.Signals | null } = { code: null, signal: null };
    let held = false;
    let holding: NodeJS.Timeout | undefined;
    const settle = (): void => {
      if (--waiting > 0) return;
      clearTimeout(holding);
      cancel.settled();
      resolve(
        finished(described, { ...end, canceled: cancel.canceled(), error: spawnFailure(spawnError?.message, options.cwd), held }, {
          stdout: Buffer.concat(out).toString(),
          stderr: Buffer.concat(err).toString(),
          output: Buffer.concat(chunks).toString(),
        }),
      );
    };
    if (pair === undefined) {
      child.stdout.on('data', take(out));
      child.stderr.on('data', take(err));
    } else {
      pair.read.on('data', take(out));
      pair.read.on('error', () => {});
      pair.read.on('close', settle);
    }
    const cancel = cancelOnAbort(child, options.signal, killAfterMs);
    let spawnError: Error | undefined;
    child.on('error', (error) => {
      spawnError = error;
    });
    // Exited, its output still open: a job it started holds it. Closed heldMs later, the command is done.
    child.on('exit', () => {
      holding = setTimeout(() => {
        held = true;
        for (const stream of pair === undefined ? [child.stdout, child.stderr] : [pair.read]) stream.destroy();
      }, heldMs);
    });
    child.on('close', (code, signal) => {
      end = { code, signal };
      settle();
    });
  });
}

/**
 * Why a command did not start, in words. Node says `spawn pwd ENOENT` both for
 * a program that is not there and for a working folder that is not: the
 * second is told apart here (systemd says CHDIR), only when spawn failed. A
 * program named by path that is there failed for its `#!` interpreter.
 */
export function spawnFailure(error: string | undefined, cwd: string | undefined): string | undefined {
  const failed = error === undefined ? null : /^spawn (.+) (ENOENT|EACCES)$/.exec(error);
  if (failed === null) return error;
  const program = failed[1]!;
  const code = failed[2]!;
  if (code === 'EACCES') return `${program} cannot be run: permission denied (${error})`;
  if (cwd !== undefined && !isFolder(cwd)) return `cannot run in ${cwd}: no such folder (${error})`;
  if (!program.includes('/')) return `${program} is not found on PATH (${error})`;
  return existsSync(path.resolve(cwd ?? '.', program)) ? `${program}: its #! interpreter is not found (${error})` : `${program} does not exist (${error})`;
}

/** A finished task command as a RunResult: ok only for exit code 0, and otherwise why not, in words. */
export function finished(
  command: string,
  end: { readonly code: number | null; readonly signal: string | null; readonly canceled: boolean; readonly error: string | undefined; readonly held?: boolean },
  streams: { readonly stdout: string; readonly stderr: string; readonly output: string },
): RunResult {
  const ok = end.error === undefined && end.code === 0 && !end.canceled;
  const failure = ok
    ? undefined
    : end.canceled
      ? 'canceled'
      : (end.error ?? (end.signal !== null ? `killed by ${end.signal}` : `exited with code ${end.code}`));
  // A process that never started has no exit code: Node gives the negative errno there.
  return { command, exitCode: typeof end.code === 'number' && end.code >= 0 ? end.code : null, ...streams, ok, canceled: end.canceled, failure, ...(end.held === true ? { held: true } : {}) };
}
