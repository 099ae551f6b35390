// The part of a task's fingerprint that comes from its declaration: what it
// runs and what it promises to write. Editing a command re-runs the task;
// editing its check, stop or destroy action does not.

import path from 'node:path';
import type { ContentHash } from '../ids.ts';
import type { TaskNode } from '../graph/graph.ts';
import { canonicalJson, hashString } from '../hash/value.ts';
import type { Command } from '../types.ts';

export function definitionOf(node: TaskNode, root: string): ContentHash {
  return hashString(definitionText(node, root));
}

/**
 * The canonical JSON of `{ run, cwd, env, outputs }` (see hashValue), written
 * out directly: the keys in their sorted order, arrays of strings through
 * JSON.stringify (which is canonical for them). A no-op computes this for
 * every task, so it matters at 50,000 of them.
 */
export function definitionText(node: TaskNode, root: string): string {
  const { spec } = node.decl;
  const run = describeRun(spec.run, spec.version);
  const env = spec.env === undefined || isEmpty(spec.env) ? '{}' : canonicalJson(spec.env);
  const outputs = node.outputs.length === 0 ? '[]' : JSON.stringify(node.outputs.map((o) => relative(root, o)));
  const runText = Array.isArray(run) ? JSON.stringify(run) : canonicalJson(run);
  return `{"cwd":${JSON.stringify(relative(root, node.cwd))},"env":${env},"outputs":${outputs},"run":${runText}}`;
}

function isEmpty(record: object): boolean {
  for (const _ in record) return false;
  return true;
}

/** path.relative, without its cost for the usual case of a path inside `root`. */
function relative(root: string, p: string): string {
  if (p === root) return '';
  if (p.startsWith(root) && p.charCodeAt(root.length) === 47 && root !== '/') return p.slice(root.length + 1);
  return path.relative(root, p);
}

/** A function run is known by its source text, unless the task names a version. */
function describeRun(run: Command | ((...args: never[]) => unknown), version: string | undefined): unknown {
  if (typeof run === 'function') return { function: version ?? run.toString() };
  return run;
}
