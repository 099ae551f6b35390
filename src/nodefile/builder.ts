// The object a Nodefile's default export receives. It records declarations
// and their sites; checking how they fit together is graph/analyze.ts's job.

import path from 'node:path';
import type { Failure } from '../error.ts';
import { taskId, type TaskId } from '../ids.ts';
import { validateTaskId, validateTaskSpec } from './schema.ts';
import { captureSite, type LazySite } from './site.ts';
import type { InputSpec, Json, NodefileApi, TaskInput, TaskRef, TaskSpec } from './types.ts';

export interface DeclaredTask {
  readonly id: TaskId;
  readonly spec: TaskSpec;
  /** Inputs by name, task handles turned into `{ kind: 'task' }` specs. */
  readonly inputs: ReadonlyMap<string, InputSpec>;
  readonly after: readonly TaskId[];
  readonly outputs: readonly string[];
  readonly site: LazySite;
}

export interface Declarations {
  /** Absolute path of the Nodefile (or a label for graphs built in code). */
  readonly file: string;
  readonly dir: string;
  readonly tasks: readonly DeclaredTask[];
  readonly pools: ReadonlyMap<string, number>;
  readonly failures: readonly Failure[];
}

const MAX_FAILURES = 20;

function makeRef(id: TaskId): TaskRef {
  return {
    kind: 'task',
    id,
    output: (p: string): InputSpec => ({ kind: 'task', id, path: p }),
  };
}

function normaliseInput(input: TaskInput): InputSpec {
  // A TaskRef carries an `output` method; the spec it stands for is plain data.
  return input.kind === 'task' ? { kind: 'task', id: input.id, ...('path' in input && input.path !== undefined ? { path: input.path } : {}) } : input;
}

export class Builder {
  readonly #file: string;
  readonly #dir: string;
  readonly #tasks: DeclaredTask[] = [];
  readonly #pools = new Map<string, number>();
  readonly #failures: Failure[] = [];

  constructor(file: string, dir: string = path.dirname(file)) {
    this.#file = file;
    this.#dir = dir;
  }

  #fail(failure: Failure): void {
    if (this.#failures.length < MAX_FAILURES) this.#failures.push(failure);
  }

  api(): NodefileApi {
    return {
      dir: this.#dir,
      task: (id, spec) => this.#task(id, spec),
      ref: (id) => makeRef(taskId(id)),
      pool: (name, depth) => {
        const site = captureSite(this.#file);
        if (typeof name !== 'string' || !Number.isInteger(depth) || depth < 1) {
          this.#fail({ reason: 'invalid-field', task: undefined, field: `pool ${String(name)}`, message: 'a pool needs a name and a whole depth of at least 1', site: site.get() });
          return;
        }
        this.#pools.set(name, depth);
      },
      file: (p) => ({ kind: 'file', path: p }),
      tree: (p) => ({ kind: 'tree', path: p }),
      glob: (pattern) => ({ kind: 'glob', pattern }),
      value: (value: Json) => ({ kind: 'value', value }),
      env: (name) => ({ kind: 'env', name }),
    };
  }

  #task(rawId: string, rawSpec: TaskSpec): TaskRef {
    const site = captureSite(this.#file);
    const id = taskId(String(rawId));
    const ref = makeRef(id);
    const checkedId = validateTaskId(rawId);
    if (!checkedId.ok) {
      for (const issue of checkedId.error) {
        this.#fail({ reason: 'invalid-field', task: String(rawId), field: issue.field, message: issue.message, site: site.get() });
      }
      return ref;
    }
    if (typeof rawSpec !== 'object' || rawSpec === null) {
      this.#fail({ reason: 'invalid-field', task: id, field: '', message: 'a task needs a spec object', site: site.get() });
      return ref;
    }
    const inputs = new Map<string, InputSpec>();
    let spec: TaskSpec = rawSpec;
    if (rawSpec.inputs !== undefined && typeof rawSpec.inputs === 'object' && rawSpec.inputs !== null) {
      const plain: Record<string, InputSpec> = {};
      for (const [name, input] of Object.entries(rawSpec.inputs)) {
        const normal = typeof input === 'object' && input !== null ? normaliseInput(input) : input;
        plain[name] = normal;
        inputs.set(name, normal);
      }
      spec = { ...rawSpec, inputs: plain };
    }
    const checked = validateTaskSpec(spec);
    if (!checked.ok) {
      for (const issue of checked.error) {
        this.#fail({ reason: 'invalid-field', task: id, field: issue.field, message: issue.message, site: site.get() });
      }
      return ref;
    }
    const after = (spec.after ?? []).map((a) => taskId(typeof a === 'string' ? a : a.id));
    this.#tasks.push({ id, spec, inputs, after, outputs: spec.outputs ?? [], site });
    return ref;
  }

  declarations(): Declarations {
    return { file: this.#file, dir: this.#dir, tasks: this.#tasks, pools: this.#pools, failures: this.#failures };
  }
}
