// Checks how the declarations fit together and builds the TaskGraph:
// duplicate ids and outputs, references to unknown tasks and pools, cycles.
// Pure: it reads nothing from disk.

import path from 'node:path';
import type { CycleEdge, Failure } from '../error.ts';
import type { TaskId } from '../ids.ts';
import type { Declarations, DeclaredTask } from '../nodefile/builder.ts';
import type { InputSpec } from '../nodefile/types.ts';
import { flat } from '../util/flat.ts';
import { firstInside, holds, join, needsNormalising } from '../util/paths.ts';
import { realPath } from '../util/realpath.ts';
import { err, ok, type Result } from '../util/result.ts';
import { TaskGraph, topologicalOrder, type TaskNode } from './graph.ts';

/** A task as analysis builds it: one object per task, handed on as the graph's node. */
class Node implements TaskNode {
  readonly id: TaskId;
  readonly decl: DeclaredTask;
  inputs: Readonly<Record<string, InputSpec>>;
  needs: readonly TaskId[] = NO_IDS;
  after: readonly TaskId[] = NO_IDS;
  outputs: readonly string[];
  cwd: string;
  order = -1;
  /** Position in declaration order: edges are kept as pairs of these. */
  readonly index: number;
  constructor(decl: DeclaredTask, index: number, outputs: readonly string[], cwd: string) {
    this.id = decl.id;
    this.decl = decl;
    this.inputs = decl.inputs;
    this.index = index;
    this.outputs = outputs;
    this.cwd = cwd;
  }
}

const NO_IDS: readonly TaskId[] = Object.freeze([]);
const NO_PATHS: readonly string[] = Object.freeze([]);

/**
 * Two passes over the declarations, one object per task, edges as pairs of
 * indices: a 50,000-task graph is checked in a small part of a second.
 */
export function analyze(declarations: Declarations, options: { readonly stateDir?: string } = {}): Result<TaskGraph, Failure[]> {
  const failures: Failure[] = [...declarations.failures];
  const { dir } = declarations;
  const guard = new OutputGuard(declarations.file, dir, options.stateDir);
  const { byId, nodes, producers, roots } = taskNodes(declarations, guard, failures);
  const folders = new Map<string, Node | null>();
  let sortedOutputs: string[] | undefined;

  // Edges upstream → downstream, as indices; `linked[u] === d + 1` when u → d is already there.
  const ups: number[] = [];
  const downs: number[] = [];
  const linked = new Int32Array(nodes.length);
  for (const node of nodes) {
    const { decl, index } = node;
    const { inputs } = decl;
    let copy: Record<string, InputSpec> | undefined;
    for (const name in inputs) {
      const input = inputs[name]!;
      let upstream: Node | undefined;
      if (input.kind === 'task') {
        upstream = byId.get(input.id);
        if (upstream === undefined) {
          failures.push({ reason: 'unknown-task', task: decl.id, field: `inputs.${name}`, ref: input.id, site: decl.site.get() });
          continue;
        }
        // `a.output(path)` names one of a's outputs (or a file inside one): a typo would otherwise pass unseen.
        if (input.path !== undefined && !namesOutput(upstream, join(dir, input.path))) {
          const declared = upstream.outputs.length === 0 ? 'it declares none' : `it declares ${upstream.outputs.map((o) => path.relative(dir, o) || o).join(', ')}`;
          failures.push({ reason: 'invalid-field', task: decl.id, field: `inputs.${name}`, message: `${input.path} is not an output of ${upstream.id} (${declared})`, site: decl.site.get() });
          continue;
        }
      } else if (input.kind === 'file' || input.kind === 'tree' || input.kind === 'glob') {
        const given = input.kind === 'glob' ? input.pattern : input.path;
        const inState = guard.refusesInput(input.kind, given, dir);
        if (inState !== undefined) {
          failures.push({ reason: 'invalid-field', task: decl.id, field: `inputs.${name}`, message: `the ${input.kind} ${given} ${inState}`, site: decl.site.get() });
          continue;
        }
        if (input.kind === 'glob') continue;
        const tree = input.kind === 'tree';
        if (!tree && !roots.mayHold(input.path)) continue;
        const absolute = join(dir, input.path);
        upstream = producers.get(absolute) ?? producerOfFolder(absolute, producers, folders) ?? undefined;
        if (tree) {
          const inside = foreignOutputInside(absolute, upstream, (sortedOutputs ??= [...producers.keys()].sort()), producers);
          const refused = guard.refusesTree(absolute) ?? (inside === undefined ? undefined : holdsOutputOf(inside, producers.get(inside)!, node, dir));
          if (refused !== undefined) failures.push({ reason: 'invalid-field', task: decl.id, field: `inputs.${name}`, message: `the tree ${input.path} ${refused}`, site: decl.site.get() });
        }
        if (upstream === undefined) continue;
        // A file that another task writes is that task's output: a trigger edge.
        (copy ??= { ...inputs })[name] = { kind: 'task', id: upstream.id, path: absolute };
      } else continue;
      if (upstream === node) {
        failures.push({ reason: 'cycle', edges: [{ from: decl.id, to: decl.id, via: 'input', site: decl.site.get() }] });
      } else if (linked[upstream.index] !== index + 1) {
        linked[upstream.index] = index + 1;
        if (node.needs === NO_IDS) node.needs = [upstream.id];
        else (node.needs as TaskId[]).push(upstream.id);
        ups.push(upstream.index);
        downs.push(index);
      }
    }
    if (copy !== undefined) node.inputs = copy;
    if (decl.after.length > 0) {
      const after: TaskId[] = [];
      decl.after.forEach((ref, i) => {
        const upstream = byId.get(ref);
        if (upstream === undefined) {
          failures.push({ reason: 'unknown-task', task: decl.id, field: `after[${i}]`, ref, site: decl.site.get() });
        } else if (upstream === node) {
          failures.push({ reason: 'cycle', edges: [{ from: decl.id, to: decl.id, via: 'after', site: decl.site.get() }] });
        } else if (linked[upstream.index] !== index + 1) {
          linked[upstream.index] = index + 1;
          after.push(ref);
          ups.push(upstream.index);
          downs.push(index);
        }
      });
      node.after = after;
    }
    const pool = decl.spec.pool;
    if (pool !== undefined && !declarations.pools.has(pool)) {
      failures.push({ reason: 'unknown-pool', task: decl.id, pool, site: decl.site.get() });
    }
    // A verb for when only an upstream moved is for a task this one consumes: another id is a typo.
    const byUpstream = decl.spec.verbs?.upstream;
    if (byUpstream !== undefined) {
      for (const up in byUpstream) {
        if (!node.needs.includes(up as TaskId)) {
          failures.push({ reason: 'invalid-field', task: decl.id, field: `verbs.upstream.${up}`, message: `${decl.id} consumes no task ${up}`, site: decl.site.get() });
        }
      }
    }
  }
  const preserve = preservedPaths(declarations, producers, options.stateDir);
  failures.push(...preserve.failures);
  if (failures.length > 0) return err(failures);

  const order = topologicalOrder(nodes.length, ups, downs);
  if (order === undefined) return err([{ reason: 'cycle', edges: findCycle(nodes, byId) }]);
  const ordered = new Array<Node>(order.length);
  for (let i = 0; i < order.length; i++) {
    const node = nodes[order[i]!]!;
    node.order = i;
    ordered[i] = node;
  }
  return ok(new TaskGraph(declarations.file, dir, declarations.pools, ordered, byId, { preserve: preserve.paths, settings: declarations.settings }));
}

/** The first pass: one node per declared task, and the task that produces each output; duplicates go to `failures`. */
function taskNodes(declarations: Declarations, guard: OutputGuard, failures: Failure[]): { byId: Map<TaskId, Node>; nodes: Node[]; producers: Map<string, Node>; roots: OutputRoots } {
  const { dir } = declarations;
  const byId = new Map<TaskId, Node>();
  const nodes: Node[] = [];
  const producers = new Map<string, Node>();
  const roots = new OutputRoots();
  for (const decl of declarations.tasks) {
    const node = new Node(decl, nodes.length, NO_PATHS, dir);
    // One map operation per task, not two: a set that does not grow the map met a duplicate.
    const size = byId.size;
    byId.set(decl.id, node);
    if (byId.size === size) {
      const first = nodes.find((n) => n.id === decl.id)!;
      byId.set(decl.id, first);
      failures.push({ reason: 'duplicate-task', task: decl.id, first: first.decl.site.get(), second: decl.site.get() });
      continue;
    }
    if (decl.spec.cwd !== undefined) node.cwd = path.resolve(dir, decl.spec.cwd);
    if (decl.outputs.length > 0) node.outputs = decl.outputs.map((o) => roots.join(dir, o));
    nodes.push(node);
    for (let i = 0; i < node.outputs.length; i++) {
      const output = node.outputs[i]!;
      const refused = guard.refuses(output);
      if (refused !== undefined) {
        failures.push({ reason: 'invalid-field', task: decl.id, field: `outputs[${i}]`, message: `${decl.outputs[i]} ${refused}`, site: decl.site.get() });
      }
      const count = producers.size;
      producers.set(output, node);
      if (producers.size === count) {
        // Another task's, or this one's named twice.
        const other = nodes.find((n) => n !== node && n.outputs.includes(output)) ?? node;
        producers.set(output, other);
        failures.push({ reason: 'duplicate-output', path: output, first: other.id, second: decl.id, site: decl.site.get() });
      }
    }
  }
  return { byId, nodes, producers, roots };
}

/**
 * The preserved paths, absolute. One inside an output would be restored and
 * then removed or rewritten by the task's own rollback; one overlapping the
 * state folder would restore nodegraph's record over itself.
 */
function preservedPaths(declarations: Declarations, producers: ReadonlyMap<string, Node>, stateDir: string | undefined): { paths: string[]; failures: Failure[] } {
  const paths: string[] = [];
  const failures: Failure[] = [];
  const state = stateDir === undefined ? undefined : path.resolve(stateDir);
  for (const { path: declared, site } of declarations.preserve) {
    const absolute = path.resolve(declarations.dir, declared);
    const fail = (message: string): void => void failures.push({ reason: 'invalid-field', task: undefined, field: 'preserve', message: `${declared} ${message}`, site: site.get() });
    let owner: Node | undefined;
    for (let p = absolute; owner === undefined; p = path.dirname(p)) {
      owner = producers.get(p);
      if (p === '/') break;
    }
    const shown = (p: string): string => (holds(declarations.dir, p) ? path.relative(declarations.dir, p) || '.' : p);
    if (owner !== undefined) fail(`is inside ${shown(owner.outputs.find((o) => holds(o, absolute))!)}, an output of ${owner.id}: a task's outputs are its own to roll back`);
    else if (state !== undefined && (holds(state, absolute) || holds(absolute, state))) fail(`overlaps nodegraph's state folder ${shown(state)}`);
    else if (!paths.includes(absolute)) paths.push(absolute);
  }
  return { paths, failures };
}

/**
 * An output strictly inside `tree` that is not `around`'s (the task whose
 * output holds the tree, whose outputs the tree may hold); found by binary
 * search over all outputs sorted. Undefined when there is none.
 */
function foreignOutputInside(tree: string, around: Node | undefined, sorted: readonly string[], producers: ReadonlyMap<string, Node>): string | undefined {
  const prefix = tree === '/' ? '/' : `${tree}/`;
  for (let i = firstInside(sorted, tree); i < sorted.length && sorted[i]!.startsWith(prefix); i++) {
    if (producers.get(sorted[i]!) !== around) return sorted[i];
  }
  return undefined;
}

/** Why a tree input may not hold `output` of `producer`: its hash would move whenever that task ran, with no edge ordering the two. */
function holdsOutputOf(output: string, producer: Node, reader: Node, dir: string): string {
  const shown = path.relative(dir, output) || output;
  return producer === reader
    ? `holds ${shown}, this task's own output, so it would change at every run: read a folder beside it`
    : `holds ${shown}, an output of ${producer.id}: read ${producer.id}'s output as an input, or a folder beside it`;
}

/** Whether `file` is one of the node's outputs, or lies in one. */
function namesOutput(node: Node, file: string): boolean {
  for (const output of node.outputs) if (holds(output, file)) return true;
  return false;
}

/** The task whose output is a folder holding `file` (or one of that folder's ancestors); remembered per folder. */
function producerOfFolder(file: string, producers: ReadonlyMap<string, Node>, folders: Map<string, Node | null>): Node | null {
  const slash = file.lastIndexOf('/');
  return slash > 0 ? producerOf(file.slice(0, slash), producers, folders) : null;
}

function producerOf(folder: string, producers: ReadonlyMap<string, Node>, folders: Map<string, Node | null>): Node | null {
  const known = folders.get(folder);
  if (known !== undefined) return known;
  const found = producers.get(folder) ?? producerOfFolder(folder, producers, folders);
  folders.set(folder, found);
  return found;
}

/**
 * What no output may be: a task's outputs are removed when it is destroyed
 * (or found orphaned), so an output that is the Nodefile, its folder or a
 * folder above it, or the state folder, one above it or a file in it, would
 * take the project or nodegraph's record of it along.
 */
export class OutputGuard {
  readonly #nodefile: string;
  readonly #dir: string;
  readonly #stateDir: string | undefined;
  /** The state folder's own name: an input path without it cannot lead inside it (one test for most inputs). */
  readonly #stateName: string;
  constructor(nodefile: string, dir: string, stateDir: string | undefined) {
    this.#nodefile = real(nodefile);
    this.#dir = real(dir);
    this.#stateDir = stateDir === undefined ? undefined : real(path.resolve(stateDir));
    this.#stateName = this.#stateDir === undefined ? '' : path.basename(this.#stateDir);
  }

  /**
   * As refuses(), for a path about to be removed: also where it really leads.
   * `up/proj` with `up` a link to `..` is the project's folder by another name,
   * and a recursive removal would follow it. One realpath per removal, never
   * per declaration (a removal is rare; a graph has 50,000 outputs).
   */
  refusesRemoving(target: string): string | undefined {
    const said = this.refuses(target);
    if (said !== undefined) return said;
    const resolved = real(target);
    if (resolved === target) return undefined;
    const why = this.refuses(resolved);
    return why === undefined ? undefined : `leads to ${resolved}, which ${why}`;
  }

  /** Why `tree` (absolute) may not be a tree input: one that holds the state folder, which every run writes, never settles. */
  refusesTree(tree: string): string | undefined {
    const state = this.#stateDir;
    return state !== undefined && holds(tree, state) ? `holds nodegraph's state folder ${state}, which every run changes: read a folder beside it` : undefined;
  }

  /**
   * Why an input (its path or pattern as given, relative to `dir`) may not be read: one inside the state
   * folder, which every run writes, never settles. A glob is judged by its folder before the first wildcard.
   */
  refusesInput(kind: 'file' | 'tree' | 'glob', given: string, dir: string): string | undefined {
    const state = this.#stateDir;
    if (state === undefined || !given.includes(this.#stateName)) return undefined;
    if (!holds(state, join(dir, kind === 'glob' ? literalFolder(given) : given))) return undefined;
    const instead = kind === 'file' ? 'read a file beside it' : kind === 'tree' ? 'read a folder beside it' : 'match files beside it';
    return `is inside nodegraph's state folder ${state}, which every run changes: ${instead}`;
  }

  /** Why `output` (absolute) may not be an output, or undefined. Most outputs lie below the folder: one comparison. */
  refuses(output: string): string | undefined {
    if (output === this.#nodefile) return 'is the Nodefile itself: destroying the task would remove it';
    if (holds(output, this.#dir)) return `is ${output === this.#dir ? 'the Nodefile\'s folder' : 'a folder that holds the Nodefile'}: destroying the task would remove the project`;
    const state = this.#stateDir;
    if (state !== undefined && (holds(output, state) || holds(state, output))) {
      return `${output === state ? 'is' : holds(output, state) ? 'holds' : 'is inside'} nodegraph's state folder ${state}: destroying the task would remove what nodegraph applied`;
    }
    return undefined;
  }
}

/** Where `p` really is; `p` itself when it does not exist. */
const real = (p: string): string => realPath(p) ?? p;

/**
 * The first path segments of the declared outputs, so that a file input
 * outside all of them (most of a build's sources) is known to be nobody's
 * output without building its absolute path and looking it up. A path that is
 * absolute or not normalised is never ruled out here.
 */
class OutputRoots {
  readonly #roots = new Set<string>();
  #list: string[] = [];
  #last = '';
  #everything = false;

  /** Joins a declared output to `dir` (as join() does) and notes its first segment. */
  join(dir: string, output: string): string {
    if (output.startsWith('/') || needsNormalising.test(output)) {
      this.#everything = true;
      return path.resolve(dir, output);
    }
    if (!this.#everything) {
      // Outputs come in runs under one root: compare with the last one before hashing a slice.
      const last = this.#last;
      if (last === '' || !output.startsWith(last) || (output.length !== last.length && output.charCodeAt(last.length) !== 47)) {
        const slash = output.indexOf('/');
        const root = slash < 0 ? output : output.slice(0, slash);
        this.#last = root;
        if (!this.#roots.has(root)) {
          this.#roots.add(root);
          this.#list.push(root);
        }
      }
    }
    return flat(dir === '/' ? `/${output}` : `${dir}/${output}`);
  }

  mayHold(input: string): boolean {
    if (this.#everything || input.startsWith('/') || needsNormalising.test(input)) return true;
    const list = this.#list;
    if (list.length > 8) {
      const slash = input.indexOf('/');
      return this.#roots.has(slash < 0 ? input : input.slice(0, slash));
    }
    for (const root of list) {
      if (input.startsWith(root) && (input.length === root.length || input.charCodeAt(root.length) === 47)) return true;
    }
    return false;
  }
}

/** Finds one loop and lists every edge of it, upstream to downstream. */
function findCycle(nodes: readonly Node[], byId: ReadonlyMap<TaskId, Node>): CycleEdge[] {
  // Only on the error path: build the edge lists with their kinds here.
  const upstreamOf = new Map(
    nodes.map((n) => [
      n.id,
      [...n.needs.map((id) => ({ id, kind: 'input' as const })), ...n.after.map((id) => ({ id, kind: 'after' as const }))],
    ]),
  );
  const state = new Map<TaskId, 'open' | 'done'>();
  // Iterative DFS along upstream edges; the stack holds the current path.
  for (const start of nodes) {
    if (state.has(start.id)) continue;
    const stack: { id: TaskId; next: number }[] = [{ id: start.id, next: 0 }];
    state.set(start.id, 'open');
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const ups = upstreamOf.get(top.id) ?? [];
      if (top.next >= ups.length) {
        state.set(top.id, 'done');
        stack.pop();
        continue;
      }
      const edge = ups[top.next++]!;
      const seen = state.get(edge.id);
      if (seen === undefined) {
        state.set(edge.id, 'open');
        stack.push({ id: edge.id, next: 0 });
      } else if (seen === 'open') {
        // The loop is edge.id … top.id on the stack, closed by top ← edge.id.
        const from = stack.findIndex((s) => s.id === edge.id);
        const loop = stack.slice(from).map((s) => s.id);
        const edges: CycleEdge[] = [];
        for (let i = 0; i < loop.length; i++) {
          const downstream = loop[i]!;
          const upstream = loop[(i + 1) % loop.length]!;
          const kind = (upstreamOf.get(downstream) ?? []).find((u) => u.id === upstream)?.kind ?? 'input';
          edges.push({ from: upstream, to: downstream, via: kind, site: byId.get(downstream)?.decl.site.get() });
        }
        return edges.reverse();
      }
    }
  }
  return [];
}

/** A glob's words: `*`, `?`, a class, a brace, an extglob. */
const WILDCARD = /[*?[\]{}]|[!+@]\(/;

/** The folder a glob's matches lie in: its words before the first with a wildcard (`.` when the first has one). */
function literalFolder(pattern: string): string {
  const words = pattern.split('/');
  let literal = 0;
  while (literal < words.length - 1 && !WILDCARD.test(words[literal]!)) literal++;
  return words.slice(0, literal).join('/') || (pattern.startsWith('/') ? '/' : '.');
}
