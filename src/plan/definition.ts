// The part of a task's fingerprint that comes from its declaration: what it
// runs and what it promises to write. Editing a command re-runs the task;
// editing its check, stop or destroy action does not.

import path from 'node:path';
import type { ContentHash } from '../ids.ts';
import type { TaskNode } from '../graph/graph.ts';
import { hashValue } from '../hash/value.ts';
import type { Command, TaskFunction } from '../nodefile/types.ts';

const cache = new WeakMap<TaskNode, ContentHash>();

export function definitionOf(node: TaskNode, root: string): ContentHash {
  let hash = cache.get(node);
  if (hash === undefined) {
    const { spec } = node.decl;
    hash = hashValue({
      run: describeRun(spec.run, spec.version),
      cwd: relative(root, node.cwd),
      env: spec.env ?? {},
      outputs: node.outputs.map((o) => relative(root, o)),
    });
    cache.set(node, hash);
  }
  return hash;
}

/** path.relative, without its cost for the usual case of a path inside `root`. */
function relative(root: string, p: string): string {
  if (p === root) return '';
  if (p.startsWith(root) && p.charCodeAt(root.length) === 47 && root !== '/') return p.slice(root.length + 1);
  return path.relative(root, p);
}

function describeRun(run: Command | TaskFunction, version: string | undefined): unknown {
  if (typeof run === 'function') return { function: version ?? run.toString() };
  return run;
}
