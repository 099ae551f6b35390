// Reads what the planner needs: the hash of every input, of every recorded
// output, and the verdict of every check. The I/O half of planning.

import type { Failure } from '../error.ts';
import type { ContentHash, TaskId } from '../ids.ts';
import { join } from '../graph/analyze.ts';
import type { TaskNode } from '../graph/graph.ts';
import type { FileObservation, HashCache } from '../hash/cache.ts';
import { hashGlob } from '../hash/glob.ts';
import { hashTree } from '../hash/tree.ts';
import { hashValue } from '../hash/value.ts';
import { runCheck } from '../execute/action.ts';
import { observeOutputs } from '../execute/outputs.ts';
import type { ProcessRunner } from '../execute/runner.ts';
import type { TaskRecord } from '../state/record.ts';
import { RecordMap } from '../state/records.ts';
import { err, ok, type Result } from '../util/result.ts';
import type { TaskObservation } from './decide.ts';

export interface ObserveOptions {
  readonly nodes: readonly TaskNode[];
  /** The Nodefile's folder: input paths are relative to it, as outputs are (a task's `cwd` is only where it runs). */
  readonly dir: string;
  readonly records: ReadonlyMap<TaskId, TaskRecord>;
  readonly cache: HashCache;
  readonly runner: ProcessRunner;
  readonly jobs: number;
  readonly signal: AbortSignal;
  readonly env: Readonly<Record<string, string | undefined>>;
}

export async function observe(options: ObserveOptions): Promise<Result<Map<TaskId, TaskObservation>, Failure[]>> {
  const { nodes, records, cache } = options;
  const failures: Failure[] = [];
  const observations = new Map<TaskId, TaskObservation>();
  const checks: TaskNode[] = [];
  // One look per file in this pass (a header that is an input of a thousand tasks is
  // stat'ed once). Only here: the executor hashes outputs again after tasks write them.
  const files = new Map<string, FileObservation>();
  // And one walk per directory: a tree several tasks read is hashed once.
  const trees = new Map<string, ContentHash>();

  for (const node of nodes) {
    const inputs = new Map<string, ContentHash>();
    for (const name in node.inputs) {
      const input = node.inputs[name]!;
      switch (input.kind) {
        case 'task':
          break;
        case 'value':
          inputs.set(name, hashValue(input.value));
          break;
        case 'env':
          inputs.set(name, hashValue(options.env[input.name] ?? null));
          break;
        case 'glob':
          inputs.set(name, hashGlob(input.pattern, options.dir, cache).hash);
          break;
        case 'file':
        case 'tree': {
          const absolute = join(options.dir, input.path);
          let seen = files.get(absolute);
          if (seen === undefined) files.set(absolute, (seen = cache.hashFile(absolute)));
          if (seen.kind === 'missing' || seen.kind === 'other') {
            failures.push({ reason: 'missing-input', task: node.id, input: name, path: absolute, site: node.decl.site.get() });
          } else if (seen.kind === 'directory') {
            let tree = trees.get(absolute);
            if (tree === undefined) trees.set(absolute, (tree = hashTree(absolute, cache)));
            inputs.set(name, tree);
          }
          else inputs.set(name, seen.hash);
          break;
        }
      }
    }
    // Without decoding a record the journal kept as text (state/records.ts).
    const trusted = records instanceof RecordMap ? records.isOk(node.id) : records.get(node.id)?.status === 'ok';
    // Outputs and checks only matter when there is a record they could agree with.
    const outputs = trusted ? observeOutputs(node.outputs, cache) : new Map<string, ContentHash | 'missing'>();
    observations.set(node.id, { inputs, outputs });
    if (trusted && node.decl.spec.check !== undefined) checks.push(node);
  }
  if (failures.length > 0) return err(failures);

  // Checks may be processes: run them in parallel, as many as jobs allows.
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < checks.length && !options.signal.aborted) {
      const node = checks[next++]!;
      const verdict = await runCheck(node, options.runner, options.signal);
      const current = observations.get(node.id)!;
      if (verdict !== undefined) observations.set(node.id, { ...current, check: verdict });
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.jobs, checks.length) }, worker));
  return ok(observations);
}
