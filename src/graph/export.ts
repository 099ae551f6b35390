// The task graph as graphology sees it: the one module that imports
// graphology, loaded only by the commands that export the graph (a no-op
// apply should not pay for it).

import { DirectedGraph } from 'graphology';
import type { EdgeKind, TaskGraph } from './graph.ts';

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
