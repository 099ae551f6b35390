// What a graph's tasks write, as the readers of a Nodefile's own reads ask it:
// a path at or below an output is the tasks' doing, and so is a folder an
// output is made in (`out` for `out/copy`), whose listing the task changes.

import path from 'node:path';
import type { TaskGraph } from './graph.ts';

export interface Written {
  /** A path at or below one of the tasks' outputs. */
  covers(p: string): boolean;
  /** A path `covers` names, or a folder that holds an output. */
  touches(p: string): boolean;
}

export function writtenBy(graph: TaskGraph): Written {
  const outputs = new Set<string>();
  const holders = new Set<string>();
  for (const node of graph.ordered) {
    for (const output of node.outputs) {
      outputs.add(output);
      for (let dir = path.dirname(output); !holders.has(dir) && dir !== path.dirname(dir); dir = path.dirname(dir)) holders.add(dir);
    }
  }
  const covers = (p: string): boolean => {
    for (let at = p; ; at = path.dirname(at)) {
      if (outputs.has(at)) return true;
      if (at === path.dirname(at)) return false;
    }
  };
  return { covers, touches: (p) => holders.has(p) || covers(p) };
}
