// The task graph as graphology sees it: the one module that imports
// graphology, loaded only by the commands that export the graph (a no-op
// apply should not pay for it).

import { DirectedGraph } from 'graphology';
import type { TaskId } from '../ids.ts';
import type { EdgeKind, TaskGraph, TaskNode } from './graph.ts';

export interface EdgeAttributes {
  readonly kind: EdgeKind;
  /** For a trigger edge: the names of the downstream task's inputs that consume the upstream one. */
  readonly inputs: readonly string[];
}

/** The input names under which `node` consumes `upstream`, in declaration order. */
function inputsOf(node: TaskNode, upstream: TaskId): string[] {
  const names: string[] = [];
  for (const name in node.inputs) {
    const input = node.inputs[name]!;
    if (Object.hasOwn(node.inputs, name) && input.kind === 'task' && input.id === upstream) names.push(name);
  }
  return names;
}

/** The graph as graphology sees it, for exports and for tools that want graph algorithms; `only` keeps those tasks and the edges among them. */
export function toGraphology(graph: TaskGraph, only?: ReadonlySet<TaskId>): DirectedGraph<Record<string, never>, EdgeAttributes> {
  const g = new DirectedGraph<Record<string, never>, EdgeAttributes>();
  const kept = (id: TaskId): boolean => only === undefined || only.has(id);
  for (const node of graph.ordered) if (kept(node.id)) g.addNode(node.id);
  for (const node of graph.ordered) {
    if (!kept(node.id)) continue;
    for (const up of node.needs) if (kept(up)) g.addEdge(up, node.id, { kind: 'input', inputs: inputsOf(node, up) });
    for (const up of node.after) if (kept(up) && !g.hasEdge(up, node.id)) g.addEdge(up, node.id, { kind: 'after', inputs: [] });
  }
  return g;
}
