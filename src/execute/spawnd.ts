// spawnd (native/spawnd.c): a helper that starts each task command and check with
// posix_spawn, so that the engine does not fork itself once per task; its
// requests and replies, and the Spawnd that speaks them.

import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Command } from '../types.ts';
import { describeCommand, HELD_MS, type RunOptions, type RunResult } from '../process-runner.ts';
import { noteGone, noteStarted } from '../state/processes.ts';
import { childProcess, finished, KILL_AFTER_MS, spawnCommand, spawnFailure } from './spawn.ts';

export interface SpawndOptions {
  /** Between SIGTERM and SIGKILL for a canceled command. */
  readonly killAfterMs?: number;
  /** How long a command's output is read after it exited, while a job it started holds it (HELD_MS). */
  readonly heldMs?: number;
  /** The program to start instead of the spawnd `npm install` built (for tests). */
  readonly program?: URL;
}

/** How spawnd ended a command: its exit code or signal, or the errno name of why it did not start. */
interface Reply {
  readonly id: number;
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly error?: string;
  readonly stdout: string;
  readonly stderr: string;
  /** Left out when one of stdout and stderr is empty: it is then the other one. */
  readonly output?: string;
  /** Its output was closed while a job it started held it (native/spawnd.c, held_ms). */
  readonly held: boolean;
}

interface Pending {
  settle(reply: Reply | { readonly died: string }): void;
  /** Output as it comes: the tail of each read (native/spawnd.c, "o" lines). */
  progress(text: string): void;
}

/** What spawnd says of a running command's output (an "o" line and its bytes). */
interface Progress {
  readonly progress: true;
  readonly id: number;
  readonly text: string;
}

/**
 * spawnd, where scripts/build-spawnd.mjs (the install script) put it (from src/execute/ in a checkout and from dist/lib/
 * in a package, the package's root is two folders up). The version is the one native/spawnd.c says it is.
 */
export const SPAWND = new URL('../../node_modules/.nodegraph/spawnd', import.meta.url);
const SPAWND_VERSION = '8';

/** Whether spawnd was built: one stat, when the process's first Spawnd is made. */
function spawndBuilt(): boolean {
  try {
    return statSync(SPAWND).isFile();
  } catch {
    return false;
  }
}

// spawnd's requests (native/spawnd.c): a one-byte kind, then NUL-terminated fields; a list is its count, then its items.
const fields = (list: readonly string[]): string => `${list.length}\0${list.map((f) => `${f}\0`).join('')}`;
const pairs = (env: Readonly<Record<string, string | undefined>>): string => fields(Object.entries(env).map(([k, v]) => `${k}=${v}`));
const envRequest = (env: NodeJS.ProcessEnv): string => `e${pairs(env)}`;
const runRequest = (id: number, file: string, args: readonly string[], cwd: string, env: Readonly<Record<string, string>> | undefined): string =>
  `r${id}\0${file}\0${cwd}\0${fields([file, ...args])}${pairs(env ?? {})}`;
const killRequest = (id: number, signal: NodeJS.Signals): string => `k${id}\0${process.getBuiltinModule('node:os').constants.signals[signal]}\0`;
const readAheadRequest = (paths: readonly string[]): string => `w${fields(paths)}`;

/**
 * Reads spawnd's replies from its stdout: "ready <version>" once, then per command a
 * header line and the raw bytes of its output, decoded as a direct spawn decodes them.
 * onGarbage once, and no more replies, when a line cannot be read or names another version.
 */
function readReplies(stdout: NodeJS.ReadableStream, onReply: (reply: Reply | Progress | { readonly ready: true }) => void, onGarbage: (what: string) => void): void {
  let pending: Buffer = Buffer.alloc(0);
  // The reply being read: its header's fields, and how many bytes of output follow it.
  let head: string[] | undefined;
  let body = 0;
  // A body still arriving: its chunks, joined once it is all there (not once per chunk: megabytes of output).
  let parts: Buffer[] = [];
  let have = 0;
  stdout.on('data', (chunk: Buffer) => {
    if (head !== undefined) {
      parts.push(chunk);
      have += chunk.length;
      if (have < body) return;
      pending = Buffer.concat(parts);
      parts = [];
      have = 0;
    } else pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      if (head === undefined) {
        const newline = pending.indexOf(10);
        if (newline < 0) return;
        const line = pending.toString('latin1', 0, newline);
        pending = pending.subarray(newline + 1);
        const words = line.split(' ');
        if (words[0] === 'ready' && words.length === 2) {
          // A spawnd built from another version of native/spawnd.c (a checkout updated without `npm install`).
          if (words[1] !== SPAWND_VERSION) {
            onGarbage(`${line} (this engine speaks version ${SPAWND_VERSION}: run npm install)`);
            stdout.removeAllListeners('data');
            return;
          }
          onReply({ ready: true });
          continue;
        }
        const isProgress = words[0] === 'o' && words.length === 3 && /^\d+$/.test(words[1]!) && /^\d+$/.test(words[2]!);
        if (!isProgress && (words[0] !== 'x' || words.length !== 9 || !words.slice(1).every((p, i) => (i === 2 || i === 3 ? /^[A-Z0-9-]+$/.test(p) : /^-?\d+$/.test(p))))) {
          onGarbage(line);
          stdout.removeAllListeners('data');
          return;
        }
        head = words;
        body = isProgress ? Number(words[2]) : Number(words[5]) + Number(words[6]) + Number(words[7]);
      }
      if (pending.length < body) {
        parts = [pending];
        have = pending.length;
        pending = Buffer.alloc(0);
        return;
      }
      if (head[0] === 'o') {
        const text = pending.toString('utf8', 0, body);
        pending = pending.subarray(body);
        onReply({ progress: true, id: Number(head[1]), text });
        head = undefined;
        continue;
      }
      const [, id, code, signal, error, nout, nerr, , held] = head;
      const out = pending.subarray(0, Number(nout));
      const err = pending.subarray(Number(nout), Number(nout) + Number(nerr));
      const all = pending.subarray(Number(nout) + Number(nerr), body);
      pending = pending.subarray(body);
      head = undefined;
      onReply({
        id: Number(id),
        code: signal !== '-' || (Number(code) === -1 && error === '-') ? null : Number(code),
        signal: signal === '-' ? null : (signal as NodeJS.Signals),
        ...(error === '-' ? {} : { error: error! }),
        stdout: out.toString(),
        stderr: err.toString(),
        ...(all.length > 0 ? { output: all.toString() } : {}),
        held: held === '1',
      });
    }
  });
}

/**
 * Runs task commands through spawnd, started with the first command (it is ready
 * within a few milliseconds, and commands sent meanwhile wait for it). One that is
 * missing, does not come up, is of another version or has died leaves every later
 * command to a direct spawn. It holds the event loop only while a command is
 * running: an idle spawnd neither keeps the engine alive nor outlives it (it exits
 * when its stdin closes).
 *
 *   unstarted ──first command──▶ starting ──"ready 8"──▶ ready
 *       │                           │                     │
 *       └──not built──▶ dead ◀──────┴──failed, garbage────┴──died, close()
 *
 * Commands start from the environment the engine had when they were sent,
 * looked at again each time spawnd has been idle: changes to process.env
 * made while commands run are seen from the next idle point.
 */
export class Spawnd {
  readonly #killAfterMs: number;
  readonly #heldMs: number;
  readonly #program: URL;
  #state: 'unstarted' | 'starting' | 'ready' | 'dead';
  #child: ChildProcessWithoutNullStreams | undefined;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  #env = '';
  #stderr = '';
  #readyWaiters: ((ready: boolean) => void)[] = [];
  #held = true;

  constructor(options: SpawndOptions = {}) {
    this.#killAfterMs = options.killAfterMs ?? KILL_AFTER_MS;
    this.#heldMs = options.heldMs ?? HELD_MS;
    this.#program = options.program ?? SPAWND;
    this.#state = options.program !== undefined || spawndBuilt() ? 'unstarted' : 'dead';
  }

  /** spawnd's pid once started (for tests). */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Starts spawnd if it is not; true once it is ready, false when it could not be. */
  ready(): Promise<boolean> {
    if (this.#state === 'unstarted') this.#start();
    if (this.#state === 'ready' || this.#state === 'dead') return Promise.resolve(this.#state === 'ready');
    return new Promise((resolve) => {
      this.#readyWaiters.push(resolve);
      this.#hold();
    });
  }

  run(command: Command, options: RunOptions): Promise<RunResult> {
    if (this.#state === 'ready') return this.#request(command, options);
    if (this.#state === 'dead') return spawnCommand(command, options, this.#killAfterMs, true, this.#heldMs);
    return this.ready().then((ok) => (ok ? this.#request(command, options) : spawnCommand(command, options, this.#killAfterMs, true, this.#heldMs)));
  }

  /**
   * Sends `paths` to spawnd to be read ahead (native/spawnd.c), starting it if it is not
   * running, in requests of READ_AHEAD_BATCH so that it begins with the first; false
   * (nothing sent) when spawnd is gone or a path has a NUL.
   */
  readAhead(paths: readonly string[]): boolean {
    if (paths.some((p) => p.includes('\0'))) return false;
    if (this.#state === 'unstarted') this.#start();
    if (this.#state === 'dead') return false;
    for (let i = 0; i < paths.length; i += READ_AHEAD_BATCH) this.#send(readAheadRequest(paths.slice(i, i + READ_AHEAD_BATCH)));
    return true;
  }

  /** Stops spawnd; commands in flight fail, later ones run directly. */
  close(): void {
    this.#died('spawnd closed');
    this.#child?.kill('SIGKILL');
  }

  #start(): void {
    this.#state = 'starting';
    const { NODE_OPTIONS: _, ...env } = process.env;
    let child: ChildProcessWithoutNullStreams;
    try {
      child = childProcess().spawn(fileURLToPath(this.#program), [], { env: { ...env, NODEGRAPH_HELD_MS: String(this.#heldMs) }, stdio: ['pipe', 'pipe', 'pipe'] });
    } catch (error) {
      this.#died(`spawnd did not start: ${(error as Error).message}`);
      return;
    }
    // spawnd's session holds every command it starts: recorded before any is sent, and in every
    // record opened while it lives (`watch` keeps it from one run to the next; src/state/processes.ts).
    noteStarted(child.pid, true);
    this.#child = child;
    this.#held = true; // a new child's handles hold the event loop until #hold() says otherwise
    child.on('error', (error) => this.#died(`spawnd failed: ${error.message}`));
    child.on('close', (code, signal) => {
      noteGone(child.pid);
      const how = signal === null ? `exited with code ${code}` : `killed by ${signal}`;
      const said = this.#stderr.trim().split('\n').at(-1);
      this.#died(`spawnd ${how}${said === undefined || said === '' ? '' : `: ${said}`}`);
    });
    child.stdin.on('error', () => {}); // EPIPE when it is gone: 'close' says so
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => {
      this.#stderr = (this.#stderr + text).slice(-2000);
    });
    const garbage = (line: string): void => {
      child.kill('SIGKILL');
      this.#died(`spawnd said something unreadable: ${line.slice(0, 200)}`);
    };
    readReplies(child.stdout, (reply) => this.#reply(reply), garbage);
    this.#sendEnv();
    this.#hold();
  }

  #reply(reply: Reply | Progress | { readonly ready: true }): void {
    if ('ready' in reply) {
      if (this.#state !== 'starting') return;
      this.#state = 'ready';
      for (const resolve of this.#readyWaiters.splice(0)) resolve(true);
      this.#hold();
      return;
    }
    if ('progress' in reply) {
      this.#pending.get(reply.id)?.progress(reply.text);
      return;
    }
    const pending = this.#pending.get(reply.id);
    if (pending === undefined) return;
    this.#pending.delete(reply.id);
    if (this.#pending.size === 0) this.#hold();
    pending.settle(reply);
  }

  #died(why: string): void {
    if (this.#state === 'dead') return;
    this.#state = 'dead';
    for (const resolve of this.#readyWaiters.splice(0)) resolve(false);
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    this.#hold();
    for (const p of pending) p.settle({ died: why });
  }

  /** Keeps the event loop alive while commands run (or someone waits for ready()), and only then. */
  #hold(): void {
    const child = this.#child;
    const busy = this.#state !== 'dead' && (this.#pending.size > 0 || this.#readyWaiters.length > 0);
    if (child === undefined || busy === this.#held) return;
    this.#held = busy;
    // The pipes are sockets (their type says only stream).
    for (const handle of [child, child.stdin, child.stdout, child.stderr] as unknown as { ref(): void; unref(): void }[]) {
      if (busy) handle.ref();
      else handle.unref();
    }
  }

  #send(message: string): void {
    if (this.#state === 'dead') return;
    this.#child!.stdin.write(message);
  }

  #sendEnv(): void {
    const env = envRequest(process.env);
    if (env === this.#env) return;
    this.#env = env;
    this.#child!.stdin.write(env);
  }

  #request(command: Command, options: RunOptions): Promise<RunResult> {
    const [file, ...args] = 'shell' in command ? ['/bin/sh', '-c', command.shell] : command;
    // What spawn refuses (a NUL byte), spawnd's requests cannot carry: spawnCommand throws it as spawn does.
    if (hasNul(file!, args, options)) return spawnCommand(command, options, this.#killAfterMs, true, this.#heldMs);
    const described = describeCommand(command);
    const id = this.#nextId++;
    if (this.#pending.size === 0) this.#sendEnv();
    return new Promise((resolve) => {
      let canceled = false;
      let killer: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        canceled = true;
        this.#send(killRequest(id, 'SIGTERM'));
        killer = setTimeout(() => this.#send(killRequest(id, 'SIGKILL')), this.#killAfterMs);
        killer.unref();
      };
      this.#pending.set(id, {
        progress: (text) => options.onOutput?.(text),
        settle: (reply) => {
          clearTimeout(killer);
          options.signal?.removeEventListener('abort', onAbort);
          if ('died' in reply) {
            resolve(finished(described, { code: null, signal: null, canceled, error: reply.died }, { stdout: '', stderr: '', output: '' }));
            return;
          }
          const { code, signal, error, stdout, stderr, output, held } = reply;
          // spawnd names the errno alone; Node's message names the program too.
          const failure = error === undefined ? undefined : spawnFailure(`spawn ${file} ${error}`, options.cwd);
          resolve(finished(described, { code, signal, canceled, error: failure, held }, { stdout, stderr, output: output ?? stdout + stderr }));
        },
      });
      this.#hold();
      this.#send(runRequest(id, file!, args, options.cwd, options.env));
      if (options.signal?.aborted) onAbort();
      else options.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** Paths a read-ahead request carries: spawnd starts on the first while the rest arrive. */
const READ_AHEAD_BATCH = 1024;

function hasNul(file: string, args: readonly string[], options: RunOptions): boolean {
  if (file.includes('\0') || options.cwd.includes('\0') || args.some((a) => a.includes('\0'))) return true;
  return options.env !== undefined && Object.entries(options.env).some(([k, v]) => k.includes('\0') || v.includes('\0'));
}
