// The public shape of a Nodefile: what a user's default export receives and
// declares. A Nodefile imports these with `import type`, so it needs nothing
// from nodegraph at run time and loads from any folder.

import type { TaskId } from '../ids.ts';
import type { Argv, Command, Json } from '../types.ts';

export type { Argv, Command, Json, SourceSite } from '../types.ts';

/** The part of an AbortSignal a task needs, for a project whose types declare none (no DOM lib, no @types/node). */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
  addEventListener(type: 'abort', listener: () => void, options?: { readonly once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/** AbortSignal wherever the project's types declare it (DOM lib, @types/node), so it can be passed on (to fetch, say); else AbortSignalLike. */
export type Signal = typeof globalThis extends { readonly AbortSignal: { readonly prototype: infer S } } ? S : AbortSignalLike;

// ---- inputs ---------------------------------------------------------------

export type InputSpec =
  | { readonly kind: 'file'; readonly path: string }
  | { readonly kind: 'tree'; readonly path: string }
  | { readonly kind: 'glob'; readonly pattern: string }
  /** `sensitive`: a plan shows that it changed, never what it was or is. */
  | { readonly kind: 'value'; readonly value: Json; readonly sensitive?: true }
  | { readonly kind: 'env'; readonly name: string }
  /** The outputs of another task: a trigger edge. `path` narrows it to one output. */
  | { readonly kind: 'task'; readonly id: TaskId; readonly path?: string };

/** A handle to a declared task; usable as an input (trigger edge) or in `after`. */
export interface TaskRef {
  readonly kind: 'task';
  readonly id: TaskId;
  /** One output of the task, as an input of another. */
  output(path: string): InputSpec;
}

export type TaskInput = InputSpec | TaskRef;

// ---- actions --------------------------------------------------------------

export interface ExecOptions {
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly input?: string;
  /** A non-zero exit is returned instead of thrown. */
  readonly reject?: boolean;
  /**
   * 'ignore' connects stdout and stderr to nothing: for a program that hands
   * its stdio to something long-lived (runc run --detach), so no pipe is left open.
   */
  readonly output?: 'capture' | 'ignore';
}

export interface ExecResult {
  /** -1 when the process did not exit by itself (killed, or never started). */
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
  /** Why it failed, in words (`exited with code 1`, `spawn foo ENOENT`), when it did. */
  readonly failure?: string;
}

/** What a function action receives. */
export interface TaskContext {
  readonly id: TaskId;
  /** The folder commands run in: the Nodefile's folder unless the task says otherwise. */
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
  readonly signal: Signal;
  /** Why this task runs, in words (`input registryMirrors changed`). */
  readonly reason: string;
  /** True when the task has never been applied (or its last record was dropped). */
  readonly firstRun: boolean;
  /** True when `--replace` named this task: do it again even where what it manages looks done. */
  readonly forced: boolean;
  /**
   * The state folder of the run (nodegraph's records): a place to keep what an operator reads after
   * a failure, such as logs. Undefined in a check.
   */
  readonly stateDir: string | undefined;
  /**
   * Names of the file, tree, glob, value and env inputs whose hash changed since the last apply
   * (all of them on a first run). An input that is a task (or a file another task writes) is an
   * upstream: see changedUpstream.
   */
  readonly changedInputs: readonly string[];
  /** Upstream task ids (trigger edges) whose outputs changed since the last apply. */
  readonly changedUpstream: readonly TaskId[];
  /** Did task `id` run (successfully) earlier in this apply? */
  ran(id: TaskId | string): boolean;
  /** The declared value of a `value` input, by input name. */
  value(name: string): Json;
  log(message: string): void;
  /** Runs an argv without a shell, through nodegraph's process runner. */
  exec(argv: Argv, options?: ExecOptions): Promise<ExecResult>;
  /**
   * Writes `content` only when it differs (or the mode does); true when it wrote. Relative to cwd.
   * Atomic (a new file renamed into place); a file that exists keeps its mode (unless `mode` is
   * given) and its owner, and a symlink is written through to the file it names.
   */
  writeIfChanged(path: string, content: string | Uint8Array, options?: { mode?: number }): Promise<boolean>;
}

/** A function action; a JSON value it returns becomes part of its output hash. */
export type TaskFunction = (ctx: TaskContext) => Promise<Json | void> | Json | void;

/** A check: true (or exit 0) when what the task manages is in place. */
export type CheckFunction = (ctx: TaskContext) => Promise<boolean | string> | boolean | string;

// ---- tasks ----------------------------------------------------------------

export interface TaskSpec {
  readonly description?: string;
  readonly inputs?: Readonly<Record<string, TaskInput>>;
  /** Files and directories the task writes, relative to the Nodefile's folder. */
  readonly outputs?: readonly string[];
  /** Order edges: run after these, never triggered by them. */
  readonly after?: readonly (TaskRef | string)[];
  readonly run: Command | TaskFunction;
  /** For a function action: bump to re-run it (defaults to the function's source text). */
  readonly version?: string;
  readonly cwd?: string;
  readonly env?: Readonly<Record<string, string>>;
  readonly check?: Command | CheckFunction;
  /**
   * How long its run, each run of its check, its stop and its destroy may each take ('30s', '5m'):
   * then it is stopped as on Ctrl-C and fails (systemd's TimeoutStartSec and TimeoutStopSec, a
   * probe's timeoutSeconds). None by default.
   */
  readonly timeout?: string;
  /** Stops what the task started, keeping its files (`nodegraph stop`, and before destroy). */
  readonly stop?: Command | readonly Command[];
  /** Tears down what the task made; recorded, so it runs even after the task leaves the Nodefile. */
  readonly destroy?: Command | readonly Command[];
  /**
   * Remove the declared outputs on destroy, and those the task no longer declares once it ran again
   * (true, the default); 'dropped': only the latter, for files the task shares with tasks that outlive
   * it; false: neither.
   */
  readonly removeOutputs?: boolean | 'dropped';
  /**
   * What happens once the Nodefile no longer declares the task: 'destroy' (the default) tears it
   * down; 'stop' only stops it, keeping its files and its record, so that declared again it is
   * found in place (the CRI's Stop keeps the place, Remove gives it up). `destroy` still destroys it.
   */
  readonly retire?: 'destroy' | 'stop';
  /** Tasks in one pool run at most `depth` at a time (see `ng.pool`). */
  readonly pool?: string;
  /**
   * Words the plan uses for this task: e.g. { create: 'start', update: 'restart' } for a service.
   * `upstream` names the word for when the only cause is a change in those tasks — a
   * service whose container restarts is started with it, not restarted:
   * `{ update: 'restart', upstream: { 'kube1/container': 'start' } }`.
   */
  readonly verbs?: { readonly create?: string; readonly update?: string; readonly upstream?: Readonly<Record<string, string>> };
  /**
   * Marks this task's check as the health of the graph: after an atomic apply it must pass
   * within `within` and keep passing for `stable` (durations: '500ms', '10s', '2m').
   */
  readonly health?: HealthSpec;
}

export interface HealthSpec {
  readonly within: string;
  readonly stable?: string;
  /**
   * Runs once when the check does not hold, before anything is rolled back (greenboot's red.d):
   * keep what an operator will want to read. What it returns is added to the failure.
   */
  readonly onFailure?: (ctx: TaskContext) => Promise<string | void> | string | void;
}

/** Settings a Nodefile gives the whole graph (`ng.settings`). */
export interface GraphSettings {
  /**
   * `true`: every whole-graph apply is atomic unless `--no-atomic` says otherwise. `'always'`:
   * whatever the flags (a change no one may make half, such as a slot switch).
   */
  readonly atomic?: boolean | 'always';
}

/** What a Nodefile's default export receives. */
export interface NodefileApi {
  /** The folder the Nodefile lives in; relative paths resolve against it. */
  readonly dir: string;
  task(id: string, spec: TaskSpec): TaskRef;
  /** A reference to a task declared elsewhere (or later) by id. */
  ref(id: string): TaskRef;
  pool(name: string, depth: number): void;
  file(path: string): InputSpec;
  tree(path: string): InputSpec;
  glob(pattern: string): InputSpec;
  /** A JSON value; `sensitive`: plan, explain and status say that it changed, never what it was or is. */
  value(value: Json, options?: { readonly sensitive?: boolean }): InputSpec;
  env(name: string): InputSpec;
  /**
   * Paths a failed atomic apply gives back byte for byte, whoever wrote them: saved before it
   * runs anything, restored on rollback. A relative path is taken from the Nodefile's folder.
   */
  preserve(...paths: string[]): void;
  settings(settings: GraphSettings): void;
}

/** The type of a Nodefile's default export. */
export type Nodefile = (ng: NodefileApi) => void | Promise<void>;
