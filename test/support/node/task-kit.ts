// A kit for testing one builder of src/node: a Nodefile API that only collects
// what the builder declares, and a task's run or check called with a real
// TaskContext whose commands go to the fake runner.

import { mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { NodefileApi, TaskContext, TaskRef, TaskSpec } from '../../../src/nodefile/types.ts';
import { taskId } from '../../../src/ids.ts';
import { taskContext } from '../../../src/observe/context.ts';
import { FakeRunner } from '../fake-runner.ts';

export interface Declared {
  readonly ng: NodefileApi;
  readonly tasks: Map<string, TaskSpec>;
  /** The task declared as `id`; throws when there is none. */
  spec(id: string): TaskSpec;
}

const refOf = (id: string): TaskRef => ({ kind: 'task', id: taskId(id), output: (p) => ({ kind: 'task', id: taskId(id), path: p }) });

export function declared(): Declared {
  const tasks = new Map<string, TaskSpec>();
  const ng: NodefileApi = {
    dir: process.cwd(),
    task: (id, spec) => {
      if (tasks.has(id)) throw new Error(`task ${id} declared twice`);
      tasks.set(id, spec);
      return refOf(id);
    },
    ref: refOf,
    pool: () => {},
    file: (p) => ({ kind: 'file', path: p }),
    tree: (p) => ({ kind: 'tree', path: p }),
    glob: (pattern) => ({ kind: 'glob', pattern }),
    value: (value) => ({ kind: 'value', value }),
    env: (name) => ({ kind: 'env', name }),
    preserve: () => {},
    settings: () => {},
  };
  const spec = (id: string): TaskSpec => {
    const found = tasks.get(id);
    if (found === undefined) throw new Error(`no task ${id}; declared: ${[...tasks.keys()].join(', ')}`);
    return found;
  };
  return { ng, tasks, spec };
}

/** Why the task runs, as a test wants it: by default a first run that nothing else ran before. */
export interface RunAs {
  readonly ran?: readonly string[];
  readonly firstRun?: boolean;
  readonly forced?: boolean;
  readonly stateDir?: string;
}

export interface Ran {
  readonly ctx: TaskContext;
  readonly logs: string[];
}

export function contextFor(id: string, runner: FakeRunner, as: RunAs = {}): Ran {
  const logs: string[] = [];
  const ran = new Set(as.ran ?? []);
  const ctx = taskContext(
    { id: taskId(id), cwd: process.cwd(), inputs: {}, decl: { spec: {} } },
    {
      signal: new AbortController().signal,
      reason: 'a test',
      firstRun: as.firstRun ?? true,
      forced: as.forced ?? false,
      changedInputs: [],
      changedUpstream: [],
      ran: (other) => ran.has(other),
      stateDir: as.stateDir,
      runner,
      log: (message) => logs.push(message),
    },
    [],
  );
  return { ctx, logs };
}

/** Runs the function action of `spec` as task `id`; what it returned and what it logged. */
export async function runOf(id: string, spec: TaskSpec, runner: FakeRunner, as: RunAs = {}): Promise<{ value: unknown; logs: string[] }> {
  if (typeof spec.run !== 'function') throw new Error(`${id} runs a command, not a function`);
  const { ctx, logs } = contextFor(id, runner, as);
  return { value: await spec.run(ctx), logs };
}

/** Calls the check of `spec` as task `id`. */
export async function checkOf(id: string, spec: TaskSpec, runner: FakeRunner): Promise<boolean | string> {
  if (typeof spec.check !== 'function') throw new Error(`${id} has no function check`);
  return spec.check(contextFor(id, runner).ctx);
}

/** A sandbox with runc's state folder, and a fake runner that answers within it. */
export function sandbox(prefix: string): { dir: string; runner: FakeRunner; runcRoot: string } {
  const dir = mkdtempSync(path.join(tmpdir(), `nodegraph-${prefix}-`));
  const runcRoot = path.join(dir, 'run/runc');
  mkdirSync(runcRoot, { recursive: true });
  return { dir, runcRoot, runner: new FakeRunner({ sandbox: dir, runcRoot }) };
}

/** The ids of a task's order edges. */
export const afterIds = (spec: TaskSpec): string[] => (spec.after ?? []).map((a) => (typeof a === 'string' ? a : a.id));
