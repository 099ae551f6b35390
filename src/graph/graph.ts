// The task graph: the one module that imports graphology. Nodes are tasks;
// an edge runs from a task to one that must come after it, marked 'input'
// (a trigger edge: it consumes the output) or 'after' (order only).

import { DirectedGraph } from 'graphology';
import type { TaskId } from '../ids.ts';
import type { DeclaredTask } from '../nodefile/builder.ts';
import type { InputSpec } from '../nodefile/types.ts';

export interface TaskNode {
  readonly id: TaskId;
  readonly decl: DeclaredTask;
  /** Inputs by name; a file input that another task writes became a `task` input. */
  readonly inputs: ReadonlyMap<string, InputSpec>;
  /** Trigger upstreams, each once, in declaration order. */
  readonly needs: readonly TaskId[];
  /** Order-only upstreams. */
  readonly after: readonly TaskId[];
  /** Declared outputs, absolute. */
  readonly outputs: readonly string[];
  /** The folder commands run in, absolute. */
  readonly cwd: string;
  /** Position in topological order. */
  readonly order: number;
}

export type EdgeKind = 'input' | 'after';

export class TaskGraph {
  readonly file: string;
  readonly dir: string;
  readonly pools: ReadonlyMap<string, number>;
  readonly #nodes: Map<TaskId, TaskNode>;
  readonly #order: readonly TaskNode[];
  readonly #dependents: ReadonlyMap<TaskId, readonly TaskId[]>;

  constructor(file: string, dir: string, pools: ReadonlyMap<string, number>, nodes: readonly TaskNode[]) {
    this.file = file;
    this.dir = dir;
    this.pools = pools;
    this.#order = nodes;
    this.#nodes = new Map(nodes.map((n) => [n.id, n]));
    const dependents = new Map<TaskId, TaskId[]>();
    const add = (up: TaskId, id: TaskId): void => {
      const list = dependents.get(up);
      if (list === undefined) dependents.set(up, [id]);
      else list.push(id);
    };
    for (const node of nodes) {
      for (const up of node.needs) add(up, node.id);
      for (const up of node.after) add(up, node.id);
    }
    this.#dependents = dependents;
  }

  get size(): number {
    return this.#order.length;
  }

  /** Every task, upstream before downstream. */
  get ordered(): readonly TaskNode[] {
    return this.#order;
  }

  get(id: TaskId): TaskNode | undefined {
    return this.#nodes.get(id);
  }

  has(id: TaskId): boolean {
    return this.#nodes.has(id);
  }

  /** Tasks with an edge (either kind) from `id`. */
  dependents(id: TaskId): readonly TaskId[] {
    return this.#dependents.get(id) ?? [];
  }

  /** `targets` and everything they need, transitively, over both kinds of edge. */
  closure(targets: readonly TaskId[]): Set<TaskId> {
    const seen = new Set<TaskId>();
    const stack = [...targets];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (seen.has(id)) continue;
      seen.add(id);
      const node = this.#nodes.get(id);
      if (node !== undefined) stack.push(...node.needs, ...node.after);
    }
    return seen;
  }
}

export interface PendingNode {
  readonly id: TaskId;
  /** Trigger upstreams. */
  readonly needs: readonly TaskId[];
  /** Order-only upstreams. */
  readonly after: readonly TaskId[];
}

/**
 * Orders nodes upstream-first (Kahn's algorithm, stable in declaration
 * order), as indices into `nodes`. Returns undefined when the graph has a
 * cycle; the caller then finds the loop to report. Plain arrays rather than graphology here: at 50,000
 * tasks graphology's edge bookkeeping alone took 350–650 ms, this takes ~20.
 */
export function topologicalOrder(nodes: readonly PendingNode[]): number[] | undefined {
  const count = nodes.length;
  const index = new Map<TaskId, number>();
  for (let i = 0; i < count; i++) index.set(nodes[i]!.id, i);
  // Edges in compressed rows: every upstream's downstream list, in two flat arrays.
  const waiting = new Int32Array(count);
  const start = new Int32Array(count + 1);
  const ups: number[] = [];
  const downs: number[] = [];
  const link = (upId: TaskId, i: number): void => {
    const u = index.get(upId);
    if (u === undefined) return;
    ups.push(u);
    downs.push(i);
    start[u + 1]!++;
    waiting[i]!++;
  };
  for (let i = 0; i < count; i++) {
    const node = nodes[i]!;
    for (const up of node.needs) link(up, i);
    for (const up of node.after) link(up, i);
  }
  for (let i = 0; i < count; i++) start[i + 1]! += start[i]!;
  const fill = start.slice(0, count);
  const edges = new Int32Array(ups.length);
  for (let e = 0; e < ups.length; e++) edges[fill[ups[e]!]!++] = downs[e]!;
  const order: number[] = [];
  const ready = new Int32Array(count);
  let tail = 0;
  for (let i = 0; i < count; i++) if (waiting[i] === 0) ready[tail++] = i;
  for (let head = 0; head < tail; head++) {
    const i = ready[head]!;
    order.push(i);
    for (let e = start[i]!; e < start[i + 1]!; e++) {
      const d = edges[e]!;
      if (--waiting[d]! === 0) ready[tail++] = d;
    }
  }
  return order.length === count ? order : undefined;
}

/** The graph as graphology sees it, for exports and for tools that want graph algorithms. */
export function toGraphology(graph: TaskGraph): DirectedGraph<Record<string, never>, { kind: EdgeKind }> {
  const g = new DirectedGraph<Record<string, never>, { kind: EdgeKind }>();
  for (const node of graph.ordered) g.addNode(node.id);
  for (const node of graph.ordered) {
    for (const up of node.needs) g.addEdge(up, node.id, { kind: 'input' });
    for (const up of node.after) g.addEdge(up, node.id, { kind: 'after' });
  }
  return g;
}
