// The container lifecycle through runc: state, run detached, kill, delete,
// exec. Every call goes through the task's exec (the engine's process
// runner). Stopping a container that is stopped or gone succeeds.

import { existsSync, readFileSync, statSync } from 'node:fs';
import type { Argv } from '../nodefile/types.ts';
import { STOP_SIGNAL_NUMBER } from './bundle.ts';
import { lastLine, tryExec, type Exec } from './exec.ts';
import { waitFor, type Clock } from './wait.ts';

export interface RuncOptions {
  /** The runc binary (absolute on real hosts, so a unit can name it too). */
  readonly binary: string;
  /** runc's state directory (`--root`); runc's default (/run/runc) when undefined. */
  readonly stateRoot?: string;
}

export type ContainerStatus = 'creating' | 'created' | 'running' | 'paused' | 'stopped';

export type ContainerState =
  | { readonly status: 'absent'; readonly detail: string }
  | { readonly status: ContainerStatus; readonly pid: number; readonly created: string; readonly bundle: string };

/** The argv prefix for a runc call: the binary and its global flags. */
export const runcArgv = (o: RuncOptions, ...args: string[]): string[] => [
  o.binary,
  ...(o.stateRoot === undefined ? [] : ['--root', o.stateRoot]),
  ...args,
];

export function parseState(stdout: string): ContainerState | undefined {
  try {
    const state = JSON.parse(stdout) as { status?: unknown; pid?: unknown; created?: unknown; bundle?: unknown };
    const status = state.status;
    if (status !== 'creating' && status !== 'created' && status !== 'running' && status !== 'paused' && status !== 'stopped') return undefined;
    return {
      status,
      pid: typeof state.pid === 'number' ? state.pid : 0,
      created: typeof state.created === 'string' ? state.created : '',
      bundle: typeof state.bundle === 'string' ? state.bundle : '',
    };
  } catch {
    return undefined;
  }
}

export async function containerState(exec: Exec, o: RuncOptions, id: string): Promise<ContainerState> {
  // runc makes its state folder when asked for a state: a probe must not make it on a host without one.
  const root = o.stateRoot ?? '/run/runc';
  if (!existsSync(root)) return { status: 'absent', detail: `no runc state folder ${root}` };
  const result = await tryExec(exec, runcArgv(o, 'state', id));
  if (result.exitCode !== 0) return { status: 'absent', detail: lastLine(result) };
  return parseState(result.stdout) ?? { status: 'absent', detail: `unreadable runc state: ${lastLine(result)}` };
}

/**
 * Does the container run from this bundle as its files are now? runc reads
 * them when it creates the container, so: running, from this bundle folder,
 * and created after each of the files last changed — by their ctime, which a
 * rename sets too (a rootfs folder swapped in, a file written atomically).
 * True, or why not.
 */
export async function runsCurrentBundle(exec: Exec, o: RuncOptions, id: string, bundle: string, files: readonly string[]): Promise<true | string> {
  const state = await containerState(exec, o, id);
  if (state.status === 'absent') return `container ${id} does not exist`;
  if (state.status !== 'running') return `container ${id} is ${state.status}`;
  if (state.bundle !== bundle) return `container ${id} runs from ${state.bundle}`;
  // Milliseconds: a file changed in the same one as the container was created counts as newer.
  const created = Date.parse(state.created);
  if (Number.isNaN(created)) return `container ${id} has no creation time (${state.created})`;
  for (const file of files) {
    let changed: number;
    try {
      changed = statSync(file).ctimeMs;
    } catch {
      return `${file} is missing`;
    }
    if (created <= changed) return `${file} changed after container ${id} was created`;
  }
  return true;
}

/** The check of a running container: true, or what runc said instead. */
export async function isRunning(exec: Exec, o: RuncOptions, id: string): Promise<true | string> {
  const state = await containerState(exec, o, id);
  if (state.status === 'running') return true;
  return state.status === 'absent' ? `container ${id} does not exist (${state.detail})` : `container ${id} is ${state.status}`;
}

/**
 * `runc run --detach`. runc hands its stdin/stdout/stderr to the container's
 * init, so they are pointed at a log file: a pipe the init keeps open would
 * never close and the runner would wait for it forever.
 */
export function runDetachedArgv(o: RuncOptions, bundle: string, id: string, consoleLog: string): Argv {
  return [
    'sh',
    '-c',
    'log=$1; shift; exec "$@" </dev/null >>"$log" 2>&1',
    'sh',
    consoleLog,
    ...runcArgv(o, 'run', '--detach', '--bundle', bundle, id),
  ];
}

/**
 * Runs the container detached. runc says why it could not start only into the
 * console log, so a failure carries what it wrote there during this attempt.
 */
export async function runDetached(exec: Exec, o: RuncOptions, bundle: string, id: string, consoleLog: string): Promise<void> {
  const from = sizeOf(consoleLog);
  const result = await tryExec(exec, runDetachedArgv(o, bundle, id, consoleLog));
  if (result.exitCode === 0) return;
  const said = runcReason(readFrom(consoleLog, from)) || result.failure || `exit ${result.exitCode}`;
  throw new Error(`runc could not start container ${id}: ${said} (console log ${consoleLog})`);
}

/**
 * What runc said went wrong, from its log lines (`time=… level=error
 * msg="runc run failed: …"`): the messages of its error lines, or else the
 * last lines it printed.
 */
export function runcReason(text: string): string {
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  const errors = lines.flatMap((line) => {
    const m = /\blevel=(?:error|fatal) msg="((?:[^"\\]|\\.)*)"/.exec(line);
    if (m === null) return [];
    try {
      return [JSON.parse(`"${m[1]!}"`) as string];
    } catch {
      return [m[1]!];
    }
  });
  return (errors.length > 0 ? errors : lines.slice(-5)).join('; ');
}

function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

function readFrom(file: string, offset: number): string {
  try {
    return readFileSync(file).subarray(offset).toString('utf8');
  } catch {
    return '';
  }
}

export interface StopOptions {
  readonly timeoutMs: number;
  readonly intervalMs?: number;
  readonly clock?: Clock;
  readonly signal?: AbortSignal;
}

/**
 * Stops and deletes a container: the stop signal systemd expects, a wait,
 * SIGKILL if it does not go, then `delete --force`. A container that is
 * already stopped or gone is fine. Returns what it found.
 */
export async function stopContainer(exec: Exec, o: RuncOptions, id: string, options: StopOptions): Promise<ContainerState['status']> {
  const before = await containerState(exec, o, id);
  if (before.status === 'absent') return 'absent';
  if (before.status === 'running' || before.status === 'paused' || before.status === 'created') {
    await tryExec(exec, runcArgv(o, 'kill', id, String(STOP_SIGNAL_NUMBER)));
    const gone = await waitFor(
      async () => {
        const s = await containerState(exec, o, id);
        return { ok: s.status === 'stopped' || s.status === 'absent', detail: s.status };
      },
      {
        what: `container ${id} to stop`,
        timeoutMs: options.timeoutMs,
        intervalMs: options.intervalMs ?? 500,
        ...(options.clock === undefined ? {} : { clock: options.clock }),
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      },
    );
    if (!gone.ok) await tryExec(exec, runcArgv(o, 'kill', '--all', id, 'KILL'));
  }
  const removed = await tryExec(exec, runcArgv(o, 'delete', '--force', id));
  if (removed.exitCode !== 0) {
    const after = await containerState(exec, o, id);
    if (after.status !== 'absent') throw new Error(`runc could not delete container ${id}: ${lastLine(removed)}`);
  }
  return before.status;
}

/** `runc exec <id> <argv…>`: a command inside the running container. */
export const execInArgv = (o: RuncOptions, id: string, argv: readonly string[]): string[] => runcArgv(o, 'exec', id, ...argv);
