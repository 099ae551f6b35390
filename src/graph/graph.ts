// The task graph. Nodes are tasks; an edge runs from a task to one that must
// come after it, marked 'input' (a trigger edge: it consumes the output) or
// 'after' (order only). graphology sees it through export.ts.

import type { TaskId } from '../ids.ts';
import type { DeclaredTask } from '../nodefile/builder.ts';
import type { GraphSettings, InputSpec } from '../nodefile/types.ts';

export interface TaskNode {
  readonly id: TaskId;
  readonly decl: DeclaredTask;
  /**
   * Inputs by name (read with for…in and Object.hasOwn); a file input that
   * another task writes became a `task` input.
   */
  readonly inputs: Readonly<Record<string, InputSpec>>;
  /** Trigger upstreams, each once, in declaration order. */
  readonly needs: readonly TaskId[];
  /** Order-only upstreams. */
  readonly after: readonly TaskId[];
  /** Declared outputs, absolute. */
  readonly outputs: readonly string[];
  /** The folder commands run in, absolute. */
  readonly cwd: string;
  /** Position in topological order: the node's index in TaskGraph.ordered, and its slot in arrays by task. */
  readonly order: number;
}

export type EdgeKind = 'input' | 'after';

export class TaskGraph {
  readonly file: string;
  readonly dir: string;
  readonly pools: ReadonlyMap<string, number>;
  /** Absolute paths an atomic apply saves first and restores on rollback (`ng.preserve`). */
  readonly preserve: readonly string[];
  readonly settings: GraphSettings;
  readonly #nodes: ReadonlyMap<TaskId, TaskNode>;
  readonly #order: readonly TaskNode[];
  #downstream: Rows | undefined;

  /** `nodes` in topological order, each at its `order`; `byId` the same nodes by id, when the caller has it already. */
  constructor(
    file: string,
    dir: string,
    pools: ReadonlyMap<string, number>,
    nodes: readonly TaskNode[],
    byId?: ReadonlyMap<TaskId, TaskNode>,
    extra: { readonly preserve?: readonly string[]; readonly settings?: GraphSettings } = {},
  ) {
    this.file = file;
    this.dir = dir;
    this.pools = pools;
    this.preserve = extra.preserve ?? [];
    this.settings = extra.settings ?? {};
    this.#order = nodes;
    this.#nodes = byId ?? new Map(nodes.map((n) => [n.id, n]));
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

  /**
   * Calls `visit` with each task that has an edge (either kind) from `node`,
   * in the order their edges were declared. Built on first use: loading a
   * graph and deciding a no-op never ask. In flat arrays by order rather than
   * a list a task: at 50,000 tasks, 50,000 arrays and a Map would be some 4 MiB.
   */
  forEachDependent(node: TaskNode, visit: (dependent: TaskNode) => void): void {
    const { start, edges } = (this.#downstream ??= downstreamOf(this));
    const { order } = node;
    for (let e = start[order]!; e < start[order + 1]!; e++) visit(this.#order[edges[e]!]!);
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
      if (node === undefined) continue;
      // Loops, not push(...list): a spread of some 100,000 arguments overflows the stack.
      for (const up of node.needs) stack.push(up);
      for (const up of node.after) stack.push(up);
    }
    return seen;
  }
}

/** Edges in compressed rows: every node's downstream list, in one flat array. */
interface Rows {
  /** Node `i`'s downstreams are `edges[start[i]]` up to `edges[start[i + 1]]`, in the order their edges were given. */
  readonly start: Int32Array;
  readonly edges: Int32Array;
}

/** The edges `ups[e] → downs[e]` among `count` nodes, in compressed rows: two passes, count each row then place it. */
function compressedRows(count: number, ups: ArrayLike<number>, downs: ArrayLike<number>): Rows {
  const start = new Int32Array(count + 1);
  for (let e = 0; e < ups.length; e++) start[ups[e]! + 1]!++;
  for (let i = 0; i < count; i++) start[i + 1]! += start[i]!;
  const fill = start.slice(0, count);
  const edges = new Int32Array(ups.length);
  for (let e = 0; e < ups.length; e++) edges[fill[ups[e]!]!++] = downs[e]!;
  return { start, edges };
}

/** The graph's edges (both kinds) from each task, by order (see forEachDependent). */
function downstreamOf(graph: TaskGraph): Rows {
  const ups: number[] = [];
  const downs: number[] = [];
  for (const node of graph.ordered) {
    for (const id of node.needs) {
      ups.push(graph.get(id)!.order);
      downs.push(node.order);
    }
    for (const id of node.after) {
      ups.push(graph.get(id)!.order);
      downs.push(node.order);
    }
  }
  return compressedRows(graph.size, ups, downs);
}

/**
 * Orders `count` nodes upstream-first (Kahn's algorithm, stable in index
 * order), given the edges as pairs `ups[e] → downs[e]` of indices. Returns the
 * indices in order, or undefined when the graph has a cycle; the caller then
 * finds the loop to report. Plain typed arrays rather than graphology here: its
 * per-edge bookkeeping (an object and map entries an edge) is most of a large graph's load.
 */
export function topologicalOrder(count: number, ups: readonly number[], downs: readonly number[]): Int32Array | undefined {
  const waiting = new Int32Array(count);
  for (const d of downs) waiting[d]!++;
  const { start, edges } = compressedRows(count, ups, downs);
  const order = new Int32Array(count);
  let tail = 0;
  for (let i = 0; i < count; i++) if (waiting[i] === 0) order[tail++] = i;
  for (let head = 0; head < tail; head++) {
    const i = order[head]!;
    for (let e = start[i]!; e < start[i + 1]!; e++) {
      const d = edges[e]!;
      if (--waiting[d]! === 0) order[tail++] = d;
    }
  }
  return tail === count ? order : undefined;
}
