// The object a Nodefile's default export receives. It records declarations
// and their sites; checking how they fit together is graph/analyze.ts's job.

import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Failure } from '../error.ts';
import { taskId, type TaskId } from '../ids.ts';
import { ID_MESSAGE, ID_PATTERN, plainlyValid } from './plain.ts';
import { captureSite, NO_SITE, type SiteRef } from './site.ts';
import { flat } from '../util/flat.ts';
import type { GraphSettings, InputSpec, Json, NodefileApi, SourceSite, TaskRef, TaskSpec } from './types.ts';

export interface DeclaredTask {
  readonly id: TaskId;
  /** The declaration as nodegraph keeps it: for a plainly valid one, ownSpec's copy, without `after` (in `after`, as ids). */
  readonly spec: TaskSpec;
  /** Inputs by name (a task handle is itself a `{ kind: 'task', id }` spec). Read it with for…in and Object.hasOwn. */
  readonly inputs: Readonly<Record<string, InputSpec>>;
  readonly after: readonly TaskId[];
  readonly outputs: readonly string[];
  /** Undefined sites unless loaded with `sites: true`. */
  readonly site: SiteRef;
}

export interface Declarations {
  /** Absolute path of the Nodefile (or a label for graphs built in code). */
  readonly file: string;
  readonly dir: string;
  readonly tasks: readonly DeclaredTask[];
  readonly pools: ReadonlyMap<string, number>;
  /** `ng.preserve` paths as written, each with where it was declared. */
  readonly preserve: readonly PreserveDeclaration[];
  readonly settings: GraphSettings;
  readonly failures: readonly Failure[];
}

export interface PreserveDeclaration {
  readonly path: string;
  readonly site: SiteRef;
}

const MAX_FAILURES = 20;

/**
 * A handle to a task; a class, so a graph of 50,000 tasks does not make 50,000 closures,
 * with its `kind` on the prototype: an object of 32 bytes, not 40.
 */
class Ref implements TaskRef {
  declare readonly kind: 'task';
  readonly id: TaskId;
  constructor(id: TaskId) {
    this.id = id;
  }
  output(path: string): InputSpec {
    return { kind: 'task', id: this.id, path };
  }
}
Object.defineProperty(Ref.prototype, 'kind', { value: 'task', enumerable: true });

/**
 * A declaration as nodegraph keeps it, its inputs and outputs read off its spec: 56 bytes
 * a task, where an object that held them too took 72.
 */
class Declared implements DeclaredTask {
  readonly id: TaskId;
  readonly spec: TaskSpec;
  readonly after: readonly TaskId[];
  readonly site: SiteRef;
  constructor(id: TaskId, spec: TaskSpec, after: readonly TaskId[], site: SiteRef) {
    this.id = id;
    this.spec = spec;
    this.after = after;
    this.site = site;
  }

  get inputs(): Readonly<Record<string, InputSpec>> {
    const declared = this.spec.inputs;
    return typeof declared === 'object' && declared !== null ? (declared as Readonly<Record<string, InputSpec>>) : NO_INPUTS;
  }

  get outputs(): readonly string[] {
    return Array.isArray(this.spec.outputs) ? this.spec.outputs : NO_PATHS;
  }
}

const makeRef = (id: TaskId): TaskRef => new Ref(id);

const NO_INPUTS: Readonly<Record<string, InputSpec>> = Object.freeze({});
const NO_IDS: readonly TaskId[] = Object.freeze([]);
const NO_PATHS: readonly string[] = Object.freeze([]);

export class Builder {
  readonly #file: string;
  readonly #dir: string;
  readonly #tasks: DeclaredTask[] = [];
  readonly #pools = new Map<string, number>();
  readonly #failures: Failure[] = [];
  readonly #preserve: PreserveDeclaration[] = [];
  #settings: GraphSettings = {};
  readonly #unchecked: { id: TaskId; spec: TaskSpec; site: SiteRef }[] = [];
  /** The inputs of the last task copied: an input equal to one of them is shared (see ownSpec). */
  #lastInputs: Readonly<Record<string, InputSpec>> = NO_INPUTS;

  readonly #sites: boolean;

  /**
   * With `sites`, every declaration remembers where it was made. That costs a
   * stack capture per task (seconds at 50,000 tasks), so graphs load without
   * it and are loaded again with it only when a diagnostic needs a place.
   */
  constructor(file: string, dir: string = path.dirname(file), options: { sites?: boolean } = {}) {
    this.#file = file;
    this.#dir = dir;
    this.#sites = options.sites ?? true;
  }

  #fail(failure: Failure): void {
    if (this.#failures.length < MAX_FAILURES) this.#failures.push(failure);
  }

  /**
   * Called once the Nodefile's default function has returned (its promise
   * settled): the graph is made. A declaration after that, from a timer or a
   * promise the function did not wait for, is in no graph, and says so on
   * stderr rather than vanish.
   */
  seal(): void {
    this.#sealed = true;
  }

  #sealed = false;

  #late(what: string): void {
    process.stderr.write(
      `warning: ${what} was declared after the Nodefile's default function returned, so it is in no graph: declare it before the function returns (await what it waits for)\n`,
    );
  }

  api(): NodefileApi {
    const task = (id: string, spec: TaskSpec): TaskRef => {
      if (!this.#sealed) return this.#task(id, spec, task);
      this.#late(`task ${String(id)}`);
      return makeRef(taskId(String(id)));
    };
    return {
      dir: this.#dir,
      task,
      ref: (id) => makeRef(taskId(id)),
      pool: (name, depth) => {
        if (this.#sealed) return this.#late(`pool ${String(name)}`);
        const site = captureSite(this.#file);
        if (typeof name !== 'string' || !Number.isInteger(depth) || depth < 1) {
          this.#fail({ reason: 'invalid-field', task: undefined, field: `pool ${String(name)}`, message: 'a pool needs a name and a whole depth of at least 1', site: site.get() });
          return;
        }
        // As ninja refuses a pool declared twice: which depth was meant cannot be told.
        if (this.#pools.has(name)) {
          this.#fail({ reason: 'invalid-field', task: undefined, field: `pool ${name}`, message: `declared twice (depth ${this.#pools.get(name)}, then ${depth})`, site: site.get() });
          return;
        }
        this.#pools.set(name, depth);
      },
      file: (p) => ({ kind: 'file', path: p }),
      tree: (p) => ({ kind: 'tree', path: p }),
      glob: (pattern) => ({ kind: 'glob', pattern }),
      value: (value: Json, options?: { readonly sensitive?: boolean }) => (options?.sensitive === true ? { kind: 'value', value, sensitive: true } : { kind: 'value', value }),
      env: (name) => ({ kind: 'env', name }),
      preserve: (...paths) => {
        if (this.#sealed) return this.#late('preserve');
        const site = captureSite(this.#file);
        for (const p of paths) {
          if (typeof p === 'string' && p.length > 0) this.#preserve.push({ path: flat(p), site });
          else this.#fail({ reason: 'invalid-field', task: undefined, field: 'preserve', message: `a preserved path is a non-empty string, not ${JSON.stringify(p) ?? String(p)}`, site: site.get() });
        }
      },
      settings: (settings) => {
        if (this.#sealed) return this.#late('settings');
        const site = captureSite(this.#file);
        const problem = settingsProblem(settings);
        if (problem !== undefined) {
          this.#fail({ reason: 'invalid-field', task: undefined, field: `settings${problem.field}`, message: problem.message, site: site.get() });
          return;
        }
        this.#settings = { ...this.#settings, ...settings };
      },
    };
  }

  #task(rawId: string, rawSpec: TaskSpec, entry: (...args: never[]) => unknown): TaskRef {
    // A failure is reported while the call is on the stack, so its site is taken then.
    const site = this.#sites ? captureSite(this.#file, entry) : NO_SITE;
    const here = (): SourceSite | undefined => (this.#sites ? site.get() : captureSite(this.#file, entry).get());
    const id = taskId(flat(String(rawId)));
    const ref = makeRef(id);
    if (typeof rawId !== 'string' || !ID_PATTERN.test(rawId)) {
      this.#fail({ reason: 'invalid-field', task: String(rawId), field: 'id', message: ID_MESSAGE, site: here() });
      return ref;
    }
    if (typeof rawSpec !== 'object' || rawSpec === null) {
      this.#fail({ reason: 'invalid-field', task: id, field: '', message: 'a task needs a spec object', site: here() });
      return ref;
    }
    const after = Array.isArray(rawSpec.after) && rawSpec.after.length > 0 ? rawSpec.after.map((a) => taskId(typeof a === 'string' ? a : a.id)) : NO_IDS;
    let spec: TaskSpec = rawSpec;
    if (plainlyValid(rawSpec as unknown as Record<string, unknown>)) {
      spec = ownSpec(rawSpec, this.#lastInputs);
      if (spec.inputs !== undefined) this.#lastInputs = spec.inputs as Readonly<Record<string, InputSpec>>;
    } else {
      // Not one of the plain shapes: the schema decides, once the Nodefile has run (see
      // check()), on the Nodefile's own object, which is then kept as it is.
      this.#unchecked.push({ id, spec, site: this.#sites ? site : captureSite(this.#file, entry) });
    }
    this.#tasks.push(new Declared(id, spec, after, site));
    return ref;
  }

  /** Validates, with the zod schema, every declaration that was not plainly valid. */
  async check(): Promise<void> {
    if (this.#unchecked.length === 0) return;
    const { validateTaskSpec } = await import('./schema.ts');
    for (const { id, spec, site } of this.#unchecked) {
      const checked = validateTaskSpec(spec);
      if (checked.ok) continue;
      for (const issue of checked.error) {
        const at = site.get();
        this.#fail({ reason: 'invalid-field', task: id, field: issue.field, message: issue.message, site: (issue.key === undefined ? undefined : keySite(at, issue.key)) ?? at });
      }
    }
    this.#unchecked.length = 0;
  }

  declarations(): Declarations {
    return { file: this.#file, dir: this.#dir, tasks: this.#tasks, pools: this.#pools, preserve: this.#preserve, settings: this.#settings, failures: this.#failures };
  }
}

/**
 * A plainly valid declaration as nodegraph keeps it: a spec and an inputs object
 * of its own, so that what only the Nodefile's objects held can go — task
 * handles in `after` (DeclaredTask holds the ids), and above all repeated
 * inputs. A file or tree input equal to the one of the same name in `previous`
 * (the last copied task's inputs) is that object: the header a thousand tasks
 * read, declared in a loop, is one object and one path instead of a thousand.
 * Other file and tree inputs are made anew, which V8 keeps smaller than the
 * Nodefile's own. An argv and the outputs are arrays of their own, of flat
 * strings, as input paths are (see flat). The rest is kept as declared.
 */
function ownSpec(spec: TaskSpec, previous: Readonly<Record<string, InputSpec>>): TaskSpec {
  const copy: Record<string, unknown> = {};
  for (const key in spec) {
    const value = (spec as unknown as Record<string, unknown>)[key];
    if (value === undefined || key === 'after') continue;
    if (key === 'inputs') copy[key] = ownInputs(value as Readonly<Record<string, InputSpec>>, previous);
    else if ((key === 'run' || key === 'outputs') && Array.isArray(value)) copy[key] = (value as readonly string[]).map(flat);
    else copy[key] = value;
  }
  return copy as unknown as TaskSpec;
}

function ownInputs(inputs: Readonly<Record<string, InputSpec>>, previous: Readonly<Record<string, InputSpec>>): Record<string, InputSpec> {
  const copy: Record<string, InputSpec> = {};
  for (const name in inputs) {
    const input = inputs[name]!;
    if (input.kind !== 'file' && input.kind !== 'tree') {
      copy[name] = input;
      continue;
    }
    // A name found on the prototype (toString) is a function there: never equal.
    const before = previous[name] as InputSpec | undefined;
    copy[name] = typeof before === 'object' && before.kind === input.kind && before.path === input.path ? before : { kind: input.kind, path: flat(input.path) };
  }
  return copy;
}

/** What is wrong with a settings object, if anything: `.atomic` and a message. */
function settingsProblem(settings: unknown): { field: string; message: string } | undefined {
  if (typeof settings !== 'object' || settings === null || Array.isArray(settings)) return { field: '', message: 'settings are an object: { atomic: true }' };
  for (const [key, value] of Object.entries(settings)) {
    if (key !== 'atomic') return { field: `.${key}`, message: 'not a setting (known: atomic)' };
    if (typeof value !== 'boolean' && value !== 'always') return { field: '.atomic', message: `true, false or 'always', not ${JSON.stringify(value)}` };
  }
  return undefined;
}

/** Lines after a declaration's call that its keys are looked for in. */
const KEY_SEARCH_LINES = 200;

/**
 * Where `key` is written as a property (`key:`, `'key':`, `"key":`) at or after `site`
 * (the ng.task call), so a diagnostic points at the key rather than at the call;
 * undefined when it is not found nearby (the spec was built elsewhere).
 */
function keySite(site: SourceSite | undefined, key: string): SourceSite | undefined {
  if (site === undefined) return undefined;
  let lines: string[];
  try {
    lines = readFileSync(site.file, 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const escaped = key.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const pattern = new RegExp(`(?<![\\w$'"])(?:${escaped}|'${escaped}'|"${escaped}")\\s*:`);
  // Only inside the call's parentheses: a key of the same name further down belongs to other code.
  let depth = 0;
  let opened = false;
  for (let i = site.line - 1; i < Math.min(lines.length, site.line - 1 + KEY_SEARCH_LINES); i++) {
    const from = i === site.line - 1 ? site.column - 1 : 0;
    let to = lines[i]!.length;
    for (let c = from; c < to; c++) {
      const ch = lines[i]![c];
      if (ch === '(') [depth, opened] = [depth + 1, true];
      else if (ch === ')' && --depth === 0 && opened) to = c;
    }
    const match = pattern.exec(lines[i]!.slice(from, to));
    if (match !== null) return { file: site.file, line: i + 1, column: from + match.index + 1 };
    if (opened && depth <= 0) break;
  }
  return undefined;
}
